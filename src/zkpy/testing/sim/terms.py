"""The terms of a simulated server: the member cores that ``runtime`` runs (``member.leading``,
``member.learning``), driven over the simulated network and disk.

Nothing of the cores' logic is here: a term feeds its core the bytes, ticks and fsync reports
the simulated world delivers, and runs the effects it returns, in order, as ``runtime.term``
runs them on the OS (``member.effects`` states the contract both keep). The cores are made
with ``trace=True``; their trace effects feed the checker (``checker``), the workload's
acknowledgements and the per-server history the checker compares.

Where the real shell swallows an unexpected exception (dropping a learner, or ending the
term), the simulator lets it through: a core that raises on a peer's well-formed input is a bug
to report. A SNAP carries the leader's ``history`` next to the bytes (``QConn.snap_meta``), for
the checker.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

from zkpy.config import QuorumConfig, ServerConfig
from zkpy.ids import zxid_epoch
from zkpy.member import effects as fx
from zkpy.member.history import History
from zkpy.member.leading import LeadingCore
from zkpy.member.learning import LearningCore
from zkpy.quorum import leader as zl
from zkpy.quorum import learner as zf
from zkpy.quorum.election import Election
from zkpy.quorum.sync import DEFAULT_COMMITTED_LOG, LoggedTxn
from zkpy.quorum.verifier import QuorumVerifier
from zkpy.server.connection import Connection
from zkpy.server.core import ServerCore
from zkpy.storage.files import DataDirs
from zkpy.storage.recovery import Recovered
from zkpy.storage.truncate import truncate_to
from zkpy.tree.datatree import DataTree
from zkpy.wire.consts import OpCode
from zkpy.wire.proto import Id
from zkpy.wire.quorum import PacketType, QuorumPacket

from .checker import Checker
from .config import SimConfig
from .disk import SimDisk, SimLog
from .network import Network, QConn
from .workload import Workload

_MAY_CREATE_EPHEMERALS = frozenset({OpCode.CREATE, OpCode.CREATE2, OpCode.MULTI})

LEARNER_CONNECT_TRIES = 5  # as runtime.learner_term
LEARNER_CONNECT_DELAY_MS = 100


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

    def trace_event(self, sid: int, what: str, detail: object) -> None: ...

    def packet_received(self, node: Peer, peer: int, packet: QuorumPacket) -> None: ...

    def packet_sent(self, node: Peer, peer: int, packet: QuorumPacket) -> None: ...


class Peer(Protocol):
    """What a term uses of the server it runs in (``node.SimNode``): the process, its data dir,
    its election, and the tree and history it hands from term to term."""

    history: list[int]
    tree: DataTree | None
    committed: list[LoggedTxn]
    mode: str

    @property
    def c(self) -> Ensemble: ...

    @property
    def sid(self) -> int: ...

    @property
    def observer(self) -> bool: ...

    @property
    def config(self) -> ServerConfig: ...

    @property
    def config_data(self) -> bytes: ...

    @property
    def verifier(self) -> QuorumVerifier: ...

    @property
    def alive(self) -> bool: ...

    @property
    def incarnation(self) -> int: ...

    @property
    def term_seq(self) -> int: ...

    @property
    def term(self) -> LeaderTerm | LearnerTerm | None: ...

    @property
    def election(self) -> Election | None: ...

    @property
    def disk(self) -> SimDisk: ...

    @property
    def dirs(self) -> DataDirs: ...

    @property
    def now(self) -> int: ...

    @property
    def wall_ms(self) -> int: ...

    def post(self, delay_ms: int, fn: Callable[..., Any], *args: Any) -> None: ...

    def recover(self) -> Recovered: ...

    def take_snapshot(self, tree: DataTree, history: list[int]) -> None: ...

    def write_epoch(self, name: str, value: int) -> None: ...

    def new_log(self, on_durable: Callable[[int], None], on_roll: Callable[[], None]) -> SimLog: ...

    def carry(self, history: History) -> None: ...

    def activate(self, quorum: QuorumConfig) -> None: ...

    def client_output(self, conn: Connection) -> None: ...


class _Term:
    """What both roles share: the core's effects, the fsync reports, the end."""

    accepts_learners = False
    member: LeadingCore | LearningCore

    def __init__(self, node: Peer) -> None:
        self.node = node
        self.c = node.c
        self.sid = node.sid
        self.term_id = node.term_seq
        self.ended: str | None = None
        self.flush_due = False
        self.log: SimLog | None = None
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
    def core(self) -> ServerCore | None:
        """The request pipeline, once the term serves."""
        return self.member.server

    @property
    def logging(self) -> list[int]:
        return list(self.member.logging)

    @property
    def tree(self) -> DataTree:
        return self.member.tree

    def current(self) -> bool:
        return self.node.term is self and self.ended is None and self.node.alive

    def end(self, reason: str) -> None:
        if self.ended is None:
            self.ended = reason

    # ---- driving the core

    def _time(self) -> None:
        self.member.set_time(self.node.now, self.node.wall_ms)

    def pump(self) -> None:
        """Run the core's effects, batch after batch (also after the term ended, as the real shell
        does: a closed term's effects reach nothing, and its core should have none)."""
        while effects := self.member.ready():
            for i, effect in enumerate(effects):
                self._rest = effects[i + 1:]
                self.execute(effect)
            self._rest = []

    def execute(self, effect: fx.Effect) -> None:
        node, checker = self.node, self.c.checker
        if isinstance(effect, fx.AppendLog):
            assert self.log is not None
            self.log.log_payloads(effect.zxids, effect.payloads)
        elif isinstance(effect, fx.WriteEpoch):
            node.write_epoch(effect.name, effect.value)
        elif isinstance(effect, fx.WriteSnapshot):
            node.take_snapshot(effect.tree, node.history)
        elif isinstance(effect, fx.Serving):
            self._serving(effect.epoch)
        elif isinstance(effect, fx.EndTerm):
            self.end(effect.reason)
        elif isinstance(effect, fx.ActivateConfig):
            node.activate(effect.quorum)
        elif isinstance(effect, fx.Output):
            node.client_output(effect.conn)
        elif isinstance(effect, fx.Applied):
            self._applied(effect)
        elif isinstance(effect, fx.Logged):
            checker.check_txn(node, effect.zxid, effect.payload, "logged")
        elif isinstance(effect, fx.Proposed):
            checker.on_propose(node, effect.zxid, effect.payload)
        elif isinstance(effect, fx.PacketIn):
            self.c.packet_received(node, self._peer(effect.link), effect.packet)
        elif isinstance(effect, fx.PacketOut):
            self._outgoing.setdefault(effect.link, []).append(effect.packet)
            self.c.packet_sent(node, self._peer(effect.link), effect.packet)
        else:
            self._io(effect)

    def _io(self, effect: fx.Effect) -> None:
        raise AssertionError(f"simulator: {type(self).__name__} cannot run {effect!r}")

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
        raise NotImplementedError

    def _durable(self, count: int) -> None:
        """The fsync worker's report, also after the term was closed (the real worker's last
        report reaches the loop after the close, as this one does): the core decides."""
        self._time()
        self.member.durable(count)
        self.pump()

    def flush(self) -> None:
        """After client input (once per event, as the real shell's call_soon): propose or forward."""
        self.flush_due = False
        if not self.current():
            return
        self._time()
        self.pump()

    def tick(self) -> None:
        self._time()
        self.member.tick()
        self.pump()

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


