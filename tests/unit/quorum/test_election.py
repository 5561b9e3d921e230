"""Fast leader election, as transcripts of one server's inputs and outputs and as small
simulated ensembles: every server decides the same leader, the one with the highest
(peer epoch, zxid, sid); late servers learn the established leader; observers never lead."""

from __future__ import annotations

import random
from collections import deque

import pytest

from zkpy.ids import make_zxid
from zkpy.quorum import (
    FINALIZE_WAIT_MS,
    MAX_NOTIFICATION_INTERVAL_MS,
    NO_SID,
    Decision,
    Election,
    ElectionError,
    LearnerType,
    QuorumMaj,
    Send,
    Vote,
)
from zkpy.wire.quorum import Notification, ServerState

LOOKING, FOLLOWING, LEADING, OBSERVING = (
    ServerState.LOOKING,
    ServerState.FOLLOWING,
    ServerState.LEADING,
    ServerState.OBSERVING,
)
Z5 = make_zxid(1, 5)
Z7 = make_zxid(1, 7)


def note(
    state: ServerState, leader: int, zxid: int, election_epoch: int, peer_epoch: int = 1
) -> Notification:
    return Notification(state, leader, zxid, election_epoch, peer_epoch)


def to_all(leader: int, zxid: int, election_epoch: int, peer_epoch: int = 1) -> Send:
    return Send(None, note(LOOKING, leader, zxid, election_epoch, peer_epoch))


def three(sid: int = 1, zxid: int = Z5, **kw: object) -> Election:
    return Election(sid, QuorumMaj.of([1, 2, 3]), last_zxid=zxid, current_epoch=1, **kw)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- transcripts


def test_follower_transcript_adopts_better_vote_then_decides_after_finalize_wait() -> None:
    e = three(1, Z5)
    e.start(0)
    assert e.ready().sends == (to_all(1, Z5, 1),)
    assert e.votes == {1: Vote(1, Z5, 1, 1)}  # my own notification looped back

    e.step(2, note(LOOKING, 2, Z7, 1), now_ms=10)
    r = e.ready()
    assert r.sends == (to_all(2, Z7, 1),) and r.decision is None
    assert e.votes == {1: Vote(2, Z7, 1, 1), 2: Vote(2, Z7, 1, 1)}  # a quorum agrees: finalizing

    e.tick(10 + FINALIZE_WAIT_MS - 1)
    assert e.ready().decision is None
    e.tick(10 + FINALIZE_WAIT_MS)
    assert e.ready().decision == Decision(2, FOLLOWING, Vote(2, Z7, 1, 1))
    assert e.state is FOLLOWING and e.current_vote == Vote(2, Z7, 1, 1)


def test_leader_transcript_keeps_its_proposal_and_leads() -> None:
    e = three(3, Z7)
    e.start(0)
    e.ready()
    e.step(1, note(LOOKING, 1, Z5, 1), now_ms=5)
    assert e.ready().sends == ()  # a worse vote changes nothing and needs no answer
    e.step(2, note(LOOKING, 3, Z7, 1), now_ms=6)
    e.tick(6 + FINALIZE_WAIT_MS)
    assert e.ready().decision == Decision(3, LEADING, Vote(3, Z7, 1, 1))


def test_ties_on_epoch_and_zxid_go_to_the_highest_sid() -> None:
    e = three(2, Z5)
    e.start(0)
    e.step(1, note(LOOKING, 1, Z5, 1))
    assert e.proposal.leader == 2
    e.step(3, note(LOOKING, 3, Z5, 1))
    assert e.proposal.leader == 3
    assert e.ready().sends[-1] == to_all(3, Z5, 1)


def test_peer_epoch_outranks_zxid() -> None:
    e = three(1, make_zxid(1, 900))
    e.start(0)
    e.step(2, note(LOOKING, 2, make_zxid(1, 1), 1, peer_epoch=2))
    assert (e.proposal.leader, e.proposal.peer_epoch) == (2, 2)


