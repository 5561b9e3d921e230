"""The shell of an ensemble member (QuorumPeer): election, then one term as leader or learner,
over and over, until stopped.

At startup the data dir is recovered (snapshot + every logged txn, committed or not). A term
that ends hands its tree on to the next (``History``): the txns it logged but never applied
are applied to it first, as ZooKeeper's fastForwardDataBase does, so the tree equals what a
recovery from disk would give without reading the disk again. A learner term that ended before
it served (its synchronisation unfinished: a snapshot not yet written, an epoch not adopted)
hands nothing on, and the next term recovers from disk. The election runs with the last zxid
of that history. The Zab cores (``zkpy.quorum.leader`` / ``learner``) decide; this
module moves their packets over the quorum port, runs their persistence actions in order, and
plugs the request pipeline (``ServerCore``) in once the term serves. When a term ends every
client connection is closed (clients move to another server with their session) and nothing of
the term's memory survives into the next.

Invariants kept here: an action that persists (an epoch file, a truncation, a snapshot) is
complete before the next action runs; a learner's ACK of a proposal leaves only after the fsync
that covers it (the core emits it only once ``logged`` says so); the leader counts its own ack
only after its own fsync.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import struct
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zkpy.config import LearnerType, ServerConfig
from zkpy.ids import make_zxid, zxid_epoch
from zkpy.quorum import leader as zl
from zkpy.quorum import learner as zf
from zkpy.quorum.sync import DEFAULT_COMMITTED_LOG, CommittedLog, LoggedTxn
from zkpy.quorum.verifier import QuorumMaj, config_string
from zkpy.runtime.election_net import ElectionService
from zkpy.runtime.osdisk import OsDisk
from zkpy.runtime.persistence import Persistence
from zkpy.runtime.server import ClientProtocol, DiskFailure
from zkpy.server.core import LEADER, LEARNER, ServerCore
from zkpy.storage.disk import FaultPlan
from zkpy.storage.epochs import (
    ACCEPTED_EPOCH,
    CURRENT_EPOCH,
    TMP_SUFFIX,
    load_epochs,
    read_epoch,
    write_epoch,
)
from zkpy.storage.files import DataDirs
from zkpy.storage.recovery import Recovered, recover
from zkpy.storage.snapshot import parse_snapshot_stream, snapshot_stream
from zkpy.storage.truncate import truncate_to
from zkpy.storage.txnlog import decode_payload, encode_payload
from zkpy.tree.datatree import DataTree
from zkpy.wire.quorum import PacketType, QuorumPacket, read_quorum_packet

log = logging.getLogger("zkpy.quorum")

_TOUCH = struct.Struct(">qi")
LEARNER_CONNECT_TRIES = 5  # Learner.connectToLeader
LEARNER_CONNECT_DELAY_S = 0.1  # leaderConnectDelayDuringRetryMs default (100 ms in 3.8)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class History:
    """What one term hands the next: the tree (every logged txn applied) and its recent txns,
    a new leader's committed log."""

    tree: DataTree
    committed: list[LoggedTxn]

    @classmethod
    def of(cls, recovered: Recovered) -> History:
        return cls(recovered.tree, [LoggedTxn(h.zxid, encode_payload(h, t)) for h, t in recovered.replayed_tail])


class TermEnded(Exception):
    """The current term is over (the reason says why); the peer goes back to election."""


