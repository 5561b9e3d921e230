"""The read-only pipeline (``server.read_only``) and the read-only switch (``member.read_only``),
driven with bytes and a fake clock. What each asserts was observed on Apache ZooKeeper 3.8 with
``-Dreadonlymode.enabled=true`` and local sessions (tests/interop/test_read_only_mode.py runs both)."""

from __future__ import annotations

from dataclasses import dataclass

from zkpy.admin.commands import run_command
from zkpy.admin.fourletter import answer
from zkpy.config import QuorumConfig, QuorumServer, ServerConfig
from zkpy.errors import Code
from zkpy.member.read_only import READ_ONLY_DELAY_MIN_MS, ReadOnlyGate
from zkpy.server.connection import Connection
from zkpy.server.core import ServerCore
from zkpy.server.outputs import Output
from zkpy.server.read_only import ReadOnlyServerCore
from zkpy.server.sessions import session_password
from zkpy.tree.datatree import DataTree
from zkpy.wire.consts import OpCode
from zkpy.wire.jute import INT
from zkpy.wire.proto import (
    ACL,
    ConnectRequest,
    ConnectResponse,
    CreateRequest,
    GetDataRequest,
    Id,
    ReplyHeader,
    RequestHeader,
    SetDataRequest,
    SyncRequest,
)
from zkpy.wire.txn import CreateSessionTxn, CreateTxn, TxnHeader

OPEN = [ACL(31, Id("world", "anyone"))]
GLOBAL_SESSION = 0x100


def _tree() -> DataTree:
    tree = DataTree()
    tree.apply(TxnHeader(GLOBAL_SESSION, 0, 0x100000001, 0, OpCode.CREATE_SESSION), CreateSessionTxn(4000))
    tree.apply(TxnHeader(GLOBAL_SESSION, 1, 0x100000002, 0, OpCode.CREATE), CreateTxn("/a", b"x", OPEN, False, 1))
    return tree


class Harness:
    def __init__(self) -> None:
        self.now = 1_000_000
        self.tree = _tree()
        self.core = ReadOnlyServerCore(ServerConfig(tick_ms=200), self.now, 1_700_000_000_000, tree=self.tree)
        self.ids = 0

    def connect(self, read_only: bool | None = True, session_id: int = 0, timeout: int = 4000) -> Connection:
        self.ids += 1
        conn = self.core.open(self.ids, "127.0.0.1", 40000 + self.ids)
        passwd = session_password(session_id) if session_id else bytes(16)
        flag = b"" if read_only is None else bytes([read_only])
        payload = ConnectRequest(0, 0, timeout, session_id, passwd).to_bytes() + flag
        self.core.receive(conn, INT.pack(len(payload)) + payload)
        return conn

    def send(self, conn: Connection, xid: int, op: int, record: object = None) -> None:
        payload = RequestHeader(xid, op).to_bytes() + (record.to_bytes() if record is not None else b"")  # type: ignore[attr-defined]
        self.core.receive(conn, INT.pack(len(payload)) + payload)

    def replies(self, conn: Connection) -> list[ReplyHeader]:
        assert all(isinstance(o, Output) for o in self.core.ready())  # it never proposes
        return [ReplyHeader.read(f[4:], 0)[0] for f in conn.take_output()]


def _connect_response(conn: Connection) -> tuple[ConnectResponse, bytes]:
    frame = conn.take_output()[0][4:]
    rsp, pos = ConnectResponse.read(frame, 0)
    return rsp, frame[pos:]


def test_a_read_only_client_gets_a_local_session_with_the_read_only_byte() -> None:
    h = Harness()
    conn = h.connect()
    rsp, flag = _connect_response(conn)
    assert rsp.sessionId != 0 and rsp.timeOut == 4000 and flag == b"\x01"
    assert rsp.sessionId not in h.tree.sessions  # local: never logged, never in the tree
    assert h.core.read_only


def test_a_client_without_the_read_only_flag_gets_no_answer() -> None:
    h = Harness()
    for flag in (False, None):
        conn = h.connect(read_only=flag)
        assert conn.closing and conn.take_output() == []


def test_a_global_session_is_not_resumed_here() -> None:
    h = Harness()
    conn = h.connect(session_id=GLOBAL_SESSION)
    rsp, flag = _connect_response(conn)
    assert (rsp.sessionId, rsp.timeOut, flag) == (0, 0, b"\x01") and conn.closing