class LeaderTerm(_Term):
    role = "leader"
    accepts_learners = True

    def __init__(self, node: Peer, history: list[LoggedTxn], accepted: int, current: int) -> None:
        super().__init__(node)
        assert node.tree is not None
        self.member: LeadingCore = LeadingCore(node.config, node.verifier, History(node.tree, list(history)),
                                               accepted_epoch=accepted, current_epoch=current,
                                               config_data=node.config_data, now_ms=node.now,
                                               wall_ms=node.wall_ms, trace=True)
        self.links: dict[int, QConn] = {}
        self.cids = itertools.count(1)
        self.log = node.new_log(self._durable, self._roll)

    @property
    def zab(self) -> zl.Leader:
        return self.member.zab

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
        self.member.link_connected(cid)

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
        self.member.link_data(cid, data)
        self.pump()
        self.flush_due = True

    def on_close(self, conn: QConn) -> None:
        cid = self._cid(conn)
        if cid is None:
            return
        self.links.pop(cid, None)
        self.member.link_lost(cid)

    def client_request(self, session: int, cxid: int, op: int, body: bytes) -> None:
        core = self.member.server
        assert core is not None
        self._time()
        core.learner_request(session, cxid, op, body, _auth(op))
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
        server = self.member.server
        before = server.unapplied if server is not None else 0
        super().tick()
        if server is not None and self.zab.phase is zl.Phase.STOPPED and server.unapplied > before:
            self.c.stats["expiry_as_leader_stops"] += 1  # the tick that ended the term expired a session

    def _io(self, effect: fx.Effect) -> None:
        if isinstance(effect, fx.Send):
            conn = self.links.get(effect.link)
            for chunk, snapshot in self._chunks(effect):
                if conn is not None:
                    meta = None
                    if snapshot:
                        meta = tuple(self.node.history)
                        self.c.stats["snap_sent"] += 1
                    self.c.net.send(conn, self.sid, chunk, meta)
        elif isinstance(effect, fx.CloseLink):
            self._outgoing.pop(effect.link, None)
            conn = self.links.pop(effect.link, None)
            if conn is not None:
                self.c.net.close(conn, self.sid, abort=True)
        else:
            super()._io(effect)

    def _applied(self, a: fx.Applied) -> None:
        super()._applied(a)
        self.c.checker.on_leader_commit(self.node, self.node.history)
        self.c.stats["commits"] += 1

    def _serving(self, epoch: int) -> None:
        node = self.node
        self.c.checker.on_tree(node, self.tree)
        node.mode = "leading"
        assert node.election is not None
        node.election.update_peer_epoch(epoch)
        self.c.trace_event(self.sid, "established", epoch)
        self.c.stats["established"] += 1
        self.c.checker.on_established(node, epoch, node.history)

    def close(self) -> None:
        self.member.stop("term closed")
        self.member.ready()  # the shell does not run what stopping produced: it aborts the links itself
        for conn in list(self.links.values()):
            self.c.net.close(conn, self.sid, abort=True)
        self.links.clear()
        self._close_log()

    def carry_over(self) -> bool:
        """After close every proposal handed to the log is on disk: the next term starts from
        this tree with those applied (``LeadingCore.carry_over``)."""
        self.node.carry(self.member.carry_over())
        return True


