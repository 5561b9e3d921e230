"""The request pipeline of a server, standalone, leader or learner: connections in, replies and txns out (pure).

Flow of a request (ZooKeeper's processor chain, without threads):
    receive -> decode -> writes: prep -> `Propose` (txn with zxid) -----------------.
                      -> reads:  queued behind the session's writes, or run now     |
    shell persists what ``ready()`` proposed, then calls ``apply_persisted`` -> tree.apply
    -> watch events (written first) -> reply to the writer -> the session's queued reads run.

Guarantees kept here: per-session FIFO (a session's replies leave in request order, and a
read queued behind the same session's write sees it); a watch event is appended to its
connection's output before any reply that shows the state after the change; nothing
acknowledges a txn before the shell says it is persisted.
"""

from __future__ import annotations

import itertools
import struct
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zkpy.config import ServerConfig
from zkpy.errors import (
    BadArgumentsError,
    Code,
    EphemeralOnLocalSessionError,
    MarshallingError,
    ProtocolError,
    ZookeeperError,
)
from zkpy.ids import long_hex
from zkpy.ratelimit import LogLimiter
from zkpy.server.connection import (
    MAX_FRAMES_PER_TURN,
    MAX_OUTSTANDING,
    MAX_QUEUED_OUTPUT,
    Connection,
    ConnState,
)
from zkpy.server.handshake import (
    SUPER,
    authenticate,
    connect_response,
    enforced_schemes,
    new_sasl_server,
    read_connect,
    read_sasl_token,
    sasl_response,
)
from zkpy.server.local_sessions import LocalSessions, needs_global
from zkpy.server.metrics import FOLD_AT, WATCH_FIRED, ServerMetrics
from zkpy.server.outputs import Output, Propose, ServerOutput
from zkpy.server.prep import WRITE_OPS, Prep, txn_body
from zkpy.server.reads import event_payload, run_read
from zkpy.server.sasl import NoSaslServer, SaslError
from zkpy.server.sessions import SessionTracker, session_password
from zkpy.tree.acl import has_permission
from zkpy.tree.datatree import DataTree, TxnResult, ephemeral_kind, ttl_of
from zkpy.wire.consts import CreateMode, OpNum, PermNum, Xid
from zkpy.wire.jute import INT
from zkpy.wire.multi import Op, read_multi_request
from zkpy.wire.proto import (
    AuthPacket,
    CreateRequest,
    CreateTTLRequest,
    DeleteRequest,
    Id,
    ReconfigRequest,
    ReplyHeader,
    SetACLRequest,
    SetDataRequest,
)
from zkpy.wire.txn import ErrorTxn, TxnHeader

Log = Callable[[str], None]

WRITE_RECORDS: dict[int, Any] = {  # the request record of each write with one (multi and the rest are read apart)
    OpNum.CREATE: CreateRequest,
    OpNum.CREATE2: CreateRequest,
    OpNum.CREATE_CONTAINER: CreateRequest,
    OpNum.CREATE_TTL: CreateTTLRequest,
    OpNum.DELETE: DeleteRequest,
    OpNum.SET_DATA: SetDataRequest,
    OpNum.SET_ACL: SetACLRequest,
    OpNum.RECONFIG: ReconfigRequest,
}

# Request.isValid of 3.8: what a client may send. Anything else is Unimplemented and closes.
VALID_OPS = frozenset({
    OpNum.CLOSE_SESSION, OpNum.CREATE, OpNum.CREATE2, OpNum.CREATE_TTL, OpNum.CREATE_CONTAINER,
    OpNum.CREATE_SESSION, OpNum.DELETE, OpNum.DELETE_CONTAINER, OpNum.EXISTS, OpNum.GET_ACL,
    OpNum.GET_CHILDREN, OpNum.GET_ALL_CHILDREN_NUMBER, OpNum.GET_CHILDREN2, OpNum.GET_DATA,
    OpNum.GET_EPHEMERALS, OpNum.MULTI, OpNum.MULTI_READ, OpNum.PING, OpNum.RECONFIG, OpNum.SET_ACL,
    OpNum.SET_DATA, OpNum.SET_WATCHES, OpNum.SET_WATCHES2, OpNum.SYNC, OpNum.CHECK_WATCHES,
    OpNum.REMOVE_WATCHES, OpNum.ADD_WATCH, OpNum.WHO_AM_I,
})

OP_NAMES: dict[int, str] = {
    OpNum.PING: "PING", OpNum.CREATE_SESSION: "SESS", OpNum.MULTI: "MULT", OpNum.MULTI_READ: "MLTR",
    OpNum.CREATE: "CREA", OpNum.CREATE2: "CREA", OpNum.CREATE_TTL: "CREA", OpNum.CREATE_CONTAINER: "CREA",
    OpNum.DELETE: "DELE", OpNum.DELETE_CONTAINER: "DELE", OpNum.SET_DATA: "SETD", OpNum.RECONFIG: "RECO",
    OpNum.SET_ACL: "SETA", OpNum.CLOSE_SESSION: "CLOS", OpNum.SYNC: "SYNC", OpNum.CHECK: "CHEC",
    OpNum.EXISTS: "EXIS", OpNum.GET_DATA: "GETD", OpNum.SET_WATCHES: "SETW", OpNum.SET_WATCHES2: "STW2",
    OpNum.ADD_WATCH: "ADDW", OpNum.GET_ACL: "GETA", OpNum.GET_CHILDREN: "GETC", OpNum.GET_CHILDREN2: "GETC",
    OpNum.GET_ALL_CHILDREN_NUMBER: "GETACN", OpNum.CHECK_WATCHES: "CHKW", OpNum.REMOVE_WATCHES: "REMW",
    OpNum.WHO_AM_I: "HOMI", OpNum.GET_EPHEMERALS: "GETE",
}

_REQUEST_HEADER = struct.Struct(">ii")
_SMALL_REPLY = 128  # a reply's expected bytes, beyond the data or child names it carries
_CHILD_NAME_ESTIMATE = 32  # expected bytes per child name in a getChildren reply
_REPLY_HEADER = struct.Struct(">iqi")
_FRAMED_REPLY_HEADER = struct.Struct(">iiqi")  # the frame's length, then the reply header: a read's reply is copied once
_MULTI_HEADER = struct.Struct(">i?i")  # MultiHeader: type, done, err
_MULTI_ERROR = struct.Struct(">i?ii")  # an ErrorResult: its MultiHeader and ErrorResponse
_MULTI_END = _MULTI_HEADER.pack(-1, True, -1)


