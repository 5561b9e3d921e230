"""The guarantees clients rely on, checked against zkpy and Apache ZooKeeper alike."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from zkpy.errors import Code
from zkpy.testing.rawclient import RawClient
from zkpy.testing.servers import ServerProcess, start_apache, start_zkpy
from zkpy.wire.consts import EventType, OpCode
from zkpy.wire.proto import (
    ACL,
    CreateRequest,
    ExistsRequest,
    GetDataRequest,
    GetDataResponse,
    Id,
    SetDataRequest,
)

OPEN = [ACL(31, Id("world", "anyone"))]


@pytest.fixture(params=["zkpy", "zkpy_workers", "apache"])
def any_server(request: pytest.FixtureRequest) -> ServerProcess:
    """The same test against zkpy with one serving process and with two workers before a dedicated
    member, and against Apache ZooKeeper."""
    if request.param == "apache":
        from tests.conftest import require_apache

        require_apache()
    return request.getfixturevalue(f"{request.param}_server")  # type: ignore[no-any-return]


def raw(server: ServerProcess, **kwargs: object) -> RawClient:
    host, port = server.hosts.split(":")
    return RawClient(host, int(port), **kwargs)  # type: ignore[arg-type]


def test_watch_event_precedes_the_read_that_shows_the_change(any_server: ServerProcess) -> None:
    """A watches /x and reads it right after B's setData: NodeDataChanged always comes first."""
    path = f"/order-{uuid.uuid4().hex[:8]}"
    a, b = raw(any_server), raw(any_server)
    try:
        assert b.call(OpCode.CREATE, CreateRequest(path, b"0", OPEN, 0)).header.err == 0
        assert a.call(OpCode.GET_DATA, GetDataRequest(path, True)).header.err == 0
        for i in range(1, 1001):
            value = str(i).encode()
            assert b.call(OpCode.SET_DATA, SetDataRequest(path, value, -1)).header.err == 0
            xid = a.send(OpCode.GET_DATA, GetDataRequest(path, True))
            frames = []
            while True:
                frame = a.recv()
                frames.append(frame)
                if frame.header.xid == xid:
                    break
            reply = GetDataResponse.from_bytes(frames[-1].body)
            assert reply.data == value
            events = [f.event() for f in frames[:-1] if f.is_notification]
            assert [(e.type, e.path) for e in events] == [(EventType.NODE_DATA_CHANGED, path)], f"round {i}"
    finally:
        a.close()
        b.close()


def test_a_read_queued_behind_the_sessions_write_sees_it(any_server: ServerProcess) -> None:
    """Per-session FIFO: pipelined create then getData, without waiting in between."""
    root = f"/fifo-{uuid.uuid4().hex[:8]}"
    c = raw(any_server)
    try:
        assert c.call(OpCode.CREATE, CreateRequest(root, b"", OPEN, 0)).header.err == 0
        xids = []
        for i in range(300):
            xids.append(c.send(OpCode.CREATE, CreateRequest(f"{root}/n{i}", str(i).encode(), OPEN, 0)))
            xids.append(c.send(OpCode.GET_DATA, GetDataRequest(f"{root}/n{i}", False)))
        replies = [c.recv() for _ in xids]
        assert [r.header.xid for r in replies] == xids  # replies come back in request order
        for i in range(300):
            got = replies[2 * i + 1]
            assert got.header.err == 0
            assert GetDataResponse.from_bytes(got.body).data == str(i).encode()
    finally:
        c.close()


@pytest.fixture(params=["zkpy", "zkpy_workers", "apache"], scope="module")
def fast_tick_server(request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    """A server with a 200 ms tick, so sessions can expire quickly."""
    settings = {"tickTime": "200", "minSessionTimeout": "400", "maxSessionTimeout": "4000"}
    if request.param == "apache":
        from tests.conftest import require_apache

        require_apache()
        server = start_apache(settings)
    else:
        server = start_zkpy({**settings, "serverWorkers": "2" if request.param == "zkpy_workers" else "1"})
    yield server
    server.cleanup()


def test_session_that_stops_pinging_expires_with_its_ephemerals(fast_tick_server: ServerProcess) -> None:
    server = fast_tick_server
    path = f"/expire-{uuid.uuid4().hex[:8]}"
    timeout_ms = 1000
    silent = raw(server, timeout_ms=timeout_ms)
    assert silent.connect_response.timeOut == timeout_ms
    watcher = raw(server)
    try:
        assert silent.call(OpCode.CREATE, CreateRequest(path, b"", OPEN, 1)).header.err == 0
        last_heard = time.monotonic()
        assert watcher.call(OpCode.EXISTS, ExistsRequest(path, True)).header.err == 0
        # the silent client sends nothing more; the watcher keeps its own session alive
        deadline = last_heard + 10
        event = None
        while event is None and time.monotonic() < deadline:
            xid = watcher.send(OpCode.PING, xid=-2)
            while True:
                frame = watcher.recv()
                if frame.is_notification:
                    event = frame.event()
                    expired_after = time.monotonic() - last_heard
                if frame.header.xid == xid:
                    break
            time.sleep(0.05)
        assert event is not None and (event.type, event.path) == (EventType.NODE_DELETED, path)
        # not before the negotiated timeout; within about a tick after it (generous for a loaded CI box)
        assert timeout_ms / 1000 - 0.05 <= expired_after <= timeout_ms / 1000 + 0.2 + 2.0
        exists = watcher.call(OpCode.EXISTS, ExistsRequest(path, False))
        assert exists.header.err == Code.NONODE
        assert silent.closed_by_server()
        host, port = server.hosts.split(":")
        again = RawClient(host, int(port), session_id=silent.session_id, passwd=silent.connect_response.passwd)
        assert again.connect_response.timeOut == 0 and again.connect_response.sessionId == 0
        again.sock.close()
    finally:
        watcher.close()
        silent.sock.close()


def test_reconnect_keeps_the_session_and_a_wrong_password_is_refused(any_server: ServerProcess) -> None:
    first = raw(any_server)
    path = f"/reconnect-{uuid.uuid4().hex[:8]}"
    assert first.call(OpCode.CREATE, CreateRequest(path, b"", OPEN, 1)).header.err == 0
    sid, pw = first.session_id, first.connect_response.passwd
    first.sock.close()
    host, port = any_server.hosts.split(":")
    wrong = RawClient(host, int(port), session_id=sid, passwd=bytes(16))
    assert wrong.connect_response.sessionId == 0 and wrong.connect_response.timeOut == 0
    wrong.sock.close()
    again = RawClient(host, int(port), session_id=sid, passwd=pw)
    try:
        assert again.session_id == sid
        assert again.call(OpCode.EXISTS, ExistsRequest(path, False)).header.err == 0
    finally:
        again.close()
    check = KazooClient(any_server.hosts)
    check.start(timeout=15)
    try:
        assert check.exists(path) is None  # closeSession removed the ephemeral
    finally:
        check.stop()
        check.close()
