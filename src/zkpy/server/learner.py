"""The request pipeline of a follower or an observer (LearnerZooKeeperServer's chain).

A learner decides nothing alone: writes, new sessions and syncs go to the leader (`Forward`)
and wait in their session's queue; a session that moved here is revalidated by the leader
(`Revalidate`) before its client hears anything; committed txns come back in zxid order
(``apply_committed``, the one apply path of ``ServerCore`` with the queue-head match of
``_answers``) and answer the local client that sent them; the leader's SYNC answers the oldest
forwarded sync (``sync_done``). Global sessions are only reported alive (``report_touches``:
a `Touches` output, for the PING reply): the leader expires them. Local sessions
(localSessionsEnabled) are this learner's alone (``server.local_sessions``); an upgrade sends
their createSession to the leader ahead of the request that needs it.

With ``serverWorkers`` on a follower or an observer, this pipeline also relays its workers'
requests to the leader (``relay_request``, ``relay_revalidate``, ``touch``; ``member.workers``)
in the order they arrived, among its own: the leader's SYNCs answer the syncs in the order they
were sent, whoever sent them, and a revalidation's answer goes to whoever asked
(a `Relayed` output); answers due to a worker whose link closed go nowhere (``relay_lost``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

from zkpy.config import ServerConfig
from zkpy.errors import ZookeeperError
from zkpy.server.connection import Connection, ConnState
from zkpy.server.core import Log, ServerCore
from zkpy.server.outputs import Forward, Relayed, Revalidate, Touches
from zkpy.server.requests import Forwarded, Proposal, QueuedRead
from zkpy.server.sessions import session_password
from zkpy.tree.datatree import DataTree
from zkpy.wire.consts import OpCode
from zkpy.wire.jute import INT
from zkpy.wire.proto import Id
from zkpy.wire.txn import TxnHeader

_GONE = -1  # the link id of a worker whose link closed while the leader's answer was due


class LearnerServerCore(ServerCore):
    def __init__(self, config: ServerConfig, now_ms: int, wall_ms: int, log: Log = lambda _m: None,
                 tree: DataTree | None = None, next_zxid: int | None = None, trace: bool = False) -> None:
        super().__init__(config, now_ms, wall_ms, log, tree, next_zxid, trace)
        self._pending_revalidation: dict[int, Connection] = {}  # sessions waiting for the leader's word
        # forwarded syncs waiting for the leader's SYNC, mine and my workers' (their link ids)
        self._pending_syncs: deque[Forwarded | int] = deque()
        self._relayed_revalidations: dict[int, deque[int]] = {}  # session -> the links that asked, in order
        self._touched: dict[int, int] = {}  # sessions seen since the last report -> timeout
        if config.quorum is not None and config.quorum.local_sessions:
            self.enable_local_sessions(config.quorum.local_sessions_upgrading)

    # ---- where a learner differs

    def _new_session(self, conn: Connection, sid: int, timeout: int) -> None:
        self._touched[sid] = timeout
        self._forward(conn, 0, OpCode.CREATE_SESSION, INT.pack(timeout))

    def _session_moved(self, conn: Connection, sid: int, passwd: bytes | None, timeout: int) -> bool:
        """The leader knows whether the session lives (Learner.validateSession); a wrong
        password is refused here."""
        if passwd != session_password(sid):
            return False
        conn.session_id = sid
        conn.transition(ConnState.AWAIT_SESSION)
        previous = self._pending_revalidation.get(sid)
        if previous is not None:
            self._close(previous, "client reconnected elsewhere")
        self._pending_revalidation[sid] = conn
        self._out.append(Revalidate(sid, timeout))
        return True

    def _seen(self, conn: Connection) -> None:
        if self.local is not None and self.local.touch(conn.session_id, self.now_ms):
            return
        self._touched[conn.session_id] = conn.timeout_ms

    def _write(self, conn: Connection, xid: int, op: int, body: bytes,
               ephemeral_error: ZookeeperError | None = None) -> None:
        if op == OpCode.CREATE_SESSION:
            self.log_peer("createSession", conn.ip, f"closing {conn.ip}:{conn.port}: createSession from an established session")
            self._close(conn, "createSession from a client")
            return
        # a failed upgrade's error is the client's answer; the leader still gets the request (as
        # ZooKeeper's FollowerRequestProcessor sends it) and fails it too: the session is not global
        self._forward(conn, xid, op, body, ephemeral_error)

    def _upgrade(self, sid: int, timeout: int) -> None:
        self._touched[sid] = timeout
        self._out.append(Forward(sid, 0, OpCode.CREATE_SESSION, INT.pack(timeout), ()))

    def _sync(self, read: QueuedRead) -> None:
        self._forward(read.conn, read.xid, OpCode.SYNC, read.body)

    def tick(self) -> None:
        """Only local sessions expire here: for the rest, the leader's closeSession and
        deleteContainer txns say so."""
        self._expire_local()

    # ---- the leader's answers

    def revalidated(self, session: int, valid: bool) -> None:
        """The leader's answer for a session that moved here (or to one of my workers)."""
        links = self._relayed_revalidations.get(session)
        if links:
            link = links.popleft()
            if not links:
                del self._relayed_revalidations[session]
            if link != _GONE:
                self._out.append(Relayed(link, session, valid))
            return
        conn = self._pending_revalidation.pop(session, None)
        if conn is None or conn.closing:
            return
        if not valid:
            self._refuse_session(conn, session)
            return
        self._take_over_session(conn, session)
        self._touched[session] = conn.timeout_ms
        self._established(conn)
        self._process_frames(conn)

    def _forward(self, conn: Connection, xid: int, op: int, body: bytes,
                 error: ZookeeperError | None = None) -> None:
        f = Forwarded(conn, xid, op, self.now_ms, body if op == OpCode.SYNC else b"", error=error)
        self._queue(f)
        if op == OpCode.SYNC:
            self._pending_syncs.append(f)
        self._out.append(Forward(conn.session_id, xid, op, body, tuple(conn.auth)))

    def sync_done(self) -> None:
        """The leader's SYNC for the oldest forwarded sync: answer it in its session's order."""
        if not self._pending_syncs:
            self.log("SYNC from the leader with no sync pending")
            return
        f = self._pending_syncs.popleft()
        if isinstance(f, int):
            if f != _GONE:
                self._out.append(Relayed(f, None, True))
            return
        f.done = True
        self._drain_queue(f.conn.session_id)

    # ---- my workers' requests (serverWorkers on a learner: member.workers relays them)

    def relay_request(self, link: int, session: int, cxid: int, op: int, body: bytes, auth: tuple[Id, ...]) -> None:
        """A request a worker forwarded: to the leader as it is, after what went before it. A
        sync's SYNC is the worker's (a `Relayed` output), in the order the syncs were sent."""
        if op == OpCode.SYNC:
            self._pending_syncs.append(link)
        self._out.append(Forward(session, cxid, op, body, auth))

    def relay_revalidate(self, link: int, session: int, timeout_ms: int) -> None:
        """A session moved to a worker: the leader says whether it lives (a `Relayed` output)."""
        self._relayed_revalidations.setdefault(session, deque()).append(link)
        self._out.append(Revalidate(session, timeout_ms))

    def touch(self, touches: Iterable[tuple[int, int]]) -> None:
        """Sessions a worker saw alive: reported with mine in the next PING reply."""
        for session, timeout in touches:
            self._touched[session] = timeout

    def relay_lost(self, link: int) -> None:
        """A worker's link closed: the leader's answers for it are dropped (a worker started
        again under the same link id must not take them for answers to its own requests)."""
        self._pending_syncs = deque(_GONE if f == link and isinstance(f, int) else f for f in self._pending_syncs)
        for links in self._relayed_revalidations.values():
            for i, owner in enumerate(links):
                if owner == link:
                    links[i] = _GONE
        self._out = [o for o in self._out if not (isinstance(o, Relayed) and o.link == link)]

    def apply_committed(self, hdr: TxnHeader, txn: Any) -> None:
        """A committed txn, in zxid order; answer the local client that sent it, if any."""
        self._applied(hdr, txn, None, None)

    def _answerable(self, hdr: TxnHeader, mine: Proposal | None) -> bool:
        """Requests of the txn's session wait here (their head may be the one it answers)."""
        return hdr.clientId in self.queues

    def _answers(self, hdr: TxnHeader, mine: Proposal | None) -> Forwarded | None:
        """The forwarded request at the head of the txn's session queue, if the txn is its answer
        (an upgrade's createSession, or another server's client's txn, answers none here)."""
        queue = self.queues.get(hdr.clientId)
        head = queue[0] if queue else None
        if (not isinstance(head, Forwarded) or head.op == OpCode.SYNC or head.xid != hdr.cxid
                or (hdr.type == OpCode.CREATE_SESSION) != (head.op == OpCode.CREATE_SESSION)):
            return None
        assert queue is not None
        queue.popleft()
        return head

    def _session_committed(self, session: int, timeout_ms: int) -> None:
        """A learner tracks a global session once its createSession is applied."""
        self.sessions.add(session, timeout_ms, self.now_ms)
        super()._session_committed(session, timeout_ms)

    def _session_closed(self, session: int) -> None:
        super()._session_closed(session)
        self._touched.pop(session, None)

    def report_touches(self, ping: int = -1) -> None:
        """Report the sessions seen since the last report (a `Touches` output, even if empty), for
        the reply to the leader's PING ``ping``."""
        self._out.append(Touches(ping, tuple(self._touched.items())))
        self._touched.clear()
