"""The pure server core driven with bytes and a fake clock: no sockets, no threads."""

from __future__ import annotations

from zkpy.config import ServerConfig
from zkpy.server.core import ServerCore
from zkpy.server.outputs import Propose
from zkpy.wire.consts import EventType, OpCode
from zkpy.wire.jute import INT
from zkpy.wire.proto import (
    ACL,
    ConnectRequest,
    ConnectResponse,
    CreateRequest,
    DeleteRequest,
    GetDataRequest,
    Id,
    ReplyHeader,
    RequestHeader,
    SetDataRequest,
    SyncRequest,
    WatcherEvent,
)

OPEN = [ACL(31, Id("world", "anyone"))]


class Harness:
    def __init__(self, **cfg: object) -> None:
        self.now = 1_000_000
        self.core = ServerCore(ServerConfig(**cfg), self.now, 1_700_000_000_000)  # type: ignore[arg-type]
        self.ids = 0

    def flush(self) -> None:
        """Persist every txn proposed (and what applying them proposes), as a shell would."""
        while proposed := [o for o in self.core.ready() if isinstance(o, Propose)]:
            self.core.apply_persisted(len(proposed))

    def connect(self, timeout: int = 10000):  # type: ignore[no-untyped-def]
        self.ids += 1
        conn = self.core.open(self.ids, "127.0.0.1", 40000 + self.ids)
        payload = ConnectRequest(0, 0, timeout, 0, bytes(16)).to_bytes() + b"\x00"
        self.core.receive(conn, INT.pack(len(payload)) + payload)
        self.flush()
        rsp = ConnectResponse.from_bytes(self.take(conn)[0])
        assert rsp.sessionId != 0
        return conn

    def send(self, conn, xid: int, op: int, record) -> None:  # type: ignore[no-untyped-def]
        payload = RequestHeader(xid, op).to_bytes() + record.to_bytes()
        self.core.receive(conn, INT.pack(len(payload)) + payload)

    @staticmethod
    def take(conn) -> list[bytes]:  # type: ignore[no-untyped-def]
        frames = [f[4:] for f in conn.take_output()]
        return frames

    def advance(self, ms: int) -> None:
        self.now += ms
        self.core.set_time(self.now, 1_700_000_000_000 + self.now)
        self.core.tick()
        self.flush()


def test_nothing_is_acknowledged_before_persistence() -> None:
    h = Harness()
    c = h.connect()
    h.send(c, 1, OpCode.CREATE, CreateRequest("/a", b"x", OPEN, 0))
    h.send(c, 2, OpCode.GET_DATA, GetDataRequest("/a", False))
    assert h.take(c) == []  # the create is proposed, the read waits behind it
    out = h.core.ready()
    assert len(out) == 1 and isinstance(out[0], Propose)
    h.core.apply_persisted(1)
    replies = [ReplyHeader.read(f, 0)[0] for f in h.take(c)]
    assert [(r.xid, r.err) for r in replies] == [(1, 0), (2, 0)]


def test_event_is_queued_before_the_writers_reply_and_later_reads() -> None:
    h = Harness()
    a, b = h.connect(), h.connect()
    h.send(b, 1, OpCode.CREATE, CreateRequest("/x", b"0", OPEN, 0))
    h.flush()
    h.take(b)
    h.send(a, 1, OpCode.GET_DATA, GetDataRequest("/x", True))
    h.take(a)
    h.send(b, 2, OpCode.SET_DATA, SetDataRequest("/x", b"1", -1))
    h.flush()
    h.send(a, 2, OpCode.GET_DATA, GetDataRequest("/x", False))
    frames = h.take(a)
    first, pos = ReplyHeader.read(frames[0], 0)
    assert first.xid == -1
    assert WatcherEvent.from_bytes(frames[0][pos:]).type == EventType.NODE_DATA_CHANGED
    assert ReplyHeader.read(frames[1], 0)[0].xid == 2


def test_sessions_expire_on_tick_boundaries() -> None:
    h = Harness(tick_ms=100, min_session_timeout_ms=200)
    c = h.connect(timeout=300)
    h.send(c, 1, OpCode.CREATE, CreateRequest("/e", b"", OPEN, 1))
    h.flush()
    h.advance(299)
    assert h.core.tree.get("/e") is not None
    h.advance(150)  # past the 300 ms timeout, within one tick
    assert h.core.tree.get("/e") is None
    assert c.closing


