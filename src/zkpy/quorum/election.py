"""Fast leader election (ZooKeeper 3.8's FastLeaderElection) as a pure state machine.

The caller drives one ``Election`` per server with ``start(now_ms)``, ``step(sid, notification)``
for each notification received from peer ``sid``, and ``tick(now_ms)``; after each call it takes
``ready()``: the notifications to send and, once, the decision. No sockets, clock, threads or
randomness live here; time is whatever ``start``/``tick``/``step(now_ms=...)`` said last.

Semantics (FastLeaderElection.lookForLeader and its WorkerReceiver, QuorumPeer's current vote):

- A vote is (leader, zxid, election epoch, peer epoch). Votes are ordered by peer epoch, then
  zxid, then sid (totalOrderPredicate); the election epoch (the *logical clock*) numbers rounds.
  A vote for a server of weight 0 (``QuorumVerifier.weight``) is never better than any: it never leads.
- Whether votes form a quorum is the verifier's rule (majority, or QuorumHierarchical's groups and
  weights), for the current config and, when newer, the next one.
- ``start`` opens a round: the logical clock goes up by one and the proposal is my own vote
  (sid, last logged zxid, current epoch). A server that is not a voting member proposes sid
  ``NO_SID``; an observer also proposes zxid and peer epoch ``NO_SID`` (Long.MIN_VALUE), so it never
  wins. The proposal goes to every voter, me included: my own notification loops back through
  ``step`` as ZooKeeper's connection manager delivers messages to self.
- A LOOKING notification of a later round moves me to that round (votes cleared, proposal reset to
  the better of mine and the sender's, re-sent); one of an earlier round is ignored, and answered
  with my proposal; one of my round replaces my proposal if it is better (re-sent). Each is then
  recorded as the sender's vote. LOOKING notifications are ignored altogether while my last logged
  zxid is -1, and so is one that carries zxid -1.
- When a quorum of the votes of my round equals my proposal, I wait ``FINALIZE_WAIT_MS``: a
  better notification ends the wait and is processed as usual; any other notification is
  dropped and restarts the wait; when the wait passes in silence, I decide my proposal.
- FOLLOWING / LEADING notifications come from servers past the election. Those of my round are
  recorded with the round's votes; all are recorded in the out-of-election map. I follow their
  leader when a quorum of either map agrees with the notification *and* the leader checks out
  (checkLeader): if it is not me, its own notification must be in that map claiming LEADING; if it
  is me, the notification must be of my round. Joining from the out-of-election map adopts the
  notification's election epoch as my logical clock.
- Notifications from non-voters (observers) are never counted: they are answered at once with my
  current vote. OBSERVING notifications from voters are ignored, and so are votes whose leader is
  not a voter.
- After a silence as long as the notification timeout (200 ms at first, doubling after each
  silence up to ``MAX_NOTIFICATION_INTERVAL_MS``; any notification restarts the silence), my
  proposal is sent to every voter again.
- Once decided, I answer each LOOKING voter with my current vote (its election epoch, my state).

Vote agreement for quorum counting is ZooKeeper's Vote.equals: if either vote is LOOKING, all
four numbers must match; between votes of established servers only the leader (and the peer
epoch, unless exactly one of the two notifications predates the version field) is compared.

Reconfiguration (with ``adopt_newer_configs``, i.e. reconfigEnabled): a notification that carries
a config newer than mine, received while I am not decided, is handed out (``Ready.newer_config``);
the shell adopts it and calls ``reconfigure``, which starts my round over with the new voters
(3.8's WorkerReceiver and processReconfig). ``designate`` takes the leader a committed reconfig
named, without a round.

Not implemented: the oracle (QuorumOracleMaj).
"""

from __future__ import annotations

import dataclasses
import enum
from collections import deque
from collections.abc import Mapping

from zkpy.wire.quorum import Notification, ServerState

from .dynconfig import config_version
from .verifier import QuorumVerifier