@dataclass(slots=True, eq=False)
class Proposal(Propose):
    """A txn waiting to be persisted and applied, and whom to answer once it is; handed over
    itself as the `Propose` output."""

    conn: Connection | None
    xid: int
    op: int
    error: ZookeeperError | None
    received_ms: int
    subs: list[tuple[int, Any]] | None = None  # a multi's ops as prep built them (Prep.last_subs)


@dataclass(slots=True)
class Forwarded:
    """A learner's client write (or sync) sent to the leader, answered when its txn commits."""

    conn: Connection
    xid: int
    op: int
    received_ms: int
    body: bytes = b""  # a sync's request (its path), read when it is answered
    done: bool = False  # a sync: the leader's SYNC arrived
    error: ZookeeperError | None = None  # what the client is answered whatever the leader says (not a multi)


@dataclass(slots=True)
class QueuedRead:
    conn: Connection
    xid: int
    op: int
    body: bytes
    received_ms: int
    after_zxid: int = 0  # a sync waits until every txn proposed before it is applied
    owed: int = 0  # bytes its reply is expected to take (counted in its connection's ``owed``)
    quorum_token: int = 0  # zkpy.quorumSync on a leader: ... and until a quorum confirmed the leadership




class ServerCore:
    """A ZooKeeper server's request pipeline with no I/O: feed it bytes and time, take its
    outputs with ``ready()`` (``server.outputs`` says what each asks of the driver).

    This class is a standalone server's: writes are prepped here into `Propose` outputs, and
    sessions expire here. ``server.leader.LeaderServerCore`` also takes learners' forwarded
    requests; ``server.learner.LearnerServerCore`` sends writes, new sessions, moved sessions and
    syncs to the leader and applies what comes back committed. The methods named ``_new_session``,
    ``_session_moved``, ``_seen``, ``_write``, ``_upgrade``, ``_sync``, ``_awaits_quorum`` and
    ``tick`` are where the roles differ; ``server.read_only.ReadOnlyServerCore`` serves a member
    cut off from its quorum (``read_only``).

    With ``local`` (a member's pipeline with localSessionsEnabled, see ``enable_local_sessions``)
    new sessions are local: created, touched, expired and closed here without a txn; an ephemeral
    create of one upgrades it first (``_upgrade``) or fails with EphemeralOnLocalSession."""

    read_only = False  # answers clients as a read-only server (isro: ro, readOnly byte 1)

    def __init__(self, config: ServerConfig, now_ms: int, wall_ms: int, log: Log = lambda _m: None,
                 tree: DataTree | None = None, next_zxid: int | None = None) -> None:
        """``tree`` is the recovered database, if any; its committed sessions are tracked again
        from now, so a session whose client is gone expires after its timeout and its ephemerals go."""
        self.config = config
        self.log = log
        self.now_ms = now_ms
        self.wall_ms = wall_ms
        self.started_ms = now_ms
        self.tree = tree if tree is not None else DataTree()
        self.prep = Prep(self.tree, config, log)
        self.sessions = SessionTracker(config.tick_ms, config.server_id or 1, wall_ms)
        for sid, timeout in self.tree.sessions.items():
            self.sessions.add(sid, timeout, now_ms)
        self.connections: dict[int, Connection] = {}
        self.session_conn: dict[int, Connection] = {}
        self.queues: dict[int, deque[Proposal | QueuedRead | Forwarded]] = {}
        self.on_apply: Callable[[TxnHeader, Any], None] | None = None  # told of each txn applied (tracing)
        self._out: list[ServerOutput] = []  # what ``ready()`` hands over next, in order
        self._unapplied: deque[Proposal] = deque()  # proposed, not yet applied, in zxid order
        self._handed = 0  # how many of them ``ready()`` handed over (as `Propose`)
        self.next_zxid = next_zxid if next_zxid is not None else self.tree.last_processed_zxid + 1
        self._dirty: dict[Connection, None] = {}  # connections with output, in the order they got it
        self._syncing: set[int] = set()  # sessions whose queue waits on a sync
        # a worker of a server with serverWorkers (member.workers): the zxid the member had
        # applied when the input now processed arrived; a read waits until it is applied here,
        # so that it sees every write acknowledged by any of the server's processes before it
        self.read_barrier = 0
        self.barrier_waits: deque[tuple[int, int]] = deque()  # (zxid, session) of reads held by it, in order
        self.last_container_check = now_ms
        self.stats = ServerStats()
        self.metrics = ServerMetrics()  # ZooKeeper's ServerMetrics: mntr and the Prometheus endpoint read them
        self._enforced = enforced_schemes(self.config)  # an id of one of these is needed for any request
        self.limiter = LogLimiter()  # lines a client can repeat: at most a few per minute per kind and peer
        self.local: LocalSessions | None = None  # local sessions (localSessionsEnabled); None: all are global
        self._my_id = config.quorum.my_id if config.quorum is not None and config.quorum.my_id else config.server_id

    def enable_local_sessions(self, upgrading: bool) -> None:
        """New sessions are local from now on (localSessionsEnabled; ``upgrading``:
        localSessionsUpgradingEnabled). A member's pipeline calls it when it is built."""
        self.local = LocalSessions(self.config.tick_ms, self.now_ms, upgrading)

    # ---- time ----

    def set_time(self, now_ms: int, wall_ms: int) -> None:
        """Monotonic milliseconds for timeouts, wall milliseconds for txn times."""
        self.now_ms = now_ms
        self.wall_ms = wall_ms

    # ---- connections ----

    def open(self, conn_id: int, ip: str, port: int) -> Connection:
        conn = Connection(conn_id, ip, port, self.config.max_buffer)
        self.connections[conn_id] = conn
        return conn

    def tls_established(self, conn: Connection, cert_der: bytes | None) -> None:
        """``conn``'s TLS handshake is done: its client certificate (DER, None without one) is its
        ``x509:`` identity, as ZooKeeper's X509AuthenticationProvider makes it on a TLS port. A
        certificate that yields no id under the configured rules closes the connection."""
        if cert_der is None:
            return
        from zkpy.server.x509 import X509IdError, x509_identities  # cryptography: only TLS ports need it

        try:
            ids = x509_identities(cert_der, self.config.x509)
        except X509IdError as exc:
            self.log_peer("x509 failed", conn.ip, f"x509 authentication failed for {conn.ip}:{conn.port}: {exc}")
            self._close(conn, "x509 auth failed")
            return
        for ident in ids:
            conn.add_auth(ident)

    def log_peer(self, kind: str, ip: str, message: str) -> None:
        """Log a line that a peer can make us repeat, rate-limited per ``kind`` and ``ip``
        (``zkpy.ratelimit``): no client can fill the disk with our log."""
        self.limiter.log(self.log, kind, ip, self.now_ms, message)

    def receive(self, conn: Connection, data: bytes) -> str | None:
        """Bytes arrived on ``conn``: process its complete frames (up to the bounds of
        ``server.connection``: call ``resume`` for more), or return the four-letter word the
        connection opened with (the shell answers it and closes)."""
        if conn.closing:
            return None
        conn.decoder.feed(data)
        self.metrics.counters["bytes_received_count"] += len(data)
        word = conn.four_letter_word()
        if word is not None:
            return word
        if conn.state is ConnState.AWAIT_SESSION and conn.decoder.buffered > 4 + self.config.max_buffer:
            # frames wait here until the session exists; one frame's worth is the bound
            self.log_peer("data before session", conn.ip,
                          f"closing connection from {conn.ip}:{conn.port}: too much data before its session was created")
            self._close(conn, "data before session")
            return None
        self._process_frames(conn)
        return None

    def resume(self, conn: Connection) -> None:
        """Take more of ``conn``'s buffered requests: the shell calls it when a turn of the loop
        passed with requests left (``conn.decoder.has_frame()``), or when the output of a paused
        connection drained (``conn.can_resume``)."""
        if conn.paused:
            if not conn.can_resume:
                return
            conn.paused = False
        self._process_frames(conn)

    def wants_turn(self, conn: Connection) -> bool:
        """Would ``resume`` take a request of ``conn`` now (or let a paused one take them again)?"""
        if conn.closing or conn.state is ConnState.AWAIT_SESSION:
            return False
        if conn.paused:
            return conn.can_resume
        return conn.decoder.has_frame()

    def _process_frames(self, conn: Connection) -> None:
        """Take ``conn``'s requests in order, one frame at a time, until none is complete, the
        connection waits (for its session, or paused: too much output queued or too many requests
        in flight) or ``MAX_FRAMES_PER_TURN`` were taken; the rest stay in its decoder."""
        decoder = conn.decoder
        try:
            for _ in range(MAX_FRAMES_PER_TURN):
                if conn.closing or conn.paused or conn.state is ConnState.AWAIT_SESSION:
                    return
                # Connection.over_limit, inlined: this runs once per request
                if conn.out_bytes + conn.unsent + conn.owed >= MAX_QUEUED_OUTPUT or conn.outstanding >= MAX_OUTSTANDING:
                    conn.paused = True
                    return
                frame = decoder.next_frame()
                if frame is None:
                    return
                conn.received += 1
                self.stats.packets_received += 1
                if conn.state is ConnState.AWAIT_CONNECT:
                    self._connect(conn, frame)
                else:
                    self._packet(conn, frame)
        except ProtocolError as exc:
            self.log_peer("protocol error", conn.ip, f"closing connection from {conn.ip}:{conn.port}: {exc}")
            self._close(conn, str(exc))

    def disconnected(self, conn: Connection) -> None:
        """The client's socket is gone: drop the connection's watches; the session lives on."""
        self.connections.pop(conn.conn_id, None)
        conn.close("client went away")
        if conn.session_id and self.session_conn.get(conn.session_id) is conn:
            del self.session_conn[conn.session_id]
        self.tree.drop_watcher(conn.conn_id)
        self._dirty.pop(conn, None)

    def _close(self, conn: Connection, reason: str) -> None:
        conn.close(reason)
        self._dirty[conn] = None

    def _send(self, conn: Connection, payload: bytes) -> None:
        self._send_framed(conn, INT.pack(len(payload)) + payload)

    def _send_framed(self, conn: Connection, framed: bytes) -> None:
        """Queue one reply, its length in front (Connection.queue, inlined: once per reply)."""
        if conn.closing and conn.close_reason != "closeSession":
            return
        conn.out.append(framed)
        conn.out_bytes += len(framed)
        conn.sent += 1
        self.stats.packets_sent += 1
        self._dirty[conn] = None

    # ---- handshake ----

    def _connect(self, conn: Connection, frame: bytes) -> None:
        req, read_only = read_connect(frame)
        self.metrics.counters["connection_request_count"] += 1
        if read_only is not None:
            conn.old_client = False  # it sent the readOnly flag: it gets the byte back
        if req.lastZxidSeen > self.tree.last_processed_zxid:
            self.log_peer("zxid ahead", conn.ip,
                          f"refusing session request for client {conn.ip}:{conn.port} as it has seen zxid "
                          f"0x{req.lastZxidSeen:x} our last zxid is 0x{self.tree.last_processed_zxid:x}")
            self._close(conn, "client zxid ahead")
            return
        timeout = min(max(req.timeOut, self.config.min_session_timeout), self.config.max_session_timeout)
        conn.timeout_ms = timeout
        if req.sessionId == 0:
            sid = self.sessions.new_session_id()
            conn.session_id = sid
            if self.local is not None:  # a local session: no txn, established at once
                self.local.add(sid, timeout, self.now_ms)
                self._established(conn)
                return
            conn.state = ConnState.AWAIT_SESSION
            self._new_session(conn, sid, timeout)
            return
        sid = req.sessionId
        if self.local is not None and self.local.is_live(sid):  # a local session back on its member
            if req.passwd != session_password(sid):
                self._refuse_session(conn, sid)
                return
            self._take_over_session(conn, sid)
            self.local.touch(sid, self.now_ms, timeout)
            conn.session_id = sid
            self._established(conn)
            return
        if self._session_moved(conn, sid, req.passwd, timeout):
            return
        if not self.sessions.is_live(sid) or req.passwd != session_password(sid):
            self._refuse_session(conn, sid)
            return
        self._take_over_session(conn, sid)
        self.sessions.touch(sid, self.now_ms, timeout)
        conn.session_id = sid
        self._established(conn)

    def _refuse_session(self, conn: Connection, sid: int) -> None:
        """The session ``conn`` resumes is gone: say so (a ConnectResponse of zeros) and close."""
        self.log_peer("invalid session", conn.ip,
                      f"invalid session 0x{long_hex(sid)} for client {conn.ip}:{conn.port}, probably expired")
        self._connect_response(conn, valid=False)
        self._close(conn, "invalid session")

    def _take_over_session(self, conn: Connection, sid: int) -> None:
        """``conn`` resumes ``sid``: a connection still holding it here is closed."""
        previous = self.session_conn.get(sid)
        if previous is not None and previous is not conn:
            self._close(previous, "client reconnected elsewhere")

    def _new_session(self, conn: Connection, sid: int, timeout: int) -> None:
        """A client asked for a new session ``sid`` (its id is chosen): create it."""
        self.sessions.add(sid, timeout, self.now_ms)
        self._propose(OpNum.CREATE_SESSION, timeout, conn, 0, sid, None)

    def _session_moved(self, conn: Connection, sid: int, passwd: bytes | None, timeout: int) -> bool:
        """A client resumes ``sid``; True when someone else must say whether it lives (a learner
        asks its leader). Here the session tracker knows."""
        return False

    def _established(self, conn: Connection) -> None:
        conn.state = ConnState.ESTABLISHED
        conn.established_ms = self.wall_ms
        self.session_conn[conn.session_id] = conn
        self._connect_response(conn, valid=True)

    def _connect_response(self, conn: Connection, valid: bool) -> None:
        payload = connect_response(conn.session_id, conn.timeout_ms, valid, not conn.old_client, self.read_only)
        conn.queue(INT.pack(len(payload)) + payload)  # not _send: it goes out even to a closing connection
        conn.sent += 1
        self.stats.packets_sent += 1
        self._dirty[conn] = None

    # ---- packets ----

    def _packet(self, conn: Connection, frame: bytes) -> None:
        if len(frame) < 8:
            raise ProtocolError(f"request header truncated ({len(frame)} bytes, a RequestHeader needs 8)")
        xid, op = _REQUEST_HEADER.unpack_from(frame, 0)
        body = frame[8:]
        sid = conn.session_id
        if conn.touched_ms != self.now_ms:  # a second touch in the same ms moves nothing
            conn.touched_ms = self.now_ms
            self._seen(conn)
        if op == OpNum.AUTH:
            self._auth(conn, xid, body)
            return
        if op == OpNum.SASL:
            self._sasl(conn, xid, body)
            return
        if self._enforced and not self._admitted(conn, xid):
            return
        if op not in VALID_OPS:
            self.log_peer("unknown type", conn.ip, f"received packet at server of unknown type {op} from {conn.ip}:{conn.port}")
            self._send(conn, ReplyHeader(xid, -1, Code.UNIMPLEMENTED).to_bytes())
            self._close(conn, f"unknown type {op}")
            return
        if xid >= 0:  # pings and other special xids are not the client's last operation
            conn.last_cxid = xid
        if op in WRITE_OPS:
            if self.local is not None and self._local_write(conn, xid, op, body):
                return
            self._write(conn, xid, op, body)
            return
        if op == OpNum.SYNC:
            self._sync(QueuedRead(conn, xid, op, body, self.now_ms))
        elif self.read_barrier > self.tree.last_processed_zxid:
            read = QueuedRead(conn, xid, op, body, self.now_ms, after_zxid=self.read_barrier)
            self.barrier_waits.append((self.read_barrier, sid))  # the barrier only rises: in zxid order
            self._queue(read)
        elif sid in self.queues:
            self._queue(QueuedRead(conn, xid, op, body, self.now_ms))
        else:  # (no record for a read answered at once)
            self._answer_read(conn, xid, op, body, self.now_ms)

    def _seen(self, conn: Connection) -> None:
        """A request came on ``conn``: its session lives on."""
        if self.local is None or not self.local.touch(conn.session_id, self.now_ms):
            self.sessions.touch(conn.session_id, self.now_ms)

    def _write(self, conn: Connection, xid: int, op: int, body: bytes,
               ephemeral_error: ZookeeperError | None = None) -> None:
        """A write; ``ephemeral_error``: what an ephemeral create in it fails with."""
        self._submit_write(conn, xid, op, body, ephemeral_error)

    def _local_write(self, conn: Connection, xid: int, op: int, body: bytes) -> bool:
        """A write of a local session that its member settles (True: handled, nothing more to do):
        its closeSession is answered here, after what the session sent before; an ephemeral create
        upgrades it to a global session first (then it goes on as any write), or without
        localSessionsUpgradingEnabled goes on failing with EphemeralOnLocalSession
        (QuorumZooKeeperServer.checkUpgradeSession)."""
        local = self.local
        assert local is not None
        sid = conn.session_id
        if not local.is_local(sid):
            return False
        if op == OpNum.CLOSE_SESSION:
            read = QueuedRead(conn, xid, op, body, self.now_ms)
            if sid in self.queues:
                self._queue(read)
            else:
                self._run_read(read)
            return True
        if op not in (OpNum.CREATE, OpNum.CREATE2, OpNum.MULTI):
            return False
        request, error = self._decode_write(op, body, conn)
        if error is not None or not needs_global(op, request):
            return False
        if not local.upgrading_enabled:
            self._write(conn, xid, op, body, EphemeralOnLocalSessionError())
            return True
        timeout = local.upgrade(sid)
        if timeout is not None:
            self.log(f"upgrading session 0x{long_hex(sid)} to a global session")
            self._upgrade(sid, timeout)
        return False

    def _upgrade(self, sid: int, timeout: int) -> None:
        """Local session ``sid`` becomes global: its createSession (same id and timeout) goes to
        the quorum before the request that needs it. Here (the leader) it is tracked as global at
        once, so that the request prepped next finds it."""
        self.sessions.add(sid, timeout, self.now_ms)
        self._propose(OpNum.CREATE_SESSION, timeout, None, 0, sid, None)

    def _close_local(self, conn: Connection, xid: int, received_ms: int) -> None:
        """A local session's closeSession, in its turn: its member forgets it; no txn."""
        sid = conn.session_id
        if self.local is not None:
            self.local.remove(sid)
        if self.session_conn.get(sid) is conn:
            del self.session_conn[sid]
        zxid = self.tree.last_processed_zxid
        self._account(conn, xid, OpNum.CLOSE_SESSION, zxid, received_ms)
        self._send(conn, _REPLY_HEADER.pack(xid, zxid, 0))
        conn.close("closeSession")
        self._dirty[conn] = None

    def _expire_local(self) -> None:
        """Local sessions whose timeout passed are gone: their connection closes."""
        if self.local is None:
            return
        for sid in self.local.expired(self.now_ms):
            self.log(f"expiring local session 0x{long_hex(sid)}, timeout exceeded")
            self.metrics.counters["stale_sessions_expired"] += 1
            owner = self.session_conn.pop(sid, None)
            if owner is not None:
                self._close(owner, "session expired")

    def _sync(self, read: QueuedRead) -> None:
        """A sync: answered after every txn proposed before it is applied (ZooKeeper queues it
        behind every write in flight, whichever session sent it)."""
        if self.next_zxid - 1 > self.tree.last_processed_zxid:
            read.after_zxid = self.next_zxid - 1
            self._syncing.add(read.conn.session_id)
        if read.after_zxid or read.quorum_token or read.conn.session_id in self.queues:
            self._queue(read)
        else:
            self._run_read(read)

    def _queue(self, entry: QueuedRead | Forwarded) -> None:
        """Behind what the session sent before: answered in order by ``_drain_queue``. A read's
        expected reply counts in its connection's output bound until it runs, so that the reads
        queued behind a write cannot all be taken and answered at once past the bound."""
        self.queues.setdefault(entry.conn.session_id, deque()).append(entry)
        entry.conn.outstanding += 1
        if isinstance(entry, QueuedRead):
            entry.owed = self._reply_estimate(entry.op, entry.body)
            entry.conn.owed += entry.owed

    def _reply_estimate(self, op: int, body: bytes) -> int:
        """About how many bytes the reply to a read will take: the node's data or child names as
        they are now (the read runs later, after the writes queued before it)."""
        if op not in (OpNum.GET_DATA, OpNum.GET_CHILDREN, OpNum.GET_CHILDREN2):
            return _SMALL_REPLY
        try:
            (n,) = INT.unpack_from(body, 0)
            node = self.tree.get(body[4 : 4 + n].decode("utf-8")) if n >= 0 else None
        except (struct.error, UnicodeDecodeError):
            return _SMALL_REPLY
        if node is None:
            return _SMALL_REPLY
        if op == OpNum.GET_DATA:
            return _SMALL_REPLY + len(node.data or b"")
        return _SMALL_REPLY + _CHILD_NAME_ESTIMATE * len(node.children)

    def _auth(self, conn: Connection, xid: int, body: bytes) -> None:
        packet = AuthPacket.from_bytes(body)
        scheme = packet.scheme
        ids = authenticate(packet, conn.ip, self.config.super_digest)
        if ids is None:
            self.log_peer("auth failed", conn.ip, f"authentication failed for scheme {scheme!r} from {conn.ip}:{conn.port}")
            self._send(conn, ReplyHeader(xid, 0, Code.AUTHFAILED).to_bytes())
            self.metrics.auth_failed += 1
            self._close(conn, "auth failed")
            return
        for ident in ids:
            conn.add_auth(ident)
        self.log_peer("auth success", conn.ip,
                      f"session 0x{long_hex(conn.session_id)}: auth success for scheme {scheme}")
        self._send(conn, ReplyHeader(xid, 0, 0).to_bytes())

    def _admitted(self, conn: Connection, xid: int) -> bool:
        """enforce.auth.enabled / sessionRequireClientSASLAuth (AuthenticationHelper.enforceAuthentication):
        every request but auth and SASL packets, pings included, needs an id of an enforced scheme;
        without one it is answered SESSIONCLOSEDREQUIRESASLAUTH (zxid 0) and the connection closes."""
        enforced = self._enforced
        if any(i.scheme in enforced for i in conn.auth):
            return True
        self.log_peer("auth enforced", conn.ip,
                      f"client {conn.ip}:{conn.port} authentication scheme(s) {[i.scheme for i in conn.auth]} do not "
                      f"match any of the expected authentication schemes {list(enforced)}, closing the connection")
        self._send(conn, ReplyHeader(xid, 0, Code.SESSIONCLOSEDREQUIRESASLAUTH).to_bytes())
        self._close(conn, "authentication enforced")
        return False

    def _sasl(self, conn: Connection, xid: int, body: bytes) -> None:
        """A SASL token (ZooKeeperServer.processSasl): answered by the connection's SASL server
        (``server.sasl``); a completed exchange adds ``sasl:<id>`` (and ``super`` for a
        zookeeper.superUser); a failed one is answered AUTHFAILED (SESSIONCLOSEDREQUIRESASLAUTH
        when SASL is enforced) with a null token, and the connection closes."""
        token = read_sasl_token(body)
        if conn.sasl is None:
            conn.sasl = new_sasl_server(self.config.sasl)
        server = conn.sasl
        try:
            answer = server.evaluate(token)
        except SaslError as exc:
            self.log_peer("sasl failed", conn.ip, f"client {conn.ip}:{conn.port} failed to SASL authenticate: {exc}")
            self.metrics.auth_failed += 1
            if isinstance(server, NoSaslServer):
                # ZooKeeper would answer OK again (kazoo loops); the refusal ends the exchange, and
                # the connection may go on without SASL as it could after the first answer
                self._send(conn, sasl_response(xid, Code.AUTHFAILED, None))
                return
            sasl_required = "sasl" in enforced_schemes(self.config)
            code = Code.SESSIONCLOSEDREQUIRESASLAUTH if sasl_required else Code.AUTHFAILED
            self._send(conn, sasl_response(xid, code, None))
            self._close(conn, "SASL authentication failed")
            return
        if isinstance(server, NoSaslServer):
            self.log_peer("sasl ignored", conn.ip,
                          f"SASL token from {conn.ip}:{conn.port} answered with a null token: no SASL server is configured")
        elif server.complete and server.authorization_id is not None:  # this token completed it
            authz = server.authorization_id
            conn.add_auth(Id("sasl", authz))
            super_user = self.config.sasl is not None and authz in self.config.sasl.super_users
            if super_user:
                conn.add_auth(SUPER)
            self.log_peer("sasl success", conn.ip,
                          f"session 0x{long_hex(conn.session_id)}: adding SASL authorization for "
                          f"authorizationID: {authz}{' (a super user)' if super_user else ''}")
        self._send(conn, sasl_response(xid, Code.OK, answer))

    def _submit_write(self, conn: Connection, xid: int, op: int, body: bytes,
                      ephemeral_error: ZookeeperError | None = None) -> None:
        request, error = self._decode_write(op, body, conn)
        if op == OpNum.CREATE_SESSION:
            # a client may not create sessions over an established one (ZooKeeper answers it with a
            # second ConnectResponse and no reply; zkpy refuses it with BadArguments)
            self.log_peer("createSession", conn.ip,
                          f"refusing createSession from established session 0x{long_hex(conn.session_id)} "
                          f"at {conn.ip}:{conn.port}")
            error = error or BadArgumentsError("createSession from a client")
        self._propose(op, request, conn, xid, conn.session_id, error, ephemeral_error=ephemeral_error, body=body)

    def _decode_write(self, op: int, body: bytes, origin: Connection | str) -> tuple[Any, ZookeeperError | None]:
        """The request record of a write (MarshallingError if it does not decode); ``origin``
        (a client's connection, or words naming the sender) is only formatted for the log line."""
        try:
            if op == OpNum.MULTI:
                request: Any = _as_zookeeper_reads_multi(read_multi_request(body, 0)[0])
            elif op == OpNum.DELETE_CONTAINER:
                request = body.decode("utf-8", "replace")
            elif op in (OpNum.CLOSE_SESSION, OpNum.CREATE_SESSION):
                request = INT.unpack_from(body, 0)[0] if op == OpNum.CREATE_SESSION else None
            else:
                request = WRITE_RECORDS[op].read(body, 0)[0]
            _check_null_paths(op, request)
            error = None
        except (ProtocolError, ValueError, IndexError, struct.error, KeyError) as exc:
            if isinstance(origin, Connection):
                origin = f"{origin.ip}:{origin.port}"
            self.log_peer("undecodable", origin.rsplit(":", 1)[0], f"failed to decode {OP_NAMES.get(op, op)} from {origin}: {exc}")
            request, error = None, MarshallingError()
        return request, error

    def _propose(self, op: int, request: Any, conn: Connection | None, xid: int, session: int,
                 error: ZookeeperError | None, auth: list[Id] | None = None,
                 ephemeral_error: ZookeeperError | None = None, body: bytes | None = None) -> None:
        """``body``: the request's bytes, whose txn may be logged from them (see `prep.txn_body`)."""
        zxid = self.next_zxid
        self.next_zxid += 1
        if auth is None:
            auth = conn.auth if conn is not None else [SUPER]
        if error is None:
            live = self.sessions.is_live(session) or op == OpNum.CREATE_SESSION
            if self.local is not None:
                live, ephemeral_error = self.local.checks(session, live, ephemeral_error, self._my_id)
            hdr, txn, error = self.prep.prep(op, request, session, xid, auth, zxid, self.wall_ms, live,
                                             ephemeral_error)
            if conn is not None and error is not None and (error.code == Code.BADARGUMENTS
                                                           or op == OpNum.DELETE_CONTAINER):
                self.log_peer("refused", conn.ip, f"{OP_NAMES.get(op, op)} from {conn.ip}:{conn.port} refused with "
                                                  f"{Code(error.code).name}: {error}")
        else:
            hdr, txn = TxnHeader(session, xid, zxid, self.wall_ms, OpNum.ERROR), ErrorTxn(int(error.code))
        if op == OpNum.CLOSE_SESSION and error is None:
            self.sessions.set_closing(session)
        p = Proposal(hdr, txn, txn_body(hdr.type, body, txn) if body is not None else None, conn, xid, op, error,
                     self.now_ms, self.prep.last_subs if error is None else None)
        self._unapplied.append(p)
        self._out.append(p)
        if conn is not None:
            queue = self.queues.get(session)
            if queue is None:  # (not setdefault: that builds a deque per write)
                queue = self.queues[session] = deque()
            queue.append(p)
            conn.outstanding += 1

    # ---- after persistence ----

    def apply_persisted(self, count: int) -> None:
        """The first ``count`` txns handed over as `Propose` are durable: apply them and answer in order."""
        if count > self._handed:
            raise AssertionError(f"apply_persisted({count}) with {self._handed} txns handed over")
        self._handed -= count
        unapplied = self._unapplied
        for _ in range(count):
            p = unapplied.popleft()
            try:
                self._apply(p)
            except Exception:  # a bug must not stall every later write: log it loudly, drop the client
                self.log(f"internal error applying zxid 0x{p.hdr.zxid:x} ({OP_NAMES.get(p.op, p.op)}):\n"
                         + traceback.format_exc())
                if p.conn is not None:
                    self._close(p.conn, "internal error")
                    queue = self.queues.get(p.hdr.clientId)
                    if queue and queue[0] is p:
                        queue.popleft()
                    self._drain_queue(p.hdr.clientId)
        for session in list(self._syncing):
            self._drain_queue(session)

    def _apply(self, p: Proposal) -> None:
        rc = self.tree.apply(p.hdr, p.txn, p.subs)
        self.metrics.propagation_latency.add(self.wall_ms - p.hdr.time)
        if self.on_apply is not None:
            self.on_apply(p.hdr, p.txn)
        self.prep.applied(p.hdr.zxid)
        self._deliver_events()
        session = p.hdr.clientId
        if self.local is not None and p.error is None:
            if p.op == OpNum.CREATE_SESSION:
                self.local.committed(session)
            elif p.op == OpNum.CLOSE_SESSION:
                self.local.closed(session)
        if p.op == OpNum.CLOSE_SESSION and p.error is None:
            self.sessions.remove(session)
            owner = self.session_conn.pop(session, None)
            if p.conn is None and owner is not None:
                self._close(owner, "session expired")
        conn = p.conn
        if conn is None:
            return
        queue = self.queues.get(session)
        if queue and queue[0] is p:
            queue.popleft()
        conn.outstanding -= 1
        if p.op == OpNum.CREATE_SESSION and p.error is None:
            if conn.state is ConnState.AWAIT_SESSION:
                self._established(conn)
                self._process_frames(conn)
        else:
            self._reply_write(conn, p, rc)
        self._drain_queue(session)

    def _drain_queue(self, session: int) -> None:
        queue = self.queues.get(session)
        applied = self.tree.last_processed_zxid
        while queue:
            head = queue[0]
            if isinstance(head, Forwarded):
                if not head.done:
                    return
                queue.popleft()
                head.conn.outstanding -= 1
                self._answer_read(head.conn, head.xid, head.op, head.body, head.received_ms)
                continue
            if not isinstance(head, QueuedRead):
                break
            if self._awaits_quorum(head):
                return
            if head.after_zxid > applied:
                self._syncing.add(session)  # a sync still waits for earlier writes: drain again after them
                return
            queue.popleft()
            head.conn.outstanding -= 1
            head.conn.owed -= head.owed
            self._run_read(head)
        self._syncing.discard(session)
        if queue is not None and not queue:
            del self.queues[session]

    def _awaits_quorum(self, read: QueuedRead) -> bool:
        """Does this queued sync still wait for a quorum check (zkpy.quorumSync on a leader)?"""
        return False

    def _deliver_events(self) -> None:
        events = self.tree.events
        if not events:
            return
        self.tree.events = []
        summaries = self.metrics.summaries
        for ev in events:
            fired = WATCH_FIRED.get(ev.type)
            if fired is not None:
                summaries[fired].add(len(ev.watchers))
            payload = event_payload(ev.type, ev.path)
            for watcher in ev.watchers:
                conn = self.connections.get(watcher)
                if conn is None or conn.closing:
                    continue
                if not has_permission(ev.acl, PermNum.READ, conn.auth):
                    continue  # a watch never reveals a path its session may not read
                self._send(conn, payload)

    def _reply_write(self, conn: Connection, p: Proposal, rc: TxnResult) -> None:
        """The reply to an applied write: header and body packed straight from the result (the
        Stat is already the bytes ``Node.stat_bytes`` packed at apply time)."""
        zxid = self.tree.last_processed_zxid
        op = p.op
        self._account(conn, p.xid, op, zxid, p.received_ms)
        if p.error is not None:
            self._send(conn, _REPLY_HEADER.pack(p.xid, zxid, int(p.error.code)))
        elif op == OpNum.MULTI:
            out = bytearray(_REPLY_HEADER.pack(p.xid, zxid, 0))
            self._multi_reply(out, rc.multi or [])
            self._send(conn, bytes(out))
        elif rc.err:
            self._send(conn, _REPLY_HEADER.pack(p.xid, zxid, rc.err))
        else:
            header = _REPLY_HEADER.pack(p.xid, zxid, 0)
            if op == OpNum.SET_DATA or op == OpNum.SET_ACL:
                self._send(conn, header + rc.stat)  # type: ignore[operator]
            elif op == OpNum.CREATE:
                path = rc.path.encode("utf-8")  # type: ignore[union-attr]
                self._send(conn, header + INT.pack(len(path)) + path)
            elif op in (OpNum.CREATE2, OpNum.CREATE_TTL, OpNum.CREATE_CONTAINER):
                path = rc.path.encode("utf-8")  # type: ignore[union-attr]
                self._send(conn, header + INT.pack(len(path)) + path + rc.stat)  # type: ignore[operator]
            elif op == OpNum.RECONFIG:  # the new config and its stat, as FinalRequestProcessor answers
                data = p.txn.data
                self._send(conn, header + INT.pack(len(data)) + data + rc.stat)
            else:
                self._send(conn, header)
        if op == OpNum.CLOSE_SESSION:
            conn.close("closeSession")
            self._dirty[conn] = None

    @staticmethod
    def _multi_reply(out: bytearray, results: list[TxnResult]) -> None:
        """A multi's results as MultiResponse carries them (``wire.multi.write_multi_response``'s
        layout, packed straight from the results: one header and at most a path and a Stat per op)."""
        for sub in results:
            t = sub.type
            if t == OpNum.ERROR:
                out += _MULTI_ERROR.pack(OpNum.ERROR, False, sub.err, sub.err)
                continue
            if t in (OpNum.CREATE_CONTAINER, OpNum.CREATE_TTL):
                t = OpNum.CREATE2  # ZooKeeper's CreateResult with a stat is always typed create2
            out += _MULTI_HEADER.pack(t, False, 0)
            if t == OpNum.CREATE or t == OpNum.CREATE2:
                path = sub.path.encode("utf-8")  # type: ignore[union-attr]
                out += INT.pack(len(path))
                out += path
                if t == OpNum.CREATE2:
                    out += sub.stat  # type: ignore[arg-type]
            elif t == OpNum.SET_DATA:
                out += sub.stat  # type: ignore[arg-type]
        out += _MULTI_END

    def _account(self, conn: Connection, xid: int, op: int, zxid: int, received_ms: int) -> None:
        latency = self.now_ms - received_ms
        conn.last_op = OP_NAMES.get(op, "NA")
        conn.last_zxid = zxid
        conn.last_response_ms = self.wall_ms
        conn.record_latency(latency)
        self.stats.record_latency(latency)
        # Summary.add, inlined: this runs once per request
        summary = self.metrics.updatelatency if op in WRITE_OPS else self.metrics.readlatency
        pending = summary.pending
        pending.append(latency)
        if len(pending) >= FOLD_AT:
            summary.fold()

    # ---- reads ----

    def _run_read(self, r: QueuedRead) -> None:
        self._answer_read(r.conn, r.xid, r.op, r.body, r.received_ms)

    def _answer_read(self, conn: Connection, xid: int, op: int, body: bytes, received_ms: int) -> None:
        if conn.closing:
            return
        zxid = self.tree.last_processed_zxid
        if op == OpNum.PING:
            self._account(conn, xid, op, zxid, received_ms)
            self._send(conn, _REPLY_HEADER.pack(Xid.PING, zxid, 0))
            return
        if op == OpNum.CLOSE_SESSION:
            self._close_local(conn, xid, received_ms)
            return
        try:
            reply = run_read(self.tree, conn, op, body, lambda payload: self._send(conn, payload),
                             () if self.config.sasl_auth else ("sasl",))
            err = 0
        except ZookeeperError as exc:
            reply, err = b"", int(exc.code)
            if err == Code.BADARGUMENTS:
                self.log_peer("refused", conn.ip, f"{OP_NAMES.get(op, op)} from {conn.ip}:{conn.port} refused with BADARGUMENTS")
        except (ProtocolError, ValueError, IndexError, struct.error) as exc:
            self.log_peer("undecodable", conn.ip, f"failed to process {OP_NAMES.get(op, op)} from {conn.ip}:{conn.port}: {exc}")
            reply, err = b"", int(Code.MARSHALLINGERROR)
        self._account(conn, xid, op, zxid, received_ms)
        self._send_framed(conn, _FRAMED_REPLY_HEADER.pack(_REPLY_HEADER.size + len(reply), xid, zxid, err) + reply)

    # ---- time passes ----

    def tick(self) -> None:
        """Expire sessions whose bucket has passed; delete empty containers and expired TTL nodes.
        Only a standalone server or the leader does either; learners hear of it through txns.
        Local sessions expire on their own member, leader or learner."""
        self._expire_local()
        for sid in self.sessions.expired(self.now_ms):
            s = self.sessions.sessions.get(sid)
            self.log(f"expiring session 0x{long_hex(sid)}, timeout of {s.timeout_ms if s else '?'}ms exceeded")
            self.metrics.counters["stale_sessions_expired"] += 1
            self._propose(OpNum.CLOSE_SESSION, None, None, 0, sid, None)
        if self.now_ms - self.last_container_check >= self.config.container_check_interval_ms:
            self.last_container_check = self.now_ms
            for path in self.container_candidates()[: self.config.container_max_per_minute]:
                self._propose(OpNum.DELETE_CONTAINER, path, None, 0, 0, None)

    def container_candidates(self) -> list[str]:
        """Empty containers that once had a child, and childless TTL nodes past their TTL (ContainerManager)."""
        out = []
        for path in sorted(self.tree.containers):
            node = self.tree.get(path)
            if node is not None and node.cversion > 0 and not node.children:
                out.append(path)
        for path in sorted(self.tree.ttls):
            node = self.tree.get(path)
            if node is None or node.children:
                continue
            if ephemeral_kind(node.ephemeral_owner) == "ttl" and self.wall_ms - node.mtime > ttl_of(node.ephemeral_owner):
                out.append(path)
        return out

    # ---- output ----

    def ready(self) -> list[ServerOutput]:
        """Everything produced since the last call, in order, then an `Output` for each connection
        that has bytes to write or is closing."""
        out, self._out = self._out, []
        if self._dirty:
            out.extend(Output(conn) for conn in self._dirty)
            self._dirty.clear()
        self._handed = len(self._unapplied)
        return out

    def handed_txns(self) -> list[tuple[TxnHeader, Any]]:
        """The txns handed over as `Propose` and not applied yet, in zxid order (a leader whose
        term ends has them on disk: the next term starts with them applied)."""
        return [(p.hdr, p.txn) for p in itertools.islice(self._unapplied, self._handed)]

    @property
    def unapplied(self) -> int:
        """Txns proposed and not applied yet."""
        return len(self._unapplied)

    @property
    def outstanding(self) -> int:
        return sum(len(q) for q in self.queues.values())

