"""Bad input on a live server: zkpy answers it as Apache ZooKeeper 3.8 does, and loses nothing.

Every case runs against zkpy and against Apache ZooKeeper 3.8 (Debian's 3.8.0, the oracle) and
asserts the same observable behaviour on both: the error code in the ReplyHeader, or that the
server closed the connection. Two places where zkpy deliberately differs are asserted per server
and explained where they are tested (bare ``check`` outside a multi, and a client's
``deleteContainer`` / ``createSession``).

Throughout every case a kazoo client stays connected to the same server: it writes before the
case and, after it, reads its write back and writes again, without ever leaving CONNECTED
(guarantee 8 of DESIGN.md: bad input never costs data, the server keeps serving everyone else).
On zkpy the server log must also name what went wrong.

Nothing sleeps: every wait is a socket read against a deadline, and "the connection is still
open" is shown by a ping that gets its answer.
"""

from __future__ import annotations

import os
import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from kazoo.client import KazooClient, KazooState

from helpers.rawzk import PING_OP, PING_XID, RawConn, connect_request_bytes, frame
from zkpy.testing.servers import ServerProcess, apache_available, start_apache, start_zkpy
from zkpy.wire.consts import OpCode
from zkpy.wire.multi import Op, read_multi_response, write_multi_request
from zkpy.wire.proto import (
    ACL,
    AddWatchRequest,
    AuthPacket,
    CheckVersionRequest,
    CheckWatchesRequest,
    ConnectRequest,
    ConnectResponse,
    CreateRequest,
    DeleteRequest,
    ExistsRequest,
    GetChildrenRequest,
    GetDataRequest,
    GetSASLRequest,
    Id,
    RemoveWatchesRequest,
    ReplyHeader,
    SetDataRequest,
    SyncRequest,
)

I = struct.Struct(">i").pack  # noqa: E741 - reads like the jute grammar
OPEN = [ACL(31, Id("world", "anyone"))]
SMALL_MAX_BUFFER = 4096
DEADLINE_S = 5.0

# error codes (KeeperException.Code)
OK, MARSHALLING, UNIMPLEMENTED, BADARGS = 0, -5, -6, -8
NONODE, NOAUTH, AUTHFAILED, NOWATCHER = -101, -102, -115, -121


# ---- one kazoo client per server, connected for the whole module ----


@dataclass
class Witness:
    """A kazoo client that must not notice anything: same session, never SUSPENDED or LOST."""

    client: KazooClient
    session_id: int
    states: list[KazooState] = field(default_factory=list)


_witnesses: dict[int, Witness] = {}


def _witness_for(server: ServerProcess) -> Witness:
    w = _witnesses.get(server.port)
    if w is None:
        client = KazooClient(hosts=server.hosts, timeout=10.0)
        client.start(timeout=15)
        w = Witness(client, client.client_id[0])
        client.add_listener(w.states.append)
        _witnesses[server.port] = w
    return w


@pytest.fixture(scope="module", autouse=True)
def _stop_witnesses() -> Iterator[None]:
    yield
    for w in _witnesses.values():
        w.client.stop()
        w.client.close()
    _witnesses.clear()


