"""The request pipeline of a leader (LeaderZooKeeperServer's chain).

Besides its own clients' requests, a leader preps what its learners forward
(``learner_request``), keeps their sessions alive (``touch``) and says whether a session that
moved to a learner lives (``revalidate``). With zkpy.quorumSync, a local sync also waits until
a quorum confirmed the leadership (`CheckQuorum`, answered by ``quorum_confirmed``), so that
a read after it is linearizable.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from zkpy.config import ServerConfig
from zkpy.ids import long_hex
from zkpy.server.core import Log, ServerCore
from zkpy.server.outputs import CheckQuorum
from zkpy.server.requests import QueuedRead
from zkpy.tree.datatree import DataTree
from zkpy.wire.consts import OpCode
from zkpy.wire.jute import INT
from zkpy.wire.proto import Id


class LeaderServerCore(ServerCore):
    def __init__(self, config: ServerConfig, now_ms: int, wall_ms: int, log: Log = lambda _m: None,
                 tree: DataTree | None = None, next_zxid: int | None = None, trace: bool = False) -> None:
        super().__init__(config, now_ms, wall_ms, log, tree, next_zxid, trace)
        quorum = self.config.quorum
        self.quorum_sync = quorum is not None and quorum.quorum_sync
        self._quorum_waiting: dict[int, int] = {}  # token -> the session whose sync waits
        self._next_token = 1
        if config.quorum is not None and config.quorum.local_sessions:
            self.enable_local_sessions(config.quorum.local_sessions_upgrading)

    def _sync(self, read: QueuedRead) -> None:
        if self.quorum_sync:
            read.quorum_token = token = self._next_token
            self._next_token += 1
            self._quorum_waiting[token] = read.conn.session_id
            self._out.append(CheckQuorum(token))
        super()._sync(read)

    def _awaits_quorum(self, read: QueuedRead) -> bool:
        return read.quorum_token in self._quorum_waiting

    def learner_request(self, session: int, cxid: int, op: int, body: bytes, auth: tuple[Id, ...]) -> None:
        """A request a learner forwarded: prep it like a local one; the learner answers its client.
        (A forwarded sync never comes here: the leader's Zab core answers it, `LearnerSync`.)"""
        if op == OpCode.CREATE_SESSION:
            try:
                (timeout,) = INT.unpack_from(body, 0)
            except struct.error:
                self.log(f"createSession for 0x{long_hex(session)} without a timeout: ignored")
                return
            self.sessions.add(session, timeout, self.now_ms)
            self._propose(OpCode.CREATE_SESSION, timeout, None, cxid, session, None, list(auth))
            return
        self.sessions.touch(session, self.now_ms)
        request, error = self._decode_write(op, body, session)
        self._propose(op, request, None, cxid, session, error, list(auth), body=body)

    def quorum_confirmed(self, token: int) -> None:
        """The quorum check for a local sync passed."""
        session = self._quorum_waiting.pop(token, None)
        if session is not None:
            self._drain_queue(session)

    def touch(self, touches: Iterable[tuple[int, int]]) -> None:
        """Sessions a learner saw alive."""
        for session, timeout in touches:
            self.sessions.touch(session, self.now_ms, timeout)

    def revalidate(self, session: int, timeout_ms: int) -> bool:
        """Does ``session`` still live (it moved to a learner)? A live one is touched."""
        return self.sessions.touch(session, self.now_ms, timeout_ms)
