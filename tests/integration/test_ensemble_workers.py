"""serverWorkers on an ensemble: the leader serves its client port from two processes (its
member and one worker, fed the txns the leader commits), the followers from one (the WARN).

Every member is given serverWorkers=2, so whichever leads has a worker; which process serves a
connection of the leader is found as in tests/integration/test_server_workers.py (a new
session's id names the process that created it: ``id % 2``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from tests.integration.test_server_workers import Processes, _path

from zkpy.errors import Code
from zkpy.testing.rawclient import RawClient
from zkpy.testing.servers import (
    ServerProcess,
    cleanup_ensemble,
    ensemble_leader,
    start_ensemble,
    wait_workers,
)
from zkpy.wire.consts import EventType, OpCode
from zkpy.wire.proto import (
    ACL,
    CreateRequest,
    ExistsRequest,
    GetDataRequest,
    GetDataResponse,
    Id,
    SetDataRequest,
    SyncRequest,
)

OPEN = [ACL(31, Id("world", "anyone"))]
pytestmark = pytest.mark.timeout(120)


class Ensemble:
    def __init__(self, servers: list[ServerProcess]) -> None:
        self.servers = servers
        self.leader = ensemble_leader(servers)
        wait_workers(self.leader, 2, 30)
        self.procs = Processes(self.leader, 2)
        self.followers = [s for s in servers if s is not self.leader]


@pytest.fixture(scope="module")
def ens() -> Iterator[Ensemble]:
    servers = start_ensemble(["zkpy"] * 3, {"serverWorkers": "2"})
    try:
        e = Ensemble(servers)
        yield e
        e.procs.close()
    finally:
        cleanup_ensemble(servers)


def test_only_the_leader_serves_from_several_processes(ens: Ensemble) -> None:
    assert "worker 1 started: pid" in ens.leader.log()
    for s in ens.followers:
        assert "serverWorkers=2: the client port is served from 2 processes while this member leads" in s.log()
        assert "worker 1 started" not in s.log()


def test_writes_through_the_leaders_worker_keep_fifo_and_reach_every_member(ens: Ensemble) -> None:
    root = _path("fifo")
    c = ens.procs.raw_on(1)
    try:
        assert c.call(OpCode.CREATE, CreateRequest(root, b"", OPEN, 0)).header.err == 0
        xids = []
        for i in range(50):
            xids.append(c.send(OpCode.CREATE, CreateRequest(f"{root}/n{i}", b"0", OPEN, 0)))
            xids.append(c.send(OpCode.SET_DATA, SetDataRequest(f"{root}/n{i}", str(i).encode(), -1)))
            xids.append(c.send(OpCode.GET_DATA, GetDataRequest(f"{root}/n{i}", False)))
        replies = [c.recv() for _ in xids]
        assert [r.header.xid for r in replies] == xids  # in request order
        for i in range(50):
            got = replies[3 * i + 2]
            assert got.header.err == 0 and GetDataResponse.from_bytes(got.body).data == str(i).encode(), i
    finally:
        c.close()
    for s in ens.servers:  # a sync, then the last write, on every member (on the leader: either process)
        r = RawClient("127.0.0.1", s.port)
        try:
            assert r.call(OpCode.SYNC, SyncRequest(root)).header.err == 0
            got = r.call(OpCode.GET_DATA, GetDataRequest(f"{root}/n49", False))
            assert got.header.err == 0 and GetDataResponse.from_bytes(got.body).data == b"49", s.extra["myid"]
        finally:
            r.close()


@pytest.mark.parametrize("writer_on", [0, 1], ids=["member-writes", "worker-writes"])
def test_a_read_on_one_of_the_leaders_processes_sees_a_write_acknowledged_by_the_other(ens: Ensemble,
                                                                                       writer_on: int) -> None:
    path = _path("ack")
    writer = ens.procs.raw_on(writer_on)
    reader = ens.procs.raw_on(1 - writer_on)
    try:
        assert writer.call(OpCode.CREATE, CreateRequest(path, b"0", OPEN, 0)).header.err == 0
        for i in range(1, 101):
            value = str(i).encode()
            assert writer.call(OpCode.SET_DATA, SetDataRequest(path, value, -1)).header.err == 0
            got = reader.call(OpCode.GET_DATA, GetDataRequest(path, False))  # no sync
            assert got.header.err == 0 and GetDataResponse.from_bytes(got.body).data == value, f"round {i}"
    finally:
        writer.close()
        reader.close()


def test_an_ephemeral_of_a_workers_session_goes_everywhere_when_it_closes(ens: Ensemble) -> None:
    path = _path("eph")
    owner = ens.procs.raw_on(1)
    watchers = [ens.procs.raw_on(0)] + [RawClient("127.0.0.1", s.port) for s in ens.followers]
    try:
        assert owner.call(OpCode.CREATE, CreateRequest(path, b"", OPEN, 1)).header.err == 0
        for w in watchers:
            assert w.call(OpCode.SYNC, SyncRequest(path)).header.err == 0
            assert w.call(OpCode.EXISTS, ExistsRequest(path, True)).header.err == 0
        owner.close()
        deadline = time.monotonic() + 20
        for w in watchers:
            while not w.notifications:
                assert time.monotonic() < deadline
                w.notifications.append(w.recv())
            assert [(f.event().type, f.event().path) for f in w.notifications] == [(EventType.NODE_DELETED, path)]
            assert w.call(OpCode.EXISTS, ExistsRequest(path, False)).header.err == Code.NONODE
    finally:
        for w in watchers:
            w.close()
