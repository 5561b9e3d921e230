"""One term as follower or observer: the Zab learner core (``quorum.learner``) joined to the
request pipeline once it is synchronised.

The leader's bytes come in with ``link_data``; SNAP is followed by the leader's snapshot
stream, which is read here until whole and installed as the tree before SNAP is stepped. The
learner core's persisting actions become barriers or ordered effects: `WriteEpoch` before the
ACKEPOCH that depends on it, `Truncate` (the shell truncates, recovers and calls
``truncated``) and `WriteSnapshot` stop the batch; a proposal's ACK is sent only after
``durable`` says the fsync covering it returned. Once UPTODATE arrives the pipeline serves
(`Serving`); ``ready()`` forwards what the pipeline sends the leader (writes, syncs, session
revalidations) since the last call.

Reconfiguration (with reconfigEnabled): a committed reconfig (COMMITANDACTIVATE or
INFORMANDACTIVATE, after its txn is applied) and the leader's config at UPTODATE (NEWLEADER's
config string, when newer than mine) become active here (`ActivateConfig`); when
``dynconfig.activation`` says my role changed or another server leads now, the term ends.
"""

from __future__ import annotations

import dataclasses
import struct
from collections import deque
from typing import assert_never

from zkpy.config import LearnerType, QuorumConfig, ServerConfig
from zkpy.errors import ProtocolError
from zkpy.quorum import dynconfig
from zkpy.quorum import learner as zf
from zkpy.quorum.sync import DEFAULT_COMMITTED_LOG, LoggedTxn
from zkpy.server.learner import LearnerServerCore
from zkpy.server.outputs import CheckQuorum, Forward, Propose, Revalidate, Touches
from zkpy.storage.epochs import ACCEPTED_EPOCH, CURRENT_EPOCH
from zkpy.storage.recovery import Recovered
from zkpy.storage.snapshot import parse_snapshot_stream
from zkpy.storage.txnlog import decode_payload
from zkpy.wire.consts import OpCode
from zkpy.wire.quorum import PacketType, QuorumPacket, QuorumPacketReader

from .effects import (
    LEADER_LINK,
    ActivateConfig,
    AppendLog,
    Applied,
    Logged,
    PacketIn,
    Serving,
    SnapshotLoaded,
    Truncate,
    WriteEpoch,
    WriteSnapshot,
)
from .history import History
from .term import Log, TermCore, ZabOutput

_TOUCH = struct.Struct(">qi")
LEARNER_CONNECT_TRIES = 5  # Learner.connectToLeader
LEARNER_CONNECT_DELAY_MS = 100  # leaderConnectDelayDuringRetryMs (100 ms in 3.8)


