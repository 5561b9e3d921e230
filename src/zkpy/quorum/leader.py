"""Zab's leader as a pure state machine: discovery, synchronisation and broadcast (ZooKeeper 3.8).

The shell accepts learner connections on the quorum port and numbers them (``cid``); it feeds
``connected``/``step``/``disconnected``/``tick``, the local fsync progress (``logged``) and the
proposals its request pipeline makes (``propose``), and after every call executes
``ready().actions`` in order. Actions that persist (``SetAcceptedEpoch``, ``SetCurrentEpoch``)
must be complete before any later action runs: that is how "persist, then send" holds.

Phases (Leader.lead and LearnerHandler.run of 3.8):

- DISCOVERY: FOLLOWERINFO / OBSERVERINFO carry each learner's accepted epoch. Once a quorum
  of voters (me included) has reported, the new epoch is one more than the largest of them; it
  is persisted as my acceptedEpoch, then sent to every learner in LEADERINFO (later learners get
  it at once).
- Epoch ack: ACKEPOCH carries each learner's current epoch and last logged zxid. A learner
  whose (current epoch, last zxid) is ahead of mine is dropped. Once a quorum of voters (me
  included) has acked, I persist the new epoch as my currentEpoch.
- SYNC (per learner, as soon as both the epoch quorum and its own ACKEPOCH are in): DIFF,
  TRUNC or SNAP (``plan_sync``), the committed txns it lacks, every outstanding proposal after
  them, then NEWLEADER. From then on the learner gets every new proposal too.
- The NEWLEADER ack of a quorum of voters (me included, once my currentEpoch is written; of
  ``newleader_verifier`` too, when NEWLEADER carries a newer config) establishes the epoch: ``Established`` tells the shell to start serving, and every learner
  whose ack is in gets UPTODATE (later ones as their ack arrives).
- BROADCAST: each proposal goes to the voters being forwarded to; it commits, in zxid order,
  once a quorum of voters (me included, after my own fsync) has acked it; COMMIT goes to the
  voters, INFORM (with the txn) to the observers. A learner's SYNC request is answered once
  every proposal made before it has committed.

Reconfiguration (Leader.propose / tryToCommit of 3.8): a proposal made with a next verifier (a
reconfig txn), and every proposal after it until it commits, commits only with a quorum of the
current config *and* of the next one (non-voting followers ack too: only OBSERVERINFO makes an
observer). Its commit goes out as COMMITANDACTIVATE (INFORMANDACTIVATE to observers) naming the
designated leader (``dynconfig.designated_leader``: me if I vote in the next config); `Activate`
follows its `Commit`, and from then on the next config counts. A leader that designated another
commits nothing more and ends its term once its followers left (at most a tick later).

Liveness (Leader.lead's loop): a PING goes to every synced learner each half tick; a learner
that sent nothing for syncLimit ticks is dropped; each tick, if the voters heard from within
syncLimit ticks (me included) are no quorum, I stop leading (``Failed``). Each wait before the
epoch is established lasts at most initLimit ticks.
"""

from __future__ import annotations

import enum
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from zkpy.ids import make_zxid, zxid_counter, zxid_epoch
from zkpy.wire.proto import Id
from zkpy.wire.quorum import LEARNER_PROTOCOL_VERSION, LearnerInfo, PacketType, QuorumPacket

from .dynconfig import designated_leader
from .sync import CommittedLog, LoggedTxn, SyncKind, plan_sync
from .verifier import QuorumVerifier
from .zab import Failed as Failed
from .zab import SetAcceptedEpoch as SetAcceptedEpoch
from .zab import SetCurrentEpoch as SetCurrentEpoch
from .zab import packet_name

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_REQUEST_HEAD = struct.Struct(">qii")
_TOUCH = struct.Struct(">qi")
_REVALIDATE = struct.Struct(">qi")


class ZabError(Exception):
    """A peer broke the protocol; the connection to it is dropped."""


# ---------------------------------------------------------------- actions


@dataclass(frozen=True, slots=True)
class Send:
    """Write ``packet`` to learner ``cid``; with ``snapshot``, follow it with the tree's snapshot
    (sessions, ACLs, nodes, end marker) and the signature, as SNAP requires."""

    cid: int
    packet: QuorumPacket
    snapshot: bool = False


