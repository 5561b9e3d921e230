"""One process of a multi-process recipe test: ``python -m tests.recipes.worker ROLE ...``.

Every process writes what it does as lines to one shared log file (O_APPEND, one write per line,
under flock), so the order of the lines is the order in which things happened across processes.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import os
import sys
import threading
import time
from collections.abc import Sequence

from zkpy import AsyncClient, Client
from zkpy.recipes import AsyncDoubleBarrier, Ownership


def log(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def lock_rounds(args: argparse.Namespace) -> None:
    """Take the lock ``rounds`` times; inside, claim a marker file that must not exist (two
    holders at once would find it), keep it a moment, remove it."""
    marker = args.log + ".holder"
    with Client(args.hosts, session_timeout=args.session_timeout) as zk:
        lock = zk.Lock(args.path, args.name)
        for round_ in range(args.rounds):
            with lock:
                try:
                    fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    log(args.log, f"VIOLATION {args.name} {round_}")
                    continue
                os.close(fd)
                log(args.log, f"in {args.name} {round_}")
                time.sleep(0.002)
                os.unlink(marker)
    log(args.log, f"done {args.name}")


def double_barrier(args: argparse.Namespace) -> None:
    """``clients`` sessions of this process enter and leave one double barrier of ``total``."""

    async def member(i: int) -> None:
        name = f"{args.name}.{i}"
        async with AsyncClient(args.hosts, session_timeout=args.session_timeout) as zk:
            barrier = AsyncDoubleBarrier(zk, args.path, args.total, name)
            log(args.log, f"enter {name}")
            await barrier.enter()
            log(args.log, f"entered {name}")
            log(args.log, f"leave {name}")
            await barrier.leave()
            log(args.log, f"left {name}")

    async def main() -> None:
        await asyncio.gather(*(member(i) for i in range(args.clients)))

    asyncio.run(main())


def candidate(args: argparse.Namespace) -> None:
    """Stand in an election; while waiting, report each watch notification; once leading, say
    so and stay leader until killed."""
    with Client(args.hosts, session_timeout=args.session_timeout) as zk:
        election = zk.Election(args.path, args.name)
        log(args.log, f"candidate {args.name}")

        def lead() -> None:
            log(args.log, f"leader {args.name} {time.monotonic():.3f}")
            election.announce()
            while election.ownership is not Ownership.LOST:
                time.sleep(0.05)

        stop = threading.Event()

        def report_wakeups() -> None:
            seen = 0
            while not stop.wait(0.02):
                now = election.aio.lock.notifications
                if now != seen:
                    log(args.log, f"woke {args.name} {now}")
                    seen = now

        threading.Thread(target=report_wakeups, daemon=True).start()
        election.run(lead)


def participant(args: argparse.Namespace) -> None:
    """A two-phase-commit site: join the next transaction, vote, report the outcome; with
    ``--die`` it exits right after joining, before voting (its session then expires)."""
    zk = Client(args.hosts, session_timeout=args.session_timeout)
    zk.start()
    site = zk.Participant(args.path, args.name)
    tx = site.next(timeout=60)
    log(args.log, f"joined {args.name} {tx.txid}")
    if args.die:
        os._exit(3)  # no close: the session lingers until it expires, as after a crash
    site.vote(tx.txid, args.vote == "commit")
    log(args.log, f"outcome {args.name} {site.outcome(tx.txid, timeout=60).value}")
    zk.close()


def consumer(args: argparse.Namespace) -> None:
    """Consume a locking queue until it is empty (no entry left, claimed or not); with ``--die``
    exit while holding the first entry taken, before consuming it."""
    zk = Client(args.hosts, session_timeout=args.session_timeout)
    zk.start()
    queue = zk.LockingQueue(args.path)
    while True:
        value = queue.get(timeout=args.idle)
        if value is None:
            left = len(queue)
            if left == 0:
                break
            log(args.log, f"waiting {args.name} {left}")  # claimed by another consumer: it may come back
            continue
        if args.die:
            log(args.log, f"took {args.name} {value.decode()}")
            os._exit(3)
        if queue.consume():
            log(args.log, f"consumed {args.name} {value.decode()}")
    log(args.log, f"idle {args.name}")
    zk.close()


ROLES = {"lock": lock_rounds, "double-barrier": double_barrier, "candidate": candidate,
         "participant": participant, "consumer": consumer}


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=sorted(ROLES))
    p.add_argument("--hosts", required=True)
    p.add_argument("--path", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--name", default=str(os.getpid()))
    p.add_argument("--session-timeout", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--clients", type=int, default=1)
    p.add_argument("--total", type=int, default=1)
    p.add_argument("--vote", default="commit")
    p.add_argument("--idle", type=float, default=1.0)
    p.add_argument("--die", action="store_true")
    args = p.parse_args(argv)
    ROLES[args.role](args)


if __name__ == "__main__":
    main(sys.argv[1:])
