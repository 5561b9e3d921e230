"""The request pipeline of a server, standalone, leader or learner: requests in, replies and txns out (pure).

Flow of a request (ZooKeeper's processor chain, without threads):
    receive -> decode -> writes: prep -> `Propose` (txn with zxid) -----------------.
                      -> reads:  queued behind the session's writes, or run now     |
    shell persists what ``ready()`` proposed, then calls ``apply_persisted`` -> ``_applied``
    -> watch events (written first) -> reply to the writer -> the session's queued reads run.

This module keeps the per-session FIFO (and sync), the write path, the one apply path and
``ready()``; the client side of a connection (intake, handshake, output) is ``server.intake``'s,
and the rest is in modules of their own: what a request is (``server.requests``), who the
client is (``server.auth``), local sessions (``server.local_sessions``), the bytes of a reply
(``server.replies``), reads (``server.reads``), what the driver is asked to do
(``server.outputs``).

Guarantees kept here: per-session FIFO (a session's replies leave in request order, and a
read queued behind the same session's write sees it); a watch event is appended to its
connection's output before any reply that shows the state after the change; nothing
acknowledges a txn before the shell says it is persisted.
"""

from __future__ import annotations

import struct
import traceback
from collections import deque
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
from zkpy.server.auth import SUPER, admitted, auth_packet, sasl_packet
from zkpy.server.connection import Connection, ConnState
from zkpy.server.containers import container_candidates
from zkpy.server.intake import Intake, Log
from zkpy.server.local_sessions import LocalSessions, LocalWrite
from zkpy.server.outputs import Output, ServerOutput, TxnApplied
from zkpy.server.prep import WRITE_OPS, Prep, txn_body
from zkpy.server.reads import refusal, run_read
from zkpy.server.replies import FRAMED_REPLY_HEADER, REPLY_HEADER, header, pong, write_reply
from zkpy.server.requests import (
    DECODE_ERRORS,
    OP_NAMES,
    REQUEST_HEADER,
    VALID_OPS,
    Forwarded,
    Proposal,
    QueuedRead,
    decode_write,
)
from zkpy.server.sessions import SessionTracker
from zkpy.tree.datatree import DataTree, TxnResult
from zkpy.wire.consts import OpNum
from zkpy.wire.jute import INT
from zkpy.wire.proto import Id
from zkpy.wire.txn import ErrorTxn, TxnHeader

__all__ = ["Log", "ServerCore"]


_SMALL_REPLY = 128  # a reply's expected bytes, beyond the data or child names it carries
_CREATE_SESSION, _CLOSE_SESSION = int(OpNum.CREATE_SESSION), int(OpNum.CLOSE_SESSION)
_MULTI, _ERROR = int(OpNum.MULTI), int(OpNum.ERROR)
_SESSION_TXNS = frozenset({_CREATE_SESSION, _CLOSE_SESSION})
_CHILD_NAME_ESTIMATE = 32  # expected bytes per child name in a getChildren reply