class LearningCore(TermCore):
    """A follower, or with ``observer`` an observer (it gets INFORM and never votes)."""

    pipeline: LearnerServerCore | None

    def __init__(self, config: ServerConfig, history: History, *, leader_sid: int, observer: bool,
                 accepted_epoch: int, current_epoch: int, config_data: bytes, now_ms: int, wall_ms: int,
                 trace: bool = False, log: Log = lambda _m: None) -> None:
        super().__init__(now_ms, wall_ms, trace=trace, log=log)
        q = config.quorum
        assert q is not None and q.my_id is not None
        self.config = config
        self.config_data = config_data
        self.quorum: QuorumConfig = q  # the active config
        self._reconfig_data = b""  # the config string of the last reconfig txn applied
        self.role = "observer" if observer else "follower"
        self.leader_sid = leader_sid
        self.tree = history.tree
        self.committed: deque[LoggedTxn] = deque(history.committed, maxlen=DEFAULT_COMMITTED_LOG)
        self.zab = zf.Learner(int(q.my_id), observer=observer, accepted_epoch=accepted_epoch,
                              current_epoch=current_epoch, last_logged_zxid=self.tree.last_processed_zxid,
                              now_ms=now_ms, tick_ms=config.tick_ms, init_limit=q.init_limit_ticks,
                              sync_limit=q.sync_limit_ticks, config_version=q.config_version)
        self.served = False
        self.truncating: int | None = None  # a Truncate is out: nothing goes on until truncated()
        self._reader = QuorumPacketReader(config.max_buffer)
        self._snap: QuorumPacket | None = None  # a SNAP whose snapshot stream is still arriving
        self._snap_buf = bytearray()
        self._snap_searched = 0
        self._to_log: list[tuple[int, bytes]] = []
        self._held: deque[zf.Action] = deque()  # the Zab core's actions not run yet (after a barrier)
        self._connect_tries = 0
        self._heard = False  # a byte came from the leader on this term's link
        self._connect_deadline_ms = now_ms + config.tick_ms * q.init_limit_ticks
        self._started = False

    # ---- inputs

    def connect_timeout_ms(self) -> int:
        """How long the shell's next try to connect to the leader may take (Learner.connectToLeader:
        every try within initLimit ticks of the term's start)."""
        return max(100, self._connect_deadline_ms - self.now_ms)

    def connect_failed(self) -> int | None:
        """A try to connect to the leader failed: the delay before the next, or None when the
        term gives up (``LEARNER_CONNECT_TRIES`` tries, or no time left before the deadline)."""
        self._connect_tries += 1
        if self._connect_tries >= LEARNER_CONNECT_TRIES or self.now_ms + LEARNER_CONNECT_DELAY_MS >= self._connect_deadline_ms:
            return None
        return LEARNER_CONNECT_DELAY_MS

    def connected(self) -> None:
        """The connection to the leader is up: FOLLOWERINFO (OBSERVERINFO) goes out."""
        self._started = True
        self.zab.start()

    def link_data(self, data: bytes) -> None:
        """Bytes from the leader. A malformed stream ends the term."""
        if self.ended is not None:
            return
        self._heard = self._heard or bool(data)
        try:
            self._read(data)
        except (ProtocolError, zf.LearnerError) as exc:
            self._end(f"error while following: {exc}")

    def link_lost(self, reason: str = "the leader closed the connection") -> int | None:
        """The connection to the leader closed: the term ends (None). One that closes before the
        leader sent a byte is a failed try to connect instead, and the delay before the next try
        is returned as by ``connect_failed``: a proxy, load balancer or sidecar in front of a
        leader that is not listening yet accepts the connection and resets it at once, and ending
        the term there sent the learner back to the election while its leader waited initLimit
        for it (issue 26). ZooKeeper's Learner ends the term; the leader sees an early
        disconnect either way."""
        if self.ended is None and not self._heard:
            delay = self.connect_failed()
            if delay is not None:
                return delay
        self._end(reason)
        return None

    def tick(self) -> None:
        """Zab's timers, then the pipeline's (a learner expires only its local sessions)."""
        if self._started:
            self.zab.tick(self.now_ms)
        if self.pipeline is not None:
            self.pipeline.tick()

    def _to_zab(self, outputs: list[ZabOutput]) -> None:
        """What the pipeline sends the leader, in order; its touches answer the oldest PING."""
        for o in outputs:
            match o:
                case Forward():
                    self.zab.request(o.session, o.cxid, o.op, o.body, o.auth)
                case Revalidate():
                    self.zab.revalidate(o.session, o.timeout_ms)
                case Touches():
                    self._ping_reply(o.ping, o.sessions)
                case Propose() | CheckQuorum():
                    raise AssertionError(f"a learner's pipeline produced {o!r}")
                case _:
                    assert_never(o)

    def _ping_reply(self, zxid: int, touches: tuple[tuple[int, int], ...]) -> None:
        data = b"".join(_TOUCH.pack(s, t) for s, t in touches)
        self._send(LEADER_LINK, QuorumPacket(PacketType.PING, zxid, data, None))

    def truncated(self, recovered: Recovered) -> None:
        """The log was cut after the `Truncate`'s zxid and the data dir recovered into
        ``recovered`` (ZOOKEEPER-1154: the uncommitted txns leave the tree too, not only the log)."""
        zxid, self.truncating = self.truncating, None
        assert zxid is not None, "truncated() without a Truncate"
        self.tree = recovered.tree
        self.committed = deque(History.of(recovered).committed, maxlen=DEFAULT_COMMITTED_LOG)
        if self.tree.last_processed_zxid != zxid:
            # what held the state at zxid is gone (e.g. a snapshot named after a newer epoch's
            # (e, 0) that SNAP wrote, with no log under it): rejoin from the state recovered, so
            # that the leader sends what is missing, instead of building on a hole
            self._end(f"TRUNC to 0x{zxid:x} left the state at 0x{self.tree.last_processed_zxid:x}: rejoining")

    def _stop_zab(self, reason: str) -> None:
        self.zab.stop(reason)

    # ---- after the term

    def carry_over(self) -> History | None:
        """A learner that served hands its tree on, with every txn it logged applied (the shell's
        log holds them once closed); one whose synchronisation began and did not finish makes the
        next term recover from disk. One that never began it (the leader could not be reached, or
        went before its DIFF, TRUNC or SNAP) hands on the tree it was given, untouched, as
        ZooKeeper keeps its ZKDatabase: a reload would cost seconds with a large tree."""
        if not self.served:
            if self.zab.synchronising or self._snap is not None:
                return None
            return History(self.tree, list(self.committed), [])
        carried = []
        for zxid, data in self.zab.unapplied_logged():
            hdr, txn = decode_payload(data)
            self.tree.apply(hdr, txn, want_stat=False)
            carried.append(LoggedTxn(zxid, data))
        self.committed.extend(carried)
        self.tree.events.clear()
        return History(self.tree, list(self.committed), carried)

    # ---- the leader's stream

    def _read(self, data: bytes) -> None:
        if self._snap is not None:
            self._snap_buf += data
        else:
            self._reader.feed(data)
        while self.ended is None:
            if self._snap is not None:
                if not self._snapshot_arrived():
                    return
                continue
            packet = self._reader.next()
            if packet is None:
                return
            if packet.type == PacketType.SNAP:
                # the snapshot stream follows the packet; what came before runs on the old tree
                if not self._drain():
                    raise zf.LearnerError("SNAP after a truncation or a snapshot in one synchronisation")
                self._snap = packet
                self._snap_buf = bytearray(self._reader.take_rest())
                self._snap_searched = 0
                continue
            self._step(packet)

    def _snapshot_arrived(self) -> bool:
        snap = self._snap
        assert snap is not None
        got = parse_snapshot_stream(self._snap_buf, self._snap_searched)  # no copy of a growing buffer
        if got is None:
            self._snap_searched = len(self._snap_buf)
            return False
        tree, used = got
        rest = bytes(self._snap_buf[used:])
        self._snap, self._snap_buf = None, bytearray()
        tree.last_processed_zxid = snap.zxid
        self.tree = tree
        self.committed.clear()  # a new history: the old one's txns are no DIFF base any more
        self.log(f"snapshot 0x{snap.zxid:x} from the leader: {tree.node_count()} znodes, {used} bytes")
        if self.trace:
            self._effects.append(SnapshotLoaded(snap.zxid, tree))
        self._reader.feed(rest)
        self._step(snap)
        return True

    def _step(self, packet: QuorumPacket) -> None:
        if self.trace:
            self._effects.append(PacketIn(LEADER_LINK, packet))
        if packet.type == PacketType.PROPOSAL:
            self.metrics.counters["learner_proposal_received_count"] += 1
        elif packet.type == PacketType.COMMIT:
            self.metrics.counters["learner_commit_received_count"] += 1
        self.zab.step(packet, self.now_ms)

    # ---- the Zab core's actions

    def _logged(self, zxid: int) -> None:
        self.zab.logged(zxid)

    def _drain(self) -> bool:
        if self.truncating is not None:
            return False
        held = self._held
        while True:
            if not held:
                held.extend(self.zab.ready())
                if not held:
                    return True
            while held:
                a = held.popleft()
                if not isinstance(a, zf.Log):
                    self._log_pending()
                match a:
                    case zf.Send():
                        self._send(LEADER_LINK, a.packet)
                    case zf.Log():
                        if self.trace:
                            self._effects.append(Logged(a.zxid, a.data))
                        self.logging.append(a.zxid)
                        self._to_log.append((a.zxid, a.data))
                    case zf.Apply():
                        self._apply(a.zxid, a.data)
                    case zf.PingReply():
                        if self.pipeline is not None:  # its touches come back as an output (``_to_zab``)
                            self.pipeline.report_touches(a.zxid)
                        else:
                            self._ping_reply(a.zxid, ())
                    case zf.Revalidated():
                        if self.pipeline is not None:
                            self.pipeline.revalidated(a.session, a.valid)
                    case zf.SyncDone():
                        if self.pipeline is not None:
                            self.pipeline.sync_done()
                    case zf.SetAcceptedEpoch():
                        self._effects.append(WriteEpoch(ACCEPTED_EPOCH, a.epoch))
                    case zf.SetCurrentEpoch():
                        self._effects.append(WriteEpoch(CURRENT_EPOCH, a.epoch))
                    case zf.Truncate():
                        self.log(f"truncating my log to 0x{a.zxid:x} for leader {self.leader_sid}")
                        self.truncating = a.zxid
                        self._barrier(Truncate(a.zxid))
                        return False
                    case zf.TakeSnapshot():
                        self._barrier(WriteSnapshot(self.tree))
                        return False
                    case zf.Activate():
                        self._activate(self._reconfig_data, a.designated)
                    case zf.LeaderConfig():
                        self._activate(a.data, None)
                    case zf.Serve():
                        if self.ended is None:
                            self._serve(a.epoch)
                    case zf.Failed():
                        self._end(a.reason)
                    case _:
                        assert_never(a)
            self._log_pending()

    def _log_pending(self) -> None:
        if self._to_log:
            zxids, payloads = tuple(z for z, _ in self._to_log), tuple(d for _, d in self._to_log)
            self._effects.append(AppendLog(zxids, payloads))
            self._log_to_workers(zxids, payloads)
            self._to_log = []

    def _activate(self, data: bytes, designated: int | None) -> None:
        """A config becomes active (3.8's processReconfig); nothing happens with reconfigEnabled
        false, or when it is not newer than mine."""
        if not self.config.reconfig_enabled or not data:
            return
        try:
            act = dynconfig.activation(self.quorum, data, leader=self.leader_sid, designated=designated)
        except ValueError as exc:
            self.log(f"ignoring a config I cannot read: {exc}")
            return
        if act is None:
            return
        self.quorum = act.quorum
        self.config = dataclasses.replace(self.config, quorum=act.quorum)
        self.config_data = dynconfig.config_data(act.quorum)
        self.log(f"config 0x{act.quorum.config_version:x} is active")
        if self.pipeline is not None:
            self.tree.set_config_node(self.config_data, act.quorum.config_version, self.wall_ms)
        self._effects.append(ActivateConfig(act.quorum))
        if act.restart is not None:
            # 3.8's reconfig flag: a designated leader (or my own leader, when only my role
            # changed) is taken without an election, if it votes in the new config
            nxt = designated if designated is not None else self.leader_sid
            server = act.quorum.server(nxt)
            if server is not None and server.role is LearnerType.PARTICIPANT and (
                    designated is not None or act.quorum.server(self.leader_sid) is not None):
                self.designated = nxt
            self._end(f"reconfig: {act.restart}")

    def _apply(self, zxid: int, data: bytes) -> None:
        hdr, txn = decode_payload(data)
        if hdr.type == OpCode.RECONFIG:
            self._reconfig_data = bytes(txn.data or b"")  # type: ignore[attr-defined]
        self.committed.append(LoggedTxn(zxid, data))
        if self.pipeline is not None:
            self.pipeline.apply_committed(hdr, txn)
        else:
            self.tree.apply(hdr, txn, want_stat=False)
            self.tree.events.clear()
        if self.trace:
            self._effects.append(Applied(zxid, data, hdr, self.tree.digest))

    def _serve(self, epoch: int) -> None:
        self.log(f"synchronised with leader {self.leader_sid} in epoch {epoch}: serving as {self.role}")
        self.tree.set_config_node(self.config_data, self.quorum.config_version, self.wall_ms)
        self.pipeline = LearnerServerCore(self.config, self.now_ms, self.wall_ms, log=self.log, tree=self.tree)
        self.pipeline.metrics = self.metrics
        self.metrics.record(f"{self.role}_sync_time", self.now_ms - self.started_ms)
        self.served = True
        self._effects.append(Serving(epoch, self.pipeline))
        self._start_workers(self.pipeline, self.zab.unapplied_logged())
