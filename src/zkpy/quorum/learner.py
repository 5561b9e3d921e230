"""Zab's learner (follower or observer) as a pure state machine (ZooKeeper 3.8's protocol).

The shell connects to the leader's quorum port, calls ``start``, then feeds every packet to
``step`` (for SNAP: after it has read the snapshot that follows the packet and installed the
tree), reports its fsync progress with ``logged`` and time with ``tick``, and executes
``ready()`` in order. ``SetAcceptedEpoch``, ``SetCurrentEpoch``, ``Truncate`` and
``TakeSnapshot`` must be complete (on disk) before the next action runs; ``Log`` is
asynchronous and its completion comes back through ``logged``.

Order kept (Learner.registerWithLeader / syncWithLeader, with the fixes of ZOOKEEPER-3911,
4646 and 4685 — every txn and the epoch are on disk before the NEWLEADER ack):

1. FOLLOWERINFO (OBSERVERINFO) with my accepted epoch; LEADERINFO brings the new epoch: a
   newer one is persisted as acceptedEpoch before ACKEPOCH (with my current epoch and last
   logged zxid) goes out; an equal one is acked with -1; an older one is an error.
2. DIFF, TRUNC (the shell truncates its log and reloads) or SNAP (the shell installed the
   leader's tree); then PROPOSAL/COMMIT pairs for what I lack. After TRUNC or SNAP those are
   applied to the tree at once and a snapshot is taken at NEWLEADER; after DIFF they are logged.
3. NEWLEADER: snapshot (if needed), log every proposal not applied, wait for the fsync, persist
   currentEpoch, then ACK NEWLEADER.
4. Until UPTODATE, proposals and commits queue. UPTODATE: ACK it, start serving, ACK the
   proposals logged at NEWLEADER, log the rest.
5. Broadcast: a proposal is logged and ACKed after its fsync; a committed txn is applied once
   it is both committed and on disk, in zxid order; SYNC completes in that same order.
   Observers get INFORM (a committed txn) instead, and ack nothing but NEWLEADER and UPTODATE.

Reconfiguration: COMMITANDACTIVATE (INFORMANDACTIVATE for observers) commits a reconfig txn and
names the designated leader: `Activate` follows its `Apply`. NEWLEADER's data is the leader's
config string, handed over as `LeaderConfig` just before `Serve`. What they mean for this server
(a newer config, a new leader, a role changed) the learning term core decides (``member.learning``).

A silence from the leader longer than initLimit (until NEWLEADER) or syncLimit (after) ends
the term (``Failed``), as the socket timeouts do in ZooKeeper.
"""

from __future__ import annotations

import enum
import struct
from collections import deque
from dataclasses import dataclass

from zkpy.ids import make_zxid, zxid_epoch
from zkpy.wire.proto import Id
from zkpy.wire.quorum import LEARNER_PROTOCOL_VERSION, LearnerInfo, PacketType, QuorumPacket

from .zab import Failed as Failed
from .zab import SetAcceptedEpoch as SetAcceptedEpoch
from .zab import SetCurrentEpoch as SetCurrentEpoch
from .zab import packet_name

_INT = struct.Struct(">i")
_REQUEST_HEAD = struct.Struct(">qii")
_REVALIDATE_REQ = struct.Struct(">qi")
_REVALIDATE_REP = struct.Struct(">q?")
_LONG = struct.Struct(">q")


class LearnerError(Exception):
    """The leader broke the protocol, or asked for something impossible: leave this term."""


# ---------------------------------------------------------------- actions


@dataclass(frozen=True, slots=True)
class Send:
    packet: QuorumPacket


@dataclass(frozen=True, slots=True)
class Truncate:
    """Cut the log after ``zxid`` and reload the tree from disk."""

    zxid: int


@dataclass(frozen=True, slots=True)
class TakeSnapshot:
    """Write a snapshot of the tree as it is now, synchronously."""


