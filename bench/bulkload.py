"""``python -m bench.bulkload``: time a bulk load with multi on each server, nothing else.

Starts each server fresh (``launch.start``), builds ``bigtree``'s tree (``--batch`` creates per
multi, ``--window`` multis in flight on one session) and prints the seconds the build took and
the creates per second. ``--profile DIR`` records the zkpy server with ``py-spy record -f raw``
while it builds (py-spy must be installed), one file per server, for the profile tables in
BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import time

from .bigtree import TreeSpec, build
from .launch import NAMES, start, target


def _measure(kind: str, spec: TreeSpec, heap: str | None, profile: str | None) -> float:
    server = start(kind, heap=heap)
    spy = None
    try:
        if profile is not None and kind == "zkpy":
            out = os.path.join(profile, f"bulkload-{kind}.txt")
            spy = subprocess.Popen(["py-spy", "record", "-r", "250", "-f", "raw", "-o", out, "--pid",
                                    str(server.proc.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)  # let py-spy attach before the load starts
        return build(target(server), spec)
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
            spy.wait()
        server.stop()
        server.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bulkload", description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", default="zkpy,apache")
    parser.add_argument("--znodes", type=int, default=1_000_000)
    parser.add_argument("--value-size", type=int, default=50)
    parser.add_argument("--batch", type=int, default=1000, help="creates per multi")
    parser.add_argument("--window", type=int, default=8, help="multis in flight")
    parser.add_argument("--heap", default="2g", help="Apache ZooKeeper's -Xmx")
    parser.add_argument("--profile", help="folder for py-spy's raw profile of the zkpy server")
    args = parser.parse_args()
    spec = TreeSpec(znodes=args.znodes, value_size=args.value_size, batch=args.batch, window=args.window)
    seconds: dict[str, float] = {}
    for kind in args.servers.split(","):
        seconds[kind] = _measure(kind, spec, args.heap, args.profile)
        print(f"{NAMES[kind]}: {spec.znodes:,} znodes in {seconds[kind]:.2f}s "
              f"({spec.znodes / seconds[kind]:,.0f} creates/s)", flush=True)
    if "zkpy" in seconds and "apache" in seconds:
        print(f"zkpy/ZooKeeper time: {seconds['zkpy'] / seconds['apache']:.2f}x")


if __name__ == "__main__":
    main()