@dataclass(frozen=True, slots=True)
class Close:
    cid: int
    reason: str


@dataclass(frozen=True, slots=True)
class Established:
    """The epoch is established: serve clients; the next proposal is ``make_zxid(epoch, 1)``."""

    epoch: int


@dataclass(frozen=True, slots=True)
class Commit:
    """The next ``count`` proposals (in zxid order) are committed: apply and answer them."""

    count: int


@dataclass(frozen=True, slots=True)
class LearnerRequest:
    """A client request a learner forwarded; prep it as if its session were connected here."""

    sid: int
    session: int
    cxid: int
    type: int
    body: bytes
    auth: tuple[Id, ...]


@dataclass(frozen=True, slots=True)
class LearnerSync:
    """A learner forwarded a client's sync. Call ``learner_sync(cid)`` once every request that
    learner forwarded before it has been proposed: the answer must follow their commits, as in
    ZooKeeper's pipeline. (A learner's CommitProcessor expects the commits of its own requests,
    syncs included, in the order it sent them; an early answer wedges every session there.)"""

    cid: int


@dataclass(frozen=True, slots=True)
class Touch:
    """A learner saw these sessions alive (PING reply): refresh their expiry."""

    touches: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class Revalidate:
    """A client moved to learner ``cid`` with ``session``: answer with ``revalidated``."""

    cid: int
    session: int
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class Activate:
    """The reconfig proposal ``zxid`` committed (its `Commit` came first): its config, of
    ``verifier``, is active from now on; ``designated`` leads the next term (me: I go on leading;
    another: I commit nothing more, and this term ends right after)."""

    zxid: int
    verifier: QuorumVerifier
    designated: int


@dataclass(frozen=True, slots=True)
class QuorumConfirmed:
    """A quorum check asked with ``check_quorum(token)`` passed: the local sync may answer."""

    token: int


Action = Send | Close | SetAcceptedEpoch | SetCurrentEpoch | Established | Commit | LearnerRequest | LearnerSync \
    | Touch | Revalidate | QuorumConfirmed | Activate | Failed


# ---------------------------------------------------------------- state


class Phase(enum.Enum):
    DISCOVERY = "discovery"  # waiting for a quorum of FOLLOWERINFO
    EPOCH_ACK = "epoch-ack"  # waiting for a quorum of ACKEPOCH
    NEWLEADER_ACK = "newleader-ack"  # waiting for a quorum of NEWLEADER acks
    BROADCAST = "broadcast"
    STOPPED = "stopped"


class LearnerPhase(enum.Enum):
    AWAIT_INFO = "await-info"
    AWAIT_EPOCH = "await-epoch"  # info in; LEADERINFO not yet sent
    AWAIT_ACKEPOCH = "await-ackepoch"
    AWAIT_SYNC = "await-sync"  # ACKEPOCH in; waiting for the epoch quorum
    AWAIT_NEWLEADER_ACK = "await-newleader-ack"
    AWAIT_UPTODATE = "await-uptodate"  # acked NEWLEADER; waiting for the epoch to be established
    FORWARDING = "forwarding"


@dataclass(slots=True)
class LearnerHandle:
    cid: int
    phase: LearnerPhase = LearnerPhase.AWAIT_INFO
    sid: int = -1
    observer: bool = False  # came with OBSERVERINFO: gets INFORM, acks nothing (a non-voting follower is no observer)
    accepted_epoch: int = -1
    last_zxid: int = -1
    deadline_ms: int = 0  # by when the next packet must arrive
    pings_sent: int = 0  # PINGs sent since UPTODATE (a quorum check counts their replies)
    pings_answered: int = 0

    @property
    def synced_from_leader(self) -> bool:
        """Proposals are forwarded to it (sync sent)."""
        return self.phase in (LearnerPhase.AWAIT_NEWLEADER_ACK, LearnerPhase.AWAIT_UPTODATE, LearnerPhase.FORWARDING)