def test_sync_waits_for_every_write_in_flight_whichever_session_sent_it() -> None:
    """ZooKeeper queues a sync behind the writes already in its pipeline: a session that syncs
    and then reads sees a write another session sent before the sync arrived."""
    h = Harness()
    writer, reader = h.connect(), h.connect()
    h.send(writer, 1, OpCode.CREATE, CreateRequest("/s", b"v", OPEN, 0))
    h.send(reader, 1, OpCode.SYNC, SyncRequest("/"))
    h.send(reader, 2, OpCode.GET_DATA, GetDataRequest("/s", False))
    assert h.take(reader) == [], "neither the sync nor the read behind it may answer before the create applies"
    h.flush()
    replies = [ReplyHeader.read(f, 0)[0] for f in h.take(reader)]
    assert [(r.xid, r.err) for r in replies] == [(1, 0), (2, 0)]
    h.send(reader, 3, OpCode.SYNC, SyncRequest("/"))  # nothing in flight: answered at once
    assert [ReplyHeader.read(f, 0)[0].xid for f in h.take(reader)] == [3]


def test_set_data_txn_bytes_are_cut_from_the_request_only_where_exact() -> None:
    """A setData's Propose carries the txn's bytes cut from the request: equal to encoding the
    txn (new version), and None where the request's bytes would not give them back."""
    h = Harness()
    c = h.connect()
    h.send(c, 1, OpCode.CREATE, CreateRequest("/a", b"x", OPEN, 0))
    h.send(c, 2, OpCode.CREATE, CreateRequest("/\u00e9", b"x", OPEN, 0))
    h.flush()
    h.take(c)
    for xid, path, data in [(3, "/a", b"v" * 100), (4, "/a", None), (5, "/a", b""), (6, "/\u00e9", b"w")]:
        h.send(c, xid, OpCode.SET_DATA, SetDataRequest(path, data, -1))
        (p,) = [o for o in h.core.ready() if isinstance(o, Propose)]
        assert p.txn.version >= 1
        if path.isascii():
            assert p.body == p.txn.to_bytes()
        else:
            assert p.body is None  # a non-ASCII path is encoded from the txn
        h.core.apply_persisted(1)
    payload = RequestHeader(7, OpCode.SET_DATA).to_bytes() + SetDataRequest("/a", b"z", -1).to_bytes() + b"junk"
    h.core.receive(c, INT.pack(len(payload)) + payload)
    (p,) = [o for o in h.core.ready() if isinstance(o, Propose)]
    assert p.body is None  # trailing bytes after the record: never cut from the request
    h.core.apply_persisted(1)
    h.send(c, 8, OpCode.SET_DATA, SetDataRequest("/a", b"z", 99))  # bad version: an error txn
    (p,) = [o for o in h.core.ready() if isinstance(o, Propose)]
    assert p.body is None
    h.core.apply_persisted(1)
    for xid, path in [(9, "/a"), (10, "/\u00e9")]:
        h.send(c, xid, OpCode.DELETE, DeleteRequest(path, -1))
        (p,) = [o for o in h.core.ready() if isinstance(o, Propose)]
        assert p.body == (p.txn.to_bytes() if path.isascii() else None)
        h.core.apply_persisted(1)


def test_create_txn_bytes_are_cut_from_the_request_only_where_exact() -> None:
    """A create's txn (path, data, ACL, ephemeral, parent cversion) is its request with the flags
    replaced, where that is exact: the open ACL, an ASCII path, the request's own path, nothing
    after the record. Everything else is encoded from the txn."""
    h = Harness()
    c = h.connect()
    cases = [  # (op, request, cut from the request?)
        (OpCode.CREATE, CreateRequest("/a", b"x" * 50, OPEN, 0), True),
        (OpCode.CREATE2, CreateRequest("/b", None, OPEN, 0), True),
        (OpCode.CREATE, CreateRequest("/e", b"", OPEN, 1), True),  # ephemeral
        (OpCode.CREATE, CreateRequest("/a/s", b"", OPEN, 2), False),  # sequential: the path grows
        (OpCode.CREATE, CreateRequest("/r", b"", [ACL(1, Id("world", "anyone"))], 0), False),
        (OpCode.CREATE, CreateRequest("/d", b"", OPEN + OPEN, 0), False),  # deduplicated to the open ACL
        (OpCode.CREATE, CreateRequest("/\u00e9", b"", OPEN, 0), False),
    ]
    for xid, (op, request, cut) in enumerate(cases, start=1):
        h.send(c, xid, op, request)
        (p,) = [o for o in h.core.ready() if isinstance(o, Propose)]
        assert p.error is None
        assert p.body == (p.txn.to_bytes() if cut else None), request
        h.core.apply_persisted(1)
    payload = RequestHeader(20, OpCode.CREATE).to_bytes() + CreateRequest("/t", b"", OPEN, 0).to_bytes() + b"junk"
    h.core.receive(c, INT.pack(len(payload)) + payload)
    (p,) = [o for o in h.core.ready() if isinstance(o, Propose)]
    assert p.error is None and p.body is None  # trailing bytes after the record