class Guard:
    """Writes before a case; afterwards checks the write, the session and the server process."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.witness = _witness_for(server)
        self.path = f"/bad-input-witness/{uuid.uuid4().hex[:10]}"
        self.log_mark = len(server.log())
        self.witness.client.create(self.path, b"before", makepath=True)

    def new_log(self) -> str:
        return self.server.log()[self.log_mark :]

    def check(self, log_says: str | None = None) -> None:
        client = self.witness.client
        assert self.server.proc.poll() is None, "the server process died"
        assert client.get(self.path)[0] == b"before", "the witness lost its write"
        client.set(self.path, b"after")
        assert client.get(self.path)[0] == b"after"
        assert client.client_id[0] == self.witness.session_id, "the witness lost its session"
        assert self.witness.states == [], f"the witness saw {self.witness.states}"
        if log_says is not None and self.server.kind == "zkpy":
            assert log_says in self.new_log(), f"zkpy's log does not say {log_says!r}:\n{self.new_log()[-2000:]}"


@pytest.fixture
def server(any_server: ServerProcess) -> ServerProcess:
    return any_server


@pytest.fixture(params=["zkpy", "apache"], scope="module")
def small_server(request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    """A server whose jute.maxbuffer is SMALL_MAX_BUFFER (zoo.cfg for zkpy, -Djute.maxbuffer for Apache)."""
    settings = {"jute.maxbuffer": str(SMALL_MAX_BUFFER)}
    if request.param == "apache":
        if not apache_available():
            if os.environ.get("CI"):
                pytest.fail("Apache ZooKeeper 3.8 (Debian's zookeeper package) is not installed")
            pytest.skip("Apache ZooKeeper 3.8 is not installed")
        srv = start_apache(settings)
    else:
        srv = start_zkpy(settings)
    yield srv
    w = _witnesses.pop(srv.port, None)
    if w is not None:
        w.client.stop()
        w.client.close()
    srv.cleanup()


# ---- observing the server ----


def session(server: ServerProcess) -> RawConn:
    conn = RawConn(server.port, timeout=DEADLINE_S)
    conn.handshake(timeout_ms=4000)
    return conn


@dataclass(frozen=True)
class Outcome:
    """What a client sees after one request: the reply's error code (None: no reply, the server
    closed first) and whether the connection is still open afterwards."""

    err: int | None
    open: bool


def outcome(conn: RawConn, xid: int) -> Outcome:
    """Read up to the reply to ``xid`` (skipping notifications), then ping to see if the
    connection is still open. The ping goes out only after the reply, so a server that closes
    after replying cannot reset the connection before the reply is read."""
    while True:
        reply = conn.read_reply()
        if reply is None:
            return Outcome(None, False)
        if reply.header.xid == xid:
            break
    _, still_open = conn.ping_outcome()
    return Outcome(reply.err, still_open)


def request(server: ServerProcess, op: int, body: bytes, xid: int = 7) -> Outcome:
    with session(server) as conn:
        conn.send_request(xid, op, body)
        return outcome(conn, xid)


def closes_silently(conn: RawConn) -> bool:
    """True when the server closes without sending another frame."""
    return conn.wait_closed() == []


def multi(*ops: Op) -> bytes:
    out = bytearray()
    write_multi_request(out, list(ops))
    return bytes(out)


def with_null_path(record_bytes: bytes, path_len: int) -> bytes:
    """A record whose leading ustring path (``path_len`` bytes long) is replaced by a null one."""
    return I(-1) + record_bytes[4 + path_len :]


# ---- before the handshake: the first frame is read as a ConnectRequest ----

_CONNECT = connect_request_bytes()
_CONNECT_NO_PASSWD = ConnectRequest(0, 0, 4000, 0, b"").to_bytes()[:-4]  # up to the passwd length

PRE_HANDSHAKE = {
    # name: (bytes sent on a fresh connection, what zkpy's log says)
    "http_request": (b"GET / HTTP/1.1\r\nHost: zk\r\n\r\n", "Len error: packet length 1195725856"),
    "small_garbage_frame": (frame(b"hello world"), "malformed connect request (11 bytes)"),
    "connect_request_too_short": (frame(_CONNECT[:27]), "malformed connect request (27 bytes)"),
    "empty_connect_frame": (frame(b""), "malformed connect request (0 bytes)"),
    "passwd_runs_past_frame": (frame(_CONNECT_NO_PASSWD + I(50) + b"x" * 10), "buffer length 50 runs past"),
    "negative_passwd_length": (frame(_CONNECT_NO_PASSWD + I(-5)), "negative buffer length -5"),
    "negative_frame_length": (I(-1) + b"\0" * 8, "Len error: packet length -1 "),
    "frame_length_min_int": (I(-(2**31)), "Len error: packet length -2147483648 "),
    "ping_before_handshake": (frame(I(PING_XID) + I(PING_OP)), "malformed connect request (8 bytes)"),
    # requests read as a ConnectRequest: the passwd length comes out of the path's bytes
    "get_data_before_handshake": (frame(I(1) + I(OpCode.GET_DATA) + GetDataRequest("/zookeeper/quota", False).to_bytes()),
                                  "malformed connect request (29 bytes)"),
    "auth_before_handshake": (frame(I(-4) + I(OpCode.AUTH) + AuthPacket(0, "digest", b"u:p").to_bytes()),
                              "malformed connect request (29 bytes)"),
    # a ConnectRequest that has seen a zxid the server has not
    "connect_zxid_ahead": (frame(connect_request_bytes(last_zxid=1 << 40)), "refusing session request"),
}


@pytest.mark.parametrize("case", list(PRE_HANDSHAKE))
def test_bad_bytes_before_the_handshake_close_the_connection(server: ServerProcess, case: str) -> None:
    data, log_says = PRE_HANDSHAKE[case]
    guard = Guard(server)
    with RawConn(server.port, timeout=DEADLINE_S) as conn:
        conn.send(data)
        assert closes_silently(conn)
    guard.check(log_says)


def test_unknown_session_gets_an_invalid_connect_response_then_close(server: ServerProcess) -> None:
    guard = Guard(server)
    with RawConn(server.port, timeout=DEADLINE_S) as conn:
        conn.send_frame(connect_request_bytes(session_id=0x0FEDCBA987654321, passwd=b"p" * 16))
        frames = conn.wait_closed()
    assert len(frames) == 1
    rsp = ConnectResponse.from_bytes(frames[0])
    assert (rsp.timeOut, rsp.sessionId) == (0, 0)
    guard.check("invalid session 0xfedcba987654321")


def test_old_client_connect_without_read_only_byte_is_accepted(server: ServerProcess) -> None:
    """Not bad input, the boundary of it: a ConnectRequest without the readOnly byte is an old client."""
    with RawConn(server.port, timeout=DEADLINE_S) as conn:
        conn.send_frame(connect_request_bytes(timeout_ms=4000, read_only=None))
        payload = conn.read_frame()
        assert payload is not None
        rsp = ConnectResponse.from_bytes(payload)
        assert rsp.sessionId != 0
        assert len(payload) == len(rsp.to_bytes())  # and the answer has no readOnly byte either
        assert conn.ping_outcome() == ([], True)


# ---- after the handshake: frames that cannot hold a RequestHeader, bad lengths ----

POST_HANDSHAKE_CLOSE = {
    "header_4_bytes": (frame(I(5)), "request header truncated (4 bytes"),
    "header_7_bytes": (frame(b"\0\0\0\5\0\0\0"), "request header truncated (7 bytes"),
    "zero_length_frame": (frame(b""), "request header truncated (0 bytes"),
    "negative_length": (I(-1), "Len error: packet length -1 "),
    "negative_length_-100": (I(-100), "Len error: packet length -100 "),
    "length_max_int": (I(2**31 - 1), "Len error: packet length 2147483647 "),
}


@pytest.mark.parametrize("case", list(POST_HANDSHAKE_CLOSE))
def test_unframeable_packets_close_the_connection(server: ServerProcess, case: str) -> None:
    data, log_says = POST_HANDSHAKE_CLOSE[case]
    guard = Guard(server)
    with session(server) as conn:
        conn.send(data)
        assert closes_silently(conn)
    guard.check(log_says)


# ---- jute.maxbuffer: exactly the limit passes, one more byte closes ----


def _create_frame_of(path: str, size: int) -> tuple[bytes, int]:
    """A create request frame whose payload is exactly ``size`` bytes (the data pads it), and
    the length of that data."""
    head = I(9) + I(OpCode.CREATE)
    data_len = size - len(head + CreateRequest(path, b"", OPEN, 0).to_bytes())
    payload = head + CreateRequest(path, b"x" * data_len, OPEN, 0).to_bytes()
    assert len(payload) == size
    return frame(payload), data_len


def test_request_of_exactly_max_buffer_is_served(small_server: ServerProcess) -> None:
    guard = Guard(small_server)
    path = f"/max-{uuid.uuid4().hex[:8]}"
    with session(small_server) as conn:
        data, data_len = _create_frame_of(path, SMALL_MAX_BUFFER)
        conn.send(data)
        assert outcome(conn, 9) == Outcome(OK, True)
    assert guard.witness.client.get(path)[0] == b"x" * data_len
    guard.check()


@pytest.mark.parametrize("whole_frame", [True, False], ids=["whole_frame", "length_only"])
def test_request_one_byte_over_max_buffer_closes_on_the_length(small_server: ServerProcess,
                                                               whole_frame: bool) -> None:
    guard = Guard(small_server)
    path = f"/over-{uuid.uuid4().hex[:8]}"
    with session(small_server) as conn:
        conn.send(_create_frame_of(path, SMALL_MAX_BUFFER + 1)[0] if whole_frame else I(SMALL_MAX_BUFFER + 1))
        assert closes_silently(conn)
    assert not guard.witness.client.exists(path)
    guard.check(f"packet length {SMALL_MAX_BUFFER + 1} is negative or larger than jute.maxbuffer={SMALL_MAX_BUFFER}")


def test_connect_request_of_exactly_max_buffer_is_accepted(small_server: ServerProcess) -> None:
    """ZooKeeper reads the fields it knows and ignores trailing bytes; the length is within bounds."""
    padded = connect_request_bytes(timeout_ms=4000)
    with RawConn(small_server.port, timeout=DEADLINE_S) as conn:
        conn.send_frame(padded + b"\0" * (SMALL_MAX_BUFFER - len(padded)))
        payload = conn.read_frame()
        assert payload is not None and ConnectResponse.from_bytes(payload).sessionId != 0
        assert conn.ping_outcome() == ([], True)


def test_connect_request_one_byte_over_max_buffer_closes(small_server: ServerProcess) -> None:
    guard = Guard(small_server)
    with RawConn(small_server.port, timeout=DEADLINE_S) as conn:
        conn.send(I(SMALL_MAX_BUFFER + 1) + connect_request_bytes())
        assert closes_silently(conn)
    guard.check(f"jute.maxbuffer={SMALL_MAX_BUFFER}")


# ---- malformed record bodies: an error reply, the connection stays open ----

_P = "/bad-input-node"  # never created: the bodies fail before the path matters
_PL = len(_P)

MALFORMED = {
    # name: (opcode, body, expected error, connection open afterwards, what zkpy's log says)
    "getData_path_runs_past_frame": (OpCode.GET_DATA, I(100) + b"/ab", MARSHALLING, True, "failed to process GETD"),
    "getData_no_body": (OpCode.GET_DATA, b"", MARSHALLING, True, "failed to process GETD"),
    "getData_no_watch_byte": (OpCode.GET_DATA, I(2) + b"/a", MARSHALLING, True, "failed to process GETD"),
    "getData_negative_path_length": (OpCode.GET_DATA, I(-5) + b"\0", MARSHALLING, True, "negative string length -5"),
    "create_data_runs_past_frame": (OpCode.CREATE, I(4) + b"/abc" + I(3) + b"x", MARSHALLING, True,
                                    "failed to decode CREA"),
    "create_no_body": (OpCode.CREATE, b"", MARSHALLING, True, "failed to decode CREA"),
    "create2_acl_count_2G": (OpCode.CREATE2, I(4) + b"/abc" + I(1) + b"x" + I(2**31 - 1), MARSHALLING, True,
                             "vector count 2147483647 runs past the frame"),
    "setData_truncated": (OpCode.SET_DATA, I(4) + b"/abc", MARSHALLING, True, "failed to decode SETD"),
    "delete_truncated": (OpCode.DELETE, I(4) + b"/ab", MARSHALLING, True, "failed to decode DELE"),
    "setWatches_count_2G": (OpCode.SET_WATCHES, struct.pack(">q", 0) + I(2**31 - 1) + I(1) + b"/", MARSHALLING,
                            True, "failed to process SETW"),
    "multi_unknown_op_type": (OpCode.MULTI, bytes([0, 0, 0, 99, 0, 255, 255, 255, 255]) + I(0), MARSHALLING, True,
                              "invalid type of op 99 in multi"),
    "multi_without_end_marker": (OpCode.MULTI, multi(Op(OpCode.CREATE, CreateRequest(_P, b"", OPEN, 0)))[:-9],
                                 MARSHALLING, True, "failed to decode MULT"),
    "multiRead_with_a_create": (OpCode.MULTI_READ, multi(Op(OpCode.CREATE, CreateRequest(_P, b"", OPEN, 0))),
                                MARSHALLING, True, "invalid type of readOp 1"),
    "addWatch_unknown_mode": (OpCode.ADD_WATCH, AddWatchRequest("/", 7).to_bytes(), MARSHALLING, True,
                              "unsupported addWatch mode 7"),
    "checkWatches_unknown_type": (OpCode.CHECK_WATCHES, CheckWatchesRequest("/", 9).to_bytes(), MARSHALLING, True,
                                  "unsupported watcher type 9"),
    "removeWatches_unknown_type": (OpCode.REMOVE_WATCHES, RemoveWatchesRequest("/", 9).to_bytes(), MARSHALLING,
                                   True, "unsupported watcher type 9"),
    "createSession_without_timeout": (OpCode.CREATE_SESSION, b"", MARSHALLING, True, "failed to decode SESS"),
    "auth_unknown_scheme": (OpCode.AUTH, AuthPacket(0, "nosuch", b"x").to_bytes(), AUTHFAILED, False,
                            "authentication failed for scheme 'nosuch'"),
    "auth_truncated": (OpCode.AUTH, I(0) + I(50), None, False, "malformed AuthPacket"),
    # zkpy has no SASL server; ZooKeeper without one answers OK with a null token, and closes on a
    # null token
    "sasl_token": (OpCode.SASL, GetSASLRequest(b"token").to_bytes(), OK, True, "no SASL server is configured"),
    "sasl_null_token": (OpCode.SASL, GetSASLRequest(None).to_bytes(), None, False, "SASL request with a null token"),
    "closeSession_with_garbage_body": (OpCode.CLOSE_SESSION, b"garbage", OK, False, None),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_record_gets_the_zookeeper_error(server: ServerProcess, case: str) -> None:
    op, body, err, still_open, log_says = MALFORMED[case]
    guard = Guard(server)
    xid = -4 if op == OpCode.AUTH else 7
    assert request(server, op, body, xid) == Outcome(err, still_open)
    guard.check(log_says)


# ---- opcodes a client may not send ----

UNKNOWN_OPS = [999, 10, 23, 0, -1, 2**31 - 1]


@pytest.mark.parametrize("op", UNKNOWN_OPS)
def test_unknown_opcode_is_unimplemented_and_closes(server: ServerProcess, op: int) -> None:
    """Read to the end instead of pinging: Apache ZooKeeper closes from another thread, and under
    load it has been seen answering a ping sent right after the reply before the close lands."""
    guard = Guard(server)
    with session(server) as conn:
        conn.send_request(7, op, b"")
        frames = conn.wait_closed(10)
    replies = [ReplyHeader.read(f, 0)[0] for f in frames]
    assert [(r.xid, r.err) for r in replies] == [(7, UNIMPLEMENTED)]
    guard.check(f"unknown type {op}")


def test_second_connect_request_is_read_as_an_unknown_opcode(server: ServerProcess) -> None:
    """A ConnectRequest after the handshake parses as xid 0, type 0 (notification): Unimplemented."""
    guard = Guard(server)
    with session(server) as conn:
        conn.send_frame(connect_request_bytes())
        frames = conn.wait_closed(10)
    # Apache closes a moment after the reply, so a ping sent after it can still be answered:
    # wait for the close instead of probing with a ping.
    replies = [ReplyHeader.read(f, 0)[0] for f in frames]
    assert [(r.xid, r.err) for r in replies] == [(0, UNIMPLEMENTED)]
    guard.check("unknown type 0")


def test_check_outside_multi(server: ServerProcess) -> None:
    """Deliberate difference. Apache ZooKeeper 3.8.0 accepts a bare ``check`` (13) outside a multi:
    it preps it (BadArguments, NoNode, ...) and, when the check passes, never answers at all.
    ZOOKEEPER-2623 (in 3.8.5 and later) makes it an unknown type: Unimplemented and close.
    zkpy does what 3.8.5 does."""
    guard = Guard(server)
    got = request(server, OpCode.CHECK, CheckVersionRequest("/bad-input-missing", -1).to_bytes())
    if server.kind == "zkpy":
        assert got == Outcome(UNIMPLEMENTED, False)
    else:
        assert got == Outcome(NONODE, True)
    guard.check("unknown type 13")


def test_create_session_over_an_established_session(server: ServerProcess) -> None:
    """Deliberate difference. On an established session, Apache ZooKeeper 3.8 takes a client's
    createSession (-10) as a session (re)init: it sends a second ConnectResponse for the same session
    and never answers the request's xid. zkpy refuses it: BadArguments, the connection stays open."""
    guard = Guard(server)
    with session(server) as conn:
        conn.send_request(7, OpCode.CREATE_SESSION, I(30000))
        if server.kind == "zkpy":
            assert outcome(conn, 7) == Outcome(BADARGS, True)
        else:
            payload = conn.read_frame()
            assert payload is not None
            assert ConnectResponse.from_bytes(payload).sessionId == conn.session_id
            assert conn.ping_outcome() == ([], True)
    guard.check("refusing createSession from established session")


