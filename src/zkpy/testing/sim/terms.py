"""The terms of a simulated server: ``runtime.leader_term.LeaderTerm`` and ``runtime.learner_term.LearnerTerm`` over the
simulated network and disk.

They execute the cores' actions as the shell does: persisting actions (epoch files,
truncation, snapshots) complete before the next action runs; ``Log`` actions and the leader's
own proposals go to the fsync worker (``SimLog``), whose completion comes back as ``logged``;
an established leader's tree is at ``(epoch, 0)`` and both roles write ``/zookeeper/config``.
Where the real shell swallows an unexpected exception (dropping a learner, or ending the
term), the simulator lets it through: a core that raises on a peer's well-formed input is a
bug to report. Malformed bytes (``ProtocolError``) are handled as the shell handles them, and
an action the shell would not know fails loudly. Where the simulator deliberately differs
from the shell, the switch is in ``cluster.WORKAROUNDS``.

A SNAP carries the leader's ``history`` next to the bytes (``QConn.snap_meta``), for the checker.
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import TYPE_CHECKING, Any

from zkpy.errors import ProtocolError
from zkpy.ids import make_zxid, zxid_epoch
from zkpy.quorum import leader as zl
from zkpy.quorum import learner as zf
from zkpy.quorum.sync import DEFAULT_COMMITTED_LOG, CommittedLog, LoggedTxn
from zkpy.server.core import LEADER, LEARNER, ServerCore
from zkpy.storage.epochs import ACCEPTED_EPOCH, CURRENT_EPOCH
from zkpy.storage.snapshot import parse_snapshot_stream, snapshot_stream
from zkpy.storage.truncate import truncate_to
from zkpy.storage.txnlog import decode_payload, encode_payload
from zkpy.tree.datatree import DataTree
from zkpy.wire.consts import OpCode
from zkpy.wire.quorum import PacketType, QuorumPacket, QuorumPacketReader
from zkpy.wire.txn import TxnHeader

from .disk import SimLog
from .network import QConn

if TYPE_CHECKING:
    from .node import SimNode

LEARNER_CONNECT_TRIES = 5  # as runtime.peer
LEARNER_CONNECT_DELAY_MS = 100


class _Term:
    """What both roles share: the tree of the term, its history, the end."""

    accepts_learners = False

    def __init__(self, node: SimNode) -> None:
        self.node = node
        self.c = node.c
        self.sid = node.sid
        self.term_id = node.term_seq
        self.ended: str | None = None
        self.flush_due = False
        self.core: ServerCore | None = None
        self.logging: deque[int] = deque()

    @property
    def tree(self) -> DataTree:
        t = self.node.tree
        assert t is not None
        return t

    def current(self) -> bool:
        return self.node.term is self and self.ended is None and self.node.alive

    def end(self, reason: str) -> None:
        if self.ended is None:
            self.ended = reason

    def flush(self) -> None:
        self.flush_due = False

    def tick(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def client_request(self, session: int, cxid: int, op: int, body: bytes) -> None:
        raise NotImplementedError

    def applied(self, hdr: TxnHeader) -> None:
        """Bookkeeping after the tree applied a txn."""
        node = self.node
        node.history.append(hdr.zxid)
        self.c.workload.on_applied(node, self.term_id, hdr)
        tree = self.tree
        self.c.checker.on_tree(node, tree)
        if hdr.type == OpCode.CLOSE_SESSION:
            self.c.checker.on_session_closed(node, tree, hdr.clientId)


# ---------------------------------------------------------------- leader


class LeaderTerm(_Term):
    role = "leader"
    accepts_learners = True

    def __init__(self, node: SimNode, history: list[LoggedTxn], accepted: int, current: int) -> None:
        super().__init__(node)
        cfg = self.c.config
        committed = CommittedLog(history)
        self.zab = zl.Leader(node.sid, self.c.verifier, accepted_epoch=accepted, current_epoch=current,
                             last_zxid=self.tree.last_processed_zxid, committed=committed, now_ms=node.now,
                             tick_ms=cfg.tick_ms, init_limit=cfg.init_limit, sync_limit=cfg.sync_limit,
                             config_data=node.config_data, quorum_sync=cfg.quorum_sync)
        self.links: dict[int, QConn] = {}
        self.readers: dict[int, QuorumPacketReader] = {}
        self.cids = itertools.count(1)
        self.log = node.new_log(self._durable, self._roll)
        self.handed = 0

    def start(self) -> None:
        self.run_actions()
        self.tick()

    # ---- the quorum port

    def accept(self, conn: QConn) -> None:
        if not self.current():
            self.c.net.close(conn, self.sid, abort=True)
            return
        cid = next(self.cids)
        self.links[cid] = conn
        self.readers[cid] = QuorumPacketReader(self.node.config.max_buffer)
        conn.ends[self.sid] = self
        conn.leader_cid = cid
        self.zab.connected(cid, self.node.now)

    def _cid(self, conn: QConn) -> int | None:
        cid = conn.leader_cid
        if self.links.get(cid) is not conn or not self.current():
            return None
        return cid

    def on_data(self, conn: QConn, data: bytes) -> None:
        cid = self._cid(conn)
        if cid is None:
            return
        reader = self.readers[cid]
        reader.feed(data)
        try:
            while (packet := reader.next()) is not None:
                self.c.packet_received(self.node, conn.learner, packet)
                if packet.type == PacketType.FOLLOWERINFO and self.zab.phase is not zl.Phase.DISCOVERY \
                        and zxid_epoch(packet.zxid) > self.zab.epoch:
                    self.c.stats["leader_yields"] += 1  # the core steps down (counted for the tests)
                self.zab.step(cid, packet, self.node.now)
                self.run_actions()
                if self.links.get(cid) is not conn:
                    return
        except ProtocolError:  # a malformed stream: drop this learner only
            self.zab.disconnected(cid)
            self.links.pop(cid, None)
            self.c.net.close(conn, self.sid, abort=True)
            return
        self.flush_due = True

    def on_close(self, conn: QConn) -> None:
        cid = self._cid(conn)
        if cid is None:
            return
        self.links.pop(cid, None)
        self.readers.pop(cid, None)
        self.zab.disconnected(cid)

    # ---- time and persistence

    def tick(self) -> None:
        now = self.node.now
        self.zab.tick(now)
        core = self.core
        if core is not None:
            core.set_time(now, self.node.wall_ms)
            core.tick()
        self.flush()

    def _durable(self, count: int) -> None:
        if not self.current():
            return
        last = -1
        for _ in range(count):
            last = self.logging.popleft()
        if last >= 0:
            self.zab.logged(last)
            self.run_actions()

    def _roll(self) -> None:
        self.node.take_snapshot(self.tree, self.node.history)

    def flush(self) -> None:
        """New proposals to the log and the voters, then the core's actions."""
        self.flush_due = False
        core = self.core
        if self.zab.phase is zl.Phase.STOPPED and core is not None and len(core.proposals) > self.handed:
            self.c.stats["propose_after_stop"] += 1  # the core ignores them (the term is over)
        self._propose_new()
        if core is not None and core.quorum_checks:
            for token in core.quorum_checks:
                self.zab.check_quorum(token)
            core.quorum_checks.clear()
        self.run_actions()

    def _propose_new(self) -> None:
        core = self.core
        if core is not None and len(core.proposals) > self.handed:
            new = core.proposals[self.handed:]
            self.handed = len(core.proposals)
            self.log.log_txns([(p.hdr, p.txn) for p in new])
            for p in new:
                self.logging.append(p.hdr.zxid)
                payload = encode_payload(p.hdr, p.txn)
                self.c.checker.on_propose(self.node, p.hdr.zxid, payload)
                self.zab.propose(p.hdr.zxid, payload)

    def client_request(self, session: int, cxid: int, op: int, body: bytes) -> None:
        core = self.core
        assert core is not None
        core.set_time(self.node.now, self.node.wall_ms)
        core.learner_request(session, cxid, op, body, ())
        self.flush_due = True

    # ---- actions

    def run_actions(self) -> None:
        node = self.node
        while actions := self.zab.ready():
            for a in actions:
                if isinstance(a, zl.Send):
                    conn = self.links.get(a.cid)
                    if conn is not None:
                        data = a.packet.to_bytes()
                        meta = None
                        if a.snapshot:
                            data += snapshot_stream(self.tree)
                            meta = tuple(node.history)
                            self.c.stats["snap_sent"] += 1
                        self.c.packet_sent(node, conn.learner, a.packet)
                        self.c.net.send(conn, self.sid, data, meta)
                elif isinstance(a, zl.Commit):
                    self._commit(a.count)
                elif isinstance(a, zl.LearnerRequest):
                    if self.core is not None:
                        self.core.set_time(node.now, node.wall_ms)
                        self.core.learner_request(a.session, a.cxid, a.type, a.body, a.auth)
                        self.flush_due = True
                elif isinstance(a, zl.LearnerSync):
                    self._propose_new()  # as runtime.leader_term: the learner's earlier requests first
                    self.zab.learner_sync(a.cid)
                elif isinstance(a, zl.Touch):
                    if self.core is not None:
                        self.core.touch(a.touches)
                elif isinstance(a, zl.Revalidate):
                    valid = self.core.revalidate(a.session, a.timeout_ms) if self.core is not None else False
                    self.zab.revalidated(a.cid, a.session, valid)
                elif isinstance(a, zl.Close):
                    conn = self.links.pop(a.cid, None)
                    self.readers.pop(a.cid, None)
                    if conn is not None:
                        self.c.net.close(conn, self.sid)
                elif isinstance(a, zl.SetAcceptedEpoch):
                    node.write_epoch(ACCEPTED_EPOCH, a.epoch)
                elif isinstance(a, zl.SetCurrentEpoch):
                    node.write_epoch(CURRENT_EPOCH, a.epoch)
                elif isinstance(a, zl.Established):
                    self._establish(a.epoch)
                elif isinstance(a, zl.QuorumConfirmed):
                    if self.core is not None:
                        self.core.quorum_confirmed(a.token)
                elif isinstance(a, zl.Failed):
                    self.end(a.reason)
                else:
                    raise AssertionError(f"simulator: the leader core emitted {a!r}, which it does not know")

    def _commit(self, count: int) -> None:
        core = self.core
        if core is None:
            raise AssertionError(f"leader {self.sid}: Commit({count}) before Established")
        node = self.node
        core.set_time(node.now, node.wall_ms)
        for _ in range(count):
            p = core.proposals[0]
            core.apply_persisted(1)
            self.handed -= 1
            self.applied(p.hdr)
            self.c.checker.on_leader_commit(node, node.history)
            self.c.stats["commits"] += 1

    def _establish(self, epoch: int) -> None:
        node = self.node
        self.tree.last_processed_zxid = make_zxid(epoch, 0)  # as runtime.peer (ZooKeeper's startZkServer)
        self.tree.set_config_node(node.config_data, 0, node.wall_ms)
        self.c.checker.on_tree(node, self.tree)
        self.core = ServerCore(node.config, node.now, node.wall_ms, tree=self.tree, role=LEADER,
                               next_zxid=make_zxid(epoch, 1))
        node.mode = "leading"
        assert node.election is not None
        node.election.update_peer_epoch(epoch)
        self.c.trace_event(self.sid, "established", epoch)
        self.c.stats["established"] += 1
        self.c.checker.on_established(node, epoch, node.history)

    def close(self) -> None:
        self.zab.stop("term closed")
        self.zab.ready()  # the shell does not run what stopping produced: it aborts the links itself
        for conn in list(self.links.values()):
            self.c.net.close(conn, self.sid, abort=True)
        self.links.clear()
        self.log.close()

    def carry_over(self) -> bool:
        """runtime.leader_term.LeaderTerm.carry_over: after close every proposal handed to the log is on
        disk; the next term starts from this tree with those applied."""
        more = []
        if self.core is not None:
            more = [(p.hdr.zxid, encode_payload(p.hdr, p.txn)) for p in self.core.proposals[:self.handed]]
        self.node.carry(self.tree, list(self.zab.committed), more)
        return True