def test_a_non_better_notification_restarts_the_finalize_wait_and_a_better_one_ends_it() -> None:
    e = three(3, Z7)
    e.start(0)
    e.step(1, note(LOOKING, 3, Z7, 1), now_ms=0)  # quorum {1, 3}: finalizing until 200
    e.step(1, note(LOOKING, 3, Z7, 1), now_ms=150)  # dropped; the wait restarts: until 350
    e.tick(349)
    assert e.ready().decision is None
    e.tick(350)
    assert e.ready().decision is not None

    e = three(2, Z5)
    e.start(0)
    e.step(1, note(LOOKING, 2, Z5, 1), now_ms=0)  # quorum for 2, finalizing
    e.ready()
    e.step(3, note(LOOKING, 3, Z7, 1), now_ms=100)  # better: the wait ends, the vote is taken
    assert e.ready().sends == (to_all(3, Z7, 1),)
    assert e.votes == {1: Vote(2, Z5, 1, 1), 2: Vote(3, Z7, 1, 1), 3: Vote(3, Z7, 1, 1)}
    e.tick(300)
    assert e.ready().decision == Decision(3, FOLLOWING, Vote(3, Z7, 1, 1))


def test_a_later_round_is_adopted_and_its_votes_start_afresh() -> None:
    e = three(1, Z7, logical_clock=3)
    e.start(0)
    assert e.logical_clock == 4
    e.step(2, note(LOOKING, 2, Z5, 4))
    e.ready()
    e.step(3, note(LOOKING, 3, Z5, 9))
    assert e.logical_clock == 9
    # my own vote beats the sender's, so I propose myself again, in round 9
    assert e.ready().sends == (to_all(1, Z7, 9),)
    assert e.votes == {1: Vote(1, Z7, 9, 1), 3: Vote(3, Z5, 9, 1)}


def test_an_earlier_round_is_answered_with_my_proposal_and_not_counted() -> None:
    e = three(1, Z5, logical_clock=4)
    e.start(0)
    e.step(2, note(LOOKING, 2, Z7, 5))  # adopt 2 in round 5
    e.ready()
    e.step(3, note(LOOKING, 3, make_zxid(1, 99), 2))
    assert e.ready().sends == (Send(3, note(LOOKING, 2, Z7, 5)),)
    assert 3 not in e.votes and e.proposal.leader == 2


def test_notifications_about_or_from_outsiders_are_ignored_and_non_voters_answered() -> None:
    e = Election(1, QuorumMaj.of([1, 2, 3], observers=[4]), last_zxid=Z5, current_epoch=1)
    e.start(0)
    e.ready()
    e.step(2, note(LOOKING, 99, make_zxid(5, 0), 1))  # leader is not a voter
    assert e.proposal.leader == 1 and 2 not in e.votes
    e.step(4, note(LOOKING, NO_SID, NO_SID, 1, NO_SID))  # an observer: answered with my current vote
    assert e.ready().sends == (Send(4, note(LOOKING, 1, Z5, 1, 1)),)
    assert e.current_vote == Vote(1, Z5, -1, 1)
    e.step(2, note(LOOKING, 2, -1, 1))  # zxid -1 is ignored
    assert 2 not in e.votes


def test_notification_timeout_resends_with_doubling_up_to_the_maximum() -> None:
    e = three(1, Z5)
    e.start(0)
    e.ready()
    resent = []
    for now in range(0, 400_000, 100):
        e.tick(now)
        if e.ready().sends:
            resent.append(now)
    assert resent[:6] == [200, 600, 1400, 3000, 5000, 7000]
    gaps = [b - a for a, b in zip(resent, resent[1:])]
    assert max(gaps) == MAX_NOTIFICATION_INTERVAL_MS and gaps[-1] == MAX_NOTIFICATION_INTERVAL_MS


def test_any_notification_restarts_the_silence_before_a_resend() -> None:
    e = three(1, Z5)
    e.start(0)
    e.step(2, note(LOOKING, 2, make_zxid(1, 1), 1), now_ms=150)  # no quorum, no change
    e.ready()
    e.tick(349)
    assert e.ready().sends == ()
    e.tick(350)
    assert e.ready().sends == (to_all(1, Z5, 1),)


def test_a_new_peer_joins_an_established_ensemble_from_following_and_leading_notifications() -> None:
    e = Election(5, QuorumMaj.of([1, 2, 3, 4, 5]), last_zxid=Z5, current_epoch=1)
    e.start(0)
    e.ready()
    # three followers of 2 (elected in round 7) are a quorum, but 2 itself has not said it leads
    for sid in (1, 3, 4):
        e.step(sid, note(FOLLOWING, 2, Z7, 7, peer_epoch=2))
    assert not e.decided and e.ready().decision is None
    e.step(2, note(LEADING, 2, Z7, 7, peer_epoch=2))
    assert e.ready().decision == Decision(2, FOLLOWING, Vote(2, Z7, 7, 2))
    assert e.logical_clock == 7  # adopted from the established ensemble