def test_close_session_really_closes_it(server: ServerProcess) -> None:
    guard = Guard(server)
    with session(server) as conn:
        sid, passwd = conn.session_id, conn.passwd
        conn.send_request(7, OpCode.CLOSE_SESSION, b"garbage")
        frames = conn.wait_closed(10)
        assert [(r.xid, r.err) for r in (ReplyHeader.read(f, 0)[0] for f in frames)] == [(7, OK)]
    with RawConn(server.port, timeout=DEADLINE_S) as conn:
        conn.send_frame(connect_request_bytes(session_id=sid, passwd=passwd))
        frames = conn.wait_closed()
        assert [ConnectResponse.from_bytes(f).sessionId for f in frames] == [0]
    guard.check()


def _container_with_history(conn: RawConn, path: str) -> None:
    """An empty container that once had a child: what the container sweeper deletes."""
    for xid, op, rec in ((1, OpCode.CREATE_CONTAINER, CreateRequest(path, b"", OPEN, 4)),
                         (2, OpCode.CREATE, CreateRequest(path + "/child", b"", OPEN, 0)),
                         (3, OpCode.DELETE, DeleteRequest(path + "/child", -1))):
        conn.send_request(xid, op, rec.to_bytes())
        reply = conn.read_reply()
        assert reply is not None and reply.err == OK, (op, reply)