FINALIZE_WAIT_MS = 200  # FastLeaderElection.finalizeWait
MIN_NOTIFICATION_INTERVAL_MS = FINALIZE_WAIT_MS  # zookeeper.fastleader.minNotificationInterval default
# zookeeper.fastleader.maxNotificationInterval is 60 s in ZooKeeper: a member that looked alone
# through a partition then waits up to that long after it heals (3.2-3.8 s after a 6 s isolation,
# measured on both: bench availability). zkpy re-sends, and dials its peers again, at least every 2 s.
MAX_NOTIFICATION_INTERVAL_MS = 2_000
TICK_MS = 50  # how often a shell ticks an open round (its finalize wait and resends run on ticks)
NO_SID = -(2**63)  # Long.MIN_VALUE: the sid, zxid and epoch a non-candidate proposes


class LearnerType(enum.Enum):
    """QuorumPeer.LearnerType: participants may lead or follow; observers only observe."""

    PARTICIPANT = "participant"
    OBSERVER = "observer"


class ElectionError(Exception):
    """The caller used the election out of order (a broken invariant, not a peer's fault)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Vote:
    """ZooKeeper's Vote. ``state`` and ``version`` are the notification's, where it came from one."""

    leader: int
    zxid: int
    election_epoch: int
    peer_epoch: int
    state: ServerState = ServerState.LOOKING
    version: int = 0

    def agrees_with(self, other: Vote) -> bool:
        """Vote.equals: whether ``other`` counts as support for this vote."""
        if self.state is ServerState.LOOKING or other.state is ServerState.LOOKING:
            return (self.leader, self.zxid, self.election_epoch, self.peer_epoch) == (
                other.leader,
                other.zxid,
                other.election_epoch,
                other.peer_epoch,
            )
        if (self.version > 0) != (other.version > 0):
            return self.leader == other.leader
        return self.leader == other.leader and self.peer_epoch == other.peer_epoch


def better_vote(
    new_leader: int, new_zxid: int, new_epoch: int, cur_leader: int, cur_zxid: int, cur_epoch: int
) -> bool:
    """totalOrderPredicate between voters of positive weight: (peer epoch, zxid, sid) of the new vote
    is larger. ``Election`` first refuses a new vote for a server of weight 0."""
    return (new_epoch, new_zxid, new_leader) > (cur_epoch, cur_zxid, cur_leader)


@dataclasses.dataclass(frozen=True, slots=True)
class Send:
    """A notification to send. ``to`` None: to every voter (current and next config) but me."""

    to: int | None
    notification: Notification


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    """The election's outcome: who leads, what I become, and the vote I now hold."""

    leader: int
    state: ServerState
    vote: Vote


@dataclasses.dataclass(frozen=True, slots=True)
class Ready:
    """What an input produced: sends in order (None-addressed ones go to every other voter)."""

    sends: tuple[Send, ...] = ()
    decision: Decision | None = None
    newer_config: bytes | None = None  # a LOOKING member saw this config, newer than its own: adopt it


class _Phase(enum.Enum):
    IDLE = "idle"  # constructed, not started
    LOOKING = "looking"  # exchanging notifications
    FINALIZING = "finalizing"  # a quorum agrees with my proposal; waiting FINALIZE_WAIT_MS
    DECIDED = "decided"  # FOLLOWING / LEADING / OBSERVING; answering LOOKING peers


