"""One term as leader: the quorum port, the Zab leader core's actions, the request pipeline.

Learners connect to the quorum port; every packet that arrived on a connection is stepped
through ``zkpy.quorum.leader.Leader`` before its actions run, so each learner gets one write per
loop turn. Proposals are serialized once, logged as they are and sent to the voters; the leader
counts its own ack only after the fsync that covers it.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import TYPE_CHECKING

from zkpy.ids import make_zxid
from zkpy.quorum import leader as zl
from zkpy.quorum.sync import CommittedLog, LoggedTxn
from zkpy.quorum.verifier import config_string
from zkpy.runtime.persistence import Persistence
from zkpy.runtime.term import History, Term, log, now_ms, wall_ms
from zkpy.server.core import LEADER, ServerCore
from zkpy.storage.epochs import ACCEPTED_EPOCH, CURRENT_EPOCH
from zkpy.storage.snapshot import snapshot_stream
from zkpy.storage.txnlog import encode_payload
from zkpy.tree.datatree import DataTree
from zkpy.wire.quorum import QuorumPacketReader

if TYPE_CHECKING:
    from zkpy.runtime.peer import QuorumPeer


class LearnerLink(asyncio.Protocol):
    """One learner's connection to my quorum port."""

    def __init__(self, term: LeaderTerm) -> None:
        self.term = term
        self.cid = next(term.cids)
        self.stream = QuorumPacketReader(term.peer.config.max_buffer)
        self.transport: asyncio.Transport | None = None
        self.out: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.term.links[self.cid] = self
        self.term.zab.connected(self.cid, now_ms())
        log.info("learner connection %d from %s", self.cid, transport.get_extra_info("peername"))

    def data_received(self, data: bytes) -> None:
        self.stream.feed(data)
        term = self.term
        try:
            now = now_ms()
            while (packet := self.stream.next()) is not None:
                term.zab.step(self.cid, packet, now)
            term.run_actions()  # once for everything that arrived: one write per learner
        except Exception as exc:  # a malformed stream: drop this learner only
            log.warning("learner connection %d: %s", self.cid, exc)
            term.zab.disconnected(self.cid)
            if self.transport is not None:
                self.transport.abort()
            return
        term.peer.schedule_flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self.term.links.pop(self.cid, None)
        self.term.zab.disconnected(self.cid)
        log.info("learner connection %d closed", self.cid)

    def queue(self, data: bytes) -> None:
        self.out.append(data)

    def flush(self) -> None:
        """One write for every packet queued in this turn."""
        if self.out:
            if self.transport is not None and not self.transport.is_closing():
                self.transport.write(b"".join(self.out))
            self.out.clear()