@pytest.mark.parametrize("parent_perms", [31, 31 & ~8], ids=["parent_allows_delete", "parent_denies_delete"])
def test_delete_container_from_a_client(server: ServerProcess, parent_perms: int) -> None:
    """Deliberate difference. deleteContainer (20) is the container sweeper's internal op.
    Apache ZooKeeper 3.8 decodes its path from the request's whole buffer, RequestHeader included,
    so the path always holds NUL bytes: a client's deleteContainer is always BadArguments and
    deletes nothing. zkpy decodes the path properly and lets a client delete an empty container
    only with DELETE permission on its parent (as a delete would need); otherwise NoAuth."""
    guard = Guard(server)
    parent = f"/bad-input-dc-{uuid.uuid4().hex[:8]}"
    guard.witness.client.create(parent, b"", acl=[_kazoo_acl(parent_perms)])
    container = parent + "/c"
    with session(server) as conn:
        _container_with_history(conn, container)
        conn.send_request(7, OpCode.DELETE_CONTAINER, container.encode())
        got = outcome(conn, 7)
    exists = guard.witness.client.exists(container) is not None
    if server.kind == "apache":
        assert (got, exists) == (Outcome(BADARGS, True), True)
        guard.check()
    elif parent_perms & 8:
        assert (got, exists) == (Outcome(OK, True), False)
        guard.check()
    else:
        assert (got, exists) == (Outcome(NOAUTH, True), True)
        guard.check("refused with NOAUTH")


