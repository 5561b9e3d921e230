"""Containers, TTL nodes and watch restoration, against zkpy and Apache ZooKeeper alike."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from zkpy.errors import Code
from zkpy.testing.rawclient import RawClient
from zkpy.testing.servers import ServerProcess, start_apache, start_zkpy
from zkpy.wire.consts import EventType, OpCode, Xid
from zkpy.wire.proto import (
    ACL,
    CreateRequest,
    CreateTTLRequest,
    DeleteRequest,
    ExistsRequest,
    GetDataRequest,
    Id,
    SetDataRequest,
    SetWatches,
)

OPEN = [ACL(31, Id("world", "anyone"))]
CHECK_MS = "200"


@pytest.fixture(params=["zkpy", "apache"], scope="module")
def quick_containers(request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    """A server that checks containers and TTL nodes every 200 ms."""
    if request.param == "apache":
        from tests.conftest import require_apache

        require_apache()
        server = start_apache(jvm_props={"znode.container.checkIntervalMs": CHECK_MS})
    else:
        server = start_zkpy({"znode.container.checkIntervalMs": CHECK_MS})
    yield server
    server.cleanup()


def client(server: ServerProcess) -> RawClient:
    return RawClient("127.0.0.1", server.port)


def wait_gone(c: RawClient, path: str, deadline_s: float = 15.0) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if c.call(OpCode.EXISTS, ExistsRequest(path, False)).header.err == Code.NONODE:
            return
        time.sleep(0.05)
    pytest.fail(f"{path} still exists after {deadline_s}s")


def test_container_goes_after_its_last_child(quick_containers: ServerProcess) -> None:
    c = client(quick_containers)
    tag = uuid.uuid4().hex[:8]
    used, fresh = f"/used-{tag}", f"/fresh-{tag}"
    try:
        assert c.call(OpCode.CREATE_CONTAINER, CreateRequest(fresh, b"", OPEN, 4)).header.err == 0
        assert c.call(OpCode.CREATE_CONTAINER, CreateRequest(used, b"", OPEN, 4)).header.err == 0
        assert c.call(OpCode.CREATE, CreateRequest(f"{used}/child", b"", OPEN, 0)).header.err == 0
        assert c.call(OpCode.DELETE, DeleteRequest(f"{used}/child", -1)).header.err == 0
        wait_gone(c, used)
        # a container that never had a child is left alone by the same check
        assert c.call(OpCode.EXISTS, ExistsRequest(fresh, False)).header.err == 0
    finally:
        c.close()


def test_ttl_node_goes_after_its_ttl_unless_it_has_children(quick_containers: ServerProcess) -> None:
    c = client(quick_containers)
    tag = uuid.uuid4().hex[:8]
    lone, parent = f"/ttl-lone-{tag}", f"/ttl-parent-{tag}"
    try:
        for path in (lone, parent):
            rsp = c.call(OpCode.CREATE_TTL, CreateTTLRequest(path, b"", OPEN, 5, 300))
            assert rsp.header.err == 0
        assert c.call(OpCode.CREATE, CreateRequest(f"{parent}/kid", b"", OPEN, 0)).header.err == 0
        wait_gone(c, lone)
        assert c.call(OpCode.EXISTS, ExistsRequest(parent, False)).header.err == 0
        assert c.call(OpCode.DELETE, DeleteRequest(f"{parent}/kid", -1)).header.err == 0
        wait_gone(c, parent)
    finally:
        c.close()


@pytest.mark.parametrize("kind", ["zkpy", "apache"])
def test_ttl_needs_extended_types(kind: str) -> None:
    if kind == "apache":
        from tests.conftest import require_apache

        require_apache()
        server = start_apache({"extendedTypesEnabled": "false"})
    else:
        server = start_zkpy({"extendedTypesEnabled": "false"})
    try:
        c = client(server)
        rsp = c.call(OpCode.CREATE_TTL, CreateTTLRequest("/ttl", b"", OPEN, 5, 1000))
        assert rsp.header.err == Code.UNIMPLEMENTED
        c.close()
    finally:
        server.cleanup()


def test_ttl_arguments_are_checked(any_server: ServerProcess) -> None:
    c = client(any_server)
    try:
        tag = uuid.uuid4().hex[:8]
        cases = [
            (OpCode.CREATE_TTL, CreateTTLRequest(f"/t0-{tag}", b"", OPEN, 5, 0)),  # ttl must be positive
            (OpCode.CREATE_TTL, CreateTTLRequest(f"/t1-{tag}", b"", OPEN, 5, 1 << 56)),  # beyond the max
            (OpCode.CREATE_TTL, CreateTTLRequest(f"/t2-{tag}", b"", OPEN, 0, 1000)),  # ttl on a plain mode
            (OpCode.CREATE, CreateRequest(f"/t3-{tag}", b"", OPEN, 5)),  # TTL mode without a ttl
            (OpCode.CREATE, CreateRequest(f"/t4-{tag}", b"", OPEN, 9)),  # no such mode
        ]
        assert [c.call(op, rec).header.err for op, rec in cases] == [Code.BADARGUMENTS] * len(cases)
    finally:
        c.close()


def test_set_watches_fires_what_changed_while_away(any_server: ServerProcess) -> None:
    tag = uuid.uuid4().hex[:8]
    data, born, parent = f"/sw-data-{tag}", f"/sw-born-{tag}", f"/sw-parent-{tag}"
    writer = client(any_server)
    away = client(any_server)
    try:
        for path in (data, parent):
            assert writer.call(OpCode.CREATE, CreateRequest(path, b"", OPEN, 0)).header.err == 0
        seen = away.call(OpCode.GET_DATA, GetDataRequest(data, True)).header.zxid
        sid, pw = away.session_id, away.connect_response.passwd
        away.sock.close()  # the session lives on; the watches went with the connection
        assert writer.call(OpCode.SET_DATA, SetDataRequest(data, b"new", -1)).header.err == 0
        assert writer.call(OpCode.CREATE, CreateRequest(born, b"", OPEN, 0)).header.err == 0
        assert writer.call(OpCode.CREATE, CreateRequest(f"{parent}/kid", b"", OPEN, 0)).header.err == 0
        back = RawClient("127.0.0.1", any_server.port, session_id=sid, passwd=pw)
        xid = back.send(OpCode.SET_WATCHES, SetWatches(seen, [data], [born], [parent]), xid=Xid.SET_WATCHES)
        events = []
        while True:
            frame = back.recv()
            if frame.is_notification:
                e = frame.event()
                events.append((e.type, e.path))
            elif frame.header.xid == xid:
                assert frame.header.err == 0
                break
        assert sorted(events) == sorted([(EventType.NODE_DATA_CHANGED, data), (EventType.NODE_CREATED, born),
                                         (EventType.NODE_CHILDREN_CHANGED, parent)])
        back.close()
    finally:
        writer.close()


def test_check_and_remove_watches(any_server: ServerProcess) -> None:
    from zkpy.wire.consts import WatcherType
    from zkpy.wire.proto import CheckWatchesRequest, GetChildrenRequest, RemoveWatchesRequest

    path = f"/rw-{uuid.uuid4().hex[:8]}"
    c = client(any_server)
    try:
        assert c.call(OpCode.CREATE, CreateRequest(path, b"", OPEN, 0)).header.err == 0
        assert c.call(OpCode.CHECK_WATCHES, CheckWatchesRequest(path, WatcherType.ANY)).header.err == Code.NOWATCHER
        c.call(OpCode.GET_DATA, GetDataRequest(path, True))
        c.call(OpCode.GET_CHILDREN, GetChildrenRequest(path, True))
        results = [
            c.call(OpCode.CHECK_WATCHES, CheckWatchesRequest(path, WatcherType.DATA)).header.err,
            c.call(OpCode.REMOVE_WATCHES, RemoveWatchesRequest(path, WatcherType.DATA)).header.err,
            c.call(OpCode.CHECK_WATCHES, CheckWatchesRequest(path, WatcherType.DATA)).header.err,
            c.call(OpCode.CHECK_WATCHES, CheckWatchesRequest(path, WatcherType.CHILDREN)).header.err,
            c.call(OpCode.REMOVE_WATCHES, RemoveWatchesRequest(path, WatcherType.ANY)).header.err,
            c.call(OpCode.REMOVE_WATCHES, RemoveWatchesRequest(path, WatcherType.ANY)).header.err,
        ]
        assert results == [0, 0, Code.NOWATCHER, 0, 0, Code.NOWATCHER]
        # nothing fires once the watches are gone
        assert c.call(OpCode.SET_DATA, SetDataRequest(path, b"x", -1)).header.err == 0
        assert c.call(OpCode.EXISTS, ExistsRequest(path, False)).header.err == 0
        assert c.notifications == []
    finally:
        c.close()


def test_ip_acl(any_server: ServerProcess) -> None:
    path = f"/ip-{uuid.uuid4().hex[:8]}"
    c = client(any_server)
    try:
        mine = [ACL(31, Id("ip", "127.0.0.0/8"))]
        other = [ACL(31, Id("ip", "10.1.2.3"))]
        assert c.call(OpCode.CREATE, CreateRequest(path, b"", mine, 0)).header.err == 0
        assert c.call(OpCode.GET_DATA, GetDataRequest(path, False)).header.err == 0
        assert c.call(OpCode.CREATE, CreateRequest(f"{path}/x", b"", other, 0)).header.err == 0
        assert c.call(OpCode.GET_DATA, GetDataRequest(f"{path}/x", False)).header.err == Code.NOAUTH
        bad = [ACL(31, Id("ip", "not-an-ip"))]
        assert c.call(OpCode.CREATE, CreateRequest(f"{path}/y", b"", bad, 0)).header.err == Code.INVALIDACL
    finally:
        c.close()
