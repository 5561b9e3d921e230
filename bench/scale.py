"""``python -m bench scale``: one zkpy server with 1, 2, ... N serving processes, and ZooKeeper beside it.

All servers are started first and stay up (an idle one costs little); then each load runs on each
server in turn, ``--rounds`` times with the order alternating, and the tables show each one's median
round, so that whatever else runs on the machine falls on all of them alike. For every N of
``--workers`` (default 1 .. the machine's cores) a standalone zkpy server is started with
``<--workers-key>=N`` in its zoo.cfg (default key ``serverWorkers``: N processes sharing the client
port, in front of a dedicated member when N > 1), the znodes are created, ``--server-warmup`` s of
90/10 load run unmeasured, then every load of ``--loads`` (``read``: 100 % getData; ``mixed``: 90 %
getData, 10 % setData of ``--value-size`` bytes; ``write``: 100 % setData) runs with the generator of ``python -m bench`` (``bench/workload.py``:
``--processes`` x ``--sessions`` x ``--outstanding`` requests in flight, closed loop); beside them an
Apache ZooKeeper 3.8 standalone server (``--servers``), in the same run.

Server CPU is counted over the server's whole process tree: at both edges of the measured window
the parent reads ``/proc/<pid>/stat`` of the server and of every descendant (utime + stime, plus
cutime + cstime for children that were reaped), so worker processes and forked snapshot writers
count. CPU-µs per op = that CPU time / the requests completed in the window; "member CPU-µs/op"
is the server's main process alone (zkpy's member: its serial ceiling is 1e6 / that figure ops/s).
ZooKeeper is one JVM process: its threads are in its own figures.

On a machine with more cores, repeat with e.g. ``--workers 1,2,4,8 --processes 8``: the generator
must not be the bottleneck (its cores are in the "gen cores" column). ``--json`` / ``--png`` default to
``benchmarks/scale.{json,png}``; ``--plot-only`` redraws the PNG from the JSON.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zkpy.testing.servers import ServerProcess, start_apache, start_zkpy

from . import figrun, plot
from .workload import READ, WRITE, Target, ThroughputSpec, percentile_ms, prepare, run

LOADS = {"read": 0.0, "mixed": 0.1, "write": 1.0}
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _log(msg: str) -> None:
    print(f"[bench scale {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- CPU of a process tree (Linux /proc) ---


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds incl. reaped children) of one process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rpartition(")")[2].split()
        return int(fields[1]), sum(int(x) for x in fields[11:15]) / _TICKS  # utime stime cutime cstime
    except (OSError, ValueError, IndexError):
        return None


def process_tree(root: int) -> dict[int, float]:
    """CPU seconds of ``root`` and of each of its live descendants, by pid."""
    stats: dict[int, tuple[int, float]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            s = _stat(int(name))
            if s is not None:
                stats[int(name)] = s
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    out: dict[int, float] = {}
    todo = [root] if root in stats else []
    while todo:
        pid = todo.pop()
        out[pid] = stats[pid][1]
        todo += children.get(pid, [])
    return out


# --- the runs ---


def _wait_processes(server: ServerProcess, n: int, timeout_s: float = 30.0) -> int:
    """Wait until the server's tree has at least ``n`` processes; how many it has."""
    deadline = time.monotonic() + timeout_s
    count = len(process_tree(server.proc.pid))
    while count < n and time.monotonic() < deadline:
        time.sleep(0.1)
        count = len(process_tree(server.proc.pid))
    return count


@dataclass
class Subject:
    """One server under test: zkpy with ``workers`` serving processes, or ZooKeeper (``workers`` None)."""

    kind: str
    workers: int | None
    server: ServerProcess

    @property
    def label(self) -> str:
        return f"zkpy x{self.workers}" if self.kind == "zkpy" else "ZooKeeper"

    def target(self) -> Target:
        return Target("127.0.0.1", self.server.port, self.server.proc.pid)


def start_subject(kind: str, workers: int | None, args: argparse.Namespace) -> Subject:
    """Start the server, wait for its processes, create the znodes, warm it up."""
    if kind == "zkpy":
        server = start_zkpy({args.workers_key: str(workers)} if args.workers_key else None)
    else:
        server = start_apache()
    subject = Subject(kind, workers, server)
    try:
        expected = workers + 1 if workers is not None and workers > 1 else 1  # the workers and their member
        procs = _wait_processes(server, expected)
        _log(f"{subject.label}: pid {server.proc.pid} on {server.port}, {procs} processes in its tree")
        if procs < expected:  # e.g. a zkpy without the key warns "has no effect" and serves alone
            _log(f"WARNING: {subject.label} has {procs} processes, not {workers}: does this zkpy honour "
                 f"{args.workers_key}? (see its log: {server.log_path}); the rows say tree_processes")
        prepare(subject.target(), args.nodes, args.value_size)
        if args.server_warmup > 0:
            run("throughput", subject.target(), ThroughputSpec(0.1, args.processes, args.sessions, args.outstanding,
                                                               args.nodes, args.value_size, 0.0, args.server_warmup))
    except BaseException:
        server.cleanup()
        raise
    return subject