def _kazoo_acl(perms: int) -> object:
    from kazoo.security import ACL as KazooACL
    from kazoo.security import Id as KazooId

    return KazooACL(perms, KazooId("world", "anyone"))


# ---- invalid paths ----

_NUL = "/nul\0x"
INVALID_PATHS = {
    # name: (opcode, body, expected error, what zkpy's log says)
    "create_no_leading_slash": (OpCode.CREATE, CreateRequest("noslash", b"", OPEN, 0), BADARGS, "refused with BADARGUMENTS"),
    # create looks the parent up first (NoNode), then validates the whole path
    "create_trailing_slash": (OpCode.CREATE, CreateRequest("/zookeeper/", b"", OPEN, 0), BADARGS, "BADARGUMENTS"),
    "create_empty_segment": (OpCode.CREATE, CreateRequest("//b", b"", OPEN, 0), BADARGS, "BADARGUMENTS"),
    "create_dot_segment": (OpCode.CREATE, CreateRequest("/.", b"", OPEN, 0), BADARGS, "BADARGUMENTS"),
    "create_dotdot_segment": (OpCode.CREATE, CreateRequest("/..", b"", OPEN, 0), BADARGS, "BADARGUMENTS"),
    "create_missing_parent_wins": (OpCode.CREATE, CreateRequest("/a//b", b"", OPEN, 0), NONODE, None),
    "create_nul": (OpCode.CREATE, CreateRequest(_NUL, b"", OPEN, 0), BADARGS, "BADARGUMENTS"),
    "create_control_char": (OpCode.CREATE, CreateRequest("/\x01ctl", b"", OPEN, 0), BADARGS, "BADARGUMENTS"),
    "create_empty_path": (OpCode.CREATE, CreateRequest("", b"", OPEN, 0), BADARGS, "BADARGUMENTS"),
    "create_surrogate_range": (OpCode.CREATE, CreateRequest("/\ue000", b"", OPEN, 0), BADARGS, "BADARGUMENTS"),
    "setData_empty_segment": (OpCode.SET_DATA, SetDataRequest("/a//b", b"", -1), BADARGS, "BADARGUMENTS"),
    "setData_no_leading_slash": (OpCode.SET_DATA, SetDataRequest("noslash", b"", -1), BADARGS, "BADARGUMENTS"),
    "exists_nul": (OpCode.EXISTS, ExistsRequest(_NUL, False), BADARGS, "BADARGUMENTS"),
    # delete checks only for a '/', NUL and ZooKeeper's own nodes; a malformed path is just not found
    "delete_empty_segment": (OpCode.DELETE, DeleteRequest("/a//b", -1), NONODE, None),
    "delete_trailing_slash": (OpCode.DELETE, DeleteRequest("/trailing/", -1), NONODE, None),
    "delete_control_char": (OpCode.DELETE, DeleteRequest("/\x01ctl", -1), NONODE, None),
    "delete_no_leading_slash": (OpCode.DELETE, DeleteRequest("noslash", -1), BADARGS, "BADARGUMENTS"),
    "delete_nul": (OpCode.DELETE, DeleteRequest(_NUL, -1), BADARGS, "BADARGUMENTS"),
    "delete_root": (OpCode.DELETE, DeleteRequest("/", -1), BADARGS, "BADARGUMENTS"),
    "delete_/zookeeper": (OpCode.DELETE, DeleteRequest("/zookeeper", -1), BADARGS, "BADARGUMENTS"),
    "delete_/zookeeper/quota": (OpCode.DELETE, DeleteRequest("/zookeeper/quota", -1), BADARGS, "BADARGUMENTS"),
    "delete_/zookeeper/config": (OpCode.DELETE, DeleteRequest("/zookeeper/config", -1), BADARGS, "BADARGUMENTS"),
    # reads look the path up as it is: not found
    "getData_no_leading_slash": (OpCode.GET_DATA, GetDataRequest("noslash", False), NONODE, None),
    "getChildren_empty_segment": (OpCode.GET_CHILDREN, GetChildrenRequest("/a//b", True), NONODE, None),
    # ZooKeeper's DataTree keys the root under "" too: reads of "" see the root
    "getData_empty_path": (OpCode.GET_DATA, GetDataRequest("", False), OK, None),
    "getChildren_empty_path": (OpCode.GET_CHILDREN, GetChildrenRequest("", False), OK, None),
    "exists_empty_path": (OpCode.EXISTS, ExistsRequest("", False), OK, None),
    # checkWatches walks the path's parents, which fails without a '/'
    "checkWatches_no_slash": (OpCode.CHECK_WATCHES, CheckWatchesRequest("noslash", 3), MARSHALLING, "has no parent"),
}


