"""The terms of a simulated server: the term cores that ``runtime`` runs (``member.leading``,
``member.learning``), driven over the simulated network and disk.

Nothing of the cores' logic is here: a term feeds its core the bytes, ticks and fsync reports
the simulated world delivers, and runs the effects it returns, in order, as ``runtime.term``
runs them on the OS (``member.effects`` states the contract both keep). The member core makes
them with ``trace=True``; their trace effects feed the checker (``checker``), the workload's
acknowledgements and the per-server history the checker compares.

Where the real shell swallows an unexpected exception (dropping a learner, or ending the
term), the simulator lets it through: a core that raises on a peer's well-formed input is a bug
to report. A SNAP carries the leader's ``history`` next to the bytes (``QConn.snap_meta``), for
the checker.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol, assert_never

from zkpy.config import ServerConfig
from zkpy.ids import zxid_epoch
from zkpy.member import effects as fx
from zkpy.member.datadir import truncate_data_dir
from zkpy.member.leading import LeadingCore
from zkpy.member.learning import LearningCore
from zkpy.member.peer import PeerCore
from zkpy.member.workers import WorkerHub, snapshot_packet
from zkpy.quorum import leader as zl
from zkpy.quorum import learner as zf
from zkpy.quorum.verifier import QuorumVerifier
from zkpy.server.connection import Connection
from zkpy.server.core import ServerCore
from zkpy.storage.files import DataDirs
from zkpy.storage.recovery import Recovered
from zkpy.tree.datatree import DataTree
from zkpy.wire.consts import OpCode
from zkpy.wire.proto import Id
from zkpy.wire.quorum import PacketType, QuorumPacket

from .checker import Checker
from .config import SimConfig
from .disk import SimDisk, SimLog
from .network import Network, QConn
from .workers import SimWorker
from .workload import Workload

_MAY_CREATE_EPHEMERALS = frozenset({OpCode.CREATE, OpCode.CREATE2, OpCode.MULTI})


class Ensemble(Protocol):
    """What a term uses of the ensemble around its server (``cluster.Cluster``)."""

    @property
    def config(self) -> SimConfig: ...

    @property
    def verifier(self) -> QuorumVerifier: ...

    @property
    def net(self) -> Network: ...

    @property
    def checker(self) -> Checker: ...

    @property
    def workload(self) -> Workload: ...

    @property
    def stats(self) -> Counter[str]: ...

    @property
    def rng(self) -> random.Random: ...

    def trace_event(self, sid: int, what: str, detail: object) -> None: ...

    def packet_received(self, node: Peer, peer: int, packet: QuorumPacket) -> None: ...

    def packet_sent(self, node: Peer, peer: int, packet: QuorumPacket) -> None: ...


class Peer(Protocol):
    """What a term uses of the server it runs in (``node.SimNode``): the process, its data dir,
    its member core, and the history the checker follows."""

    history: list[int]
    sid: int
    config: ServerConfig
    alive: bool
    incarnation: int
    term_seq: int
    disk: SimDisk
    dirs: DataDirs
    core: PeerCore | None
    term: SimLeaderTerm | SimLearnerTerm | None

    @property
    def c(self) -> Ensemble: ...

    @property
    def tree(self) -> DataTree | None: ...

    @property
    def observer(self) -> bool: ...

    @property
    def now(self) -> int: ...

    @property
    def wall_ms(self) -> int: ...

    def post(self, delay_ms: int, fn: Callable[..., Any], *args: Any) -> None: ...

    def run_core(self) -> None: ...

    def recovered_from(self, rec: Recovered) -> None: ...

    def take_snapshot(self, tree: DataTree, history: list[int]) -> None: ...

    def write_epoch(self, name: str, value: int) -> None: ...

    def new_log(self, on_durable: Callable[[int], None], on_roll: Callable[[], None]) -> SimLog: ...

    def client_output(self, conn: Connection) -> None: ...


class _Term:
    """What both roles share: the core's effects, the fsync reports, the end."""

    accepts_learners = False
    core: LeadingCore | LearningCore

    def __init__(self, node: Peer) -> None:
        self.node = node
        self.c = node.c
        self.sid = node.sid
        self.term_id = node.term_seq
        self.ended: str | None = None
        self.flush_due = False
        self.log: SimLog | None = None
        self.workers: list[SimWorker] = []  # its serving processes (serverWorkers), 1..N-1
        self.hub: WorkerHub | None = None
        self.applied_zxid = -1  # what the member published to its workers (runtime.worker.SharedZxid)
        self._outgoing: dict[int, list[QuorumPacket]] = {}  # packets in the next Send of each link
        self._rest: list[fx.Effect] = []  # the effects of the batch not run yet

    def _chunks(self, effect: fx.Send) -> list[tuple[bytes, bool]]:
        """A `Send`'s bytes cut at its packets' boundaries (a SNAP's chunk takes the snapshot
        stream after it), each with whether it holds that snapshot. The network delivers them
        as separate segments, in order, as TCP may: a step between two packets of one write is
        reachable (a crash after SNAP, before NEWLEADER)."""
        packets = self._outgoing.pop(effect.link, [])
        sizes = [len(p.to_bytes()) for p in packets]
        if sum(sizes) > len(effect.data) or (sum(sizes) < len(effect.data) and not effect.snapshot):
            raise AssertionError("simulator: a Send's bytes do not match its packets")
        chunks, pos = [], 0
        for p, size in zip(packets, sizes):
            end = pos + size
            snap = effect.snapshot and p.type == PacketType.SNAP
            if snap:
                end += len(effect.data) - sum(sizes)
            chunks.append((effect.data[pos:end], snap))
            pos = end
        return chunks

    # ---- what the cluster, the workload and the tests look at

    @property
    def pipeline(self) -> ServerCore | None:
        """The request pipeline, once the term serves."""
        return self.core.pipeline

    @property
    def logging(self) -> list[int]:
        return list(self.core.logging)

    @property
    def tree(self) -> DataTree:
        return self.core.tree

    def current(self) -> bool:
        return self.node.term is self and self.ended is None and self.node.alive

    def end(self, reason: str) -> None:
        if self.ended is None:
            self.ended = reason

    # ---- driving the core

    def _time(self) -> None:
        self.core.set_time(self.node.now, self.node.wall_ms)

    def pump(self) -> None:
        """Run the core's effects, batch after batch (also after the term ended, as the real shell
        does: a closed term's effects reach nothing, and its core should have none)."""
        while effects := self.core.ready():
            for i, effect in enumerate(effects):
                self._rest = effects[i + 1:]
                self.execute(effect)
            self._rest = []

    def execute(self, effect: fx.Effect) -> None:
        node, checker = self.node, self.c.checker
        match effect:
            case fx.Output():
                node.client_output(effect.conn)
            case fx.Send():
                self._send(effect)
            case fx.AppendLog():
                assert self.log is not None
                self.log.log_payloads(effect.zxids, effect.payloads)
            case fx.WriteEpoch():
                node.write_epoch(effect.name, effect.value)
            case fx.WriteSnapshot():
                node.take_snapshot(effect.tree, node.history)
            case fx.Truncate():
                self._truncate(effect.zxid)
            case fx.CloseLink():
                self._close_link(effect.link, effect.reason)
            case fx.Serving():
                self._serving(effect.epoch)
            case fx.ActivateConfig():
                assert node.core is not None
                node.core.config_activated(effect.quorum)
                node.run_core()
            case fx.EndTerm():
                self.end(effect.reason)
            case fx.StartWorkers():
                self._start_workers(effect)
            case fx.PublishApplied():
                self.applied_zxid = effect.zxid
            case fx.ToWorker():
                worker = self.workers[effect.link - 1]
                worker.down.send(worker.from_member, effect.data)
            case fx.Applied():
                self._applied(effect)
            case fx.Logged():
                checker.check_txn(node, effect.zxid, effect.payload, "logged")
            case fx.Proposed():
                checker.on_propose(node, effect.zxid, effect.payload)
            case fx.PacketIn():
                self.c.packet_received(node, self._peer(effect.link), effect.packet)
            case fx.PacketOut():
                self._outgoing.setdefault(effect.link, []).append(effect.packet)
                self.c.packet_sent(node, self._peer(effect.link), effect.packet)
            case fx.SnapshotLoaded():
                self._snapshot_loaded(effect)
            case _:
                assert_never(effect)

    def _send(self, effect: fx.Send) -> None:
        raise NotImplementedError

    # ---- serving processes (runtime.workers)

    def _start_workers(self, effect: fx.StartWorkers) -> None:
        self.hub = effect.hub
        rng = self.c.rng
        self.workers = [SimWorker(self.node, index, effect.count, rng, self._from_worker, lambda: self.applied_zxid)
                        for index in range(1, effect.count)]
        for worker in self.workers:
            self.node.post(rng.randint(1, 5), self._attach, worker.index)  # its link connects
        self.c.stats["workers_started"] += len(self.workers)

    def _attach(self, index: int) -> None:
        """Worker ``index``'s link is up: as ``runtime.workers`` does, a child writes it the tree
        as it is now and exits a little later; the link's other output waits for that."""
        if self.current() and self.hub is not None:
            self.hub.attach(index, streamed=True)
            worker = self.workers[index - 1]
            worker.down.send(worker.from_member, snapshot_packet(self.hub.pipeline.tree))
            self.node.post(self.c.rng.randint(1, 30), self._snapshot_sent, index)

    def _snapshot_sent(self, index: int) -> None:
        if self.current() and self.hub is not None:
            self.hub.snapshot_sent(index)
            self.flush_due = True

    def _from_worker(self, index: int, data: bytes) -> None:
        if self.current() and self.hub is not None:
            self._time()
            self.hub.receive(index, data)  # a LinkError is a bug the simulator reports
            self.flush_due = True

    def _stop_workers(self) -> None:
        for worker in self.workers:
            worker.stop()

    def _close_link(self, link: int, reason: str) -> None:
        raise NotImplementedError

    def _truncate(self, zxid: int) -> None:
        raise AssertionError(f"simulator: a {type(self).__name__} truncates nothing (TRUNC to 0x{zxid:x})")

    def _snapshot_loaded(self, effect: fx.SnapshotLoaded) -> None:
        raise AssertionError(f"simulator: a {type(self).__name__} loads no snapshot")

    def _peer(self, link: int) -> int:
        raise NotImplementedError

    def _applied(self, a: fx.Applied) -> None:
        """Bookkeeping after the core applied a committed txn."""
        node = self.node
        node.history.append(a.zxid)
        self.c.workload.on_applied(node.sid, node.incarnation, self.term_id, a.hdr)
        self.c.checker.on_digest(node, a.zxid, a.digest)
        if a.hdr.type == OpCode.CLOSE_SESSION:
            self.c.checker.on_session_closed(node, self.tree, a.hdr.clientId)
        elif a.hdr.type in _MAY_CREATE_EPHEMERALS:
            self.c.checker.on_ephemerals_created(node, self.tree, a.hdr.clientId)

    def _serving(self, epoch: int) -> None:
        """The term serves: the member core hears of it (as ``runtime.peer``'s ``serving``)."""
        node = self.node
        assert node.core is not None
        node.core.term_serving(epoch)
        node.run_core()

    def _durable(self, count: int) -> None:
        """The fsync worker's report, also after the term was closed (the real worker's last
        report reaches the loop after the close, as this one does): the core decides."""
        self._time()
        self.core.durable(count)
        self.pump()

    def flush(self) -> None:
        """After client input (once per event, as the real shell's call_soon): propose or forward;
        the workers that took input flush too."""
        self.flush_due = False
        if not self.current():
            return
        self._time()
        self.pump()
        for worker in self.workers:
            if worker.flush_due:
                worker.flush()

    def tick(self) -> None:
        self._time()
        self.core.tick()
        self.pump()
        for worker in self.workers:
            worker.tick()

    def _roll(self) -> None:
        """The log rolled (in an `AppendLog`): snapshot the tree as it is, which already holds the
        txns the rest of the batch reports as applied (the core ran the whole batch first)."""
        pending = [e.zxid for e in self._rest if isinstance(e, fx.Applied)]
        self.node.take_snapshot(self.tree, self.node.history + pending)

    def client_request(self, session: int, cxid: int, op: int, body: bytes) -> None:
        """A client's request reaches this server's pipeline (``workload``)."""
        raise NotImplementedError

    def _close_log(self) -> None:
        """The log's worker syncs what it was handed and stops; its report of those txns comes
        after the close, as the real worker's does (through the loop)."""
        if self.log is not None:
            unreported = self.log.close()
            if unreported:
                self.node.post(0, self._durable, unreported)