class ServerCore(Intake):
    """A ZooKeeper server's request pipeline with no I/O: feed it bytes and time, take its
    outputs with ``ready()`` (``server.outputs`` says what each asks of the driver).

    This class is a standalone server's: writes are prepped here into `Propose` outputs, and
    sessions expire here. ``server.leader.LeaderServerCore`` also takes learners' forwarded
    requests; ``server.learner.LearnerServerCore`` sends writes, new sessions, moved sessions and
    syncs to the leader and applies what comes back committed. The methods named ``_new_session``,
    ``_session_moved``, ``_seen``, ``_write``, ``_upgrade``, ``_sync``, ``_awaits_quorum``,
    ``_answers``, ``_session_committed``, ``_session_closed`` and ``tick`` are where the roles
    differ; ``server.read_only.ReadOnlyServerCore`` serves a member cut off from its quorum.

    With ``local`` (a member's pipeline with localSessionsEnabled, see ``enable_local_sessions``)
    new sessions are local: created, touched, expired and closed here without a txn; an ephemeral
    create of one upgrades it first (``_upgrade``) or fails with EphemeralOnLocalSession. With
    ``trace`` every txn applied is also a `TxnApplied` output (the simulator's checkers read them)."""

    def __init__(self, config: ServerConfig, now_ms: int, wall_ms: int, log: Log = lambda _m: None,
                 tree: DataTree | None = None, next_zxid: int | None = None, trace: bool = False) -> None:
        """``tree`` is the recovered database, if any; its committed sessions are tracked again
        from now, so a session whose client is gone expires after its timeout and its ephemerals go."""
        super().__init__(config, now_ms, wall_ms, log)
        self.trace = trace
        self.started_ms = now_ms
        self.tree = tree if tree is not None else DataTree()
        self.prep = Prep(self.tree, config, log)
        self.sessions = SessionTracker(config.tick_ms, config.server_id or 1, wall_ms)
        for sid, timeout in self.tree.sessions.items():
            self.sessions.add(sid, timeout, now_ms)
        self.local: LocalSessions | None = None  # local sessions (localSessionsEnabled); None: all are global
        self.queues: dict[int, deque[Proposal | QueuedRead | Forwarded]] = {}
        self._out: list[ServerOutput] = []  # what ``ready()`` hands over next, in order
        self._unapplied: deque[Proposal] = deque()  # proposed, not yet applied, in zxid order
        self._handed = 0  # how many of them ``ready()`` handed over (as `Propose`)
        self.next_zxid = next_zxid if next_zxid is not None else self.tree.last_processed_zxid + 1
        self._syncing: set[int] = set()  # sessions whose queue waits on a sync
        # a worker of a server with serverWorkers (member.workers): the zxid the member had
        # applied when the input now processed arrived; a read waits until it is applied here,
        # so that it sees every write acknowledged by any of the server's processes before it
        self.read_barrier = 0
        self.barrier_waits: deque[tuple[int, int]] = deque()  # (zxid, session) of reads held by it, in order
        self.last_container_check = now_ms
        self._unnamed = () if config.sasl_auth else ("sasl",)  # whoAmI: schemes with no provider registered
        self._my_id = config.quorum.my_id if config.quorum is not None and config.quorum.my_id else config.server_id

    def enable_local_sessions(self, upgrading: bool) -> None:
        """New sessions are local from now on (localSessionsEnabled; ``upgrading``:
        localSessionsUpgradingEnabled). A member's pipeline calls it when it is built."""
        self.local = LocalSessions(self.config.tick_ms, self.now_ms, upgrading)

    # ---- requests

    def _packet(self, conn: Connection, frame: bytes) -> None:
        if len(frame) < 8:
            raise ProtocolError(f"request header truncated ({len(frame)} bytes, a RequestHeader needs 8)")
        xid, op = REQUEST_HEADER.unpack_from(frame, 0)
        body = frame[8:]
        sid = conn.session_id
        if conn.touched_ms != self.now_ms:  # a second touch in the same ms moves nothing
            conn.touched_ms = self.now_ms
            self._seen(conn)
        if op == OpNum.AUTH:
            self._authenticated(conn, auth_packet(conn, xid, body, self.config.super_digest))
            return
        if op == OpNum.SASL:
            self._authenticated(conn, sasl_packet(conn, xid, body, self.config))
            return
        if self._enforced:
            refused = admitted(conn, xid, self._enforced)
            if refused is not None:
                self._authenticated(conn, refused)
                return
        if op not in VALID_OPS:
            self.log_peer("unknown type", conn.ip, f"received packet at server of unknown type {op} from {conn.ip}:{conn.port}")
            self._send(conn, header(xid, -1, Code.UNIMPLEMENTED))
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

    def _new_session(self, conn: Connection, sid: int, timeout: int) -> None:
        """A client asked for a new session ``sid`` (its id is chosen): create it."""
        self.sessions.add(sid, timeout, self.now_ms)
        self._propose(OpNum.CREATE_SESSION, timeout, conn, 0, sid, None)

    def _local_write(self, conn: Connection, xid: int, op: int, body: bytes) -> bool:
        """A write of a local session that its member settles (``LocalSessions.on_write``); True:
        handled, nothing more to do."""
        assert self.local is not None
        sid = conn.session_id
        verdict, timeout = self.local.on_write(sid, op, body)
        if verdict is LocalWrite.CLOSE:  # answered here, after what the session sent before
            read = QueuedRead(conn, xid, op, body, self.now_ms)
            if sid in self.queues:
                self._queue(read)
            else:
                self._run_read(read)
            return True
        if verdict is LocalWrite.REFUSED:
            self._write(conn, xid, op, body, EphemeralOnLocalSessionError())
            return True
        if verdict is LocalWrite.UPGRADED:
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
        self._send(conn, header(xid, zxid, 0))
        self._close(conn, "closeSession")

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

    # ---- per-session order

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

    def _drain_barrier(self) -> None:
        """Reads held by ``read_barrier`` (a server's worker) run once their zxid is applied."""
        waits = self.barrier_waits
        applied = self.tree.last_processed_zxid
        while waits and waits[0][0] <= applied:
            self._drain_queue(waits.popleft()[1])

    # ---- the write path

    def _write(self, conn: Connection, xid: int, op: int, body: bytes,
               ephemeral_error: ZookeeperError | None = None) -> None:
        """A write; ``ephemeral_error``: what an ephemeral create in it fails with."""
        request, error = self._decode_write(op, body, conn)
        if op == OpNum.CREATE_SESSION:
            # a client may not create sessions over an established one (ZooKeeper answers it with a
            # second ConnectResponse and no reply; zkpy refuses it with BadArguments)
            self.log_peer("createSession", conn.ip,
                          f"refusing createSession from established session 0x{long_hex(conn.session_id)} "
                          f"at {conn.ip}:{conn.port}")
            error = error or BadArgumentsError("createSession from a client")
        self._propose(op, request, conn, xid, conn.session_id, error, ephemeral_error=ephemeral_error, body=body)

    def _decode_write(self, op: int, body: bytes, origin: Connection | int) -> tuple[Any, ZookeeperError | None]:
        """The request record of a write, or a MarshallingError if it does not decode; ``origin``
        (a client's connection, or the session of a learner's request) is only formatted for the
        log line."""
        try:
            return decode_write(op, body), None
        except DECODE_ERRORS as exc:
            if isinstance(origin, Connection):
                sender, ip = f"{origin.ip}:{origin.port}", origin.ip
            else:
                sender = ip = f"learner request for 0x{long_hex(origin)}"
            self.log_peer("undecodable", ip, f"failed to decode {OP_NAMES.get(op, op)} from {sender}: {exc}")
            return None, MarshallingError()

    def _propose(self, op: int, request: Any, conn: Connection | None, xid: int, session: int,
                 error: ZookeeperError | None, auth_ids: list[Id] | None = None,
                 ephemeral_error: ZookeeperError | None = None, body: bytes | None = None) -> None:
        """``body``: the request's bytes, whose txn may be logged from them (see `prep.txn_body`)."""
        zxid = self.next_zxid
        self.next_zxid += 1
        if auth_ids is None:
            auth_ids = conn.auth if conn is not None else [SUPER]
        if error is None:
            live = self.sessions.is_live(session) or op == OpNum.CREATE_SESSION
            if self.local is not None:
                live, ephemeral_error = self.local.checks(session, live, ephemeral_error, self._my_id)
            hdr, txn, error = self.prep.prep(op, request, session, xid, auth_ids, zxid, self.wall_ms, live,
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

    # ---- the apply path (one, every role's)

    def apply_persisted(self, count: int) -> None:
        """The first ``count`` txns handed over as `Propose` are durable: apply them and answer in order."""
        if count > self._handed:
            raise AssertionError(f"apply_persisted({count}) with {self._handed} txns handed over")
        self._handed -= count
        unapplied = self._unapplied
        for _ in range(count):
            p = unapplied.popleft()
            try:
                self._applied(p.hdr, p.txn, p.subs, p)
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

    def _applied(self, hdr: TxnHeader, txn: Any, subs: list[tuple[int, Any]] | None, mine: Proposal | None) -> None:
        """Apply one committed txn and answer what it answers: the tree changes, its watch events
        go out, sessions are created or closed, then the request it answers (``_answers``: the
        txn's own `Proposal` here, a learner's forwarded request there) gets its reply and its
        session's queued reads run. ``mine``: this pipeline's own proposal of the txn, if any."""
        rc = self.tree.apply(hdr, txn, subs, self._answerable(hdr, mine))
        self.metrics.propagation_latency.add(self.wall_ms - hdr.time)
        self.prep.applied(hdr.zxid)
        if self.trace:
            self._out.append(TxnApplied(hdr, txn, self.tree.digest))
        if self.tree.events:
            self._deliver_events()
        session = hdr.clientId
        kind = hdr.type
        if kind in _SESSION_TXNS:
            if kind == _CREATE_SESSION:
                self._session_committed(session, txn.timeOut)
            else:
                self._session_closed(session)
        entry = self._answers(hdr, mine)
        if kind == _CLOSE_SESSION:
            owner = self.session_conn.pop(session, None)
            if entry is None and owner is not None:
                self._close(owner, "session expired")
        if entry is not None:
            conn = entry.conn
            assert conn is not None  # (``_answers`` names only requests a client sent)
            conn.outstanding -= 1
            op = entry.op
            if op != _CREATE_SESSION:
                # the request's own error (a learner's: not for a multi, whose results the leader
                # settled), else an error txn's code (a learner's request the leader refused)
                error = entry.error
                code = int(error.code) if error is not None and (mine is not None or op != _MULTI) \
                    else rc.err if kind == _ERROR else 0
                self._reply_write(conn, entry.xid, op, code, entry.received_ms, rc, txn)
            elif conn.state is ConnState.AWAIT_SESSION:  # a new session's createSession
                if kind == _CREATE_SESSION:
                    self._established(conn)
                    self._process_frames(conn)
                else:
                    self._close(conn, "session not created")
            elif kind != _CREATE_SESSION:  # a client's createSession over an established session
                error = entry.error
                self._reply_write(conn, entry.xid, op, int(error.code) if error is not None else 0, entry.received_ms,
                                  rc, txn)
            self._drain_queue(session)
        if self.barrier_waits:
            self._drain_barrier()

    def _answerable(self, hdr: TxnHeader, mine: Proposal | None) -> bool:
        """May ``_answers`` name a request for this txn (then its reply wants the Stat the apply
        packs)? Here: the txn is this pipeline's own client's."""
        return mine is not None and mine.conn is not None

    def _answers(self, hdr: TxnHeader, mine: Proposal | None) -> Proposal | Forwarded | None:
        """The queued request that the txn just applied answers, taken off its session's queue:
        here its own proposal, when a client sent it."""
        if mine is None or mine.conn is None:
            return None
        queue = self.queues.get(hdr.clientId)
        if queue and queue[0] is mine:
            queue.popleft()
        return mine

    def _session_committed(self, session: int, timeout_ms: int) -> None:
        """A createSession txn was applied (here the session is tracked since it was prepped)."""
        if self.local is not None:
            self.local.committed(session)

    def _session_closed(self, session: int) -> None:
        """A closeSession txn was applied."""
        self.sessions.remove(session)
        if self.local is not None:
            self.local.closed(session)

    def _reply_write(self, conn: Connection, xid: int, op: int, error: int, received_ms: int, rc: TxnResult,
                     txn: Any) -> None:
        """The reply to an applied write (``replies.write_reply``); a closeSession's closes."""
        zxid = self.tree.last_processed_zxid
        self._account(conn, xid, op, zxid, received_ms)
        self._send(conn, write_reply(xid, zxid, op, error, rc, txn))
        if op == OpNum.CLOSE_SESSION:
            self._close(conn, "closeSession")

    # ---- reads

    def _run_read(self, r: QueuedRead) -> None:
        self._answer_read(r.conn, r.xid, r.op, r.body, r.received_ms)

    def _answer_read(self, conn: Connection, xid: int, op: int, body: bytes, received_ms: int) -> None:
        if conn.closing:
            return
        zxid = self.tree.last_processed_zxid
        if op == OpNum.PING:
            self._account(conn, xid, op, zxid, received_ms)
            self._send(conn, pong(zxid))
            return
        if op == OpNum.CLOSE_SESSION:
            self._close_local(conn, xid, received_ms)
            return
        try:
            response, err = run_read(self.tree, conn, op, body, lambda payload: self._send(conn, payload),
                                     self._unnamed), 0
        except Exception as exc:  # (ZooKeeper's error codes, a malformed request; a bug is raised again)
            response = b""
            err, line = refusal(conn, op, exc)
            if line is not None:
                self.log_peer(line[0], conn.ip, line[1])
        self._account(conn, xid, op, zxid, received_ms)
        # (the frame's length and the reply header packed at once: once per read)
        self._send_framed(conn, FRAMED_REPLY_HEADER.pack(REPLY_HEADER.size + len(response), xid, zxid, err) + response)

    # ---- time passes

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
            for path in container_candidates(self.tree, self.wall_ms)[: self.config.container_max_per_minute]:
                self._propose(OpNum.DELETE_CONTAINER, path, None, 0, 0, None)

    # ---- output

    def ready(self) -> list[ServerOutput]:
        """Everything produced since the last call, in order, then an `Output` for each connection
        that has bytes to write or is closing."""
        out, self._out = self._out, []
        if self._dirty:
            out.extend(Output(conn) for conn in self._dirty)
            self._dirty.clear()
        self._handed = len(self._unapplied)
        return out

    @property
    def unapplied(self) -> int:
        """Txns proposed and not applied yet."""
        return len(self._unapplied)

    @property
    def outstanding(self) -> int:
        return sum(len(q) for q in self.queues.values())
