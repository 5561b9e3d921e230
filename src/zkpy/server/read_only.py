"""The request pipeline of a member that serves read-only clients (ReadOnlyZooKeeperServer's chain).

A member cut off from its quorum, with ``readonlymode.enabled``, serves its copy of the tree
to clients that asked for read-only service; what it does, as Apache ZooKeeper 3.8 does it
(with local sessions, the only setting in which 3.8 gives a read-only client a session):

* a client that did not set the readOnly flag of its ConnectRequest gets no answer: the
  connection is closed;
* a new session is local: known to this pipeline only, never logged, never committed, so no
  other server knows it and a client resuming it elsewhere hears that it expired; a session
  created before the partition (global) is not resumed here either (invalid session);
* the ConnectResponse's readOnly byte is 1;
* every write, and sync, is answered NotReadOnly (-119); closeSession ends the local session;
* reads are answered from the tree, which nothing changes while this pipeline serves, so the
  watches they set never fire here (the client sets them again wherever it goes next);
* a local session whose client is silent past its timeout is dropped (its connection closed).

Invariant: this pipeline never proposes a txn and never mutates the tree (``ready()`` holds
`Output`s only).
"""

from __future__ import annotations

from zkpy.config import ServerConfig
from zkpy.errors import Code, ZookeeperError
from zkpy.ids import long_hex
from zkpy.server.connection import Connection
from zkpy.server.core import Log, ServerCore
from zkpy.server.handshake import read_connect
from zkpy.server.requests import QueuedRead
from zkpy.server.sessions import SessionTracker
from zkpy.tree.datatree import DataTree
from zkpy.wire.consts import OpCode
from zkpy.wire.proto import ReplyHeader


class ReadOnlyServerCore(ServerCore):
    read_only = True

    def __init__(self, config: ServerConfig, now_ms: int, wall_ms: int, log: Log = lambda _m: None,
                 tree: DataTree | None = None) -> None:
        super().__init__(config, now_ms, wall_ms, log, tree)
        # the tree's (global) sessions are the quorum's to expire: only local ones are tracked here
        self.sessions = SessionTracker(config.tick_ms, config.server_id or 1, wall_ms)

    def _connect(self, conn: Connection, frame: bytes) -> None:
        _, read_only = read_connect(frame)
        if not read_only:
            self.log_peer("not read-only", conn.ip, f"refusing session request for not-read-only client "
                          f"{conn.ip}:{conn.port}: this server is read-only")
            self._close(conn, "not a read-only client")
            return
        super()._connect(conn, frame)

    def _new_session(self, conn: Connection, sid: int, timeout: int) -> None:
        """A local session: tracked here, established at once, never logged."""
        self.sessions.add(sid, timeout, self.now_ms)
        self._established(conn)

    def _write(self, conn: Connection, xid: int, op: int, body: bytes,
               ephemeral_error: ZookeeperError | None = None) -> None:
        zxid = self.tree.last_processed_zxid
        self._account(conn, xid, op, zxid, self.now_ms)
        if op == OpCode.CLOSE_SESSION:
            self.sessions.remove(conn.session_id)
            self._send(conn, ReplyHeader(xid, zxid, 0).to_bytes())
            self._close(conn, "closeSession")
            return
        self._send(conn, ReplyHeader(xid, zxid, int(Code.NOTREADONLY)).to_bytes())

    def _sync(self, read: QueuedRead) -> None:
        conn = read.conn
        zxid = self.tree.last_processed_zxid
        self._account(conn, read.xid, OpCode.SYNC, zxid, read.received_ms)
        self._send(conn, ReplyHeader(read.xid, zxid, int(Code.NOTREADONLY)).to_bytes())

    def tick(self) -> None:
        """Drop local sessions past their timeout; nothing else changes here (no container sweeps)."""
        for sid in self.sessions.expired(self.now_ms):
            self.sessions.remove(sid)
            self.log(f"expiring local session 0x{long_hex(sid)}")
            self.metrics.counters["stale_sessions_expired"] += 1
            conn = self.session_conn.get(sid)
            if conn is not None:
                self._close(conn, "session expired")