class LeaderTerm(Term):
    role = "leader"

    def __init__(self, peer: QuorumPeer, history: History, accepted: int, current: int) -> None:
        super().__init__()
        self.peer = peer
        self.tree: DataTree = history.tree
        cfg = peer.config
        q = peer.quorum
        committed = CommittedLog(history.committed)
        self.zab = zl.Leader(peer.sid, peer.verifier, accepted_epoch=accepted, current_epoch=current,
                             last_zxid=self.tree.last_processed_zxid, committed=committed, now_ms=now_ms(),
                             tick_ms=cfg.tick_ms, init_limit=q.init_limit_ticks, sync_limit=q.sync_limit_ticks,
                             config_data=config_string(q).encode("utf-8"), quorum_sync=q.quorum_sync)
        self.links: dict[int, LearnerLink] = {}
        self.cids = itertools.count(1)
        self.persistence = Persistence(cfg, peer.disk, peer.dirs)
        self.handed = 0
        self._server: asyncio.base_events.Server | None = None
        self._ticker: asyncio.TimerHandle | None = None

    async def run(self) -> str:
        peer = self.peer
        loop = asyncio.get_running_loop()
        self.ended = loop.create_future()
        me = peer.quorum.me
        assert me is not None
        host = "0.0.0.0" if peer.quorum.quorum_listen_on_all_ips else me.host
        self.persistence.start(loop, self._durable, peer.disk_failed)
        peer.persistence = self.persistence
        self._server = await loop.create_server(lambda: LearnerLink(self), host, me.peer_port, reuse_address=True)
        log.info("server %d LEADING: quorum port %s:%d", peer.sid, host, me.peer_port)
        self.run_actions()
        self._tick()
        return await self.ended

    def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
        self.zab.stop("term closed")
        for link in list(self.links.values()):
            if link.transport is not None:
                link.transport.abort()
        if self._server is not None:
            self._server.close()
        self.persistence.close()
        if self.peer.persistence is self.persistence:
            self.peer.persistence = None

    def carry_over(self) -> History:
        """After ``close``: every proposal handed to the log is on disk; apply those never committed."""
        core = self.peer.core_of_term if self.peer.core_of_term is not None else None
        committed = list(self.zab.committed)
        if core is not None:
            for p in core.proposals[:self.handed]:
                self.tree.apply(p.hdr, p.txn)
                committed.append(LoggedTxn(p.hdr.zxid, encode_payload(p.hdr, p.txn)))
            self.tree.events.clear()
        return History(self.tree, committed)

    def _tick(self) -> None:
        now = now_ms()
        self.zab.tick(now)
        core = self.peer.core
        if core is not None:
            core.set_time(now, wall_ms())
            core.tick()
        self.flush()
        loop = asyncio.get_running_loop()
        self._ticker = loop.call_later(max(10, min(100, self.peer.config.tick_ms // 4)) / 1000, self._tick)

    def flush(self) -> None:
        """New proposals to the log and the voters, then the cores' actions, then client output."""
        self._propose_new()
        core = self.peer.core
        if core is not None and core.quorum_checks:
            for token in core.quorum_checks:
                self.zab.check_quorum(token)
            core.quorum_checks.clear()
        self.run_actions()
        self.peer.write_clients()

    def _propose_new(self) -> None:
        """The core's new proposals to the log and to the voters."""
        core = self.peer.core
        if core is not None and len(core.proposals) > self.handed:
            new = core.proposals[self.handed:]
            self.handed = len(core.proposals)
            zxids = [p.hdr.zxid for p in new]
            payloads = [encode_payload(p.hdr, p.txn) for p in new]
            self.persistence.log_payloads(zxids, payloads, core.tree)
            self.logging.extend(zxids)
            for zxid, payload in zip(zxids, payloads):
                self.zab.propose(zxid, payload)

    def run_actions(self) -> None:
        peer = self.peer
        while actions := self.zab.ready():
            encoded: dict[int, bytes] = {}  # a packet sent to every learner is encoded once
            for a in actions:
                if isinstance(a, zl.Send):
                    link = self.links.get(a.cid)
                    if link is not None:
                        data = encoded.get(id(a.packet))
                        if data is None:
                            data = encoded[id(a.packet)] = a.packet.to_bytes()
                        if a.snapshot:
                            data += snapshot_stream(self.tree)
                        link.queue(data)
                elif isinstance(a, zl.Commit):
                    core = peer.core
                    assert core is not None
                    core.set_time(now_ms(), wall_ms())
                    core.apply_persisted(a.count)
                    self.handed -= a.count
                elif isinstance(a, zl.LearnerRequest):
                    if peer.core is not None:
                        peer.core.set_time(now_ms(), wall_ms())
                        peer.core.learner_request(a.session, a.cxid, a.type, a.body, a.auth)
                        peer.schedule_flush()
                elif isinstance(a, zl.LearnerSync):
                    self._propose_new()  # the requests the learner sent before it come first
                    self.zab.learner_sync(a.cid)
                elif isinstance(a, zl.Touch):
                    if peer.core is not None:
                        peer.core.touch(a.touches)
                elif isinstance(a, zl.Revalidate):
                    valid = peer.core.revalidate(a.session, a.timeout_ms) if peer.core is not None else False
                    self.zab.revalidated(a.cid, a.session, valid)
                elif isinstance(a, zl.Close):
                    link = self.links.pop(a.cid, None)
                    log.info("dropping learner connection %d: %s", a.cid, a.reason)
                    if link is not None and link.transport is not None:
                        link.transport.close()
                elif isinstance(a, zl.SetAcceptedEpoch):
                    peer.write_epoch(ACCEPTED_EPOCH, a.epoch)
                elif isinstance(a, zl.SetCurrentEpoch):
                    peer.write_epoch(CURRENT_EPOCH, a.epoch)
                elif isinstance(a, zl.Established):
                    self._establish(a.epoch)
                elif isinstance(a, zl.QuorumConfirmed):
                    if peer.core is not None:
                        peer.core.quorum_confirmed(a.token)
                elif isinstance(a, zl.Failed):
                    self.end(a.reason)
        for link in self.links.values():
            link.flush()

    def _establish(self, epoch: int) -> None:
        peer = self.peer
        log.info("server %d: epoch %d established with a quorum: serving as leader", peer.sid, epoch)
        self.tree.last_processed_zxid = make_zxid(epoch, 0)  # as ZooKeeper's startZkServer sets it
        self.tree.set_config_node(config_string(peer.quorum).encode("utf-8"), 0, wall_ms())
        peer.core = peer.core_of_term = ServerCore(peer.config, now_ms(), wall_ms(), log=log.info, tree=self.tree,
                                                   role=LEADER, next_zxid=make_zxid(epoch, 1))
        peer.mode = "leader"
        assert peer.election is not None
        peer.election.update_peer_epoch(epoch)
