"""``python -m bench availability``: how long clients cannot write, and how long members take to
serve again, under one seeded schedule of faults, on a zkpy and an Apache ZooKeeper 3.8 ensemble in
the same run (needs root: the members run on the network test bed, ``zkpy.testing.netbed``).

For each seed, each server kind in turn (the order alternating) gets a fresh ensemble on its own
addresses, ``--writers`` kazoo sessions (``--session-s``) creating znodes one after another through
every member, and the same faults in the seed's order: kill -9 of the leader (restarted after
``--down-s``), kill -9 of a follower (the same), kill -9 of every member (all restarted), SIGSTOP
of the leader (SIGCONT after ``--down-s``) and the leader isolated at the switch (healed after
``--down-s``). After each fault is undone the bench waits until every member serves again and
then ``--settle-s`` more. Reported per run: the longest stretch with no write acknowledged to any
writer (the clients' outage), and for each fault the seconds from its end until every member
served again. Nothing is lost is checked too (every acknowledged create is in the final tree).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NodeExistsError
from kazoo.retry import KazooRetry

from zkpy.testing.netbed import NetBed, start_bed_ensemble, unavailable
from zkpy.testing.servers import (
    ServerProcess,
    cleanup_ensemble,
    ensemble_leader,
    restart_ensemble_member,
    server_mode,
)

FAULTS = ("kill-leader", "kill-follower", "kill-all", "pause-leader", "isolate-leader")


class Writer(threading.Thread):
    """Creates ``/av/<tag>-<n>`` one after another; the monotonic time of every acknowledgement."""

    def __init__(self, tag: str, hosts: str, session_s: float) -> None:
        super().__init__(daemon=True)
        self.tag = tag
        self.acked: list[tuple[float, str]] = []
        self.stopping = threading.Event()
        retry = KazooRetry(max_tries=-1, delay=0.05, max_delay=0.5)
        self.client = KazooClient(hosts=hosts, timeout=session_s, connection_retry=retry)

    def run(self) -> None:
        n = 0
        while not self.stopping.is_set():
            path = f"/av/{self.tag}-{n:07d}"
            try:
                self.client.create(path, b"x")
            except NodeExistsError:
                pass  # an earlier try whose answer was lost went through
            except KazooException:
                time.sleep(0.02)
                continue
            self.acked.append((time.monotonic(), path))
            n += 1


def longest_outage(writers: Sequence[Writer], start: float, end: float) -> float:
    """The longest stretch in [start, end] with no write acknowledged to any writer."""
    times = sorted([start, *(t for w in writers for t, _ in w.acked if start <= t <= end), end])
    return max(b - a for a, b in zip(times, times[1:]))


def wait_all_serving(servers: Sequence[ServerProcess], deadline_s: float = 120.0) -> float:
    """Seconds until every member serves, one as the leader and the others as followers (polled
    every 50 ms: a leader paused through an election still says "leader" when it wakes)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < deadline_s:
        modes = sorted(str(server_mode(s, timeout=0.5)) for s in servers)
        if modes == sorted(["leader"] + ["follower"] * (len(servers) - 1)):
            return time.monotonic() - t0
        time.sleep(0.05)
    raise RuntimeError(f"not every member serves after {deadline_s} s")


def apply_fault(fault: str, bed: NetBed, servers: list[ServerProcess], down_s: float) -> None:
    """Inflict ``fault``, wait ``down_s``, undo it (restart, SIGCONT, heal)."""
    lead = ensemble_leader(servers)
    victims: list[ServerProcess]
    if fault == "kill-leader":
        victims = [lead]
    elif fault == "kill-follower":
        victims = [next(s for s in servers if s is not lead)]
    elif fault == "kill-all":
        victims = list(servers)
    elif fault == "pause-leader":
        lead.proc.send_signal(signal.SIGSTOP)
        time.sleep(down_s)
        lead.proc.send_signal(signal.SIGCONT)
        return
    elif fault == "isolate-leader":
        bed.isolate(int(lead.extra["myid"]))
        time.sleep(down_s)
        bed.heal(int(lead.extra["myid"]))
        return
    else:
        raise ValueError(fault)
    for s in victims:
        s.proc.kill()
        s.proc.wait()
    time.sleep(down_s)
    for s in victims:
        restart_ensemble_member(s)