class QuorumPeer:
    """An ensemble member: client port always open, serving only while a term is established."""

    def __init__(self, config: ServerConfig, faults: FaultPlan | None = None) -> None:
        assert config.quorum is not None and config.quorum.my_id is not None
        self.config = config
        self.quorum = config.quorum
        self.sid = int(self.quorum.my_id)  # type: ignore[arg-type]
        me = self.quorum.me
        self.observer = me is not None and me.role is LearnerType.OBSERVER
        self.verifier = QuorumMaj.of([s.sid for s in self.quorum.participants],
                                     [s.sid for s in self.quorum.observers])
        self.disk = OsDisk(faults, config.force_sync)
        self.dirs = DataDirs.of(config.data_dir, config.data_log_dir)
        # what ClientProtocol and the four-letter words read
        self.core: ServerCore | None = None  # the core serving clients (None between terms)
        self.core_of_term: ServerCore | None = None  # the current term's core, also once it stopped serving
        self.mode = "looking"
        self.persistence: Persistence | None = None
        self.protocols: dict[int, ClientProtocol] = {}
        self.per_ip: dict[str, int] = {}
        self.conn_ids = itertools.count(1)
        self.listen_backlog = 1024
        self.trace_mask = 306
        self.loop: asyncio.AbstractEventLoop | None = None
        self.failure: BaseException | None = None
        self.stopped = asyncio.Event()
        self.election: ElectionService | None = None
        self.term: LeaderTerm | LearnerTerm | None = None
        self._server: asyncio.base_events.Server | None = None
        self._flush_scheduled = False

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    # ---- what ClientProtocol calls ----

    def schedule_flush(self) -> None:
        if not self._flush_scheduled and self.loop is not None:
            self._flush_scheduled = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        self._flush_scheduled = False
        if self.term is not None:
            self.term.flush()

    def write_clients(self) -> None:
        core = self.core
        if core is None:
            return
        for conn in core.take_dirty():
            proto = self.protocols.get(conn.conn_id)
            if proto is not None:
                proto.flush()

    def close_clients(self) -> None:
        for proto in list(self.protocols.values()):
            if proto.transport is not None:
                proto.transport.close()
        self.core = None

    # ---- life cycle ----

    async def run(self, stop: asyncio.Event) -> None:
        self.loop = asyncio.get_running_loop()
        history = self._recover()
        epochs = load_epochs(self.disk, self.dirs.snap_dir, history.tree.last_processed_zxid, log.info)
        self.election = ElectionService(self.config, last_zxid=history.tree.last_processed_zxid,
                                        current_epoch=epochs.current, cnx_timeout_ms=self.quorum.cnx_timeout_ms)
        await self.election.start()
        self._server = await self.loop.create_server(
            lambda: ClientProtocol(self), self.config.client_port_address, self.config.client_port,
            reuse_address=True, backlog=self.listen_backlog)
        log.info("server %d: client port %s:%d", self.sid, self.config.client_port_address, self.port)
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set() and self.failure is None:
                carried = await self._one_term(history, stopping)
                if stop.is_set() or self.failure is not None:
                    break
                history = carried if carried is not None else self._recover()
        finally:
            stopping.cancel()
            self.close_clients()
            if self.election is not None:
                await self.election.close()
            if self._server is not None:
                self._server.close()
                await self._server.wait_closed()
            log.info("server %d shut down", self.sid)
        if self.failure is not None:
            raise DiskFailure(str(self.failure)) from self.failure

    def _recover(self) -> History:
        for directory in (self.dirs.snap_dir, self.dirs.log_dir):
            self.disk.makedirs(directory)
        gc.disable()
        try:
            recovered = recover(self.disk, self.dirs, log.info)
            unadopted = self._unadopted_epoch(recovered.tree.last_processed_zxid)
            if unadopted is not None:
                recovered = recover(self.disk, self.dirs, log.info)
        finally:
            gc.enable()
        if recovered.fresh:
            p = Persistence(self.config, self.disk, self.dirs)
            p.write_initial_snapshot(recovered.tree)
            p.close()
        return History.of(recovered)

    def _unadopted_epoch(self, last_zxid: int) -> int | None:
        """Cut off txns of an epoch whose NEWLEADER this server never acknowledged.

        A learner logs the leader's history before it writes currentEpoch and acks NEWLEADER
        (so that the ack means "on disk"); a term that ends in between leaves txns of an epoch
        newer than currentEpoch. None of them was acknowledged (proposal acks follow the
        NEWLEADER ack), so dropping them loses nothing, and the next leader sends them again.
        ZooKeeper refuses to start instead. Returns the epoch dropped, or None."""
        current = read_epoch(self.disk, self.dirs.snap_dir, CURRENT_EPOCH)
        pending = read_epoch(self.disk, self.dirs.snap_dir, CURRENT_EPOCH + TMP_SUFFIX)
        epoch = zxid_epoch(last_zxid)
        if current is None or current >= epoch or (pending is not None and pending >= epoch):
            return None
        keep = make_zxid(current + 1, 0) - 1
        log.warning("server %d: the log holds txns up to 0x%x of epoch %d, newer than my current epoch %d "
                    "(a synchronisation ended before its NEWLEADER ack): dropping the txns after 0x%x",
                    self.sid, last_zxid, epoch, current, keep)
        truncate_to(self.disk, self.dirs, keep, log.info)
        return epoch

    async def _one_term(self, history: History, stopping: asyncio.Future[Any]) -> History | None:
        """Elect, then run one term; the history for the next term, or None to recover from disk."""
        assert self.election is not None
        tree = history.tree
        epochs = load_epochs(self.disk, self.dirs.snap_dir, tree.last_processed_zxid, log.info)
        self.mode = "looking"
        electing = asyncio.ensure_future(self.election.elect(tree.last_processed_zxid, epochs.current))
        await asyncio.wait([electing, stopping], return_when=asyncio.FIRST_COMPLETED)
        if not electing.done():
            electing.cancel()
            return None
        decision = electing.result()
        log.info("server %d: election decided: leader %d, I am %s", self.sid, decision.leader, decision.state.name)
        term: LeaderTerm | LearnerTerm
        if decision.leader == self.sid:
            term = LeaderTerm(self, history, epochs.accepted, epochs.current)
        else:
            term = LearnerTerm(self, history, decision.leader, epochs.accepted, epochs.current)
        self.term = term
        self.core_of_term = None
        running = asyncio.ensure_future(term.run())
        crashed = False
        try:
            await asyncio.wait([running, stopping], return_when=asyncio.FIRST_COMPLETED)
            if running.done():
                exc = running.exception()
                crashed = exc is not None
                reason = running.result() if exc is None else f"{type(exc).__name__}: {exc}"
                if exc is not None and not isinstance(exc, (OSError, TermEnded)):
                    log.error("server %d: %s term failed", self.sid, term.role, exc_info=exc)
                log.warning("server %d: %s term ended: %s", self.sid, term.role, reason)
            else:
                running.cancel()
                try:
                    await running
                except (asyncio.CancelledError, TermEnded):
                    pass
        finally:
            term.close()
            self.term = None
            self.close_clients()
            self.mode = "looking"
        # a term that broke off with an exception may have left its tree half-way: start from disk
        return term.carry_over() if self.failure is None and not crashed else None

    def disk_failed(self, exc: BaseException) -> None:
        """Fail-stop, as standalone: nothing unlogged is ever acknowledged."""
        self.failure = exc
        log.critical("cannot write the txn log (%s): stopping", exc)
        for proto in list(self.protocols.values()):
            if proto.transport is not None:
                proto.transport.abort()
        if self.term is not None:
            self.term.end("disk failure")

    def write_epoch(self, name: str, value: int) -> None:
        write_epoch(self.disk, self.dirs.snap_dir, name, value)