@dataclass(slots=True)
class QuorumCheck:
    """zkpy.quorumSync: a sync waits until a quorum of voters answered a PING sent after it
    arrived, so that I still led at some moment after the sync was issued."""

    needed: dict[int, int]  # sid -> the count of its PING replies that answers the PING sent for this check
    confirmed: set[int]
    token: int | None = None  # a local sync's token
    cid: int | None = None  # a learner's sync
    after_zxid: int = 0  # ... also waits for proposals made before it


@dataclass(slots=True)
class Outstanding:
    zxid: int
    data: bytes
    acks: set[int] = field(default_factory=set)
    # while a reconfig is pending, a proposal needs a quorum of the next config too (3.8's
    # Proposal.qvAcksetPairs); ``reconfig`` marks the proposal that activates it
    next_verifier: QuorumVerifier | None = None
    reconfig: bool = False


class Leader:
    """One leader term. See the module doc for the rules it follows."""

    def __init__(self, sid: int, verifier: QuorumVerifier, *, accepted_epoch: int, current_epoch: int,
                 last_zxid: int, committed: CommittedLog, now_ms: int, tick_ms: int, init_limit: int,
                 sync_limit: int, config_data: bytes = b"", quorum_sync: bool = False,
                 newleader_config: Callable[[int], tuple[bytes, QuorumVerifier | None]] | None = None) -> None:
        self.sid = sid
        self.verifier = verifier
        self.accepted_epoch = accepted_epoch
        self.current_epoch = current_epoch
        self.last_zxid = last_zxid  # the last zxid of my history (the tree's last processed)
        self.committed = committed
        self.now_ms = now_ms
        self.tick_ms = tick_ms
        self.init_limit_ms = init_limit * tick_ms
        self.sync_limit_ms = sync_limit * tick_ms
        self.config_data = config_data  # what NEWLEADER carries (the config string)
        self._newleader_config = newleader_config  # or, given the new epoch, what it carries (and its verifier, if newer)
        self.quorum_sync = quorum_sync
        self.next_verifier: QuorumVerifier | None = None  # the config of a reconfig proposed, not yet committed
        # the config NEWLEADER carries when it is newer than mine (a reconfig in my log): the epoch
        # is established only with a quorum of it too (3.8's newLeaderProposal with both verifiers)
        self.newleader_verifier: QuorumVerifier | None = None
        self.allowed_to_commit = True  # false once a reconfig handed the leadership to another
        self._handover_ms = 0  # then: when the term ends at the latest (the learners leave first)
        self._checks: list[QuorumCheck] = []
        self.phase = Phase.DISCOVERY
        self.epoch = -1
        self.learners: dict[int, LearnerHandle] = {}
        self._connecting: dict[int, int] = {sid: accepted_epoch}  # sid -> accepted epoch
        self._epoch_acked: set[int] = {sid}
        self._newleader_acked: set[int] = set()
        self._phase_deadline_ms = now_ms + self.init_limit_ms
        self.outstanding: deque[Outstanding] = deque()
        self._outstanding_by_zxid: dict[int, Outstanding] = {}
        self._logged_upto = last_zxid  # my own log is synced up to here (my ack of every proposal before)
        self.last_proposed = last_zxid
        self.last_committed = last_zxid
        self._pending_syncs: dict[int, list[int]] = {}  # zxid -> cids whose SYNC waits on it
        self._next_ping_ms = now_ms
        self._actions: list[Action] = []
        self._maybe_decide_epoch()

    # ------------------------------------------------------------ outputs

    def ready(self) -> list[Action]:
        out, self._actions = self._actions, []
        return out

    @property
    def established(self) -> bool:
        return self.phase is Phase.BROADCAST

    @property
    def pending_syncs(self) -> int:
        """Learners' syncs waiting for a commit (or a quorum check)."""
        return sum(len(cids) for cids in self._pending_syncs.values()) + len(self._checks)

    def forwarding(self) -> list[LearnerHandle]:
        return [h for h in self.learners.values() if h.synced_from_leader]

    # ------------------------------------------------------------ inputs: connections

    def connected(self, cid: int, now_ms: int) -> None:
        self.now_ms = now_ms
        self.learners[cid] = LearnerHandle(cid, deadline_ms=now_ms + self.init_limit_ms)

    def disconnected(self, cid: int) -> None:
        h = self.learners.pop(cid, None)
        if h is None:
            return
        for cids in self._pending_syncs.values():
            while cid in cids:
                cids.remove(cid)
        self._handed_over()

    def step(self, cid: int, packet: QuorumPacket, now_ms: int) -> None:
        """A packet from learner ``cid``; a protocol violation closes that learner only."""
        self.now_ms = now_ms
        h = self.learners.get(cid)
        if h is None or self.phase is Phase.STOPPED:
            return
        h.deadline_ms = now_ms + (self.sync_limit_ms if h.phase is LearnerPhase.FORWARDING else self.init_limit_ms)
        try:
            self._step(h, packet)
        except ZabError as exc:
            self._drop(h, str(exc))

    def _step(self, h: LearnerHandle, p: QuorumPacket) -> None:
        t = p.type
        if h.phase is LearnerPhase.AWAIT_INFO:
            if t not in (PacketType.FOLLOWERINFO, PacketType.OBSERVERINFO):
                raise ZabError(f"first packet is {packet_name(t)}, not FOLLOWERINFO or OBSERVERINFO")
            self._on_info(h, p)
        elif h.phase is LearnerPhase.AWAIT_ACKEPOCH:
            if t != PacketType.ACKEPOCH:
                raise ZabError(f"{packet_name(t)} where ACKEPOCH was due")
            self._on_ackepoch(h, p)
        elif h.phase is LearnerPhase.AWAIT_NEWLEADER_ACK:
            if t != PacketType.ACK:
                raise ZabError(f"{packet_name(t)} where the NEWLEADER ack was due")
            self._on_newleader_ack(h, p)
        elif h.phase is LearnerPhase.FORWARDING or h.phase is LearnerPhase.AWAIT_UPTODATE:
            self._on_broadcast_packet(h, p)
        else:
            raise ZabError(f"{packet_name(t)} while {h.phase.value}")

    # ------------------------------------------------------------ discovery

    def _on_info(self, h: LearnerHandle, p: QuorumPacket) -> None:
        data = p.data or b""
        if len(data) < 8:
            raise ZabError("FOLLOWERINFO without a LearnerInfo")
        info = LearnerInfo.from_bytes(data) if len(data) >= 20 else LearnerInfo(
            struct.unpack_from(">q", data)[0], _INT.unpack_from(data, 8)[0] if len(data) >= 12 else 0, 0)
        if info.protocolVersion < LEARNER_PROTOCOL_VERSION:
            raise ZabError(f"learner protocol 0x{info.protocolVersion:x} predates Zab 1.0")
        for other in list(self.learners.values()):
            if other is not h and other.sid == info.serverid:
                self._drop(other, f"sid {info.serverid} connected again")
        h.sid = info.serverid
        h.observer = p.type == PacketType.OBSERVERINFO
        h.accepted_epoch = zxid_epoch(p.zxid)
        h.phase = LearnerPhase.AWAIT_EPOCH
        if self.phase is not Phase.DISCOVERY and not h.observer and h.accepted_epoch > self.epoch:
            # it acked a newer would-be leader's LEADERINFO: it would refuse mine for ever (and
            # ZooKeeper's learners do the same). A new election picks an epoch past it.
            self._fail(f"learner {h.sid} accepted epoch {h.accepted_epoch}, newer than mine ({self.epoch}): "
                       "stepping down so that the next election picks a newer epoch")
            return
        if self.phase is Phase.DISCOVERY:
            # an observer's accepted epoch counts for the new epoch (as getEpochToPropose counts
            # every learner that arrives while it waits); only voters count for the quorum
            self._connecting[h.sid] = max(self._connecting.get(h.sid, -1), h.accepted_epoch)
            self._maybe_decide_epoch()
        else:
            self._send_leaderinfo(h)

    def _maybe_decide_epoch(self) -> None:
        if self.phase is not Phase.DISCOVERY or not self.verifier.contains_quorum(self._connecting):
            return
        self.epoch = max(self._connecting.values()) + 1
        if self._newleader_config is not None:
            self.config_data, self.newleader_verifier = self._newleader_config(self.epoch)
        self.phase = Phase.EPOCH_ACK
        self._phase_deadline_ms = self.now_ms + self.init_limit_ms
        self.accepted_epoch = self.epoch
        self._actions.append(SetAcceptedEpoch(self.epoch))
        for h in self.learners.values():
            if h.phase is LearnerPhase.AWAIT_EPOCH:
                self._send_leaderinfo(h)
        self._maybe_epoch_quorum()

    def _send_leaderinfo(self, h: LearnerHandle) -> None:
        h.phase = LearnerPhase.AWAIT_ACKEPOCH
        self._send(h, PacketType.LEADERINFO, make_zxid(self.epoch, 0), _INT.pack(LEARNER_PROTOCOL_VERSION))

    def _on_ackepoch(self, h: LearnerHandle, p: QuorumPacket) -> None:
        data = p.data or b""
        if len(data) < 4:
            raise ZabError("ACKEPOCH without an epoch")
        (current,) = _INT.unpack_from(data, 0)
        h.last_zxid = p.zxid
        if current != -1:
            if (current, p.zxid) > (self.current_epoch, self.last_zxid):
                raise ZabError(f"learner {h.sid} is ahead of the leader: epoch {current}, zxid 0x{p.zxid:x} "
                               f"against {self.current_epoch}, 0x{self.last_zxid:x}")
            if p.zxid != -1 and not h.observer:
                self._epoch_acked.add(h.sid)
        h.phase = LearnerPhase.AWAIT_SYNC
        if self.phase is Phase.EPOCH_ACK:
            self._maybe_epoch_quorum()
        elif self.phase in (Phase.NEWLEADER_ACK, Phase.BROADCAST):
            self._sync(h)

    def _maybe_epoch_quorum(self) -> None:
        if self.phase is not Phase.EPOCH_ACK or not self.verifier.contains_quorum(self._epoch_acked):
            return
        self.phase = Phase.NEWLEADER_ACK
        self._phase_deadline_ms = self.now_ms + self.init_limit_ms
        self.current_epoch = self.epoch
        self._actions.append(SetCurrentEpoch(self.epoch))
        for h in list(self.learners.values()):
            if h.phase is LearnerPhase.AWAIT_SYNC:
                self._sync(h)
        self._add_newleader_ack(self.sid)

    # ------------------------------------------------------------ synchronisation

    def _sync(self, h: LearnerHandle) -> None:
        plan = plan_sync(h.last_zxid, self.committed, self.last_committed)
        if plan.kind is SyncKind.SNAP:
            self._actions.append(Send(h.cid, QuorumPacket(PacketType.SNAP, plan.zxid, None, None), snapshot=True))
        else:
            op = PacketType.DIFF if plan.kind is SyncKind.DIFF else PacketType.TRUNC
            self._send(h, op, plan.zxid)
        for txn in plan.txns:
            self._send(h, PacketType.PROPOSAL, txn.zxid, txn.data)
            self._send(h, PacketType.COMMIT, txn.zxid)
        after = plan.forward_from
        if not h.observer:
            for o in self.outstanding:
                if o.zxid > after:
                    self._send(h, PacketType.PROPOSAL, o.zxid, o.data)
        h.phase = LearnerPhase.AWAIT_NEWLEADER_ACK
        self._send(h, PacketType.NEWLEADER, make_zxid(self.epoch, 0), self.config_data or None)

    def _on_newleader_ack(self, h: LearnerHandle, p: QuorumPacket) -> None:
        if p.zxid != make_zxid(self.epoch, 0):
            raise ZabError(f"NEWLEADER ack for 0x{p.zxid:x}, expected 0x{make_zxid(self.epoch, 0):x}")
        h.phase = LearnerPhase.AWAIT_UPTODATE
        h.deadline_ms = self.now_ms + self.sync_limit_ms
        if self.phase is Phase.BROADCAST:
            self._uptodate(h)
        elif not h.observer:
            self._add_newleader_ack(h.sid)

    def _add_newleader_ack(self, sid: int) -> None:
        self._newleader_acked.add(sid)
        if self.phase is not Phase.NEWLEADER_ACK or self.sid not in self._newleader_acked:
            return
        if not self.verifier.contains_quorum(self._newleader_acked):
            return
        if self.newleader_verifier is not None and not self.newleader_verifier.contains_quorum(self._newleader_acked):
            return
        self.phase = Phase.BROADCAST
        self.last_proposed = self.last_committed = make_zxid(self.epoch, 0)
        self._actions.append(Established(self.epoch))
        self._next_ping_ms = self.now_ms
        for h in list(self.learners.values()):
            if h.phase is LearnerPhase.AWAIT_UPTODATE:
                self._uptodate(h)

    def _uptodate(self, h: LearnerHandle) -> None:
        h.phase = LearnerPhase.FORWARDING
        h.pings_sent = h.pings_answered = 0  # learners answer PINGs from UPTODATE on
        h.deadline_ms = self.now_ms + self.sync_limit_ms
        self._send(h, PacketType.UPTODATE, -1)

    # ------------------------------------------------------------ broadcast

    def propose(self, zxid: int, data: bytes, next_verifier: QuorumVerifier | None = None) -> None:
        """The pipeline made a txn (``data``: serialized header + txn); send it to the followers.
        With ``next_verifier`` it is a reconfig: it and every proposal after it commit only with a
        quorum of both configs, and its commit activates the next one (3.8 allows one reconfig
        in flight; prep refuses a second). Ignored once the leader has stopped: the term is over
        and the txn is never committed."""
        if self.phase is Phase.STOPPED:
            return
        if self.phase is not Phase.BROADCAST:
            raise ZabError("propose before the epoch is established")
        if zxid <= self.last_proposed:
            raise ZabError(f"proposal 0x{zxid:x} after 0x{self.last_proposed:x}")
        self.last_proposed = zxid
        if next_verifier is not None:
            self.next_verifier = next_verifier
        o = Outstanding(zxid, data, next_verifier=self.next_verifier, reconfig=next_verifier is not None)
        self.outstanding.append(o)
        self._outstanding_by_zxid[zxid] = o
        packet = QuorumPacket(PacketType.PROPOSAL, zxid, data, None)  # one object: the shell encodes it once
        for h in self.learners.values():
            if h.synced_from_leader and not h.observer:
                self._actions.append(Send(h.cid, packet))

    def logged(self, zxid: int) -> None:
        """My own log holds every proposal up to ``zxid`` (fsynced): my ack of each."""
        if zxid > self._logged_upto:
            self._logged_upto = zxid
            if self.phase is Phase.BROADCAST:
                self._try_commit()

    def _on_broadcast_packet(self, h: LearnerHandle, p: QuorumPacket) -> None:
        t = p.type
        if t == PacketType.ACK:
            if not h.observer:
                self._ack(h.sid, p.zxid)
        elif t == PacketType.PING:
            h.pings_answered += 1
            if self._checks:
                self._advance_checks(h)
            data = p.data or b""
            touches = tuple(_TOUCH.unpack_from(data, i) for i in range(0, len(data) - len(data) % 12, 12))
            if touches:
                self._actions.append(Touch(touches))
        elif t == PacketType.REQUEST:
            data = p.data or b""
            if len(data) < _REQUEST_HEAD.size:
                raise ZabError(f"REQUEST of {len(data)} bytes")
            session, cxid, rtype = _REQUEST_HEAD.unpack_from(data, 0)
            if rtype == 9:  # OpCode.sync: answered once what was proposed before it commits
                self._actions.append(LearnerSync(h.cid))
            else:
                self._actions.append(LearnerRequest(h.sid, session, cxid, rtype, bytes(data[_REQUEST_HEAD.size:]),
                                                    tuple(p.authinfo or ())))
        elif t == PacketType.REVALIDATE:
            data = p.data or b""
            if len(data) < _REVALIDATE.size:
                raise ZabError(f"REVALIDATE of {len(data)} bytes")
            session, timeout = _REVALIDATE.unpack_from(data, 0)
            self._actions.append(Revalidate(h.cid, session, timeout))
        else:
            raise ZabError(f"unexpected {packet_name(t)} from learner {h.sid}")

    def revalidated(self, cid: int, session: int, valid: bool) -> None:
        h = self.learners.get(cid)
        if h is not None:
            self._send(h, PacketType.REVALIDATE, -1, struct.pack(">q?", session, valid))

    def learner_sync(self, cid: int) -> None:
        """Answer learner ``cid``'s sync (see `LearnerSync`) once what is proposed now commits."""
        h = self.learners.get(cid)
        if h is not None and self.phase is Phase.BROADCAST:
            self._on_sync(h)

    def _on_sync(self, h: LearnerHandle) -> None:
        if self.quorum_sync:
            self._start_check(QuorumCheck({}, {self.sid}, cid=h.cid, after_zxid=self.last_proposed))
            return
        if not self.outstanding:
            self._send(h, PacketType.SYNC, 0)
        else:
            self._pending_syncs.setdefault(self.last_proposed, []).append(h.cid)

    def check_quorum(self, token: int) -> None:
        """A local sync under zkpy.quorumSync: ``QuorumConfirmed(token)`` once a quorum answered."""
        self._start_check(QuorumCheck({}, {self.sid}, token=token))

    def _start_check(self, check: QuorumCheck) -> None:
        for h in self.learners.values():
            if h.phase is LearnerPhase.FORWARDING and not h.observer:
                self._send(h, PacketType.PING, self.last_proposed)
                h.pings_sent += 1
                check.needed[h.sid] = h.pings_sent
        self._checks.append(check)
        self._finish_checks()

    def _advance_checks(self, h: LearnerHandle) -> None:
        for check in self._checks:
            need = check.needed.get(h.sid)
            if need is not None and h.pings_answered >= need:
                check.confirmed.add(h.sid)
        self._finish_checks()

    def _finish_checks(self) -> None:
        still = []
        for check in self._checks:
            if not self.verifier.contains_quorum(check.confirmed):
                still.append(check)
            elif check.token is not None:
                self._actions.append(QuorumConfirmed(check.token))
            elif check.cid is not None and check.cid in self.learners:
                h = self.learners[check.cid]
                if check.after_zxid <= self.last_committed:
                    self._send(h, PacketType.SYNC, 0)
                else:
                    self._pending_syncs.setdefault(check.after_zxid, []).append(h.cid)
        self._checks = still

    def _ack(self, sid: int, zxid: int) -> None:
        if self.phase is not Phase.BROADCAST or zxid_counter(zxid) == 0:
            return
        o = self._outstanding_by_zxid.get(zxid)
        if o is not None:
            o.acks.add(sid)
            if o is self.outstanding[0]:
                self._try_commit()

    def _try_commit(self) -> None:
        """Commit from the oldest outstanding proposal while each has a quorum of acks (mine
        included; of both configs while a reconfig is pending); the Commit action comes first, so
        a SNAP serialized by a later action holds these txns. A committed reconfig goes out as
        COMMITANDACTIVATE (INFORMANDACTIVATE) naming the designated leader, and is followed by
        `Activate`; if that leader is another server, nothing more commits and the term ends
        (Leader.tryToCommit, allowedToCommit)."""
        count = 0
        sends: list[Action] = []
        outstanding = self.outstanding
        while self.allowed_to_commit and outstanding and outstanding[0].zxid <= self._logged_upto:
            head = outstanding[0]
            head.acks.add(self.sid)
            if not self.verifier.contains_quorum(head.acks):
                break
            if head.next_verifier is not None and not head.next_verifier.contains_quorum(head.acks):
                break
            o = outstanding.popleft()
            del self._outstanding_by_zxid[o.zxid]
            self.last_committed = o.zxid
            self.committed.add(LoggedTxn(o.zxid, o.data))
            count += 1
            activate = self._designate(o) if o.reconfig else None
            commit = inform = None
            for h in self.learners.values():
                if h.synced_from_leader:
                    if h.observer:
                        if inform is None:
                            inform = QuorumPacket(PacketType.INFORM, o.zxid, o.data, None) if activate is None \
                                else QuorumPacket(PacketType.INFORMANDACTIVATE, o.zxid,
                                                  _LONG.pack(activate.designated) + o.data, None)
                        sends.append(Send(h.cid, inform))
                    else:
                        if commit is None:
                            commit = QuorumPacket(PacketType.COMMIT, o.zxid, None, None) if activate is None \
                                else QuorumPacket(PacketType.COMMITANDACTIVATE, o.zxid,
                                                  _LONG.pack(activate.designated), None)
                        sends.append(Send(h.cid, commit))
            for cid in self._pending_syncs.pop(o.zxid, ()):
                if cid in self.learners:
                    sends.append(Send(cid, QuorumPacket(PacketType.SYNC, 0, None, None)))
            if activate is not None:
                self._actions.append(Commit(count))
                self._actions.extend(sends)
                self._actions.append(activate)
                count, sends = 0, []
        if count:
            self._actions.append(Commit(count))
        self._actions.extend(sends)

    def _designate(self, o: Outstanding) -> Activate:
        """The reconfig ``o`` commits: its config becomes the active one (for the commits after
        it too), and names the next term's leader (Leader.getDesignatedLeader)."""
        new = o.next_verifier
        assert new is not None
        designated = designated_leader(self.sid, new, o.acks, [p.acks for p in self.outstanding])
        self.verifier = new
        self.next_verifier = None
        for p in self.outstanding:
            p.next_verifier = None
        if designated != self.sid:
            # 3.8 commits nothing more; its followers leave for the designated leader once they
            # applied the reconfig, and the term ends when they are gone (here: at the latest a
            # tick later, instead of 3.8's syncLimit)
            self.allowed_to_commit = False
            self._handover_ms = self.now_ms + self.tick_ms
        return Activate(o.zxid, new, designated)

    def _handed_over(self) -> bool:
        if self.allowed_to_commit or self.phase is Phase.STOPPED:
            return False
        if any(not h.observer for h in self.learners.values()) and self.now_ms < self._handover_ms:
            return False
        self._fail("the committed reconfig handed the leadership over")
        return True

    # ------------------------------------------------------------ time

    def tick(self, now_ms: int) -> None:
        self.now_ms = now_ms
        if self.phase is Phase.STOPPED:
            return
        if self.phase is not Phase.BROADCAST:
            if now_ms >= self._phase_deadline_ms:
                self._fail(f"timeout waiting for a quorum in {self.phase.value} "
                           f"(initLimit is {self.init_limit_ms} ms)")
            for h in list(self.learners.values()):
                if now_ms >= h.deadline_ms:
                    self._drop(h, "no packet within initLimit")
            return
        if self._handed_over():
            return
        for h in list(self.learners.values()):
            if now_ms >= h.deadline_ms:
                self._drop(h, f"no packet within {'syncLimit' if h.phase is LearnerPhase.FORWARDING else 'initLimit'}")
        synced = {self.sid} | {h.sid for h in self.learners.values()
                               if h.phase is LearnerPhase.FORWARDING and not h.observer}
        if not self.verifier.contains_quorum(synced):
            self._fail(f"not sufficient followers synced, only synced with sids: {sorted(synced)}")
            return
        if now_ms >= self._next_ping_ms:
            self._next_ping_ms = now_ms + max(1, self.tick_ms // 2)
            for h in self.learners.values():
                if h.synced_from_leader:
                    self._send(h, PacketType.PING, self.last_proposed)
                    if h.phase is LearnerPhase.FORWARDING:
                        h.pings_sent += 1

    def stop(self, reason: str) -> None:
        self._fail(reason)

    # ------------------------------------------------------------ helpers

    def _fail(self, reason: str) -> None:
        if self.phase is Phase.STOPPED:
            return
        self.phase = Phase.STOPPED
        for h in list(self.learners.values()):
            self._actions.append(Close(h.cid, "leader stopping"))
        self.learners.clear()
        self._actions.append(Failed(reason))

    def _drop(self, h: LearnerHandle, reason: str) -> None:
        self.disconnected(h.cid)
        self._actions.append(Close(h.cid, reason))

    def _send(self, h: LearnerHandle, type_: int, zxid: int, data: bytes | None = None) -> None:
        self._actions.append(Send(h.cid, QuorumPacket(type_, zxid, data, None)))