class ServerStats:
    """Counters the four-letter words report (ServerStats)."""

    def __init__(self) -> None:
        self.packets_received = 0
        self.packets_sent = 0
        self.min_latency = -1
        self.max_latency = 0
        self.total_latency = 0
        self.count = 0

    def record_latency(self, ms: int) -> None:
        if ms < self.min_latency or self.min_latency < 0:  # comparisons, not min()/max(): once per request
            self.min_latency = ms
        if ms > self.max_latency:
            self.max_latency = ms
        self.total_latency += ms
        self.count += 1

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]

    @property
    def avg_latency(self) -> float:
        return self.total_latency / self.count if self.count else 0.0


_CREATES = frozenset({OpNum.CREATE, OpNum.CREATE2, OpNum.CREATE_CONTAINER, OpNum.CREATE_TTL})
_TTL_FLAGS = frozenset({int(CreateMode.PERSISTENT_WITH_TTL), int(CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL)})
_CONTAINER_FLAGS = int(CreateMode.CONTAINER)


def _as_zookeeper_reads_multi(ops: list[Op]) -> list[Op]:
    """A multi's create ops as ZooKeeper's MultiOperationRecord reads them: the op's type comes
    from its flags, not from its header (create2 is a plain create; flags 4 make a container
    whatever the header said). TTL flags need a createTTL header, else the multi is malformed.
    Without this, the txn type and the txn record of a sub-op could disagree. ``ops`` (just read,
    owned by the caller) is changed in place and returned."""
    for i, o in enumerate(ops):
        if o.type in _CREATES:
            flags = o.request.flags
            if flags in _TTL_FLAGS:
                if o.type != OpNum.CREATE_TTL:
                    raise ProtocolError(f"TTL flags {flags} on a multi op of type {o.type}")
                kind = OpNum.CREATE_TTL
            elif flags == _CONTAINER_FLAGS:
                kind = OpNum.CREATE_CONTAINER
            else:
                kind = OpNum.CREATE
            if kind != o.type:
                ops[i] = Op(kind, o.request, o.body)
    return ops


_NULL_PATH_FAILS = frozenset({OpNum.CREATE, OpNum.CREATE2, OpNum.CREATE_CONTAINER, OpNum.CREATE_TTL,
                              OpNum.DELETE})


def _check_null_paths(op: int, request: Any) -> None:
    """ZooKeeper fails these writes, and a multi with any null path, with a marshalling error
    (setData, setACL and check validate the path instead: BadArguments)."""
    if op == OpNum.MULTI:
        if any(o.request.path is None for o in request):
            raise ProtocolError("null path in multi")
    elif op in _NULL_PATH_FAILS and request.path is None:
        raise ProtocolError("null path")
