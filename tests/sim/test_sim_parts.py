"""The simulator's own parts keep the promises the runs rely on: what a crash keeps of a disk,
TCP semantics on quorum connections, and a quiet ensemble that elects, commits and agrees."""

from __future__ import annotations

import random

import pytest

from zkpy.storage.disk import join
from zkpy.testing.sim import Cluster, DelayModel, SimConfig
from zkpy.testing.sim.disk import SimDisk
from zkpy.testing.sim.network import QConn

from .scenario import Script


def _disk_with_unsynced_tail() -> tuple[SimDisk, str, bytes, bytes]:
    disk = SimDisk()
    path = join("/d", "log.1")
    f = disk.create(path)
    f.write(b"synced-")
    f.sync()
    f.write(b"unsynced")
    return disk, path, b"synced-", b"synced-unsynced"


def test_power_loss_keeps_what_was_synced() -> None:
    disk, path, synced, _ = _disk_with_unsynced_tail()
    disk.crash_now(random.Random(1), "power")
    assert disk.read(path) == synced


def test_kill_keeps_what_was_written() -> None:
    disk, path, _, written = _disk_with_unsynced_tail()
    disk.crash_now(random.Random(1), "kill")
    assert disk.read(path) == written


def test_a_torn_write_keeps_a_prefix_of_the_unsynced_bytes() -> None:
    kept = set()
    for seed in range(40):
        disk, path, synced, written = _disk_with_unsynced_tail()
        disk.crash_now(random.Random(seed), "torn")
        data = disk.read(path)
        assert written.startswith(data) and data.startswith(synced)
        kept.add(len(data))
    assert len(kept) > 3


def test_quorum_connections_are_fifo_and_break_without_holes() -> None:
    """Within a connection every message arrives in order, whatever the delays; after a break
    nothing more arrives (no hole, no resumption); across connections messages overtake each other."""
    c = Cluster(3, SimConfig(delays=DelayModel(1, 50)))
    arrivals: list[tuple[int, int]] = []

    class End:
        def on_data(self, conn: QConn, data: bytes) -> None:
            arrivals.append((conn.learner, int.from_bytes(data, "big")))

        def on_close(self, conn: QConn) -> None:
            pass

    for node in c.nodes.values():
        node.alive = True
        node.incarnation = 1
    c.net.split_p = 0
    conns = {sid: QConn(sid, sid, 3, {sid: End(), 3: End()}, {sid: 1, 3: 1}, last={sid: 0, 3: 0})
             for sid in (1, 2)}
    for i in range(200):
        for conn in conns.values():
            c.net.send(conn, 3, i.to_bytes(4, "big"))
        if i == 150:
            c.net.break_conn(conns[2], notify_p=0)
        c.run_for(2)
    c.run_for(10_000)
    on1 = [i for sid, i in arrivals if sid == 1]
    on2 = [i for sid, i in arrivals if sid == 2]
    assert on1 == list(range(200))
    assert on2 == list(range(len(on2))) and 0 < len(on2) <= 150
    first = {key: n for n, key in enumerate(arrivals)}
    overtaken = sum(1 for i in range(len(on2)) if first[(2, i)] < first[(1, i)])
    assert 0 < overtaken < len(on2)


@pytest.mark.parametrize("nodes", [3, 5])
def test_a_quiet_ensemble_elects_commits_and_agrees(nodes: int) -> None:
    s = Script(config=SimConfig(nodes=nodes, session_timeout_ms=60_000))
    leader = s.converge()
    assert leader.sid == nodes  # equal zxids: the highest sid wins
    s.open_session(1)  # through a learner: REQUEST -> the leader's ServerCore
    for i in range(20):
        s.create(1, f"/n{i}")
    s.wait(lambda: s.acked("/n19"), "the writes")
    s.final()
    digests = {n.tree.digest for n in s.c.nodes.values() if n.tree is not None}
    assert len(digests) == 1
    assert all(s.everywhere(f"/n{i}") for i in range(20))
    assert s.c.checker.leaders == {1: nodes}