# ---------------------------------------------------------------- packet streams


class PacketStream:
    """Incremental QuorumPacket reader for one quorum connection (records back to back)."""

    def __init__(self, max_buffer: int) -> None:
        self.buf = bytearray()
        self.pos = 0
        self.max_buffer = max_buffer

    def feed(self, data: bytes) -> None:
        if self.pos > 65536 and self.pos * 2 > len(self.buf):
            del self.buf[:self.pos]
            self.pos = 0
        self.buf += data

    def next(self) -> QuorumPacket | None:
        got = read_quorum_packet(self.buf, self.pos, self.max_buffer)
        if got is None:
            return None
        packet, self.pos = got
        return packet

    def take_rest(self) -> bytes:
        rest = bytes(self.buf[self.pos:])
        self.buf = bytearray()
        self.pos = 0
        return rest


# ---------------------------------------------------------------- leader


class LearnerLink(asyncio.Protocol):
    """One learner's connection to my quorum port."""

    def __init__(self, term: LeaderTerm) -> None:
        self.term = term
        self.cid = next(term.cids)
        self.stream = PacketStream(term.peer.config.max_buffer)
        self.transport: asyncio.Transport | None = None
        self.out: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.term.links[self.cid] = self
        self.term.zab.connected(self.cid, _now_ms())
        log.info("learner connection %d from %s", self.cid, transport.get_extra_info("peername"))

    def data_received(self, data: bytes) -> None:
        self.stream.feed(data)
        term = self.term
        try:
            now = _now_ms()
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