@dataclass(frozen=True, slots=True)
class Log:
    """Append this txn (serialized header + txn) to the log; report the fsync with ``logged``."""

    zxid: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Apply:
    """Apply this committed txn to the tree (and answer the local client that sent it)."""

    zxid: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Activate:
    """The reconfig txn ``zxid`` (applied by the `Apply` just before) is committed: its config is
    active, and ``designated`` leads (COMMITANDACTIVATE / INFORMANDACTIVATE)."""

    zxid: int
    designated: int


@dataclass(frozen=True, slots=True)
class LeaderConfig:
    """The leader's config (the NEWLEADER packet's config string), handed over at UPTODATE just
    before `Serve`: a learner that missed a reconfig, or joins, adopts it if it is newer."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Serve:
    """Synchronised (UPTODATE): serve clients."""

    epoch: int


@dataclass(frozen=True, slots=True)
class PingReply:
    """Answer the leader's PING with ``zxid`` and the sessions touched since the last one."""

    zxid: int


@dataclass(frozen=True, slots=True)
class Revalidated:
    session: int
    valid: bool


@dataclass(frozen=True, slots=True)
class SyncDone:
    """The oldest forwarded sync is answered: every commit before it has been applied."""


Action = Send | SetAcceptedEpoch | SetCurrentEpoch | Truncate | TakeSnapshot | Log | Apply | Activate | LeaderConfig \
    | Serve | PingReply | Revalidated | SyncDone | Failed


class Phase(enum.Enum):
    DISCOVERY = "discovery"  # FOLLOWERINFO sent; waiting for LEADERINFO
    SYNC_START = "sync-start"  # ACKEPOCH sent; waiting for DIFF / TRUNC / SNAP
    SYNC = "sync"  # receiving the diff; waiting for NEWLEADER
    PERSIST = "persist"  # NEWLEADER in; waiting for the fsync of the proposals before acking it
    AWAIT_UPTODATE = "await-uptodate"
    BROADCAST = "broadcast"
    FAILED = "failed"


@dataclass(slots=True)
class _Txn:
    zxid: int
    data: bytes  # b"" for a SYNC marker
    logged: bool = False
    committed: bool = False
    sync: bool = False
    designated: int | None = None  # a reconfig committed with COMMITANDACTIVATE: the leader it names