def test_a_quorum_in_my_round_still_needs_the_leader_to_claim_leading() -> None:
    e = three(3, Z5)
    e.start(0)
    e.ready()
    e.step(1, note(FOLLOWING, 2, Z7, 1))
    e.step(2, note(FOLLOWING, 2, Z7, 1))  # 2 says it follows itself? not leading: no decision
    assert not e.decided
    e.step(2, note(LEADING, 2, Z7, 1))
    assert e.ready().decision == Decision(2, FOLLOWING, Vote(2, Z7, 1, 1))


def test_observing_notifications_teach_nothing() -> None:
    e = three(1, Z5)
    e.start(0)
    e.step(2, note(OBSERVING, 3, Z7, 1))
    assert e.votes == {1: Vote(1, Z5, 1, 1)} and not e.decided


def test_a_decided_server_answers_looking_voters_with_its_vote_and_state() -> None:
    e = three(2, Z7)
    e.start(0)
    e.step(1, note(LOOKING, 2, Z7, 1))
    e.tick(FINALIZE_WAIT_MS)
    assert e.ready().decision == Decision(2, LEADING, Vote(2, Z7, 1, 1))
    e.step(3, note(LOOKING, 3, Z5, 4))
    assert e.ready().sends == (Send(3, note(LEADING, 2, Z7, 1)),)
    e.step(3, note(FOLLOWING, 2, Z7, 1))
    assert e.ready().sends == ()
    e.update_peer_epoch(2)  # Zab settled epoch 2: later answers carry it
    e.step(3, note(LOOKING, 3, Z5, 4))
    assert e.ready().sends == (Send(3, note(LEADING, 2, Z7, 1, peer_epoch=2)),)


def test_a_new_round_after_a_decision_counts_up_the_logical_clock() -> None:
    e = three(1, Z5)
    e.start(0)
    e.step(2, note(LOOKING, 2, Z7, 1))
    e.tick(FINALIZE_WAIT_MS)
    assert e.ready().decision is not None
    e.start(1000, last_zxid=Z7)
    assert e.state is LOOKING and e.logical_clock == 2
    assert e.ready().sends == (to_all(1, Z7, 2),)


def test_misuse_is_an_error() -> None:
    e = three()
    with pytest.raises(ElectionError):
        e.step(2, note(LOOKING, 2, Z7, 1))
    e.start(100)
    with pytest.raises(ElectionError):
        e.start(100)
    with pytest.raises(ElectionError):
        e.tick(50)


def test_an_observer_proposes_nobody_and_ends_observing_the_voters_leader() -> None:
    qv = QuorumMaj.of([1, 2, 3], observers=[4])
    e = Election(4, qv, last_zxid=make_zxid(9, 9), current_epoch=9, learner_type=LearnerType.OBSERVER)
    e.start(0)
    assert e.ready().sends == (to_all(NO_SID, NO_SID, 1, NO_SID),)
    assert e.votes == {}  # an observer is not a voter: nothing loops back
    e.step(1, note(LOOKING, 2, Z5, 1))
    e.step(2, note(LOOKING, 2, Z5, 1))
    e.tick(FINALIZE_WAIT_MS)
    assert e.ready().decision == Decision(2, OBSERVING, Vote(2, Z5, 1, 1))


# --------------------------------------------------------------------------- simulated ensembles


class Net:
    """Elections joined by per-link FIFO channels; delivery picks a random non-empty link."""

    def __init__(self, elections: dict[int, Election], rng: random.Random) -> None:
        self.e = elections
        self.rng = rng
        self.links: dict[tuple[int, int], deque[Notification]] = {}
        self.now = 0
        self.started: set[int] = set()
        self.decisions: dict[int, Decision] = {}

    def collect(self, sid: int) -> None:
        r = self.e[sid].ready()
        voters = self.e[sid].voters
        for s in r.sends:
            for to in sorted(voters - {sid}) if s.to is None else [s.to]:
                self.links.setdefault((sid, to), deque()).append(s.notification)
        if r.decision is not None:
            self.decisions[sid] = r.decision

    def start(self, sid: int) -> None:
        self.e[sid].start(self.now)
        self.started.add(sid)
        self.collect(sid)

    def deliverable(self) -> list[tuple[int, int]]:
        return sorted(k for k, q in self.links.items() if q and k[1] in self.started)

    def deliver_one(self) -> bool:
        ready = self.deliverable()
        if not ready:
            return False
        src, dst = self.rng.choice(ready)
        self.e[dst].step(src, self.links[(src, dst)].popleft(), now_ms=self.now)
        self.collect(dst)
        return True

    def advance(self, ms: int) -> None:
        self.now += ms
        for sid in sorted(self.started):
            self.e[sid].tick(self.now)
            self.collect(sid)


