"""Before/after on a noisy machine: servers from several checkouts, started once, loaded in turns.

``python -m bench.ab MODE [--rounds N] SRC [SRC ...]``

Each SRC is a checkout's ``src`` directory (a zkpy server started with ``PYTHONPATH`` at it) or
``apache`` (Apache ZooKeeper 3.8). All of them start once, get the same znodes, and then take
short load windows in turns (the order reversed every other round), so that a change of the
machine's speed between minutes falls on all of them alike. MODE is ``write`` (100% setData),
``read`` (100% getData) or ``createW`` (W create workers, e.g. ``create20``), with
``bench.workload``'s generator. Printed: each round's ops/s and server cores, then per server
the median, the range and the median of its ratio to the first server in the same round.
Compare the paired ratios, not absolute figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
from typing import Any

from zkpy.testing.servers import ServerProcess, start_apache, start_zkpy

from .workload import CREATE, CreateSpec, Target, ThroughputSpec, prepare, run


def _start(src: str) -> ServerProcess:
    if src == "apache":
        return start_apache(None, 60)
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.path.abspath(src)  # the server process inherits it
    try:
        return start_zkpy(None, 30)
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old


def _spec(mode: str, window_s: float) -> tuple[str, Any]:
    if mode.startswith("create"):
        return "create", CreateSpec(workers=int(mode[len("create"):] or 20), warmup_s=0.5, duration_s=window_s)
    ratios = {"write": 1.0, "read": 0.0}
    if mode not in ratios:
        raise SystemExit(f"mode {mode!r}: write, read or createW")
    return "throughput", ThroughputSpec(write_ratio=ratios[mode], warmup_s=0.5, duration_s=window_s)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__.split("\n\n")[0])
    ap.add_argument("mode")
    ap.add_argument("sources", nargs="+", help="a checkout's src directory, or apache")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--window", type=float, default=3.0, help="measured seconds per turn")
    args = ap.parse_args(argv)
    kind, spec = _spec(args.mode, args.window)
    servers: list[ServerProcess] = []
    try:
        for src in args.sources:
            servers.append(_start(src))
        targets = [Target("127.0.0.1", s.port, s.proc.pid) for s in servers]
        for t in targets:
            prepare(t)
        rows: list[list[tuple[float, float]]] = [[] for _ in servers]
        for r in range(args.rounds):
            order = list(range(len(servers)))
            for i in order if r % 2 == 0 else order[::-1]:
                res = run(kind, targets[i], spec)
                ops = res.stats[CREATE].ops if kind == "create" else res.ops
                rows[i].append((ops / res.duration_s, res.server_cpu or 0.0))
            print(f"round {r + 1}: " + " · ".join(f"{src} {row[-1][0]:,.0f} ({row[-1][1]:.2f})"
                                                  for src, row in zip(args.sources, rows)), flush=True)
        for src, row in zip(args.sources, rows):
            ops = [o for o, _ in row]
            ratio = statistics.median(o / b for (o, _), (b, _) in zip(row, rows[0]))
            print(f"{src}: median {statistics.median(ops):,.0f} ops/s (range {min(ops):,.0f}–{max(ops):,.0f}), "
                  f"paired ratio to {args.sources[0]}: {ratio:.2f}")
    finally:
        for s in servers:
            s.stop()
            s.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
