"""A pipeline's client side: connections, their intake, their handshake and their output (pure).

What every request pipeline (``server.core.ServerCore`` and its roles) does with a client
connection before and after the request itself: bytes in and frames taken under the bounds of
``server.connection`` (back-pressure: a paused connection takes nothing until it drained); the
session handshake (a new session, a session resumed, moved, refused); who the client is
(``server.auth``'s steps carried out); replies and watch events queued on the connection, which
becomes an `Output` at the next ``ready()``; the figures each answered request adds to
(``cons``, ``stat``, ``mntr``).

A subclass says what a request does (``_packet``) and how sessions are created and found
(``_new_session``, ``_session_moved``); it owns the tree, the session trackers and the
local sessions this class reads in the handshake.
"""

from __future__ import annotations

from collections.abc import Callable

from zkpy.config import ServerConfig
from zkpy.errors import ProtocolError
from zkpy.ids import long_hex
from zkpy.ratelimit import LogLimiter
from zkpy.server import auth
from zkpy.server.connection import (
    MAX_FRAMES_PER_TURN,
    MAX_OUTSTANDING,
    MAX_QUEUED_OUTPUT,
    Connection,
    ConnState,
)
from zkpy.server.handshake import connect_response, read_connect
from zkpy.server.local_sessions import LocalSessions
from zkpy.server.metrics import FOLD_AT, WATCH_FIRED, ServerMetrics, ServerStats
from zkpy.server.prep import WRITE_OPS
from zkpy.server.reads import event_payload
from zkpy.server.replies import framed
from zkpy.server.requests import OP_NAMES
from zkpy.server.sessions import SessionTracker, session_password
from zkpy.tree.acl import has_permission
from zkpy.tree.datatree import DataTree
from zkpy.wire.consts import PermNum
from zkpy.wire.jute import INT

Log = Callable[[str], None]


class Intake:
    """The client side of a request pipeline (see the module doc)."""

    read_only = False  # answers clients as a read-only server (isro: ro, readOnly byte 1)
    tree: DataTree  # the subclass's
    sessions: SessionTracker
    local: LocalSessions | None

    def __init__(self, config: ServerConfig, now_ms: int, wall_ms: int, log: Log) -> None:
        self.config = config
        self.log = log
        self.now_ms = now_ms
        self.wall_ms = wall_ms
        self.connections: dict[int, Connection] = {}
        self.session_conn: dict[int, Connection] = {}  # session -> the connection holding it here
        self._dirty: dict[Connection, None] = {}  # connections with output, in the order they got it
        self.stats = ServerStats()
        self.metrics = ServerMetrics()  # ZooKeeper's ServerMetrics: mntr and the Prometheus endpoint read them
        self._enforced = auth.enforced_schemes(config)  # an id of one of these is needed for any request
        self.limiter = LogLimiter()  # lines a client can repeat: at most a few per minute per kind and peer

    def set_time(self, now_ms: int, wall_ms: int) -> None:
        """Monotonic milliseconds for timeouts, wall milliseconds for txn times."""
        self.now_ms = now_ms
        self.wall_ms = wall_ms

    # ---- connections: intake under the bounds of ``server.connection``

    def open(self, conn_id: int, ip: str, port: int) -> Connection:
        conn = Connection(conn_id, ip, port, self.config.max_buffer)
        self.connections[conn_id] = conn
        return conn

    def tls_established(self, conn: Connection, cert_der: bytes | None) -> None:
        """``conn``'s TLS handshake is done: its client certificate (DER, None without one) is its
        ``x509:`` identity (``auth.certificate``)."""
        step = auth.certificate(conn, cert_der, self.config)
        if step is not None:
            self._authenticated(conn, step)

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
        self._send_framed(conn, INT.pack(len(payload)) + payload)  # (replies.framed, inlined: once per reply)

    def _send_framed(self, conn: Connection, framed_reply: bytes) -> None:
        """Queue one reply, its length in front (Connection.queue, inlined: once per reply)."""
        if conn.closing and conn.close_reason != "closeSession":
            return
        conn.out.append(framed_reply)
        conn.out_bytes += len(framed_reply)
        conn.sent += 1
        self.stats.packets_sent += 1
        self._dirty[conn] = None

    # ---- the session handshake

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
            conn.transition(ConnState.AWAIT_SESSION)
            self._new_session(conn, sid, timeout)
            return
        sid = req.sessionId
        if self.local is not None and self.local.is_live(sid):  # a local session back on its member
            self._resume(conn, sid, req.passwd, timeout, self.local.tracker)
        elif not self._session_moved(conn, sid, req.passwd, timeout):
            self._resume(conn, sid, req.passwd, timeout, self.sessions if self.sessions.is_live(sid) else None)

    def _resume(self, conn: Connection, sid: int, passwd: bytes | None, timeout: int,
                tracker: SessionTracker | None) -> None:
        """``conn`` resumes session ``sid``, which ``tracker`` keeps alive here (None: no one does)."""
        if tracker is None or passwd != session_password(sid):
            self._refuse_session(conn, sid)
            return
        self._take_over_session(conn, sid)
        tracker.touch(sid, self.now_ms, timeout)
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
        """A client asked for a new session ``sid`` (its id is chosen): create it (the subclass's)."""
        raise NotImplementedError

    def _session_moved(self, conn: Connection, sid: int, passwd: bytes | None, timeout: int) -> bool:
        """A client resumes ``sid``; True when someone else must say whether it lives (a learner
        asks its leader). Here the session tracker knows."""
        return False

    def _established(self, conn: Connection) -> None:
        conn.transition(ConnState.ESTABLISHED)
        conn.established_ms = self.wall_ms
        self.session_conn[conn.session_id] = conn
        self._connect_response(conn, valid=True)

    def _connect_response(self, conn: Connection, valid: bool) -> None:
        payload = connect_response(conn.session_id, conn.timeout_ms, valid, not conn.old_client, self.read_only)
        conn.queue(framed(payload))  # not _send: it goes out even to a closing connection
        conn.sent += 1
        self.stats.packets_sent += 1
        self._dirty[conn] = None


    def _packet(self, conn: Connection, frame: bytes) -> None:
        """A request of an established connection (the subclass's)."""
        raise NotImplementedError

    # ---- what a request leaves behind

    def _authenticated(self, conn: Connection, step: auth.AuthStep) -> None:
        """Carry out what an authentication step decided (``server.auth``)."""
        if step.line:
            self.log_peer(step.kind, conn.ip, step.line)
        if step.failed:
            self.metrics.auth_failed += 1
        if step.reply is not None:
            self._send(conn, step.reply)
        if step.close is not None:
            self._close(conn, step.close)

    def _seen(self, conn: Connection) -> None:
        """A request came on ``conn``: its session lives on."""
        if self.local is None or not self.local.touch(conn.session_id, self.now_ms):
            self.sessions.touch(conn.session_id, self.now_ms)

    def _deliver_events(self) -> None:
        events = self.tree.events
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