def _auth(op: int) -> tuple[Id, ...]:
    """The identities of a simulated client: a reconfig's is the super user (only one may)."""
    return (Id("super", ""),) if op == OpCode.RECONFIG else ()


# ---------------------------------------------------------------- leader


class SimLeaderTerm(_Term):
    role = "leader"
    accepts_learners = True

    def __init__(self, node: Peer, core: LeadingCore) -> None:
        super().__init__(node)
        self.core: LeadingCore = core
        self.links: dict[int, QConn] = {}
        self.cids = itertools.count(1)
        self.log = node.new_log(self._durable, self._roll)

    @property
    def zab(self) -> zl.Leader:
        return self.core.zab

    def start(self) -> None:
        self.pump()
        self.tick()

    # ---- the quorum port

    def accept(self, conn: QConn) -> None:
        if not self.current():
            self.c.net.close(conn, self.sid, abort=True)
            return
        cid = next(self.cids)
        self.links[cid] = conn
        conn.ends[self.sid] = self
        conn.leader_cid = cid
        self._time()
        self.core.link_connected(cid)

    def _cid(self, conn: QConn) -> int | None:
        cid = conn.leader_cid
        if self.links.get(cid) is not conn or not self.current():
            return None
        return cid

    def on_data(self, conn: QConn, data: bytes) -> None:
        cid = self._cid(conn)
        if cid is None:
            return
        self._time()
        self.core.link_data(cid, data)
        self.pump()
        self.flush_due = True

    def on_close(self, conn: QConn) -> None:
        cid = self._cid(conn)
        if cid is None:
            return
        self.links.pop(cid, None)
        self.core.link_lost(cid)

    def client_request(self, session: int, cxid: int, op: int, body: bytes) -> None:
        pipeline = self.core.pipeline
        assert pipeline is not None
        self._time()
        pipeline.learner_request(session, cxid, op, body, _auth(op))
        self.flush_due = True

    def _peer(self, link: int) -> int:
        conn = self.links.get(link)
        return conn.learner if conn is not None else -1

    def execute(self, effect: fx.Effect) -> None:
        if isinstance(effect, fx.PacketIn) and effect.packet.type == PacketType.FOLLOWERINFO \
                and self.zab.phase is not zl.Phase.DISCOVERY and zxid_epoch(effect.packet.zxid) > self.zab.epoch:
            self.c.stats["leader_yields"] += 1  # the core steps down (counted for the tests)
        super().execute(effect)

    def tick(self) -> None:
        pipeline = self.core.pipeline
        before = pipeline.unapplied if pipeline is not None else 0
        super().tick()
        if pipeline is not None and self.zab.phase is zl.Phase.STOPPED and pipeline.unapplied > before:
            self.c.stats["expiry_as_leader_stops"] += 1  # the tick that ended the term expired a session

    def _send(self, effect: fx.Send) -> None:
        conn = self.links.get(effect.link)
        for chunk, snapshot in self._chunks(effect):
            if conn is not None:
                meta = None
                if snapshot:
                    meta = tuple(self.node.history)
                    self.c.stats["snap_sent"] += 1
                self.c.net.send(conn, self.sid, chunk, meta)

    def _close_link(self, link: int, reason: str) -> None:
        self._outgoing.pop(link, None)
        conn = self.links.pop(link, None)
        if conn is not None:
            self.c.net.close(conn, self.sid, abort=True)

    def _applied(self, a: fx.Applied) -> None:
        super()._applied(a)
        self.c.checker.on_leader_commit(self.node, self.node.history)
        self.c.stats["commits"] += 1

    def _serving(self, epoch: int) -> None:
        node = self.node
        self.c.checker.on_tree(node, self.tree)
        self.c.trace_event(self.sid, "established", epoch)
        self.c.stats["established"] += 1
        self.c.checker.on_established(node, epoch, node.history)
        super()._serving(epoch)

    def close(self) -> None:
        self.core.stop("term closed")
        self.core.ready()  # the shell does not run what stopping produced: it aborts the links itself
        for conn in list(self.links.values()):
            self.c.net.close(conn, self.sid, abort=True)
        self.links.clear()
        self._stop_workers()
        self._close_log()