class Learner:
    """One term of following (or observing) one leader."""

    def __init__(self, sid: int, *, observer: bool, accepted_epoch: int, current_epoch: int,
                 last_logged_zxid: int, now_ms: int, tick_ms: int, init_limit: int, sync_limit: int,
                 config_version: int = 0) -> None:
        self.sid = sid
        self.observer = observer
        self.accepted_epoch = accepted_epoch
        self.current_epoch = current_epoch
        self.last_logged_zxid = last_logged_zxid
        self.now_ms = now_ms
        self.init_limit_ms = init_limit * tick_ms
        self.sync_limit_ms = sync_limit * tick_ms
        self.config_version = config_version
        self.phase = Phase.DISCOVERY
        self.synchronising = False  # DIFF, TRUNC or SNAP came: the tree may be the leader's from here on
        self.new_epoch = -1
        self._snapshot_needed = False
        self._txns: deque[_Txn] = deque()  # proposals (and SYNC markers) not yet applied, in order
        self._to_ack_at_uptodate: list[int] = []
        self._persist_until = -1  # PERSIST: the zxid whose fsync releases the NEWLEADER ack
        self._logged_upto = last_logged_zxid
        self._deadline_ms = now_ms + self.init_limit_ms
        self._served = False
        self._leader_config = b""  # NEWLEADER's config string
        self._actions: list[Action] = []

    # ------------------------------------------------------------ outputs

    def ready(self) -> list[Action]:
        out, self._actions = self._actions, []
        return out

    @property
    def serving(self) -> bool:
        return self.phase is Phase.BROADCAST

    # ------------------------------------------------------------ requests from the local server

    def start(self) -> None:
        info = LearnerInfo(self.sid, LEARNER_PROTOCOL_VERSION, self.config_version).to_bytes()
        kind = PacketType.OBSERVERINFO if self.observer else PacketType.FOLLOWERINFO
        self._send(kind, make_zxid(self.accepted_epoch, 0), info)

    def request(self, session: int, cxid: int, type_: int, body: bytes, auth: tuple[Id, ...]) -> None:
        """Forward a client's write (or sync) to the leader."""
        self._actions.append(Send(QuorumPacket(PacketType.REQUEST, -1,
                                               _REQUEST_HEAD.pack(session, cxid, type_) + body, list(auth))))

    def revalidate(self, session: int, timeout_ms: int) -> None:
        self._send(PacketType.REVALIDATE, -1, _REVALIDATE_REQ.pack(session, timeout_ms))

    # ------------------------------------------------------------ packets from the leader

    def step(self, p: QuorumPacket, now_ms: int) -> None:
        self.now_ms = now_ms
        if self.phase is Phase.FAILED:
            return
        limit = self.sync_limit_ms if self.phase in (Phase.AWAIT_UPTODATE, Phase.BROADCAST) else self.init_limit_ms
        self._deadline_ms = now_ms + limit
        try:
            self._step(p)
        except LearnerError as exc:
            self._fail(str(exc))

    def _step(self, p: QuorumPacket) -> None:
        t = p.type
        phase = self.phase
        if phase is Phase.DISCOVERY:
            if t != PacketType.LEADERINFO:
                raise LearnerError(f"{packet_name(t)} where LEADERINFO was due (a leader before Zab 1.0?)")
            self._on_leaderinfo(p)
        elif phase is Phase.SYNC_START:
            self._on_sync_start(p)
        elif phase in (Phase.SYNC, Phase.PERSIST, Phase.AWAIT_UPTODATE):
            self._on_sync_packet(p)
        elif phase is Phase.BROADCAST:
            self._on_broadcast_packet(p)

    def _on_leaderinfo(self, p: QuorumPacket) -> None:
        epoch = zxid_epoch(p.zxid)
        if epoch > self.accepted_epoch:
            self._actions.append(SetAcceptedEpoch(epoch))
            ack = self.current_epoch
            self.accepted_epoch = epoch
        elif epoch == self.accepted_epoch:
            ack = -1  # already acked this epoch: this reply must not count as a second ack
        else:
            raise LearnerError(f"the leader's epoch {epoch} is older than my accepted epoch {self.accepted_epoch}")
        self.new_epoch = epoch
        self._send(PacketType.ACKEPOCH, self.last_logged_zxid, _INT.pack(ack))
        self.phase = Phase.SYNC_START

    def _on_sync_start(self, p: QuorumPacket) -> None:
        t = p.type
        self.synchronising = True
        if t == PacketType.DIFF:
            self._snapshot_needed = False
        elif t == PacketType.TRUNC:
            self._snapshot_needed = True
            self._actions.append(Truncate(p.zxid))
            self._logged_upto = p.zxid
        elif t == PacketType.SNAP:
            self._snapshot_needed = True  # the shell has installed the leader's tree at p.zxid
            self._logged_upto = p.zxid
        else:
            raise LearnerError(f"{packet_name(t)} where DIFF, TRUNC or SNAP was due")
        self.phase = Phase.SYNC

    def _on_sync_packet(self, p: QuorumPacket) -> None:
        t = p.type
        if t == PacketType.PROPOSAL:
            self._txns.append(_Txn(p.zxid, bytes(p.data or b"")))
        elif t == PacketType.INFORM or t == PacketType.INFORMANDACTIVATE:
            designated, data = _activation(p)
            self._txns.append(_Txn(p.zxid, data, committed=True, designated=designated))
            self._apply_unlogged_if_snapshot()
        elif t == PacketType.COMMIT or t == PacketType.COMMITANDACTIVATE:
            self._mark_committed(p.zxid, _activation(p)[0])
            self._apply_unlogged_if_snapshot()
        elif t == PacketType.NEWLEADER:
            if self.phase is not Phase.SYNC:
                raise LearnerError("a second NEWLEADER")
            self._leader_config = bytes(p.data or b"")
            self._on_newleader()
        elif t == PacketType.UPTODATE:
            if self.phase is not Phase.AWAIT_UPTODATE:
                raise LearnerError("UPTODATE before NEWLEADER was acknowledged")
            self._on_uptodate()
        elif t == PacketType.PING:
            pass  # not answered before UPTODATE: the leader expects the NEWLEADER ack first
        else:
            raise LearnerError(f"unexpected {packet_name(t)} while synchronising")

    def _apply_unlogged_if_snapshot(self) -> None:
        """Before NEWLEADER, after TRUNC or SNAP: committed txns go straight into the tree (the
        snapshot at NEWLEADER will hold them)."""
        if self.phase is not Phase.SYNC or not self._snapshot_needed:
            return
        while self._txns and self._txns[0].committed:
            txn = self._txns.popleft()
            self._apply(txn)
            self._logged_upto = max(self._logged_upto, txn.zxid)

    def _on_newleader(self) -> None:
        if self._snapshot_needed:
            self._actions.append(TakeSnapshot())
        pending = [t for t in self._txns if not t.logged]
        for txn in pending:
            self._actions.append(Log(txn.zxid, txn.data))
        self._to_ack_at_uptodate = [t.zxid for t in pending]
        self.phase = Phase.PERSIST
        self._persist_until = pending[-1].zxid if pending else -1
        if self._persist_until < 0 or self._logged_upto >= self._persist_until:
            self._ack_newleader()

    def _ack_newleader(self) -> None:
        self._actions.append(SetCurrentEpoch(self.new_epoch))
        self.current_epoch = self.new_epoch
        self._send(PacketType.ACK, make_zxid(self.new_epoch, 0))
        self.phase = Phase.AWAIT_UPTODATE
        self._deadline_ms = self.now_ms + self.sync_limit_ms

    def _on_uptodate(self) -> None:
        self._send(PacketType.ACK, make_zxid(self.new_epoch, 0))
        self.phase = Phase.BROADCAST
        self._served = True
        if self._leader_config:
            self._actions.append(LeaderConfig(self._leader_config))
        self._actions.append(Serve(self.new_epoch))
        if not self.observer:
            for zxid in self._to_ack_at_uptodate:
                self._send(PacketType.ACK, zxid)
        self._to_ack_at_uptodate = []
        for txn in self._txns:
            if not txn.logged and not txn.sync and txn.zxid > self._persist_until:
                self._actions.append(Log(txn.zxid, txn.data))
        self._apply_ready()

    def _on_broadcast_packet(self, p: QuorumPacket) -> None:
        t = p.type
        if t == PacketType.PROPOSAL:
            if self.observer:
                return  # ZooKeeper's observers ignore proposals
            txn = _Txn(p.zxid, bytes(p.data or b""))
            self._txns.append(txn)
            self._actions.append(Log(txn.zxid, txn.data))
        elif t == PacketType.COMMIT or t == PacketType.COMMITANDACTIVATE:
            if self.observer:
                return
            self._mark_committed(p.zxid, _activation(p)[0])
            self._apply_ready()
        elif t == PacketType.INFORM or t == PacketType.INFORMANDACTIVATE:
            designated, data = _activation(p)
            txn = _Txn(p.zxid, data, committed=True, designated=designated)
            self._txns.append(txn)
            self._actions.append(Log(txn.zxid, txn.data))
        elif t == PacketType.PING:
            self._actions.append(PingReply(p.zxid))
        elif t == PacketType.REVALIDATE:
            data = p.data or b""
            if len(data) < _REVALIDATE_REP.size:
                raise LearnerError(f"REVALIDATE of {len(data)} bytes")
            session, valid = _REVALIDATE_REP.unpack_from(data, 0)
            self._actions.append(Revalidated(session, valid))
        elif t == PacketType.SYNC:
            # answered once every txn committed before it is applied; proposals not yet
            # committed (made after the sync) do not hold it up
            at = next((i for i, txn in enumerate(self._txns) if not txn.committed), len(self._txns))
            self._txns.insert(at, _Txn(-1, b"", logged=True, committed=True, sync=True))
            self._apply_ready()
        elif t == PacketType.UPTODATE:
            pass  # ZooKeeper logs this and carries on
        else:
            raise LearnerError(f"unexpected {packet_name(t)} while following")

    def _mark_committed(self, zxid: int, designated: int | None = None) -> None:
        for txn in self._txns:
            if txn.sync or txn.committed:
                continue
            if txn.zxid == zxid:
                txn.committed = True
                txn.designated = designated
                return
            raise LearnerError(f"COMMIT 0x{zxid:x} but the next uncommitted proposal is 0x{txn.zxid:x}")
        raise LearnerError(f"COMMIT 0x{zxid:x} for no pending proposal")

    # ------------------------------------------------------------ persistence and time

    def logged(self, zxid: int) -> None:
        """Every Log action up to ``zxid`` is on disk."""
        if self.phase is Phase.FAILED:
            return
        newly = [t.zxid for t in self._txns if not t.sync and not t.logged and t.zxid <= zxid]
        for txn in self._txns:
            if not txn.sync and txn.zxid <= zxid:
                txn.logged = True
        self._logged_upto = max(self._logged_upto, zxid)
        if self.phase is Phase.PERSIST and self._logged_upto >= self._persist_until:
            self._ack_newleader()
        elif self.phase is Phase.BROADCAST:
            if not self.observer:
                for z in newly:
                    if z > self._persist_until:
                        self._send(PacketType.ACK, z)
            self._apply_ready()

    def unapplied_logged(self) -> list[tuple[int, bytes]]:
        """Once serving: every txn handed to the log and not applied, in order. A shell whose
        log has synced them can apply them to carry its tree into the next term."""
        if self.phase is not Phase.BROADCAST and not (self.phase is Phase.FAILED and self._served):
            raise LearnerError("unapplied_logged before serving")
        return [(t.zxid, t.data) for t in self._txns if not t.sync]

    def _apply_ready(self) -> None:
        while self._txns and self._txns[0].logged and self._txns[0].committed:
            txn = self._txns.popleft()
            if txn.sync:
                self._actions.append(SyncDone())
            else:
                self._apply(txn)

    def _apply(self, txn: _Txn) -> None:
        self._actions.append(Apply(txn.zxid, txn.data))
        if txn.designated is not None:
            self._actions.append(Activate(txn.zxid, txn.designated))

    def tick(self, now_ms: int) -> None:
        self.now_ms = now_ms
        if self.phase is not Phase.FAILED and now_ms >= self._deadline_ms:
            limit = "syncLimit" if self.phase in (Phase.AWAIT_UPTODATE, Phase.BROADCAST) else "initLimit"
            self._fail(f"no packet from the leader within {limit} ({self.phase.value})")

    def stop(self, reason: str) -> None:
        self._fail(reason)

    def _fail(self, reason: str) -> None:
        if self.phase is not Phase.FAILED:
            self.phase = Phase.FAILED
            self._actions.append(Failed(reason))

    def _send(self, type_: int, zxid: int, data: bytes | None = None) -> None:
        self._actions.append(Send(QuorumPacket(type_, zxid, data, None)))


def _activation(p: QuorumPacket) -> tuple[int | None, bytes]:
    """The designated leader of a COMMITANDACTIVATE / INFORMANDACTIVATE (None for COMMIT and
    INFORM) and the rest of its data (INFORM's txn)."""
    data = bytes(p.data or b"")
    if p.type not in (PacketType.COMMITANDACTIVATE, PacketType.INFORMANDACTIVATE):
        return None, data
    if len(data) < _LONG.size:
        raise LearnerError(f"{packet_name(p.type)} without the designated leader")
    return _LONG.unpack_from(data, 0)[0], data[_LONG.size:]
