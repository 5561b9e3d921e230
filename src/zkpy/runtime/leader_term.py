"""One term as leader, on sockets: the quorum port, the timers, the fsync worker; everything else
is ``member.leading.LeadingCore``'s.

Every packet that arrived on a learner's connection is handed to the core before its effects
run, so each learner gets one write per loop turn.

With ``serverWorkers`` = N > 1 the leader serves its client port from N processes while its
term serves (``runtime.term``): its workers' forwarded requests, syncs, revalidations and
session touches go into the leader's pipeline as its learners' do (``member.workers``).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import cast

from zkpy.member import effects as fx
from zkpy.member.leading import LeadingCore
from zkpy.member.quorum_auth import QuorumAuthServer, Verdict
from zkpy.ratelimit import LogLimiter
from zkpy.runtime.clock import now_ms
from zkpy.runtime.quorum_auth import new_auth_server
from zkpy.runtime.term import Term, TermHost, log


class LearnerLink(asyncio.Protocol):
    """One learner's connection to my quorum port."""

    def __init__(self, term: LeaderTerm) -> None:
        self.term = term
        self.cid = next(term.cids)
        self.transport: asyncio.Transport | None = None
        self.host = "?"
        sasl = term.host.config.quorum_sasl
        self.auth: QuorumAuthServer | None = new_auth_server(sasl) if sasl is not None else None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        term = self.term
        term.links[self.cid] = self
        term._time()
        term.core.link_connected(self.cid)
        peer = transport.get_extra_info("peername")
        self.host = peer[0] if peer else "?"
        term.log_peer(log.info, "connected", self.host, f"learner connection {self.cid} from {peer}")

    def data_received(self, data: bytes) -> None:
        term = self.term
        if self.auth is not None:
            data = self._check(data)
            if not data:
                return
        try:
            term._time()
            term.core.link_data(self.cid, data)
            term.pump()  # once for everything that arrived: one write per learner
        except Exception as exc:  # a failure this learner's input caused: drop this learner only
            term.log_peer(log.warning, "failed", self.host, f"learner connection {self.cid}: {exc}")
            term.core.link_lost(self.cid)
            if self.transport is not None:
                self.transport.abort()

    def _check(self, data: bytes) -> bytes:
        """Quorum SASL before Zab: what of ``data`` is Zab (nothing until the learner has passed)."""
        auth = self.auth
        assert auth is not None and self.transport is not None
        out = auth.receive(data)
        if out:
            self.transport.write(out)
        if auth.verdict is Verdict.PENDING:
            return b""
        self.auth = None
        if auth.verdict is Verdict.REFUSED:
            self.term.log_peer(log.warning, "quorum auth", self.host,
                               f"learner connection {self.cid} refused: {auth.reason}")
            self.transport.close()
            return b""
        if auth.user is None:
            self.term.log_peer(log.warning, "unauthenticated", self.host,
                               f"learner connection {self.cid} kept without quorum SASL ({auth.reason}; "
                               "quorum.auth.serverRequireSasl=false)")
        return auth.leftover

    def connection_lost(self, exc: Exception | None) -> None:
        term = self.term
        if term.links.get(self.cid) is self:
            del term.links[self.cid]
            term.core.link_lost(self.cid)
        term.log_peer(log.info, "closed", self.host, f"learner connection {self.cid} closed")


class LeaderTerm(Term):
    role = "leader"

    def __init__(self, host: TermHost, core: LeadingCore) -> None:
        super().__init__(host)
        self.core: LeadingCore = core
        self.links: dict[int, LearnerLink] = {}
        self.cids = itertools.count(1)
        self.limiter = LogLimiter()  # lines a peer can make us repeat (a connection to the quorum port)
        self._server: asyncio.base_events.Server | None = None
        self._ticker: asyncio.TimerHandle | None = None

    async def run(self) -> str:
        host = self.host
        loop = asyncio.get_running_loop()
        self.ended = loop.create_future()
        me = host.quorum.me
        assert me is not None
        address = host.quorum.listen_host()
        self._start_persistence()
        tls = host.quorum_tls
        self._server = await loop.create_server(lambda: LearnerLink(self), address, me.peer_port, reuse_address=True,
                                                ssl=tls.server if tls else None)
        log.info("server %d LEADING: quorum port %s:%d", host.sid, address, me.peer_port)
        self.pump()
        self._tick()
        return await self.ended

    def log_peer(self, write: Callable[[str], None], kind: str, host: str, message: str) -> None:
        """Log a line a peer can make us repeat, rate-limited per kind and host (``zkpy.ratelimit``)."""
        self.limiter.log(write, kind, host, now_ms(), message)

    def _send(self, effect: fx.Send) -> None:
        link = self.links.get(effect.link)
        if link is not None and link.transport is not None and not link.transport.is_closing():
            link.transport.write(effect.data)

    def _close_link(self, link_id: int, reason: str) -> None:
        link = self.links.pop(link_id, None)
        if link is not None and link.transport is not None:
            link.transport.close()

    def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
        self.core.stop("term closed")
        self.stop_workers()
        for link in list(self.links.values()):
            if link.transport is not None:
                link.transport.abort()
        self.links.clear()
        if self._server is not None:
            self._server.close()
        self.close_persistence()

    def _tick(self) -> None:
        self._time()
        self.core.tick()
        self.pump()
        loop = asyncio.get_running_loop()
        self._ticker = loop.call_later(self.host.config.tick_interval_ms / 1000, self._tick)
