"""``python -m bench figure5``: the ZooKeeper paper's Figure 5, throughput against the percentage of reads.

For every ensemble size (``--sizes``, default 3 and 5) and implementation (zkpy, Apache ZooKeeper 3.8)
a fresh ensemble is started on 127.0.0.1 (``bench/ensemble.py``'s ``start``: the same zoo.cfg keys
for both, fsync on), the znodes are created, the ensemble is warmed up, and then for every read
percentage (``--reads``) the closed-loop generator of ``bench/workload.py`` runs against it: one
generator process per server, connected to that server, ``--sessions-total`` sessions in all (split
evenly over the processes, so every size gets the same clients, as in the paper), each with
``--outstanding`` requests in flight; a request is a getData or, with probability 1 - reads/100, a
setData (version -1) of ``--value-size`` bytes, on one of ``--nodes`` znodes. Reads are answered by
the session's server, writes go through the leader. Both implementations' ensembles of one size run
side by side (the one not measured idles) and the points alternate between them, so that whatever else
runs on the machine falls on both alike; they are stopped before the next size starts. Each point
records the cores used by the servers, by the generator, by every other process ("others", which
includes the idle ensemble) and by the idle ensemble alone (over the whole run, warmup included).

Writes the numbers to ``--json`` and the figure to ``--png`` (default ``benchmarks/figure5.{json,png}``);
``--plot-only`` redraws the PNG from the JSON. Every point is a short run (``--duration`` s, default
4) because the machine this was written on has 2 cores shared by every server and the generator.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from zkpy.testing.servers import ServerProcess, cleanup_ensemble, ensemble_leader

from . import figrun, plot
from .ensemble import EnsembleSpec, followers_first, myid, run_spread, start, target
from .workload import READ, WRITE, Target, ThroughputSpec, _cpu_total, percentile_ms, prepare

NAMES = {"zkpy": "zkpy", "apache": "ZooKeeper"}


def _log(msg: str) -> None:
    print(f"[bench figure5 {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _csv(text: str, kind: type) -> list[Any]:
    return [kind(x) for x in text.split(",") if x.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench figure5", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--servers", default="zkpy,apache", help="implementations (default: zkpy,apache)")
    p.add_argument("--sizes", default="3,5", help="ensemble sizes (default 3,5)")
    p.add_argument("--reads", default="0,20,40,60,80,90,100", help="percentages of reads (default 0,20,40,60,80,90,100)")
    p.add_argument("--duration", type=float, help="measured seconds per point (default 4; --quick 1)")
    p.add_argument("--warmup", type=float, help="unmeasured seconds before each point (default 1; --quick 0.3)")
    p.add_argument("--server-warmup", type=float,
                   help="unmeasured seconds of 90/10 load on each fresh ensemble (default 3; --quick 0.5)")
    p.add_argument("--sessions-total", type=int, default=48, help="sessions over all generator processes (default 48)")
    p.add_argument("--outstanding", type=int, default=11, help="requests in flight per session (default 11)")
    p.add_argument("--nodes", type=int, help="znodes read and written (default 1000; --quick 100)")
    p.add_argument("--value-size", type=int, default=1024, help="bytes per setData value (default 1024)")
    p.add_argument("--tick-ms", type=int, default=2000, help="tickTime of the ensembles (default 2000)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: sizes 3, reads 0,100, 1 s points; other flags still apply on top")
    p.add_argument("--json", default="benchmarks/figure5.json", help="numbers (default benchmarks/figure5.json)")
    p.add_argument("--png", default="benchmarks/figure5.png", help="figure (default benchmarks/figure5.png)")
    p.add_argument("--merge", action="store_true",
                   help="keep the curves of --json that this run does not measure (e.g. run --sizes 3, then "
                        "--sizes 5 --merge: two shorter runs, one figure)")
    p.add_argument("--plot-only", action="store_true", help="redraw --png from --json without running anything")
    args = p.parse_args(argv)
    if args.quick:
        if args.sizes == "3,5":
            args.sizes = "3"
        if args.reads == "0,20,40,60,80,90,100":
            args.reads = "0,100"
    for name, full, short in (("duration", 4.0, 1.0), ("warmup", 1.0, 0.3), ("server_warmup", 3.0, 0.5),
                              ("nodes", 1000, 100)):
        if getattr(args, name) is None:
            setattr(args, name, short if args.quick else full)
    return args


def _start(kind: str, size: int, args: argparse.Namespace) -> tuple[list[ServerProcess], list[Target], dict[str, Any]]:
    """A fresh ``size``-server ``kind`` ensemble with the znodes created and warmed up."""
    _log(f"{kind}: starting a {size}-server ensemble")
    out: dict[str, Any] = {"size": size, "server": kind, "points": [], "load_at_start": os.getloadavg()[0]}
    servers = start(kind, EnsembleSpec(size, args.tick_ms))
    try:
        leader = ensemble_leader(servers)
        out["leader"] = myid(leader)
        targets = [target(s) for s in followers_first(servers, leader)]
        prepare(target(leader), args.nodes, args.value_size)
        out["sessions"] = _sessions(size, args) * size
        if args.server_warmup > 0:
            run_spread("throughput", targets, _spec(size, args, 0.1, 0.0, args.server_warmup))
    except BaseException:
        cleanup_ensemble(servers)
        raise
    return servers, targets, out


def _sessions(size: int, args: argparse.Namespace) -> int:
    return max(1, round(int(args.sessions_total) / size))


def _spec(size: int, args: argparse.Namespace, write_ratio: float, warmup: float, duration: float) -> ThroughputSpec:
    return ThroughputSpec(write_ratio, size, _sessions(size, args), args.outstanding, args.nodes, args.value_size,
                          warmup, duration)


def measure_size(kinds: list[str], size: int, args: argparse.Namespace, reads: list[int]) -> list[dict[str, Any]]:
    """Both implementations' ``size``-server ensembles running side by side (the idle one idles), the read
    percentages measured on each in turn, alternating which goes first, so that the machine's other load
    falls on both alike; both stopped again."""
    ensembles: dict[str, tuple[list[ServerProcess], list[Target], dict[str, Any]]] = {}
    try:
        for kind in kinds:
            ensembles[kind] = _start(kind, size, args)
        for i, pct in enumerate(reads):
            for kind in kinds if i % 2 == 0 else kinds[::-1]:
                _, targets, out = ensembles[kind]
                idle = [s.proc.pid for k, (servers, _, _) in ensembles.items() if k != kind for s in servers]
                idle0, t0 = _cpu_total(idle), time.monotonic()
                r = run_spread("throughput", targets, _spec(size, args, 1 - pct / 100, args.warmup, args.duration))
                idle1, t1 = _cpu_total(idle), time.monotonic()
                merged = r.result.merged((READ, WRITE))
                point = {"reads_pct": pct, "ops_per_s": merged.ops / args.duration,
                         "reads_per_s": r.result.rate((READ,)), "writes_per_s": r.result.rate((WRITE,)),
                         "p50_ms": percentile_ms(merged.latencies_ns, 50),
                         "p99_ms": percentile_ms(merged.latencies_ns, 99),
                         "errors": r.result.errors, "error_codes": r.result.error_codes,
                         "server_cpu": r.server_cpu, "generator_cpu": r.result.generator_cpu,
                         "others_cpu": r.others_cpu,  # includes the idle ensemble's:
                         "idle_ensemble_cpu": (idle1 - idle0) / (t1 - t0) if idle0 is not None and idle1 is not None
                         else None}
                out["points"].append(point)
                _log(f"{kind} x{size}, {pct}% reads: {point['ops_per_s']:,.0f} ops/s, p99 {point['p99_ms']:.1f} ms, "
                     f"errors {point['errors']}, servers CPU {r.server_cpu or 0:.2f}, others {r.others_cpu or 0:.2f} "
                     f"(the idle ensemble {point['idle_ensemble_cpu'] or 0:.2f})")
    finally:
        for servers, _, _ in ensembles.values():
            cleanup_ensemble(servers)
    return [ensembles[k][2] for k in kinds]


def table(runs: list[dict[str, Any]]) -> str:
    sizes = sorted({r["size"] for r in runs})
    kinds = [k for k in ("zkpy", "apache") if any(r["server"] == k for r in runs)]
    reads = sorted({p["reads_pct"] for r in runs for p in r["points"]})
    by = {(r["server"], r["size"]): {p["reads_pct"]: p for p in r["points"]} for r in runs}
    head = ["% reads"]
    for size in sizes:
        head += [f"{NAMES[k]} x{size} ops/s" for k in kinds]
        if len(kinds) == 2:
            head.append(f"x{size} zkpy/ZK")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for pct in reads:
        cells = [str(pct)]
        for size in sizes:
            vals = [by.get((k, size), {}).get(pct) for k in kinds]
            cells += [f"{v['ops_per_s']:,.0f}" + (f" ({v['errors']} err)" if v["errors"] else "") if v else "-"
                      for v in vals]
            if len(kinds) == 2:
                z, a = vals
                cells.append(f"{z['ops_per_s'] / a['ops_per_s']:.2f}x" if z and a and a["ops_per_s"] else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _loads(runs: list[dict[str, Any]]) -> str:
    loads = [r["load_at_start"] for r in runs if "load_at_start" in r]
    return f"{min(loads):.1f}-{max(loads):.1f}" if loads else "-"


def draw(data: dict[str, Any], png: str) -> None:
    curves: dict[str, dict[int, list[tuple[float, float]]]] = {}
    for r in data["runs"]:
        curves.setdefault(r["server"], {})[r["size"]] = [(p["reads_pct"], p["ops_per_s"]) for p in r["points"]]
    a = data["args"]
    title = (f"Figure 5 on {data['machine']}: {a['sessions_total']} sessions x {a['outstanding']} outstanding,\n"
             f"1 generator process per server, {a['value_size']} B values, {a['duration']:g} s per point; "
             f"1-min load {_loads(data['runs'])} at each ensemble's start")
    plot.figure5(png, curves, title)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.plot_only:
        return figrun.replot(args, draw)
    kinds = figrun.server_kinds(args, _log)
    sizes, reads = _csv(args.sizes, int), _csv(args.reads, int)
    load_before = os.getloadavg()
    started = time.monotonic()
    runs = [run for size in sizes for run in measure_size(kinds, size, args, reads)]
    if args.merge and os.path.exists(args.json):  # keep the other sizes' curves of an earlier run
        with open(args.json, encoding="utf-8") as f:
            old = json.load(f)
        fresh = {(r["server"], r["size"]) for r in runs}
        runs = [r for r in old["runs"] if (r["server"], r["size"]) not in fresh] + runs
        runs.sort(key=lambda r: (r["size"], r["server"] != "zkpy"))
    figrun.save(args, "runs", runs, load_before, started, draw)
    print(f"{args.sessions_total} sessions x {args.outstanding} outstanding, one generator process per server; "
          f"{args.nodes} znodes of {args.value_size} B; {args.duration:g} s per point after {args.warmup:g} s warmup")
    print()
    print(table(runs))
    print()
    print(f"wrote {args.json} and {args.png}")
    return 1 if any(p["errors"] for r in runs for p in r["points"]) else 0