# ---------------------------------------------------------------- learner


class LearnerTerm(_Term):
    role = "follower"

    def __init__(self, node: SimNode, leader_sid: int, accepted: int, current: int) -> None:
        super().__init__(node)
        cfg = self.c.config
        self.leader_sid = leader_sid
        self.zab = zf.Learner(node.sid, observer=False, accepted_epoch=accepted, current_epoch=current,
                              last_logged_zxid=self.tree.last_processed_zxid, now_ms=node.now, tick_ms=cfg.tick_ms,
                              init_limit=cfg.init_limit, sync_limit=cfg.sync_limit)
        self.conn: QConn | None = None
        self.reader = QuorumPacketReader(node.config.max_buffer)
        self.log: SimLog | None = None
        self._to_log: list[tuple[TxnHeader, Any]] = []
        self._snap: QuorumPacket | None = None
        self._snap_buf = b""
        self._snap_searched = 0
        self._tries = 0
        self._deadline = node.now + cfg.tick_ms * cfg.init_limit
        self.serving = False

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
        self.zab.start()
        self.run_actions()

    def on_data(self, conn: QConn, data: bytes) -> None:
        if conn is not self.conn or not self.current():
            return
        try:
            self._read(conn, data)
        except ProtocolError as exc:  # a malformed stream: this term is over
            self.end(f"error while following: {exc}")

    def _read(self, conn: QConn, data: bytes) -> None:
        if self._snap is not None:
            self._snap_buf += data
        else:
            self.reader.feed(data)
        while True:
            if self._snap is not None:
                got = parse_snapshot_stream(self._snap_buf, self._snap_searched)
                if got is None:
                    self._snap_searched = len(self._snap_buf)
                    return
                tree, used = got
                snap = self._snap
                self._snap = None
                rest = self._snap_buf[used:]
                self._snap_buf = b""
                tree.last_processed_zxid = snap.zxid
                self.node.tree = tree
                self.node.committed = []  # a new history: no DIFF base from the old one
                meta = conn.snap_meta.popleft()
                self.node.history = list(meta)
                self.c.checker.on_tree(self.node, tree)
                self.reader.feed(rest)
                self._step(snap)
                if not self.current():
                    return
                continue
            packet = self.reader.next()
            if packet is None:
                return
            if packet.type == PacketType.SNAP:
                self._snap = packet
                self._snap_buf = self.reader.take_rest()
                self._snap_searched = 0
                continue
            self._step(packet)
            if not self.current():
                return

    def _step(self, packet: QuorumPacket) -> None:
        self.c.packet_received(self.node, self.leader_sid, packet)
        self.zab.step(packet, self.node.now)
        self.run_actions()

    def on_close(self, conn: QConn) -> None:
        if conn is self.conn and self.current():
            self.end("the leader closed the connection")

    def tick(self) -> None:
        if self.conn is None:
            return
        self.zab.tick(self.node.now)
        self.run_actions()

    def _durable(self, count: int) -> None:
        if not self.current():
            return
        last = -1
        for _ in range(count):
            last = self.logging.popleft()
        if last >= 0:
            self.zab.logged(last)
            self.run_actions()

    def _roll(self) -> None:
        self.node.take_snapshot(self.tree, self.node.history)

    def client_request(self, session: int, cxid: int, op: int, body: bytes) -> None:
        self.zab.request(session, cxid, op, body, ())
        self.run_actions()

    def _send(self, packet: QuorumPacket) -> None:
        if self.conn is not None:
            self.c.packet_sent(self.node, self.leader_sid, packet)
            self.c.net.send(self.conn, self.sid, packet.to_bytes())

    def _log_pending(self) -> None:
        if self._to_log:
            assert self.log is not None
            self.log.log_txns(self._to_log)
            self._to_log = []

    def run_actions(self) -> None:
        node = self.node
        checker = self.c.checker
        while actions := self.zab.ready():
            for a in actions:
                if not isinstance(a, zf.Log):
                    self._log_pending()
                if isinstance(a, zf.Send):
                    self._send(a.packet)
                elif isinstance(a, zf.Log):
                    checker.check_txn(node, a.zxid, a.data, "logged")
                    hdr, txn = decode_payload(a.data)
                    self.logging.append(a.zxid)
                    self._to_log.append((hdr, txn))
                elif isinstance(a, zf.Apply):
                    checker.check_txn(node, a.zxid, a.data, "applied")
                    hdr, txn = decode_payload(a.data)
                    node.committed.append(LoggedTxn(a.zxid, a.data))
                    if len(node.committed) > 2 * DEFAULT_COMMITTED_LOG:
                        del node.committed[:-DEFAULT_COMMITTED_LOG]
                    if self.core is not None:
                        self.core.set_time(node.now, node.wall_ms)
                        self.core.apply_committed(hdr, txn)
                    else:
                        self.tree.apply(hdr, txn)
                        self.tree.events.clear()
                    self.applied(hdr)
                    checker.on_learner_apply(node, node.history, self.serving)
                elif isinstance(a, zf.PingReply):
                    touches = self.core.take_touches() if self.core is not None else []
                    data = b"".join(s.to_bytes(8, "big", signed=True) + t.to_bytes(4, "big", signed=True)
                                    for s, t in touches)
                    self._send(QuorumPacket(PacketType.PING, a.zxid, data, None))
                elif isinstance(a, zf.Revalidated):
                    if self.core is not None:
                        self.core.revalidated(a.session, a.valid)
                elif isinstance(a, zf.SyncDone):
                    if self.core is not None:
                        self.core.sync_done()
                elif isinstance(a, zf.SetAcceptedEpoch):
                    node.write_epoch(ACCEPTED_EPOCH, a.epoch)
                elif isinstance(a, zf.SetCurrentEpoch):
                    node.write_epoch(CURRENT_EPOCH, a.epoch)
                elif isinstance(a, zf.Truncate):
                    self._truncate(a.zxid)
                    if self.ended is not None:
                        return  # as runtime.peer: the term is over, nothing after TRUNC runs
                elif isinstance(a, zf.TakeSnapshot):
                    node.take_snapshot(self.tree, node.history)
                elif isinstance(a, zf.Serve):
                    self._serve(a.epoch)
                elif isinstance(a, zf.Failed):
                    self.end(a.reason)
                elif not isinstance(a, zf.Log):
                    raise AssertionError(f"simulator: the learner core emitted {a!r}, which it does not know")
            self._log_pending()

    def _truncate(self, zxid: int) -> None:
        """TRUNC: cut the log after ``zxid`` and reload the tree from disk."""
        node = self.node
        assert self.log is not None
        self.c.stats["trunc"] += 1
        unreported = self.log.close()
        truncate_to(node.disk, node.dirs, zxid)
        node.recover()
        self.log = node.new_log(self._durable, self._roll)
        if unreported:
            node.post(0, self._durable, unreported)
        if node.tree is not None and node.tree.last_processed_zxid != zxid:
            # as runtime.peer: what held the state at zxid is gone; rejoin from what was recovered
            self.c.stats["trunc_would_lose_state"] += 1
            self.end(f"TRUNC to 0x{zxid:x} left the state at 0x{node.tree.last_processed_zxid:x}")

    def _serve(self, epoch: int) -> None:
        node = self.node
        self.tree.set_config_node(node.config_data, 0, node.wall_ms)
        self.core = ServerCore(node.config, node.now, node.wall_ms, tree=self.tree, role=LEARNER)
        self.serving = True
        node.mode = "following"
        assert node.election is not None
        node.election.update_peer_epoch(epoch)
        self.c.trace_event(self.sid, "serving", (epoch, self.leader_sid))
        self.c.checker.on_serve(node, epoch, node.history)

    def close(self) -> None:
        if self.conn is not None:
            self.c.net.close(self.conn, self.sid)
        if self.log is not None:
            self.log.close()

    def carry_over(self) -> bool:
        """runtime.learner_term.LearnerTerm.carry_over: only a learner that served hands its tree on."""
        if self.core is None:
            return False
        self.node.carry(self.tree, list(self.node.committed), self.zab.unapplied_logged())
        return True