def simulate(n: int, ids: list[tuple[int, int]], observers: int = 0) -> Net:
    qv = QuorumMaj.of(range(1, n + 1), observers=range(n + 1, n + 1 + observers))
    elections = {
        sid: Election(sid, qv, last_zxid=make_zxid(epoch, counter), current_epoch=epoch)
        for sid, (epoch, counter) in zip(range(1, n + 1), ids)
    }
    for sid in range(n + 1, n + 1 + observers):
        elections[sid] = Election(
            sid, qv, last_zxid=make_zxid(50, 50), current_epoch=50, learner_type=LearnerType.OBSERVER
        )
    net = Net(elections, random.Random(0))
    for sid in sorted(elections):
        net.start(sid)
    for _ in range(10_000):
        if len(net.decisions) == len(elections):
            return net
        if not net.deliver_one():
            net.advance(50)
    raise AssertionError(f"no decision: {net.decisions}")


def test_three_voters_elect_the_highest_zxid() -> None:
    net = simulate(3, [(1, 5), (1, 7), (1, 6)])
    assert {d.leader for d in net.decisions.values()} == {2}
    assert net.decisions[2].state is LEADING and net.decisions[1].state is FOLLOWING


def test_five_voters_with_equal_logs_elect_the_highest_sid() -> None:
    net = simulate(5, [(1, 5)] * 5)
    assert {d.leader for d in net.decisions.values()} == {5}
    assert [d.state for _, d in sorted(net.decisions.items())] == [FOLLOWING] * 4 + [LEADING]


def test_an_observer_with_the_newest_log_is_never_elected() -> None:
    net = simulate(3, [(1, 5), (1, 7), (1, 6)], observers=1)
    assert {d.leader for d in net.decisions.values()} == {2}
    assert net.decisions[4].state is OBSERVING


@pytest.mark.parametrize("seed", range(40))
def test_random_delivery_order_still_elects_one_leader(seed: int) -> None:
    print(f"seed={seed}")
    rng = random.Random(seed)
    n = rng.choice([3, 5, 7])
    qv = QuorumMaj.of(range(1, n + 1))
    logs = {sid: (rng.randint(1, 2), rng.randint(0, 3)) for sid in range(1, n + 1)}
    elections = {
        sid: Election(
            sid,
            qv,
            last_zxid=make_zxid(*logs[sid]),
            current_epoch=logs[sid][0],
            logical_clock=rng.randint(0, 2),
        )
        for sid in logs
    }
    net = Net(elections, rng)
    late = set(rng.sample(sorted(logs), k=rng.randint(0, (n - 1) // 2)))  # a minority starts late
    for sid in sorted(set(logs) - late):
        net.start(sid)
    start_late_at = rng.randint(0, 2000)
    everyone_on_time = not late
    for _ in range(100_000):
        if len(net.decisions) == n:
            break
        if late and net.now >= start_late_at:
            for sid in sorted(late):
                net.start(sid)
            late.clear()
        if not net.deliver_one():  # time moves only when nothing is in flight
            net.advance(rng.choice([10, 50, 100]))
    else:
        raise AssertionError(f"seed={seed}: no decision {net.decisions}")
    leaders = {d.leader for d in net.decisions.values()}
    assert len(leaders) == 1, f"seed={seed}: {net.decisions}"
    (leader,) = leaders
    assert net.decisions[leader].state is LEADING
    assert all(d.state is FOLLOWING for s, d in net.decisions.items() if s != leader)
    if everyone_on_time:  # every vote is heard before the finalize wait ends: the best log wins
        assert leader == max(logs, key=lambda sid: (*logs[sid], sid)), f"seed={seed}"
