"""Read-only mode in the simulator: the member cores decide (``member.read_only``,
``server.read_only``), the simulated shell runs them as ``runtime.peer`` does.

A seeded run with real clients (``read_only=True``): every server is cut off from every other,
so each serves read-only once it has looked for a quorum long enough; the clients get local
read-only sessions, read, and have every write refused (a read-only server never acknowledges
one: the checker fails the run if it does, or if the read-only pipeline ever proposes). Then
servers 1 and 2 find each other: they form a quorum, server 3 stays read-only, and the clients
move to the read-write servers, some by finding one with ``isro`` (``ClientCore.rw_probe``).
Then the partition heals: server 3 rejoins and the ensemble converges with every acknowledged
write.
"""

from __future__ import annotations

import os

import pytest

from zkpy.testing.sim import SimConfig

from .scenario import Script

SEEDS = [int(os.environ["ZKPY_SIM_SEED"])] if "ZKPY_SIM_SEED" in os.environ else [3, 11]
CONFIG = SimConfig(read_only=True, session_clients=4, session_timeout_ms=4000, fsync_ms=(2, 4))


@pytest.mark.parametrize("seed", SEEDS)
def test_cut_off_members_serve_reads_only_and_rejoin(seed: int) -> None:
    print(f"seed {seed} (ZKPY_SIM_SEED={seed} reruns it)")
    s = Script(seed, CONFIG)
    c = s.c
    s.converge()
    c.workload.start(c.sched.now + 60_000)
    c.sessions.start(c.sched.now + 60_000)
    s.wait(lambda: c.stats["client_connected"] >= 4, "the clients' sessions")
    s.run(3000)  # the clients write their keys

    c.partition([1], [2], [3])
    s.wait(lambda: all(n.mode == "read-only" for n in c.nodes.values()), "every server to serve read-only")
    s.wait(lambda: c.stats["client_read_only_read"] >= 10 and c.stats["client_not_read_only"] >= 3,
           "reads served and writes refused by read-only servers", 30_000)
    assert c.stats["client_read_only_session"] >= 1
    assert c.leader() is None

    c.partition([1, 2], [3])
    s.wait(lambda: s.c.converged(only=(1, 2)), "servers 1 and 2 to form a quorum", 30_000)
    assert c.nodes[3].mode == "read-only"
    sessions_before = c.stats["client_connected"]
    s.wait(lambda: all(cl.link is not None and cl.link.node.serving for cl in c.sessions.clients),
           "every client on a read-write server", 30_000)
    assert c.stats["client_connected"] > sessions_before

    c.heal()
    s.converge(60_000)
    assert c.nodes[3].mode != "read-only"
    assert c.stats["client_rw_server_found"] >= 1  # a client left server 3 by itself (seeded: it did)
    c.workload.stop()
    c.sessions.stop()
    s.final()