# ---------------------------------------------------------------- learner


class LearnerTerm(_Term):
    def __init__(self, node: Peer, leader_sid: int, accepted: int, current: int, observer: bool = False) -> None:
        super().__init__(node)
        cfg = self.c.config
        assert node.tree is not None
        self.role = "observer" if observer else "follower"
        self.leader_sid = leader_sid
        self.member: LearningCore = LearningCore(node.config, History(node.tree, list(node.committed)),
                                                 leader_sid=leader_sid, observer=observer,
                                                 accepted_epoch=accepted, current_epoch=current,
                                                 config_data=node.config_data, now_ms=node.now,
                                                 wall_ms=node.wall_ms, trace=True)
        self.conn: QConn | None = None
        self._tries = 0
        self._deadline = node.now + cfg.tick_ms * cfg.init_limit

    @property
    def zab(self) -> zf.Learner:
        return self.member.zab

    @property
    def serving(self) -> bool:
        return self.member.served

    def start(self) -> None:
        self.c.net.connect(self.sid, self.leader_sid, self)

    def on_connect_failed(self) -> None:
        if not self.current():
            return
        self._tries += 1
        now = self.node.now
        if self._tries >= LEARNER_CONNECT_TRIES or now + LEARNER_CONNECT_DELAY_MS >= self._deadline:
            self.end(f"could not connect to leader {self.leader_sid}")
            return
        self.node.post(LEARNER_CONNECT_DELAY_MS, self._retry)

    def _retry(self) -> None:
        if self.current():
            self.c.net.connect(self.sid, self.leader_sid, self)

    def on_connected(self, conn: QConn) -> None:
        if not self.current():
            self.c.net.close(conn, self.sid)
            return
        self.conn = conn
        self.log = self.node.new_log(self._durable, self._roll)
        self._time()
        self.member.connected()
        self.pump()

    def on_data(self, conn: QConn, data: bytes) -> None:
        if conn is not self.conn or not self.current():
            return
        self._time()
        self.member.link_data(data)
        self.pump()
        if self.member.server is not None:
            self.flush_due = True

    def on_close(self, conn: QConn) -> None:
        if conn is self.conn and self.current():
            self._time()
            self.member.link_lost()
            self.pump()

    def tick(self) -> None:
        if self.conn is None:
            return
        super().tick()

    def client_request(self, session: int, cxid: int, op: int, body: bytes) -> None:
        self._time()
        self.zab.request(session, cxid, op, body, _auth(op))
        self.pump()

    def _peer(self, link: int) -> int:
        return self.leader_sid

    def execute(self, effect: fx.Effect) -> None:
        if isinstance(effect, fx.SnapshotLoaded):
            assert self.conn is not None
            node = self.node
            node.tree = effect.tree
            node.committed = []  # a new history: no DIFF base from the old one
            node.history = list(self.conn.snap_meta.popleft())
            self.c.checker.on_tree(node, effect.tree)
        else:
            super().execute(effect)

    def _io(self, effect: fx.Effect) -> None:
        if isinstance(effect, fx.Send):
            for chunk, _ in self._chunks(effect):
                if self.conn is not None:
                    self.c.net.send(self.conn, self.sid, chunk)
        elif isinstance(effect, fx.Truncate):
            self._truncate(effect.zxid)
        elif isinstance(effect, fx.CloseLink):
            self.end(effect.reason)
        else:
            super()._io(effect)

    def _applied(self, a: fx.Applied) -> None:
        node = self.node
        self.c.checker.check_txn(node, a.zxid, a.payload, "applied")
        node.committed.append(LoggedTxn(a.zxid, a.payload))
        if len(node.committed) > 2 * DEFAULT_COMMITTED_LOG:
            del node.committed[:-DEFAULT_COMMITTED_LOG]
        super()._applied(a)
        self.c.checker.on_learner_apply(node, node.history, self.member.served)

    def _truncate(self, zxid: int) -> None:
        """TRUNC: cut the log after ``zxid``, recover the data dir, hand it back to the core."""
        node = self.node
        assert self.log is not None
        self.c.stats["trunc"] += 1
        unreported = self.log.close()
        truncate_to(node.disk, node.dirs, zxid)
        recovered = node.recover()
        self.member.truncated(recovered)
        self.log = node.new_log(self._durable, self._roll)
        if unreported:
            node.post(0, self._durable, unreported)
        if self.member.ended is not None:
            self.c.stats["trunc_would_lose_state"] += 1

    def _serving(self, epoch: int) -> None:
        node = self.node
        self.c.checker.on_tree(node, self.tree)
        node.mode = "observing" if node.observer else "following"
        if node.observer:
            self.c.stats["observer_serving"] += 1
        assert node.election is not None
        node.election.update_peer_epoch(epoch)
        self.c.trace_event(self.sid, "serving", (epoch, self.leader_sid))
        self.c.checker.on_serve(node, epoch, node.history)

    def close(self) -> None:
        self.member.stop("term closed")
        if self.conn is not None:
            self.c.net.close(self.conn, self.sid)
            self.conn = None
        self._close_log()

    def carry_over(self) -> bool:
        """Only a learner that served hands its tree on (``LearningCore.carry_over``)."""
        history = self.member.carry_over()
        if history is None:
            return False
        self.node.carry(history)
        return True