# ---------------------------------------------------------------- learner


class SimLearnerTerm(_Term):
    def __init__(self, node: Peer, core: LearningCore) -> None:
        super().__init__(node)
        self.core: LearningCore = core
        self.conn: QConn | None = None

    @property
    def zab(self) -> zf.Learner:
        return self.core.zab

    @property
    def serving(self) -> bool:
        return self.core.served

    def start(self) -> None:
        self.c.net.connect(self.sid, self.core.leader_sid, self)

    def on_connect_failed(self) -> None:
        """A try to connect to the leader failed: the core says whether to try again."""
        if not self.current():
            return
        self._time()
        delay = self.core.connect_failed()
        if delay is None:
            self.end(f"could not connect to leader {self.core.leader_sid}")
            return
        self.node.post(delay, self._retry)

    def _retry(self) -> None:
        if self.current():
            self.c.net.connect(self.sid, self.core.leader_sid, self)

    def on_connected(self, conn: QConn) -> None:
        if not self.current():
            self.c.net.close(conn, self.sid)
            return
        self.conn = conn
        if self.log is None:  # a link that closed before the leader said anything is dialled again
            self.log = self.node.new_log(self._durable, self._roll)
        self._time()
        self.core.connected()
        self.pump()

    def on_data(self, conn: QConn, data: bytes) -> None:
        if conn is not self.conn or not self.current():
            return
        self._time()
        self.core.link_data(data)
        self.pump()
        if self.core.pipeline is not None:
            self.flush_due = True

    def on_close(self, conn: QConn) -> None:
        if conn is self.conn and self.current():
            self._time()
            retry_ms = self.core.link_lost()
            self.pump()
            if retry_ms is not None:  # closed before the leader said anything: dial again
                self.conn = None
                self.node.post(retry_ms, self._retry)

    def tick(self) -> None:
        if self.conn is None:
            return
        super().tick()

    def client_request(self, session: int, cxid: int, op: int, body: bytes) -> None:
        self._time()
        self.zab.request(session, cxid, op, body, _auth(op))
        self.pump()

    def _peer(self, link: int) -> int:
        return self.core.leader_sid

    def _snapshot_loaded(self, effect: fx.SnapshotLoaded) -> None:
        assert self.conn is not None
        node = self.node
        node.history = list(self.conn.snap_meta.popleft())
        self.c.checker.on_tree(node, effect.tree)

    def _send(self, effect: fx.Send) -> None:
        for chunk, _ in self._chunks(effect):
            if self.conn is not None:
                self.c.net.send(self.conn, self.sid, chunk)

    def _close_link(self, link: int, reason: str) -> None:
        self.end(reason)

    def _applied(self, a: fx.Applied) -> None:
        node = self.node
        self.c.checker.check_txn(node, a.zxid, a.payload, "applied")
        super()._applied(a)
        self.c.checker.on_learner_apply(node, node.history, self.core.served)

    def _truncate(self, zxid: int) -> None:
        """TRUNC: ``member.datadir`` cuts the log after ``zxid`` and recovers; the core goes on."""
        node = self.node
        assert self.log is not None
        self.c.stats["trunc"] += 1
        unreported = self.log.close()
        recovered = truncate_data_dir(node.disk, node.dirs, zxid)
        node.recovered_from(recovered)
        self.c.checker.on_tree(node, recovered.tree)
        self.core.truncated(recovered)
        self.log = node.new_log(self._durable, self._roll)
        if unreported:
            node.post(0, self._durable, unreported)
        if self.core.ended is not None:
            self.c.stats["trunc_would_lose_state"] += 1

    def _serving(self, epoch: int) -> None:
        node = self.node
        self.c.checker.on_tree(node, self.tree)
        if node.observer:
            self.c.stats["observer_serving"] += 1
        self.c.trace_event(self.sid, "serving", (epoch, self.core.leader_sid))
        self.c.checker.on_serve(node, epoch, node.history)
        super()._serving(epoch)

    def close(self) -> None:
        self.core.stop("term closed")
        if self.conn is not None:
            self.c.net.close(self.conn, self.sid)
            self.conn = None
        self._stop_workers()
        self._close_log()