def measure(subject: Subject, load: str, args: argparse.Namespace) -> dict[str, Any]:
    """One run of ``load`` on ``subject``: ops/s, latency, and the CPU of the server's process tree."""
    pid = subject.server.proc.pid
    probe: Callable[[], Any] = lambda: (time.monotonic(), process_tree(pid))  # noqa: E731
    spec = ThroughputSpec(LOADS[load], args.processes, args.sessions, args.outstanding, args.nodes,
                          args.value_size, args.warmup, args.duration)
    r = run("throughput", subject.target(), spec, probe)
    merged = r.merged((READ, WRITE))
    cpu_s = per_process = window = tree = member_s = None
    if r.probes is not None:
        (t0, before), (t1, after) = r.probes
        cpu_s = sum(after.values()) - sum(before.values())
        member_s = after.get(pid, 0.0) - before.get(pid, 0.0)
        window = t1 - t0
        per_process = {str(p): round((after[p] - before.get(p, 0.0)) / window, 3) for p in after}
        tree = len(after)
    x: dict[str, Any] = {
        "server": subject.kind, "processes": subject.workers, "load": load, "ops_per_s": merged.ops / spec.duration_s,
        "p50_ms": percentile_ms(merged.latencies_ns, 50), "p99_ms": percentile_ms(merged.latencies_ns, 99),
        "errors": r.errors, "error_codes": r.error_codes,
        "server_cores": cpu_s / window if cpu_s is not None and window else None,
        "server_cores_by_pid": per_process, "main_process_cores": r.server_cpu,
        "cpu_us_per_op": cpu_s / merged.ops * 1e6 if cpu_s is not None and merged.ops else None,
        "member_cpu_us_per_op": member_s / merged.ops * 1e6 if member_s is not None and merged.ops else None,
        "generator_cores": r.generator_cpu, "tree_processes": tree, "load_avg": os.getloadavg()[0],
    }
    _log(f"{subject.label}, {load}: {x['ops_per_s']:,.0f} ops/s, p99 {x['p99_ms']:.2f} ms, "
         f"server {_f(x['server_cores'])} cores ({_f(x['cpu_us_per_op'], 1)} CPU-µs/op, member "
         f"{_f(x['member_cpu_us_per_op'], 1)}), "
         f"generator {_f(x['generator_cores'])} cores, errors {x['errors']}")
    return x