class Election:
    """One server's fast leader election. See the module docstring for the rules it follows."""

    def __init__(
        self,
        sid: int,
        verifier: QuorumVerifier,
        *,
        last_zxid: int,
        current_epoch: int,
        logical_clock: int = 0,
        learner_type: LearnerType = LearnerType.PARTICIPANT,
        next_verifier: QuorumVerifier | None = None,
        config_data: bytes = b"",
        adopt_newer_configs: bool = False,
    ) -> None:
        self.sid = sid
        self.verifier = verifier
        self.next_verifier = next_verifier
        self.learner_type = learner_type
        self.last_zxid = last_zxid
        self.current_epoch = current_epoch
        self.logical_clock = logical_clock
        self.config_data = config_data  # QuorumVerifier.toString() bytes, carried in every notification
        self.adopt_newer_configs = adopt_newer_configs  # reconfigEnabled: a newer config in a notification is news
        self._newer_config: bytes | None = None
        # QuorumPeer.currentVote: what I answer non-voters (and, once decided, LOOKING voters) with.
        self.current_vote = Vote(sid, last_zxid, -1, current_epoch)
        self.proposal = Vote(NO_SID, NO_SID, -1, NO_SID)
        self.state = ServerState.LOOKING
        self.now_ms = 0
        self._phase = _Phase.IDLE
        self._recvset: dict[int, Vote] = {}
        self._outofelection: dict[int, Vote] = {}
        self._not_timeout_ms = MIN_NOTIFICATION_INTERVAL_MS
        self._resend_at_ms = 0
        self._finalize_at_ms = 0
        self._loopback: deque[Notification] = deque()
        self._sends: list[Send] = []
        self._decision: Decision | None = None

    # ------------------------------------------------------------------ inputs

    @property
    def voters(self) -> frozenset[int]:
        """QuorumPeer.getCurrentAndNextConfigVoters."""
        if self.next_verifier is None:
            return self.verifier.voting
        return self.verifier.voting | self.next_verifier.voting

    @property
    def votes(self) -> Mapping[int, Vote]:
        """The votes of my current round (recvset), by sender."""
        return dict(self._recvset)

    @property
    def decided(self) -> bool:
        return self._phase is _Phase.DECIDED

    def start(self, now_ms: int, *, last_zxid: int | None = None, current_epoch: int | None = None) -> None:
        """Open a new round (lookForLeader). Allowed before the first round and after a decision."""
        if self._phase not in (_Phase.IDLE, _Phase.DECIDED):
            raise ElectionError(f"start while {self._phase.value}")
        self._advance_clock(now_ms)
        if last_zxid is not None:
            self.last_zxid = last_zxid
        if current_epoch is not None:
            self.current_epoch = current_epoch
        self.state = ServerState.LOOKING
        self._phase = _Phase.LOOKING
        self._recvset.clear()
        self._outofelection.clear()
        self._decision = None
        self._not_timeout_ms = MIN_NOTIFICATION_INTERVAL_MS
        self.logical_clock += 1
        self.proposal = self._initial_vote()
        self._send_notifications()
        self._resend_at_ms = self.now_ms + self._not_timeout_ms
        self._drain_loopback()

    def tick(self, now_ms: int) -> None:
        """Let time pass: finish a finalize wait, or re-send my proposal after a silence."""
        self._advance_clock(now_ms)
        if self._phase is _Phase.FINALIZING and self.now_ms >= self._finalize_at_ms:
            self._decide(self.proposal.leader, self._end_vote())
        elif self._phase is _Phase.LOOKING and self.now_ms >= self._resend_at_ms:
            self._send_notifications()
            self._not_timeout_ms = min(self._not_timeout_ms * 2, MAX_NOTIFICATION_INTERVAL_MS)
            self._resend_at_ms = self.now_ms + self._not_timeout_ms
            self._drain_loopback()

    def step(self, sid: int, n: Notification, now_ms: int | None = None) -> None:
        """A notification received from server ``sid``; ``now_ms`` first advances time as tick."""
        if self._phase is _Phase.IDLE:
            raise ElectionError("step before start")
        if now_ms is not None:
            self.tick(now_ms)
        self._receive(sid, n)
        self._drain_loopback()

    def reconfigure(self, verifier: QuorumVerifier, config_data: bytes, learner_type: LearnerType) -> None:
        """A newer config became active (QuorumPeer.processReconfig): who votes, what every
        notification carries and my own role from now on (the next round starts with them)."""
        self.verifier = verifier
        self.next_verifier = None
        self.config_data = config_data
        self.learner_type = learner_type
        if self._phase in (_Phase.LOOKING, _Phase.FINALIZING):  # the round starts over, with the new voters
            self._phase = _Phase.LOOKING
            self._recvset.clear()
            self._outofelection.clear()
            self.proposal = self._initial_vote()
            self._send_notifications()
            self._resend_at_ms = self.now_ms + self._not_timeout_ms
            self._drain_loopback()

    def designate(self, leader: int, zxid: int) -> Decision:
        """A committed reconfig named ``leader`` (QuorumPeer.updateVote and updateServerState with
        the reconfig flag): I take its role without a round, and answer with this vote from now on."""
        if self._phase not in (_Phase.IDLE, _Phase.DECIDED):
            raise ElectionError(f"designate while {self._phase.value}")
        vote = Vote(leader, zxid, self.logical_clock, self.current_vote.peer_epoch)
        self._decide(leader, vote)
        decision, self._decision = self._decision, None
        assert decision is not None
        return decision

    def update_peer_epoch(self, peer_epoch: int) -> None:
        """QuorumPeer.updateElectionVote: the new epoch Zab settled, answered from now on."""
        self.current_vote = dataclasses.replace(self.current_vote, peer_epoch=peer_epoch)

    # ------------------------------------------------------------------ outputs

    def ready(self) -> Ready:
        """What to send, in order, and the decision if it was just made; both are handed out once."""
        out = Ready(tuple(self._sends), self._decision, self._newer_config)
        self._sends = []
        self._decision = None
        self._newer_config = None
        return out

    # ------------------------------------------------------------------ the receiver (WorkerReceiver)

    def _receive(self, sid: int, n: Notification) -> None:
        if (self.adopt_newer_configs and n.config and self._phase is not _Phase.DECIDED
                and config_version(n.config) > self.verifier.version):
            # WorkerReceiver: a LOOKING server that hears of a newer config adopts it (the shell
            # calls ``reconfigure``, which opens the round again with it)
            self._newer_config = n.config
        if sid not in self.voters:
            v = self.current_vote
            self._reply(sid, v.leader, v.zxid, self.logical_clock, v.peer_epoch)
            return
        if self._phase is _Phase.DECIDED:
            if n.state is ServerState.LOOKING:
                v = self.current_vote
                self._reply(sid, v.leader, v.zxid, v.election_epoch, v.peer_epoch)
            return
        if n.state is ServerState.LOOKING and n.election_epoch < self.logical_clock:
            p = self.proposal
            self._reply(sid, p.leader, p.zxid, self.logical_clock, p.peer_epoch)
        self._look(sid, n)

    def _reply(self, to: int, leader: int, zxid: int, election_epoch: int, peer_epoch: int) -> None:
        n = Notification(self.state, leader, zxid, election_epoch, peer_epoch, self.config_data)
        if to == self.sid:
            self._loopback.append(n)  # the connection manager delivers to self without the network
        else:
            self._sends.append(Send(to, n))

    # ------------------------------------------------------------------ the election loop (lookForLeader)

    def _look(self, sid: int, n: Notification) -> None:
        p = self.proposal
        if self._phase is _Phase.FINALIZING:
            if not self._better(n.leader, n.zxid, n.peer_epoch, p.leader, p.zxid, p.peer_epoch):
                self._finalize_at_ms = self.now_ms + FINALIZE_WAIT_MS  # dropped; the wait starts over
                return
            self._phase = _Phase.LOOKING  # a better vote: back to the loop, which takes it next
        self._resend_at_ms = self.now_ms + self._not_timeout_ms
        if sid not in self.voters or n.leader not in self.voters:
            return
        if n.state is ServerState.LOOKING:
            self._on_looking(sid, n)
        elif n.state in (ServerState.FOLLOWING, ServerState.LEADING):
            self._on_established(sid, n)
        # OBSERVING: nothing to learn from an observer's state

    def _on_looking(self, sid: int, n: Notification) -> None:
        if self._initial_vote().zxid == -1 or n.zxid == -1:
            return
        if n.election_epoch > self.logical_clock:
            self.logical_clock = n.election_epoch
            self._recvset.clear()
            mine = self._initial_vote()
            if self._better(n.leader, n.zxid, n.peer_epoch, mine.leader, mine.zxid, mine.peer_epoch):
                self.proposal = Vote(n.leader, n.zxid, -1, n.peer_epoch)
            else:
                self.proposal = mine
            self._send_notifications()
        elif n.election_epoch < self.logical_clock:
            return
        elif self._better(n.leader, n.zxid, n.peer_epoch, *self._proposal_key()):
            self.proposal = Vote(n.leader, n.zxid, -1, n.peer_epoch)
            self._send_notifications()
        self._recvset[sid] = Vote(n.leader, n.zxid, n.election_epoch, n.peer_epoch)
        if self._has_quorum(self._recvset, self._end_vote()):
            self._phase = _Phase.FINALIZING
            self._finalize_at_ms = self.now_ms + FINALIZE_WAIT_MS

    def _on_established(self, sid: int, n: Notification) -> None:
        theirs = Vote(n.leader, n.zxid, n.election_epoch, n.peer_epoch, n.state, n.version)
        outcome = Vote(n.leader, n.zxid, n.election_epoch, n.peer_epoch)
        if n.election_epoch == self.logical_clock:
            # ZooKeeper records these without the notification's version (Vote's 5-argument form).
            self._recvset[sid] = Vote(n.leader, n.zxid, n.election_epoch, n.peer_epoch, n.state)
            if self._has_quorum(self._recvset, theirs) and self._check_leader(self._recvset, n):
                self._decide(n.leader, outcome)
                return
        self._outofelection[sid] = theirs
        if self._has_quorum(self._outofelection, theirs) and self._check_leader(self._outofelection, n):
            self.logical_clock = n.election_epoch
            self._decide(n.leader, outcome)

    def _check_leader(self, votes: Mapping[int, Vote], n: Notification) -> bool:
        if n.leader != self.sid:
            leader_vote = votes.get(n.leader)
            return leader_vote is not None and leader_vote.state is ServerState.LEADING
        return self.logical_clock == n.election_epoch

    def _has_quorum(self, votes: Mapping[int, Vote], vote: Vote) -> bool:
        acks = {sid for sid, v in votes.items() if vote.agrees_with(v)}
        verifiers = [self.verifier]
        if self.next_verifier is not None and self.next_verifier.version > self.verifier.version:
            verifiers.append(self.next_verifier)
        return all(qv.contains_quorum(acks) for qv in verifiers)

    def _decide(self, leader: int, vote: Vote) -> None:
        if leader == self.sid:
            self.state = ServerState.LEADING
        elif self.learner_type is LearnerType.PARTICIPANT:
            self.state = ServerState.FOLLOWING
        else:
            self.state = ServerState.OBSERVING
        self._phase = _Phase.DECIDED
        self.current_vote = vote
        self._decision = Decision(leader, self.state, vote)
        self._loopback.clear()  # leaveInstance drops whatever is still queued

    # ------------------------------------------------------------------ helpers

    def _initial_vote(self) -> Vote:
        """getInitId, getInitLastLoggedZxid, getPeerEpoch."""
        sid = self.sid if self.verifier.is_voter(self.sid) else NO_SID
        if self.learner_type is LearnerType.PARTICIPANT:
            return Vote(sid, self.last_zxid, -1, self.current_epoch)
        return Vote(sid, NO_SID, -1, NO_SID)

    def _better(self, new_leader: int, new_zxid: int, new_epoch: int, cur_leader: int, cur_zxid: int,
                cur_epoch: int) -> bool:
        """totalOrderPredicate: a server of weight 0 in the current config never wins."""
        if self.verifier.weight(new_leader) == 0:
            return False
        return better_vote(new_leader, new_zxid, new_epoch, cur_leader, cur_zxid, cur_epoch)

    def _proposal_key(self) -> tuple[int, int, int]:
        return self.proposal.leader, self.proposal.zxid, self.proposal.peer_epoch

    def _end_vote(self) -> Vote:
        p = self.proposal
        return Vote(p.leader, p.zxid, self.logical_clock, p.peer_epoch)

    def _send_notifications(self) -> None:
        p = self.proposal
        n = Notification(
            ServerState.LOOKING, p.leader, p.zxid, self.logical_clock, p.peer_epoch, self.config_data
        )
        self._sends.append(Send(None, n))
        if self.sid in self.voters:
            self._loopback.append(n)

    def _drain_loopback(self) -> None:
        while self._loopback and self._phase is not _Phase.DECIDED:
            self._receive(self.sid, self._loopback.popleft())

    def _advance_clock(self, now_ms: int) -> None:
        if now_ms < self.now_ms:
            raise ElectionError(f"time went backwards: {now_ms} < {self.now_ms}")
        self.now_ms = now_ms
