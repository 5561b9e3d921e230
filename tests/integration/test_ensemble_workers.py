"""serverWorkers on an ensemble: every member serves its client port from two worker processes,
fed the txns the member applies, and the member serves no client. A leader's worker forwards to
the leader's pipeline; a follower's or an observer's is relayed to the leader through its
member's learner link. Each test runs against the leader, a follower and an observer of a 3+1
ensemble.

Which process serves a connection is found as in tests/integration/test_server_workers.py (a new
session's id names the process that created it: ``id % 3``, workers 1 and 2).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from tests.integration.test_server_workers import Processes, _path, _ping

from zkpy.errors import Code
from zkpy.testing.rawclient import RawClient
from zkpy.testing.servers import (
    ServerProcess,
    cleanup_ensemble,
    ensemble_leader,
    four_letter,
    server_mode,
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
    def __init__(self, servers: list[ServerProcess], role: str) -> None:
        self.servers = servers
        leader = ensemble_leader(servers)
        followers = [s for s in servers[:3] if s is not leader]
        self.target = {"leader": leader, "follower": followers[0] if followers else leader,
                       "observer": servers[3]}[role]
        assert server_mode(self.target) == role
        wait_workers(self.target, 2, 30)
        self.procs = Processes(self.target, 2)
        self.others = [s for s in servers if s is not self.target]


@pytest.fixture(scope="module")
def servers() -> Iterator[list[ServerProcess]]:
    servers = start_ensemble(["zkpy"] * 4, {"serverWorkers": "2"}, observers=[4])
    try:
        for s in servers:
            wait_workers(s, 2, 30)
        yield servers
    finally:
        cleanup_ensemble(servers)


@pytest.fixture(scope="module", params=["leader", "follower", "observer"])
def ens(servers: list[ServerProcess], request: pytest.FixtureRequest) -> Iterator[Ensemble]:
    e = Ensemble(servers, request.param)
    yield e
    e.procs.close()


def test_writes_through_a_members_worker_keep_fifo_and_reach_every_member(ens: Ensemble) -> None:
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
    for s in ens.servers:  # a sync, then the last write, on every member (on either process)
        r = RawClient("127.0.0.1", s.port)
        try:
            assert r.call(OpCode.SYNC, SyncRequest(root)).header.err == 0
            got = r.call(OpCode.GET_DATA, GetDataRequest(f"{root}/n49", False))
            assert got.header.err == 0 and GetDataResponse.from_bytes(got.body).data == b"49", s.extra["myid"]
        finally:
            r.close()


@pytest.mark.parametrize("writer_on", [1, 2], ids=["worker-1-writes", "worker-2-writes"])
def test_a_read_on_one_of_a_members_processes_sees_a_write_acknowledged_by_the_other(ens: Ensemble,
                                                                                       writer_on: int) -> None:
    path = _path("ack")
    writer = ens.procs.raw_on(writer_on)
    reader = ens.procs.raw_on(3 - writer_on)
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
    watchers = [ens.procs.raw_on(2)] + [RawClient("127.0.0.1", s.port) for s in ens.others]
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


def test_a_workers_session_lives_while_it_pings_and_expires_when_it_stops(ens: Ensemble) -> None:
    """The leader expires sessions: a worker's touches must reach it (a follower's relayed)."""
    path = _path("live")
    alive = ens.procs.raw_on(1, timeout_ms=1000)
    silent = ens.procs.raw_on(1, timeout_ms=1000)
    try:
        assert alive.call(OpCode.CREATE, CreateRequest(f"{path}-alive", b"", OPEN, 1)).header.err == 0
        assert silent.call(OpCode.CREATE, CreateRequest(f"{path}-silent", b"", OPEN, 1)).header.err == 0
        deadline = time.monotonic() + 20
        while True:  # the alive session pings every 200 ms until the silent one has expired
            _ping(alive)
            if alive.call(OpCode.EXISTS, ExistsRequest(f"{path}-silent", False)).header.err == Code.NONODE:
                break
            assert time.monotonic() < deadline, "the silent session never expired"
            time.sleep(0.2)
        started = time.monotonic()
        while time.monotonic() < started + 2.5:  # more than twice its timeout
            _ping(alive)
            time.sleep(0.2)
        assert alive.call(OpCode.EXISTS, ExistsRequest(f"{path}-alive", False)).header.err == 0
    finally:
        alive.close()
        silent.sock.close()


def test_a_members_client_port_is_served_by_its_workers_alone(ens: Ensemble) -> None:
    """The member serves no client while its term's workers do: every four-letter word is
    answered by a worker's process and every new session is created by a worker."""
    answered = {re.search(r"process\.id=(\d+)", four_letter(ens.target.port, "envi")).group(1)  # type: ignore[union-attr]
                for _ in range(30)}
    assert str(ens.target.proc.pid) not in answered and len(answered) == 2, answered
    clients = [ens.procs.raw() for _ in range(20)]
    try:
        assert {ens.procs.creator(c.session_id) for c in clients} <= {1, 2}
    finally:
        for c in clients:
            c.close()
