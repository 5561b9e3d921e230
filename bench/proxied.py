"""``python -m bench proxied``: the example project's failover story (``examples/jobqueue``'s
``tests/test_failover.py``) on the pytest plugin's ``ZkEnsemble``, whose members reach each other
through TCP proxies as through a load balancer or a sidecar, timed step by step.

Per run: the seconds until a new leader serves after kill -9 of the leader, and until the
follower that was isolated (and healed) serves a session while the restarted old leader is
frozen (SIGSTOP). Prints each run's figures and their range; ``--runs`` sets how many.
"""

from __future__ import annotations

import argparse
import time

from kazoo.client import KazooClient

from zkpy import Client
from zkpy.testing.pytest_plugin import ZkEnsemble


def one_run() -> tuple[float, float]:
    ens = ZkEnsemble(3)
    try:
        with Client(ens.hosts) as zk:
            zk.create("/before", b"1")
            leader = ens.leader()
            leader.kill()
            started = time.monotonic()
            new_leader = ens.leader(among=[m for m in ens.members if m is not leader])
            elected_s = time.monotonic() - started
        leader.restart()
        kz = KazooClient(leader.hosts)
        kz.start()
        kz.sync("/")
        kz.stop()
        kz.close()
        cut = next(m for m in ens.members if m is not new_leader and m is not leader)
        ens.isolate(cut)
        with Client(new_leader.hosts) as zk:
            zk.create("/while-cut", b"1")
        ens.heal()
        leader.pause()
        started = time.monotonic()
        try:
            with Client(cut.hosts, session_timeout=6.0) as zk:
                zk.sync("/")
            served_s = time.monotonic() - started
        finally:
            leader.resume()
        return elected_s, served_s
    finally:
        ens.cleanup()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench proxied", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=6)
    args = parser.parse_args(argv)
    results = []
    for n in range(args.runs):
        elected_s, served_s = one_run()
        results.append((elected_s, served_s))
        print(f"run {n + 1}: new leader after {elected_s:.2f} s, healed follower serves after {served_s:.2f} s",
              flush=True)
    elected = [r[0] for r in results]
    served = [r[1] for r in results]
    print(f"new leader: {min(elected):.2f}-{max(elected):.2f} s; healed follower: {min(served):.2f}-{max(served):.2f} s")
    return 0