def test_reads_are_served_writes_and_sync_get_not_read_only_and_nothing_changes() -> None:
    h = Harness()
    conn = h.connect()
    conn.take_output()
    digest, zxid = h.tree.digest, h.tree.last_processed_zxid
    h.send(conn, 1, OpCode.GET_DATA, GetDataRequest("/a", True))
    h.send(conn, 2, OpCode.CREATE, CreateRequest("/b", b"", OPEN, 0))
    h.send(conn, 3, OpCode.SET_DATA, SetDataRequest("/a", b"y", -1))
    h.send(conn, 4, OpCode.SYNC, SyncRequest("/a"))
    h.send(conn, 5, OpCode.GET_DATA, GetDataRequest("/a", False))
    got = [(r.xid, r.zxid, r.err) for r in h.replies(conn)]
    ro = int(Code.NOTREADONLY)
    assert got == [(1, zxid, 0), (2, zxid, ro), (3, zxid, ro), (4, zxid, ro), (5, zxid, 0)]
    assert (h.tree.digest, h.tree.last_processed_zxid) == (digest, zxid)
    assert not conn.closing  # a refused write does not end the session


def test_close_session_ends_the_local_session() -> None:
    h = Harness()
    conn = h.connect()
    sid = _connect_response(conn)[0].sessionId
    h.send(conn, 1, OpCode.CLOSE_SESSION)
    assert [(r.xid, r.err) for r in h.replies(conn)] == [(1, 0)]
    assert conn.closing and not h.core.sessions.is_live(sid)
    again = h.connect(session_id=sid)
    assert _connect_response(again)[0].timeOut == 0  # gone


def test_a_silent_local_session_expires_and_its_connection_closes() -> None:
    h = Harness()
    conn = h.connect(timeout=4000)
    sid = _connect_response(conn)[0].sessionId
    h.now += 4000 + 2 * 200
    h.core.set_time(h.now, 1_700_000_000_000 + h.now)
    h.core.tick()
    assert conn.closing and not h.core.sessions.is_live(sid)
    assert sid not in h.tree.sessions and GLOBAL_SESSION in h.tree.sessions  # the tree's sessions are untouched


@dataclass
class _View:
    """What the four-letter words read of a server (admin.view.ServerView), for isro."""

    pipeline: ServerCore | None
    config: ServerConfig
    mode: str
    trace_mask: int = 0


def test_isro_says_ro_rw_or_null_while_looking() -> None:
    config = ServerConfig(four_letter_words=frozenset({"isro"}))
    tree = _tree()
    assert answer("isro", _View(ReadOnlyServerCore(config, 0, 0, tree=tree), config, "read-only")) == "ro"  # type: ignore[arg-type]
    assert answer("isro", _View(ServerCore(config, 0, 0), config, "leader")) == "rw"  # type: ignore[arg-type]
    assert answer("isro", _View(None, config, "looking")) == "null"  # type: ignore[arg-type]


def test_the_admin_server_says_whether_it_is_read_only() -> None:
    config = ServerConfig()
    ro = _View(ReadOnlyServerCore(config, 0, 0, tree=_tree()), config, "read-only")
    rw = _View(ServerCore(config, 0, 0), config, "leader")
    assert run_command("is_read_only", ro, {})["read_only"] is True  # type: ignore[arg-type]
    assert run_command("is_read_only", rw, {})["read_only"] is False  # type: ignore[arg-type]
    quorum = ServerConfig(quorum=QuorumConfig((QuorumServer(1, "127.0.0.1", 2888, 3888),), my_id=1))  # type: ignore[arg-type]
    looking = _View(ReadOnlyServerCore(quorum, 0, 0, tree=_tree()), quorum, "read-only")
    # a read-only server is no QuorumZooKeeperServer in 3.8: its quorum commands answer as a standalone one's
    assert {k: v for k, v in run_command("zabstate", looking, {}).items()  # type: ignore[arg-type]
            if k in ("voting", "zabstate")} == {"voting": False, "zabstate": ""}


def test_read_only_service_starts_after_the_delay_once_per_election_and_ends_with_it() -> None:
    gate = ReadOnlyGate(enabled=True, tick_ms=200)
    assert gate.due_ms() is None and not gate.tick(10**9)  # not looking
    gate.looking(1000)
    assert gate.due_ms() == 1000 + READ_ONLY_DELAY_MIN_MS
    assert not gate.tick(1000 + READ_ONLY_DELAY_MIN_MS - 1)
    assert gate.tick(1000 + READ_ONLY_DELAY_MIN_MS) and gate.serving
    assert not gate.tick(10**9)  # once
    assert gate.decided() and not gate.serving
    assert not gate.decided()  # an election that ends before the delay ends no service
    assert ReadOnlyGate(enabled=True, tick_ms=5000).delay_ms == 5000  # max(2 s, tickTime)
    off = ReadOnlyGate(enabled=False, tick_ms=200)
    off.looking(0)
    assert off.due_ms() is None and not off.tick(10**9)
