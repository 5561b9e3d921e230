"""One term as follower or observer: the connection to the leader, the Zab learner core's
actions (epoch files, truncation, snapshots, the log) in order, the request pipeline once
synchronised.

Actions that persist run to completion before the next one; a proposal's ACK leaves only once
the learner core has been told (``logged``) that the fsync covering it returned.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections import deque
from typing import TYPE_CHECKING

from zkpy.quorum import learner as zf
from zkpy.quorum.sync import DEFAULT_COMMITTED_LOG, LoggedTxn
from zkpy.quorum.verifier import config_string
from zkpy.runtime.persistence import Persistence
from zkpy.runtime.term import History, Term, TermEnded, log, now_ms, wall_ms
from zkpy.server.core import LEARNER, ServerCore
from zkpy.storage.epochs import ACCEPTED_EPOCH, CURRENT_EPOCH
from zkpy.storage.recovery import recover
from zkpy.storage.snapshot import parse_snapshot_stream
from zkpy.storage.truncate import truncate_to
from zkpy.storage.txnlog import decode_payload
from zkpy.tree.datatree import DataTree
from zkpy.wire.quorum import PacketType, QuorumPacket, QuorumPacketReader

if TYPE_CHECKING:
    from zkpy.runtime.peer import QuorumPeer

_TOUCH = struct.Struct(">qi")
LEARNER_CONNECT_TRIES = 5  # Learner.connectToLeader
LEARNER_CONNECT_DELAY_S = 0.1  # leaderConnectDelayDuringRetryMs default (100 ms in 3.8)


class LearnerTerm(Term):
    def __init__(self, peer: QuorumPeer, history: History, leader_sid: int, accepted: int, current: int) -> None:
        super().__init__()
        self.peer = peer
        self.role = "observer" if peer.observer else "follower"
        self.leader_sid = leader_sid
        self.tree: DataTree = history.tree
        self.committed: deque[LoggedTxn] = deque(history.committed, maxlen=DEFAULT_COMMITTED_LOG)
        cfg = peer.config
        q = peer.quorum
        self.zab = zf.Learner(peer.sid, observer=peer.observer, accepted_epoch=accepted, current_epoch=current,
                              last_logged_zxid=self.tree.last_processed_zxid, now_ms=now_ms(),
                              tick_ms=cfg.tick_ms, init_limit=q.init_limit_ticks, sync_limit=q.sync_limit_ticks)
        self.persistence = Persistence(cfg, peer.disk, peer.dirs)
        self.writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._ticker: asyncio.TimerHandle | None = None
        self._to_log: list[tuple[int, bytes]] = []
        self._out: list[bytes] = []
        self.served = False

    async def run(self) -> str:
        peer = self.peer
        loop = asyncio.get_running_loop()
        self.ended = loop.create_future()
        leader = peer.quorum.server(self.leader_sid)
        if leader is None:
            return f"leader {self.leader_sid} is not in the configuration"
        reader = await self._connect(leader.host, leader.peer_port)
        if reader is None:
            return f"could not connect to leader {self.leader_sid} at {leader.host}:{leader.peer_port}"
        self.persistence.start(loop, self._durable, peer.disk_failed)
        peer.persistence = self.persistence
        self.zab.start()
        self.run_actions()
        self._reader_task = asyncio.ensure_future(self._read(reader))
        self._tick()
        return await self.ended

    async def _connect(self, host: str, port: int) -> asyncio.StreamReader | None:
        deadline = time.monotonic() + self.peer.config.tick_ms * self.peer.quorum.init_limit_ticks / 1000
        for attempt in range(LEARNER_CONNECT_TRIES):
            try:
                timeout = max(0.1, deadline - time.monotonic())
                reader, self.writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
                log.info("server %d: connected to leader %d at %s:%d", self.peer.sid, self.leader_sid, host, port)
                return reader
            except (TimeoutError, OSError) as exc:
                log.warning("server %d: cannot connect to leader %d at %s:%d (try %d): %s", self.peer.sid,
                            self.leader_sid, host, port, attempt + 1, exc)
                if time.monotonic() + LEARNER_CONNECT_DELAY_S >= deadline:
                    break
                await asyncio.sleep(LEARNER_CONNECT_DELAY_S)
        return None

    async def _read(self, reader: asyncio.StreamReader) -> None:
        stream = QuorumPacketReader(self.peer.config.max_buffer)
        try:
            while True:
                data = await reader.read(1 << 16)
                if not data:
                    self.end("the leader closed the connection")
                    return
                stream.feed(data)
                now = now_ms()
                while (packet := stream.next()) is not None:
                    if packet.type == PacketType.SNAP:
                        self.run_actions()
                        await self._receive_snapshot(packet, stream, reader)
                        now = now_ms()
                    self.zab.step(packet, now)
                self.run_actions()
                self.peer.write_clients()
                if self.peer.core is not None:
                    self.flush()
        except asyncio.CancelledError:
            raise
        except (ConnectionError, TermEnded) as exc:
            self.end(f"connection to the leader lost: {exc}")
        except Exception as exc:  # a malformed stream or a failed action: this term is over
            log.exception("server %d: following leader %d failed", self.peer.sid, self.leader_sid)
            self.end(f"error while following: {exc}")

    async def _receive_snapshot(self, packet: QuorumPacket, stream: QuorumPacketReader,
                                reader: asyncio.StreamReader) -> None:
        buf = stream.take_rest()
        searched = 0
        t0 = time.monotonic()
        while (got := parse_snapshot_stream(buf, searched)) is None:
            searched = len(buf)
            data = await reader.read(1 << 20)
            if not data:
                raise TermEnded("the leader closed the connection during SNAP")
            buf += data
        tree, used = got
        tree.last_processed_zxid = packet.zxid
        self.tree = tree
        self.committed.clear()  # a new history: the old one's txns are no DIFF base any more
        stream.feed(buf[used:])
        log.info("server %d: snapshot 0x%x from the leader: %d znodes, %d bytes in %.2fs", self.peer.sid,
                 packet.zxid, tree.node_count(), used, time.monotonic() - t0)

    def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
        if self._reader_task is not None:
            self._reader_task.cancel()
        if self.writer is not None:
            self.writer.close()
        self.persistence.close()
        if self.peer.persistence is self.persistence:
            self.peer.persistence = None

    def _tick(self) -> None:
        now = now_ms()
        self.zab.tick(now)
        self.run_actions()
        loop = asyncio.get_running_loop()
        self._ticker = loop.call_later(max(10, min(100, self.peer.config.tick_ms // 4)) / 1000, self._tick)

    def flush(self) -> None:
        core = self.peer.core
        if core is not None:
            for f in core.forward:
                self.zab.request(f.session, f.cxid, f.op, f.body, f.auth)
            core.forward.clear()
            for session, timeout in core.revalidations:
                self.zab.revalidate(session, timeout)
            core.revalidations.clear()
        self.run_actions()
        self.peer.write_clients()

    def _send(self, packet: QuorumPacket) -> None:
        self._out.append(packet.to_bytes())

    def _log_pending(self) -> None:
        if self._to_log:
            self.persistence.log_payloads([z for z, _ in self._to_log], [d for _, d in self._to_log], self.tree)
            self._to_log = []

    def carry_over(self) -> History | None:
        """After ``close``: a learner that served hands its tree on, with every txn it logged
        applied; one that did not (its sync unfinished) makes the next term recover from disk."""
        if not self.served:
            return None
        for zxid, data in self.zab.unapplied_logged():
            hdr, txn = decode_payload(data)
            self.tree.apply(hdr, txn)
            self.committed.append(LoggedTxn(zxid, data))
        self.tree.events.clear()
        return History(self.tree, list(self.committed))

    def run_actions(self) -> None:
        peer = self.peer
        while actions := self.zab.ready():
            for a in actions:
                if not isinstance(a, zf.Log):
                    self._log_pending()
                if isinstance(a, zf.Send):
                    self._send(a.packet)
                elif isinstance(a, zf.Log):
                    self.logging.append(a.zxid)
                    self._to_log.append((a.zxid, a.data))
                elif isinstance(a, zf.Apply):
                    hdr, txn = decode_payload(a.data)
                    self.committed.append(LoggedTxn(a.zxid, a.data))
                    if peer.core is not None:
                        peer.core.set_time(now_ms(), wall_ms())
                        peer.core.apply_committed(hdr, txn)
                    else:
                        self.tree.apply(hdr, txn)
                        self.tree.events.clear()
                elif isinstance(a, zf.PingReply):
                    touches = peer.core.take_touches() if peer.core is not None else []
                    data = b"".join(_TOUCH.pack(s, t) for s, t in touches)
                    self._send(QuorumPacket(PacketType.PING, a.zxid, data, None))
                elif isinstance(a, zf.Revalidated):
                    if peer.core is not None:
                        peer.core.revalidated(a.session, a.valid)
                elif isinstance(a, zf.SyncDone):
                    if peer.core is not None:
                        peer.core.sync_done()
                elif isinstance(a, zf.SetAcceptedEpoch):
                    peer.write_epoch(ACCEPTED_EPOCH, a.epoch)
                elif isinstance(a, zf.SetCurrentEpoch):
                    peer.write_epoch(CURRENT_EPOCH, a.epoch)
                elif isinstance(a, zf.Truncate):
                    self._truncate(a.zxid)
                elif isinstance(a, zf.TakeSnapshot):
                    self.persistence.write_initial_snapshot(self.tree)
                elif isinstance(a, zf.Serve):
                    self._serve(a.epoch)
                elif isinstance(a, zf.Failed):
                    self.end(a.reason)
            self._log_pending()
        if self._out:
            if self.writer is not None and not self.writer.is_closing():
                self.writer.write(b"".join(self._out))
            self._out.clear()

    def _truncate(self, zxid: int) -> None:
        """TRUNC: cut my log after ``zxid`` and reload (ZOOKEEPER-1154: the uncommitted txns must
        leave the tree too, not only the log)."""
        peer = self.peer
        log.warning("server %d: truncating my log to 0x%x for leader %d", peer.sid, zxid, self.leader_sid)
        self.persistence.close()
        truncate_to(peer.disk, peer.dirs, zxid, log.info)
        recovered = recover(peer.disk, peer.dirs, log.info)
        self.tree = recovered.tree
        self.committed = deque(History.of(recovered).committed, maxlen=DEFAULT_COMMITTED_LOG)
        if self.tree.last_processed_zxid != zxid:
            # what held the state at zxid is gone (e.g. a snapshot named after a newer epoch's
            # (e, 0) that SNAP wrote, with no log under it): rejoin from the state recovered, so
            # that the leader sends what is missing, instead of building on a hole
            raise TermEnded(f"TRUNC to 0x{zxid:x} left the state at 0x{self.tree.last_processed_zxid:x}: rejoining")
        loop = asyncio.get_running_loop()
        self.persistence = Persistence(peer.config, peer.disk, peer.dirs)
        self.persistence.start(loop, self._durable, peer.disk_failed)
        peer.persistence = self.persistence

    def _serve(self, epoch: int) -> None:
        peer = self.peer
        log.info("server %d: synchronised with leader %d in epoch %d: serving as %s", peer.sid, self.leader_sid,
                 epoch, self.role)
        self.tree.set_config_node(config_string(peer.quorum).encode("utf-8"), 0, wall_ms())
        peer.core = peer.core_of_term = ServerCore(peer.config, now_ms(), wall_ms(), log=log.info, tree=self.tree,
                                                   role=LEARNER)
        self.served = True
        peer.mode = self.role
        assert peer.election is not None
        peer.election.update_peer_epoch(epoch)
