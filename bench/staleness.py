"""``python -m bench staleness``: how often another session, reading through a follower, misses a
create that has just returned through the leader, on a 3-member zkpy and a 3-member Apache
ZooKeeper 3.8 ensemble in the same run.

ZooKeeper promises read-your-writes within a session; across sessions a reader needs ``sync``.
Programs written without it still meet the gap, so the figure is worth keeping as Apache's: a
leader sends COMMIT to its followers before it answers its own client. Each round starts both
ensembles afresh (in turns, the order alternating), then session A (on the leader only) creates
``--reads`` znodes one after the other and, as each create returns, session B (on one follower
only) asks ``exists`` of it. The table gives each round's share of misses and the medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence

from kazoo.client import KazooClient

from zkpy.testing.servers import ServerProcess, cleanup_ensemble, ensemble_leader

from .ensemble import EnsembleSpec, start

KINDS = ("zkpy", "apache")


def misses(servers: Sequence[ServerProcess], reads: int) -> int:
    """Creates through the leader that a session on a follower did not see at once."""
    leader = ensemble_leader(servers)
    follower = next(s for s in servers if s is not leader)
    writer = KazooClient(hosts=f"127.0.0.1:{leader.port}", timeout=10)
    reader = KazooClient(hosts=f"127.0.0.1:{follower.port}", timeout=10)
    writer.start(30)
    reader.start(30)
    try:
        writer.ensure_path("/stale")
        reader.sync("/stale")
        missed = 0
        reader_id = f"{follower.port}-"
        for i in range(reads):
            path = f"/stale/{reader_id}n{i:06d}"
            writer.create(path, b"x")
            if reader.exists(path) is None:
                missed += 1
        return missed
    finally:
        writer.stop()
        reader.stop()
        writer.close()
        reader.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench staleness", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reads", type=int, default=500)
    parser.add_argument("--servers", default=",".join(KINDS), help="zkpy, apache or both (comma-separated)")
    args = parser.parse_args(argv)
    kinds = [k for k in args.servers.split(",") if k]
    found: dict[str, list[float]] = {k: [] for k in kinds}
    for r in range(args.rounds):
        for kind in (kinds if r % 2 == 0 else kinds[::-1]):
            servers = start(kind, EnsembleSpec())
            try:
                t0 = time.monotonic()
                share = 100.0 * misses(servers, args.reads) / args.reads
            finally:
                cleanup_ensemble(servers)
            found[kind].append(share)
            print(f"[staleness] round {r + 1} {kind}: {share:.1f} % of {args.reads} reads missed the create "
                  f"({time.monotonic() - t0:.1f} s)", file=sys.stderr, flush=True)
    print("| server | misses per round (%) | median |")
    print("|---|---|---|")
    for kind, shares in found.items():
        print(f"| {kind} | {', '.join(f'{s:.1f}' for s in shares)} | {statistics.median(shares):.1f} |")


if __name__ == "__main__":
    main()