@pytest.mark.parametrize("case", list(INVALID_PATHS))
def test_invalid_path_gets_the_zookeeper_error(server: ServerProcess, case: str) -> None:
    op, record, err, log_says = INVALID_PATHS[case]
    guard = Guard(server)
    assert request(server, op, record.to_bytes()) == Outcome(err, True)
    guard.check(log_says)


NULL_PATHS = {
    # name: (opcode, body with a null path, expected error). ZooKeeper fails most of these with a
    # NullPointerException, i.e. MarshallingError; setData and setACL validate the path first.
    "create": (OpCode.CREATE, with_null_path(CreateRequest(_P, b"", OPEN, 0).to_bytes(), _PL), MARSHALLING),
    "create2": (OpCode.CREATE2, with_null_path(CreateRequest(_P, b"", OPEN, 0).to_bytes(), _PL), MARSHALLING),
    "delete": (OpCode.DELETE, with_null_path(DeleteRequest(_P, -1).to_bytes(), _PL), MARSHALLING),
    "exists": (OpCode.EXISTS, with_null_path(ExistsRequest(_P, True).to_bytes(), _PL), MARSHALLING),
    "getData": (OpCode.GET_DATA, with_null_path(GetDataRequest(_P, True).to_bytes(), _PL), MARSHALLING),
    "getChildren": (OpCode.GET_CHILDREN, with_null_path(GetChildrenRequest(_P, False).to_bytes(), _PL), MARSHALLING),
    "checkWatches": (OpCode.CHECK_WATCHES, with_null_path(CheckWatchesRequest(_P, 3).to_bytes(), _PL), MARSHALLING),
    "setWatches": (OpCode.SET_WATCHES, struct.pack(">q", 0) + I(1) + I(-1) + I(0) + I(0), MARSHALLING),
    "multi": (OpCode.MULTI, multi(Op(OpCode.CREATE, CreateRequest(_P + "/m", b"", OPEN, 0)),
                                  Op(OpCode.CHECK, CheckVersionRequest(None, -1))), MARSHALLING),  # type: ignore[arg-type]
    "multiRead": (OpCode.MULTI_READ, multi(Op(OpCode.GET_DATA, GetDataRequest(None, False))), MARSHALLING),  # type: ignore[arg-type]
    "setData": (OpCode.SET_DATA, with_null_path(SetDataRequest(_P, b"", -1).to_bytes(), _PL), BADARGS),
    "sync": (OpCode.SYNC, with_null_path(SyncRequest(_P).to_bytes(), _PL), OK),
    "removeWatches": (OpCode.REMOVE_WATCHES, with_null_path(RemoveWatchesRequest(_P, 3).to_bytes(), _PL), NOWATCHER),
}