class LeaderTerm:
    role = "leader"

    def __init__(self, peer: QuorumPeer, history: History, accepted: int, current: int) -> None:
        self.peer = peer
        self.tree: DataTree = history.tree
        cfg = peer.config
        q = peer.quorum
        committed = CommittedLog(history.committed)
        self.zab = zl.Leader(peer.sid, peer.verifier, accepted_epoch=accepted, current_epoch=current,
                             last_zxid=self.tree.last_processed_zxid, committed=committed, now_ms=_now_ms(),
                             tick_ms=cfg.tick_ms, init_limit=q.init_limit_ticks, sync_limit=q.sync_limit_ticks,
                             config_data=config_string(q).encode("utf-8"), quorum_sync=q.quorum_sync)
        self.links: dict[int, LearnerLink] = {}
        self.cids = itertools.count(1)
        self.persistence = Persistence(cfg, peer.disk, peer.dirs)
        self.logging: deque[int] = deque()  # zxids handed to the fsync worker, oldest first
        self.handed = 0
        self.ended: asyncio.Future[str] | None = None
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

    def end(self, reason: str) -> None:
        if self.ended is not None and not self.ended.done():
            self.ended.set_result(reason)

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
        now = _now_ms()
        self.zab.tick(now)
        core = self.peer.core
        if core is not None:
            core.set_time(now, _wall_ms())
            core.tick()
        self.flush()
        loop = asyncio.get_running_loop()
        self._ticker = loop.call_later(max(10, min(100, self.peer.config.tick_ms // 4)) / 1000, self._tick)

    def _durable(self, count: int) -> None:
        last = -1
        for _ in range(count):
            last = self.logging.popleft()
        if last >= 0:
            self.zab.logged(last)
            self.run_actions()
            self.peer.write_clients()

    def flush(self) -> None:
        """New proposals to the log and the voters, then the cores' actions, then client output."""
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
        if core is not None and core.quorum_checks:
            for token in core.quorum_checks:
                self.zab.check_quorum(token)
            core.quorum_checks.clear()
        self.run_actions()
        self.peer.write_clients()

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
                    core.set_time(_now_ms(), _wall_ms())
                    core.apply_persisted(a.count)
                    self.handed -= a.count
                elif isinstance(a, zl.LearnerRequest):
                    if peer.core is not None:
                        peer.core.set_time(_now_ms(), _wall_ms())
                        peer.core.learner_request(a.session, a.cxid, a.type, a.body, a.auth)
                        peer.schedule_flush()
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
        self.tree.set_config_node(config_string(peer.quorum).encode("utf-8"), 0, _wall_ms())
        peer.core = peer.core_of_term = ServerCore(peer.config, _now_ms(), _wall_ms(), log=log.info, tree=self.tree,
                                                   role=LEADER, next_zxid=make_zxid(epoch, 1))
        peer.mode = "leader"
        assert peer.election is not None
        peer.election.update_peer_epoch(epoch)


# ---------------------------------------------------------------- learner


class LearnerTerm:
    def __init__(self, peer: QuorumPeer, history: History, leader_sid: int, accepted: int, current: int) -> None:
        self.peer = peer
        self.role = "observer" if peer.observer else "follower"
        self.leader_sid = leader_sid
        self.tree: DataTree = history.tree
        self.committed: deque[LoggedTxn] = deque(history.committed, maxlen=DEFAULT_COMMITTED_LOG)
        cfg = peer.config
        q = peer.quorum
        self.zab = zf.Learner(peer.sid, observer=peer.observer, accepted_epoch=accepted, current_epoch=current,
                              last_logged_zxid=self.tree.last_processed_zxid, now_ms=_now_ms(),
                              tick_ms=cfg.tick_ms, init_limit=q.init_limit_ticks, sync_limit=q.sync_limit_ticks)
        self.persistence = Persistence(cfg, peer.disk, peer.dirs)
        self.logging: deque[int] = deque()
        self.ended: asyncio.Future[str] | None = None
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
        stream = PacketStream(self.peer.config.max_buffer)
        try:
            while True:
                data = await reader.read(1 << 16)
                if not data:
                    self.end("the leader closed the connection")
                    return
                stream.feed(data)
                now = _now_ms()
                while (packet := stream.next()) is not None:
                    if packet.type == PacketType.SNAP:
                        self.run_actions()
                        await self._receive_snapshot(packet, stream, reader)
                        now = _now_ms()
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

    async def _receive_snapshot(self, packet: QuorumPacket, stream: PacketStream,
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

    def end(self, reason: str) -> None:
        if self.ended is not None and not self.ended.done():
            self.ended.set_result(reason)

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
        now = _now_ms()
        self.zab.tick(now)
        self.run_actions()
        loop = asyncio.get_running_loop()
        self._ticker = loop.call_later(max(10, min(100, self.peer.config.tick_ms // 4)) / 1000, self._tick)

    def _durable(self, count: int) -> None:
        last = -1
        for _ in range(count):
            last = self.logging.popleft()
        if last >= 0:
            self.zab.logged(last)
            self.run_actions()
            self.peer.write_clients()

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
                        peer.core.set_time(_now_ms(), _wall_ms())
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
        self.tree.set_config_node(config_string(peer.quorum).encode("utf-8"), 0, _wall_ms())
        peer.core = peer.core_of_term = ServerCore(peer.config, _now_ms(), _wall_ms(), log=log.info, tree=self.tree,
                                                   role=LEARNER)
        self.served = True
        peer.mode = self.role
        assert peer.election is not None
        peer.election.update_peer_epoch(epoch)


async def serve_quorum(config: ServerConfig, stop: asyncio.Event, faults: FaultPlan | None = None,
                       on_ready: Callable[[QuorumPeer], None] | None = None) -> None:
    """Run an ensemble member until ``stop`` is set; DiskFailure if its log could not be written."""
    peer = QuorumPeer(config, faults)
    if on_ready is not None:
        on_ready(peer)
    await peer.run(stop)