@dataclass
class Run:
    kind: str
    seed: int
    outage_s: float
    serving_again_s: dict[str, float]
    acked: int


def one_run(kind: str, seed: int, args: argparse.Namespace) -> Run:
    order = list(FAULTS)
    random.Random(seed).shuffle(order)
    with NetBed(args.members) as bed:
        servers = start_bed_ensemble(bed, [kind] * args.members, tick_ms=args.tick_ms, ready_s=120)
        hosts = ",".join(s.hosts for s in servers)
        writers: list[Writer] = []
        try:
            setup = KazooClient(hosts=hosts, timeout=10)
            setup.start(30)
            setup.ensure_path("/av")
            setup.stop()
            setup.close()
            writers = [Writer(f"w{i}", hosts, args.session_s) for i in range(args.writers)]
            for w in writers:
                w.client.start(30)
                w.start()
            time.sleep(args.settle_s)
            start = time.monotonic()
            again: dict[str, float] = {}
            for fault in order:
                apply_fault(fault, bed, servers, args.down_s)
                again[fault] = wait_all_serving(servers)
                print(f"[availability] {kind} seed {seed}: {fault}: every member serving {again[fault]:.2f} s "
                      "after it ended", file=sys.stderr, flush=True)
                time.sleep(args.settle_s)
            end = time.monotonic()
            outage = longest_outage(writers, start, end)
        finally:
            for w in writers:
                w.stopping.set()
            for w in writers:
                w.join(30)
        check = KazooClient(hosts=hosts, timeout=10)
        check.start(30)
        try:
            present = set(check.get_children("/av"))
            lost = [p for w in writers for _, p in w.acked if p.rsplit("/", 1)[1] not in present]
        finally:
            check.stop()
            check.close()
            for w in writers:
                w.client.stop()
                w.client.close()
            cleanup_ensemble(servers)
        if lost:
            raise AssertionError(f"{kind} seed {seed}: {len(lost)} acknowledged writes lost, e.g. {lost[:3]}")
        return Run(kind, seed, outage, again, sum(len(w.acked) for w in writers))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench availability", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--servers", default="zkpy,apache")
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--writers", type=int, default=3)
    parser.add_argument("--session-s", type=float, default=4.0)
    parser.add_argument("--tick-ms", type=int, default=500)
    parser.add_argument("--down-s", type=float, default=6.0)
    parser.add_argument("--settle-s", type=float, default=3.0)
    args = parser.parse_args(argv)
    reason = unavailable()
    if reason is not None:
        raise SystemExit(f"bench availability: {reason}")
    kinds = [k for k in args.servers.split(",") if k]
    runs: list[Run] = []
    for i, seed in enumerate(int(s) for s in args.seeds.split(",") if s):
        for kind in (kinds if i % 2 == 0 else kinds[::-1]):
            runs.append(one_run(kind, seed, args))
    print(f"{args.members} members, tickTime {args.tick_ms} ms, {args.writers} writers with {args.session_s} s "
          f"sessions, faults undone after {args.down_s} s, pid {os.getpid()}")
    print("| seed | server | longest write outage s | " + " | ".join(f"{f} serving again s" for f in FAULTS)
          + " | writes |")
    print("|---|---|---|" + "---|" * len(FAULTS) + "---|")
    for r in sorted(runs, key=lambda r: (r.seed, r.kind)):
        print(f"| {r.seed} | {r.kind} | {r.outage_s:.1f} | "
              + " | ".join(f"{r.serving_again_s[f]:.1f}" for f in FAULTS) + f" | {r.acked:,} |")
    for kind in kinds:
        mine = [r for r in runs if r.kind == kind]
        worst: Callable[[Run], float] = lambda r: max(r.serving_again_s.values())  # noqa: E731
        print(f"{kind}: median longest outage {statistics.median(r.outage_s for r in mine):.1f} s, "
              f"median slowest return to serving {statistics.median(worst(r) for r in mine):.1f} s")


if __name__ == "__main__":
    main()