@pytest.mark.parametrize("case", list(NULL_PATHS))
def test_null_path_gets_the_zookeeper_error(server: ServerProcess, case: str) -> None:
    op, body, err = NULL_PATHS[case]
    guard = Guard(server)
    assert request(server, op, body) == Outcome(err, True)
    guard.check("null path" if err == MARSHALLING else None)


def test_invalid_path_inside_a_multi_fails_the_multi(server: ServerProcess) -> None:
    """The bad op carries BadArguments, the ones before it are rolled back, the rest RuntimeInconsistency."""
    guard = Guard(server)
    ok_path = f"/bad-input-multi-{uuid.uuid4().hex[:8]}"
    body = multi(Op(OpCode.CREATE, CreateRequest(ok_path, b"", OPEN, 0)),
                 Op(OpCode.CHECK, CheckVersionRequest("/a//b", -1)),
                 Op(OpCode.DELETE, DeleteRequest("/zookeeper", -1)))
    with session(server) as conn:
        conn.send_request(7, OpCode.MULTI, body)
        reply = conn.read_reply()
        assert reply is not None and reply.err == OK
        results, _ = read_multi_response(reply.body, 0)
        assert [(r.type, r.err) for r in results] == [(-1, 0), (-1, BADARGS), (-1, -2)]
        assert conn.ping_outcome() == ([], True)
    assert guard.witness.client.exists(ok_path) is None
    guard.check()


def test_zookeeper_config_node_is_read_only(server: ServerProcess) -> None:
    guard = Guard(server)
    assert request(server, OpCode.SET_DATA, SetDataRequest("/zookeeper/config", b"x", -1).to_bytes()) == Outcome(NOAUTH, True)
    assert request(server, OpCode.CREATE, CreateRequest("/zookeeper/config/x", b"", OPEN, 0).to_bytes()) == Outcome(NOAUTH, True)
    guard.check()


# ---- multi create ops whose header and flags disagree ----

MULTI_CREATES = {
    # name: (header type, flags, ttl or None, expected reply error, result type, result has a stat)
    # ZooKeeper types a multi's create op by its flags: create2 is a plain create ...
    "create2_header": (OpCode.CREATE2, 0, None, OK, OpCode.CREATE, False),
    # ... container flags make a container whatever the header (result typed create2, with a stat)
    "create_header_container_flags": (OpCode.CREATE, 4, None, OK, OpCode.CREATE2, True),
    "createContainer_header_plain_flags": (OpCode.CREATE_CONTAINER, 0, None, OK, OpCode.CREATE, False),
    "createTTL_header_plain_flags": (OpCode.CREATE_TTL, 0, 100, OK, OpCode.CREATE, False),
    "createTTL_header_ttl_flags": (OpCode.CREATE_TTL, 5, 100_000, OK, OpCode.CREATE2, True),
    # TTL flags without a createTTL header: the whole multi is malformed
    "create_header_ttl_flags": (OpCode.CREATE, 5, None, MARSHALLING, None, False),
}