def measure_all(subjects: list[Subject], loads: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every load on every server, ``args.rounds`` times, alternating the order; the median round of each."""
    rows = []
    for load in loads:
        runs: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(subjects))}
        order = list(range(len(subjects)))
        for r in range(args.rounds):
            for i in order if r % 2 == 0 else order[::-1]:
                runs[i].append(measure(subjects[i], load, args))
        for i in order:
            ranked = sorted(runs[i], key=lambda x: x["ops_per_s"])
            row = dict(ranked[(len(ranked) - 1) // 2])
            row["round_ops_per_s"] = [x["ops_per_s"] for x in runs[i]]
            row["errors"] = sum(x["errors"] for x in runs[i])
            rows.append(row)
    return rows


def _f(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def table(rows: list[dict[str, Any]]) -> str:
    head = ["load", "server", "serving processes", "ops/s", "vs zkpy x1", "vs ZooKeeper", "p50 ms", "p99 ms",
            "server cores", "server CPU-µs/op", "member CPU-µs/op", "gen cores", "errors"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for load in [x for x in LOADS if any(r["load"] == x for r in rows)]:
        mine = [r for r in rows if r["load"] == load]
        one = next((r for r in mine if r["server"] == "zkpy" and r["processes"] == 1), None)
        zk = next((r for r in mine if r["server"] == "apache"), None)
        for r in mine:
            lines.append("| " + " | ".join([
                load, "zkpy" if r["server"] == "zkpy" else "ZooKeeper", str(r["processes"] or "-"),
                f"{r['ops_per_s']:,.0f}",
                f"{r['ops_per_s'] / one['ops_per_s']:.2f}x" if one and one["ops_per_s"] else "-",
                f"{r['ops_per_s'] / zk['ops_per_s']:.2f}x" if zk and zk["ops_per_s"] else "-",
                _f(r["p50_ms"]), _f(r["p99_ms"]), _f(r["server_cores"]), _f(r["cpu_us_per_op"], 1),
                _f(r.get("member_cpu_us_per_op"), 1), _f(r["generator_cores"]), str(r["errors"])]) + " |")
    return "\n".join(lines)


def draw(data: dict[str, Any], png: str) -> None:
    a = data["args"]
    title = (f"zkpy serving processes on {data['machine']} (generator on the same machine: {a['processes']} processes "
             f"x {a['sessions']} sessions x {a['outstanding']} outstanding), {a['duration']:g} s per point; "
             f"load {data['load_before'][0]:.2f} before")
    plot.scale(png, data["rows"], title)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench scale", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--servers", default="zkpy,apache", help="implementations (default: zkpy,apache)")
    p.add_argument("--workers", help="zkpy serving processes to measure (default 1,2,...,cores; --quick 1)")
    p.add_argument("--workers-key", default="serverWorkers",
                   help="the zoo.cfg key that sets them (default serverWorkers; '' for none: one process)")
    p.add_argument("--loads", default="read,mixed", help=f"loads (default read,mixed; of {', '.join(LOADS)})")
    p.add_argument("--duration", type=float, help="measured seconds per load (default 4; --quick 1)")
    p.add_argument("--warmup", type=float, help="unmeasured seconds before each load (default 1; --quick 0.3)")
    p.add_argument("--server-warmup", type=float, help="unmeasured seconds of 90/10 on each server (default 2)")
    p.add_argument("--rounds", type=int, help="runs of each load on each server, alternating the order; the "
                   "table shows the median (default 2; --quick 1)")
    p.add_argument("--processes", type=int, default=2, help="generator processes (default 2)")
    p.add_argument("--sessions", type=int, default=16, help="sessions per generator process (default 16)")
    p.add_argument("--outstanding", type=int, default=16, help="requests in flight per session (default 16)")
    p.add_argument("--nodes", type=int, default=1000, help="znodes read and written (default 1000)")
    p.add_argument("--value-size", type=int, default=1024, help="bytes per znode value (default 1024)")
    p.add_argument("--quick", action="store_true", help="smoke run: one serving process, 1 s loads")
    p.add_argument("--json", default="benchmarks/scale.json", help="numbers (default benchmarks/scale.json)")
    p.add_argument("--png", default="benchmarks/scale.png", help="figure (default benchmarks/scale.png)")
    p.add_argument("--plot-only", action="store_true", help="redraw --png from --json without running anything")
    args = p.parse_args(argv)
    if args.workers is None:
        args.workers = "1" if args.quick else ",".join(str(i) for i in range(1, (os.cpu_count() or 1) + 1))
    for name, full, short in (("duration", 4.0, 1.0), ("warmup", 1.0, 0.3), ("server_warmup", 2.0, 0.5),
                              ("rounds", 2, 1)):
        if getattr(args, name) is None:
            setattr(args, name, short if args.quick else full)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.plot_only:
        return figrun.replot(args, draw)
    loads = [x.strip() for x in args.loads.split(",") if x.strip()]
    for load in loads:
        if load not in LOADS:
            raise SystemExit(f"unknown load {load!r}: choose from {', '.join(LOADS)}")
    kinds = figrun.server_kinds(args, _log)
    counts = [int(x) for x in args.workers.split(",") if x.strip()]
    if not args.workers_key and counts != [1]:
        raise SystemExit("without --workers-key only --workers 1 can be measured")
    load_before = os.getloadavg()
    started = time.monotonic()
    subjects: list[Subject] = []
    try:
        for kind in kinds:
            for n in counts if kind == "zkpy" else [None]:
                subjects.append(start_subject(kind, n, args))
        rows = measure_all(subjects, loads, args)
    finally:
        for subject in subjects:
            subject.server.cleanup()
    figrun.save(args, "rows", rows, load_before, started, draw)
    print(f"generator: {args.processes} processes x {args.sessions} sessions x {args.outstanding} outstanding; "
          f"{args.nodes} znodes of {args.value_size} B; {args.duration:g} s per load after {args.warmup:g} s warmup; "
          f"zoo.cfg key {args.workers_key or '(none)'}")
    print("server cores / CPU-µs per op: the server's whole process tree over the measured window")
    print()
    print(table(rows))
    print()
    print(f"wrote {args.json} and {args.png}")
    return 1 if any(r["errors"] for r in rows) else 0

