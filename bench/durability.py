"""``python -m bench durability``: the durability rows, zkpy and Apache ZooKeeper 3.8 side by side.

Modes (``--modes``, all by default), each on both servers in the same run, fsync on for both
(zkpy's ``forceSync`` default, ZooKeeper's default):

* ``writes``: 100% setData of ``--value-size`` bytes with the throughput driver (``workload``),
  ``processes x sessions x outstanding`` in flight. Besides ops/s and latency, the servers' own
  counters over the measured window (``mntr``): fsyncs/s and txns per fsync (``bench.mntr``).
* ``create``: one worker, one create outstanding at a time (the create-latency mode of
  ``python -m bench`` with 1 worker): p50/p99 of the create, and the same fsync counters.
* ``restart``: ``--znodes`` znodes of ``--znode-size`` bytes, then the time from process start to
  ``srvr`` answering (``bench.restart``).
* ``snapshot``: on that data dir, latency while the server snapshots the whole tree under write
  load, against while it does not; zkpy's longest snapshot slice on its loop (``bench.snapload``).

``writes`` and ``create`` run on freshly started servers with ZooKeeper at ``-Xmx512m`` (as the
main benchmark); ``restart`` and ``snapshot`` give ZooKeeper ``--apache-heap`` (default 2g: at 512m
it runs out of heap before a million znodes) and run one server at a time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zkpy.testing.servers import ServerProcess, apache_available

from . import restart, snapload
from .bigtree import TreeSpec
from .launch import NAMES, start, target
from .mntr import CommitRates, CommitSample
from .workload import (
    CREATE,
    WRITE,
    CreateSpec,
    RunResult,
    Target,
    ThroughputSpec,
    percentile_ms,
    prepare,
    run,
)

MODES = ("writes", "create", "restart", "snapshot")


@dataclass
class CommitRun:
    """One server's median round of one workload, with the server's fsync counters."""

    workload: str
    server: str
    result: RunResult
    kinds: tuple[str, ...]
    rates: CommitRates | None
    round_rates: list[float]
    errors: int

    def summary(self) -> dict[str, Any]:
        merged = self.result.merged(self.kinds)
        lat = merged.latencies_ns
        return {"workload": self.workload, "server": self.server, "ops_per_s": merged.ops / self.result.duration_s,
                "p50_ms": percentile_ms(lat, 50), "p99_ms": percentile_ms(lat, 99),
                "server_cpu": self.result.server_cpu, "generator_cpu": self.result.generator_cpu,
                "commit": self.rates.as_dict() if self.rates else None,
                "round_ops_per_s": self.round_rates, "errors": self.errors}


def _fmt(x: float | None, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:,.{digits}f}"


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not b or math.isnan(a) or math.isnan(b):
        return None
    return a / b


def _log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- writes and create: throughput, latency and group commit ---


def _probe(t: Target) -> Callable[[], CommitSample]:
    """What ``run`` calls at the window's edges: the server's group-commit counters."""

    def take() -> CommitSample:
        return CommitSample.take(t.host, t.port)

    return take


def _commit_rounds(label: str, kind: str, spec: ThroughputSpec | CreateSpec, targets: dict[str, Target],
                   rounds: int, kinds: tuple[str, ...]) -> list[CommitRun]:
    """Run ``spec`` ``rounds`` times per server, alternating which goes first; keep the median round."""
    got: dict[str, list[RunResult]] = {name: [] for name in targets}
    names = list(targets)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            res = run(kind, targets[name], spec, probe=_probe(targets[name]))
            got[name].append(res)
            rates = CommitRates.between(*res.probes) if res.probes else None
            commit = (f", {rates.fsyncs_per_s:,.0f} fsyncs/s, {rates.txns_per_fsync:.1f} txns/fsync"
                      if rates else ", no mntr")
            _log(f"{label} / {name} round {r + 1}: {res.rate(kinds):,.0f} ops/s, "
                 f"p50 {percentile_ms(res.merged(kinds).latencies_ns, 50):.2f} ms{commit}, errors {res.errors}")
    out = []
    for name, rs in got.items():
        median = sorted(rs, key=lambda x: x.rate(kinds))[(len(rs) - 1) // 2]
        rates = CommitRates.between(*median.probes) if median.probes else None
        out.append(CommitRun(label, name, median, kinds, rates, [x.rate(kinds) for x in rs],
                             sum(x.errors for x in rs)))
    return out


def commit_table(runs: list[CommitRun]) -> str:
    head = ["workload"]
    servers = [s for s in ("zkpy", "apache") if any(r.server == s for r in runs)]
    for s in servers:
        n = NAMES[s]
        head += [f"{n} ops/s", f"{n} p50 ms", f"{n} p99 ms", f"{n} CPU", f"{n} fsyncs/s", f"{n} txns/fsync"]
    both = servers == ["zkpy", "apache"]
    if both:
        head += ["ops/s zkpy/ZK", "p50 zkpy/ZK", "target"]
    head.append("errors")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for workload in dict.fromkeys(r.workload for r in runs):
        row = {r.server: r.summary() for r in runs if r.workload == workload}
        cells = [workload]
        for s in servers:
            d = row.get(s)
            if d is None:
                cells += ["-"] * 6
                continue
            c = d["commit"] or {}
            cells += [_fmt(d["ops_per_s"], 0), _fmt(d["p50_ms"]), _fmt(d["p99_ms"]), _fmt(d["server_cpu"]),
                      _fmt(c.get("fsyncs_per_s"), 0), _fmt(c.get("txns_per_fsync"), 1)]
        if both and "zkpy" in row and "apache" in row:
            ops = _ratio(row["zkpy"]["ops_per_s"], row["apache"]["ops_per_s"])
            p50 = _ratio(row["zkpy"]["p50_ms"], row["apache"]["p50_ms"])
            cells += [f"**{ops:.2f}x**" if ops else "-", f"{p50:.2f}x" if p50 else "-", _target(workload, ops, p50)]
        cells.append(str(sum(d["errors"] for d in row.values())))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _target(workload: str, ops: float | None, p50: float | None) -> str:
    if workload.startswith("writes") and ops is not None:
        return f"ops/s >= 0.5x: {'met' if ops >= 0.5 else 'missed'}"
    if workload.startswith("create") and p50 is not None:
        return f"p50 <= 1.5x: {'met' if p50 <= 1.5 else 'missed'}"
    return "-"


def run_commit_modes(args: argparse.Namespace, modes: list[str], servers: list[str]) -> list[CommitRun]:
    started: list[ServerProcess] = []
    targets: dict[str, Target] = {}
    try:
        for name in servers:
            _log(f"starting {name}")
            server = start(name)
            started.append(server)
            targets[name] = target(server)
            prepare(targets[name], args.nodes, args.value_size)
        if args.server_warmup > 0:
            warm = ThroughputSpec(1.0, args.processes, args.sessions, args.outstanding, args.nodes, args.value_size,
                                  0.0, args.server_warmup)
            for name, t in targets.items():
                _log(f"{name}: warming up ({args.server_warmup:g}s of 100% setData, unmeasured)")
                run("throughput", t, warm)
        runs: list[CommitRun] = []
        if "writes" in modes:
            spec: ThroughputSpec | CreateSpec = ThroughputSpec(
                1.0, args.processes, args.sessions, args.outstanding, args.nodes, args.value_size,
                args.warmup, args.duration)
            runs += _commit_rounds("writes (100% setData)", "throughput", spec, targets, args.rounds, (WRITE,))
        if "create" in modes:
            spec = CreateSpec(1, 1, args.value_size, min(args.warmup, 1.0), args.create_duration)
            runs += _commit_rounds("create, 1 worker", "create", spec, targets, args.rounds, (CREATE,))
        return runs
    finally:
        for server in started:
            server.cleanup()


# --- restart and snapshot: the large tree ---


def restart_table(results: list[restart.RestartResult]) -> str:
    head = ["server", "znodes", "build s", "snapshot MiB", "restart s (start → srvr)", "server's own load s",
            "snapshot inside the start s", "RSS after start MiB"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in results:
        each = " · ".join(f"{x.seconds:.2f}" for x in r.restarts)
        lines.append("| " + " | ".join([
            NAMES[r.server], f"{r.znodes:,}", _fmt(r.build_s, 1), _fmt(r.snapshot_mb, 0),
            f"**{_fmt(r.median('seconds'))}** ({each})", _fmt(r.median("load_s")),
            _fmt(r.median("startup_snapshot_s")) if r.server == "apache" else "- (later, in the background)",
            _fmt(r.median("rss_mb"), 0)]) + " |")
    by = {r.server: r for r in results}
    if "zkpy" in by and "apache" in by:
        ratio = _ratio(by["zkpy"].median("seconds"), by["apache"].median("seconds"))
        lines.append(f"\nrestart time zkpy/ZooKeeper: **{_fmt(ratio)}x**")
    return "\n".join(lines)


def _lat(d: dict[str, float], key: str) -> str:
    return _fmt(d.get(key)) if d.get("n") else "-"


def snapshot_table(results: list[snapload.SnapLoadResult]) -> str:
    head = ["server", "round", "snapshots (s of window)", "longest loop slice ms", "ops",
            "p50 ms", "p99 ms", "p99.9 ms", "max ms"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    rounds: dict[str, int] = {}
    for r in results:
        rounds[r.server] = rounds.get(r.server, 0) + 1
        d = r.summary()
        pauses = [s.longest_pause_ms for s in r.snapshots if s.longest_pause_ms is not None]
        window = d["window_s"]
        spans = {"during": d["snapshot_s_in_window"], "outside": window - d["snapshot_s_in_window"]}
        first = [NAMES[r.server], str(rounds[r.server]),
                 f"{len(r.snapshots)} ({d['snapshot_s_in_window']:.1f} of {window:.0f})"
                 + (f", {r.skipped} skipped" if r.skipped else ""),
                 _fmt(max(pauses), 1) if pauses else "-"]
        for kind in ("read", "write"):
            for label in ("during", "outside"):
                s = d[f"{kind}_{label}"]
                rate = s["n"] / spans[label] if spans[label] > 0 else 0
                cells = first if (kind, label) == ("read", "during") else ["", "", "", ""]
                lines.append("| " + " | ".join(cells + [
                    f"{kind}s {label} snapshot: {s['n']:,} ({rate:,.0f}/s)",
                    _lat(s, "p50_ms"), _lat(s, "p99_ms"), _lat(s, "p999_ms"), _lat(s, "max_ms")]) + " |")
    return "\n".join(lines)


def run_big_modes(args: argparse.Namespace, modes: list[str], servers: list[str]
                  ) -> tuple[list[restart.RestartResult], list[snapload.SnapLoadResult]]:
    tree = TreeSpec(args.znodes, args.znode_size)
    restarts: list[restart.RestartResult] = []
    loads: list[snapload.SnapLoadResult] = []
    for name in servers:
        heap = args.apache_heap if name == "apache" else None
        stopped: ServerProcess | None = None
        try:
            big = restart.prepare_big(name, tree, heap, _log)
            stopped = big[0]
            if "restart" in modes:
                result, stopped = restart.measure(name, tree, args.restarts, heap, _log, big)
                restarts.append(result)
            if "snapshot" in modes:
                spec = snapload.SnapLoadSpec(tree, args.snap_readers, args.snap_writers, args.snap_outstanding,
                                             args.snap_warmup, args.snap_duration, args.snap_count)
                for _ in range(args.rounds):
                    loads.append(snapload.measure(name, stopped, spec, heap, _log))
        finally:
            if stopped is not None:
                stopped.cleanup()
    return restarts, loads


# --- the command ---


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench durability", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--servers", default="zkpy,apache", help="which servers (default: zkpy,apache)")
    p.add_argument("--modes", default=",".join(MODES), help=f"default: {','.join(MODES)}")
    p.add_argument("--rounds", type=int, default=1,
                   help="repeat writes/create (median round shown) and snapshot runs (default 1)")
    p.add_argument("--duration", type=float, default=10.0, help="measured seconds per writes run (default 10)")
    p.add_argument("--warmup", type=float, default=2.0, help="unmeasured seconds before each run (default 2)")
    p.add_argument("--create-duration", type=float, default=5.0, help="measured seconds per create run (default 5)")
    p.add_argument("--server-warmup", type=float, default=5.0,
                   help="unmeasured seconds of setData on each fresh server first (default 5)")
    p.add_argument("--processes", type=int, default=2, help="writes: generator processes (default 2)")
    p.add_argument("--sessions", type=int, default=16, help="writes: sessions per process (default 16)")
    p.add_argument("--outstanding", type=int, default=16, help="writes: requests in flight per session (default 16)")
    p.add_argument("--nodes", type=int, default=1000, help="writes: znodes written (default 1000)")
    p.add_argument("--value-size", type=int, default=1024, help="writes/create: bytes per value (default 1024)")
    p.add_argument("--znodes", type=int, default=1_000_000, help="restart/snapshot: znodes (default 1000000)")
    p.add_argument("--znode-size", type=int, default=50, help="restart/snapshot: bytes per znode (default 50)")
    p.add_argument("--restarts", type=int, default=2, help="timed restarts per server (default 2)")
    p.add_argument("--apache-heap", default="2g", help="restart/snapshot: ZooKeeper's -Xmx (default 2g)")
    p.add_argument("--snap-count", type=int, default=100_000, help="snapshot: snapCount (default 100000)")
    p.add_argument("--snap-warmup", type=float, default=10.0,
                   help="snapshot: unmeasured seconds of load first (default 10; see bench/snapload.py)")
    p.add_argument("--snap-duration", type=float, default=40.0, help="snapshot: measured seconds (default 40)")
    p.add_argument("--snap-readers", type=int, default=4, help="snapshot: getData probe sessions (default 4)")
    p.add_argument("--snap-writers", type=int, default=8, help="snapshot: setData sessions (default 8)")
    p.add_argument("--snap-outstanding", type=int, default=8, help="snapshot: setData per session (default 8)")
    p.add_argument("--json", help="also write the figures to this JSON file")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in modes:
        if m not in MODES:
            raise SystemExit(f"unknown mode {m!r} (modes: {', '.join(MODES)})")
    servers = []
    for name in (s.strip() for s in args.servers.split(",") if s.strip()):
        if name == "apache" and not apache_available():
            _log("Apache ZooKeeper is not installed: skipping it")
            continue
        servers.append(name)
    commit_runs = run_commit_modes(args, modes, servers) if {"writes", "create"} & set(modes) else []
    restarts, loads = run_big_modes(args, modes, servers) if {"restart", "snapshot"} & set(modes) else ([], [])

    print()
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}")
    if commit_runs:
        print(f"writes: {args.processes} processes x {args.sessions} sessions x {args.outstanding} outstanding; "
              f"{args.nodes} znodes of {args.value_size} B; {args.duration:g}s measured after {args.warmup:g}s; "
              f"create: 1 worker, {args.create_duration:g}s; fsyncs/s and txns/fsync from each server's mntr")
        print()
        print(commit_table(commit_runs))
        if args.rounds > 1:
            print()
            for r in commit_runs:
                print(f"  {r.workload:24} {NAMES[r.server]:10} " + "  ".join(f"{x:,.0f}" for x in r.round_rates))
    if restarts:
        print()
        print(f"restart: {args.znodes:,} znodes of {args.znode_size} B; median of {args.restarts} restarts")
        print()
        print(restart_table(restarts))
    if loads:
        print()
        print(f"snapshot under load: {args.snap_writers}x{args.snap_outstanding} setData + {args.snap_readers} "
              f"getData probes, snapCount {args.snap_count}, {args.snap_duration:g}s measured")
        print()
        print(snapshot_table(loads))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"commit": [r.summary() for r in commit_runs], "restart": [r.as_dict() for r in restarts],
                       "snapshot": [r.summary() for r in loads]}, f, indent=2)
    errors = sum(r.errors for r in commit_runs) + sum(r.reads.errors + r.writes.errors for r in loads)
    return 1 if errors else 0