@pytest.mark.parametrize("case", list(MULTI_CREATES))
def test_multi_create_op_is_typed_by_its_flags(server: ServerProcess, case: str) -> None:
    """Once crashed zkpy's apply (a CreateContainerTxn recorded under type create) and wedged
    every later write; now read the way ZooKeeper's MultiOperationRecord reads it."""
    from zkpy.wire.proto import CreateTTLRequest

    header, flags, ttl, err, result_type, has_stat = MULTI_CREATES[case]
    guard = Guard(server)
    path = f"/bad-input-mc-{uuid.uuid4().hex[:8]}"
    record = CreateRequest(path, b"", OPEN, flags) if ttl is None else CreateTTLRequest(path, b"", OPEN, flags, ttl)
    with session(server) as conn:
        conn.send_request(7, OpCode.MULTI, multi(Op(header, record)))
        reply = conn.read_reply()
        assert reply is not None and reply.err == err
        if err == OK:
            (result,), _ = read_multi_response(reply.body, 0)
            assert (result.type, result.path, result.stat is not None) == (result_type, path, has_stat)
        assert conn.ping_outcome() == ([], True)
    assert (guard.witness.client.exists(path) is not None) == (err == OK)
    guard.check("TTL flags 5 on a multi op" if err != OK else None)


def test_requests_before_a_bad_length_are_still_processed(server: ServerProcess) -> None:
    """ZooKeeper handles each packet as it reads it: a create sent in the same segment as a bad
    length is applied (its reply may or may not make it out before the close)."""
    guard = Guard(server)
    path = f"/bad-input-before-len-{uuid.uuid4().hex[:8]}"
    with session(server) as conn:
        create = frame(I(9) + I(OpCode.CREATE) + CreateRequest(path, b"kept", OPEN, 0).to_bytes())
        conn.send(create + I(-1))
        frames = conn.wait_closed()
        assert len(frames) <= 1
    guard.witness.client.sync("/")  # ordered after the create on either server
    assert guard.witness.client.get(path)[0] == b"kept"
    guard.check("Len error: packet length -1 ")


# ---- single create ops whose opcode and flags disagree ----

SINGLE_CREATES = {
    # name: (opcode, flags); the opcode picks the txn and the reply, the flags add the sequence
    # suffix (and would make an ephemeral, but not a container: only createContainer does)
    "create_container_flags": (OpCode.CREATE, 4),
    "create2_container_flags": (OpCode.CREATE2, 4),
    "createContainer_plain_flags": (OpCode.CREATE_CONTAINER, 0),
    "createContainer_ephemeral_flags": (OpCode.CREATE_CONTAINER, 1),
    "createContainer_sequential_flags": (OpCode.CREATE_CONTAINER, 2),
}


@pytest.mark.parametrize("case", list(SINGLE_CREATES))
def test_create_opcode_and_flags_disagree(server: ServerProcess, case: str) -> None:
    """Once recorded a CreateContainerTxn under type create, which crashed zkpy's apply and
    wedged every later write."""
    from zkpy.wire.proto import Create2Response, CreateResponse

    op, flags = SINGLE_CREATES[case]
    guard = Guard(server)
    path = f"/bad-input-sc-{uuid.uuid4().hex[:8]}"
    with session(server) as conn:
        conn.send_request(7, op, CreateRequest(path, b"", OPEN, flags).to_bytes())
        reply = conn.read_reply()
        assert reply is not None and reply.err == OK
        rsp = (CreateResponse if op == OpCode.CREATE else Create2Response).from_bytes(reply.body)
        if flags == 2:
            assert rsp.path.startswith(path) and len(rsp.path) == len(path) + 10 and rsp.path[-10:].isdigit()
        else:
            assert rsp.path == path
        assert conn.ping_outcome() == ([], True)
    stat = guard.witness.client.exists(rsp.path)
    assert stat is not None and stat.ephemeralOwner == 0  # containers show 0 too; never the session
    guard.check()


def test_create_ttl_without_ttl_flags_is_refused(zkpy_server: ServerProcess) -> None:
    """zkpy only, on purpose: Apache ZooKeeper 3.8.0 accepts createTTL with non-TTL flags and
    ttl -1, then fails applying a TTL txn without a TTL and the whole server process exits
    (measured: 'Usage: ZooKeeperServerMain ...' and the port closes). zkpy answers BadArguments."""
    from zkpy.wire.proto import CreateTTLRequest

    guard = Guard(zkpy_server)
    for flags in (0, 1, 4):
        body = CreateTTLRequest(f"/bad-input-ttl-{uuid.uuid4().hex[:8]}", b"", OPEN, flags, -1).to_bytes()
        assert request(zkpy_server, OpCode.CREATE_TTL, body) == Outcome(BADARGS, True)
    guard.check("CREA from")
