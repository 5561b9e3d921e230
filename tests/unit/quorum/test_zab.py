"""Zab's pure cores, wired back to back in memory: the orders the protocol depends on."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import pytest

from zkpy.ids import make_zxid
from zkpy.quorum import leader as zl
from zkpy.quorum import learner as zf
from zkpy.quorum.sync import CommittedLog, LoggedTxn, SyncKind, plan_sync
from zkpy.quorum.verifier import QuorumMaj
from zkpy.wire.quorum import PacketType, QuorumPacket


def wire(p: QuorumPacket) -> QuorumPacket:
    return QuorumPacket.from_bytes(p.to_bytes())


@dataclass
class Net:
    """A leader (sid 3 unless told) and learners, with in-memory persistence the test controls."""

    leader: zl.Leader
    learners: dict[int, zf.Learner]
    auto_log: bool = True  # learners' fsyncs complete at once
    log: list[str] = field(default_factory=list)
    applied: dict[int, list[int]] = field(default_factory=dict)
    logged: dict[int, list[int]] = field(default_factory=dict)
    leader_commits: int = 0
    confirmed: list[int] = field(default_factory=list)

    def pump(self) -> None:
        moved = True
        while moved:
            moved = False
            for a in self.leader.ready():
                moved = True
                if isinstance(a, zl.Send):
                    self.log.append(f"L->{a.cid} {PacketType(a.packet.type).name}")
                    self.learners[a.cid].step(wire(a.packet), 0)
                elif isinstance(a, zl.Commit):
                    self.leader_commits += a.count
                elif isinstance(a, zl.QuorumConfirmed):
                    self.confirmed.append(a.token)
                else:
                    self.log.append(f"L {a}")
            for sid, f in self.learners.items():
                for b in f.ready():
                    moved = True
                    if isinstance(b, zf.Send):
                        self.log.append(f"{sid}->L {PacketType(b.packet.type).name}")
                        self.leader.step(sid, wire(b.packet), 0)
                    elif isinstance(b, zf.Log):
                        self.logged.setdefault(sid, []).append(b.zxid)
                        self.log.append(f"{sid} Log {b.zxid:x}")
                    elif isinstance(b, zf.Apply):
                        self.applied.setdefault(sid, []).append(b.zxid)
                    elif isinstance(b, zf.PingReply):
                        self.leader.step(sid, QuorumPacket(PacketType.PING, b.zxid, b"", None), 0)
                    else:
                        self.log.append(f"{sid} {b}")
                if self.auto_log and self.logged.get(sid):
                    f.logged(self.logged[sid][-1])


def make(n: int = 3, *, leader_zxid: int = 0, learner_zxids: dict[int, int] | None = None,
         committed: list[int] | None = None, observers: tuple[int, ...] = (), quorum_sync: bool = False) -> Net:
    voters = [sid for sid in range(1, n + 1) if sid not in observers]
    v = QuorumMaj.of(voters, observers)
    log = CommittedLog(LoggedTxn(z, b"txn%x" % z) for z in committed or [])
    leader = zl.Leader(n, v, accepted_epoch=0, current_epoch=0, last_zxid=leader_zxid, committed=log, now_ms=0,
                       tick_ms=100, init_limit=10, sync_limit=5, quorum_sync=quorum_sync)
    learners = {sid: zf.Learner(sid, observer=sid in observers, accepted_epoch=0, current_epoch=0,
                                last_logged_zxid=(learner_zxids or {}).get(sid, 0), now_ms=0, tick_ms=100,
                                init_limit=10, sync_limit=5)
                for sid in range(1, n)}
    net = Net(leader, learners)
    for sid, f in learners.items():
        leader.connected(sid, 0)  # cid = sid
        f.start()
    return net


def test_epoch_is_established_with_acked_epochs_in_order() -> None:
    net = make()
    net.pump()
    assert net.leader.established and net.leader.epoch == 1
    # each learner persisted acceptedEpoch before ACKEPOCH and currentEpoch before its NEWLEADER ack
    for sid in (1, 2):
        i = net.log.index(f"{sid} SetAcceptedEpoch(epoch=1)")
        assert net.log.index(f"{sid}->L ACKEPOCH") > i
        j = net.log.index(f"{sid} SetCurrentEpoch(epoch=1)")
        assert net.log.index(f"{sid}->L ACK") > j
    assert all(f.serving for f in net.learners.values())


def test_a_proposal_commits_only_with_the_leaders_own_fsync() -> None:
    net = make()
    net.pump()
    z = make_zxid(1, 1)
    net.leader.propose(z, b"x")
    net.pump()
    assert net.leader_commits == 0  # both learners acked, but the leader's own log is not synced
    net.leader.logged(z)
    net.pump()
    assert net.leader_commits == 1
    assert net.applied == {1: [z], 2: [z]}


def test_a_learner_acks_newleader_only_after_its_log_is_synced() -> None:
    net = make(committed=[1, 2, 3], leader_zxid=3, learner_zxids={1: 1, 2: 3})
    net.auto_log = False
    net.pump()
    assert net.logged[1] == [2, 3]  # DIFF: the two txns it lacked, logged at NEWLEADER
    assert "1->L ACK" not in net.log and not net.leader.established or net.leader.established
    acks_before = net.log.count("1->L ACK")
    net.learners[1].logged(3)
    net.pump()
    assert net.log.count("1->L ACK") > acks_before
    assert net.applied.get(1) == [2, 3]


def test_pings_during_synchronisation_are_not_answered() -> None:
    net = make()
    f = net.learners[1]
    f.step(QuorumPacket(PacketType.LEADERINFO, make_zxid(1, 0), b"\x00\x01\x00\x00", None), 0)
    f.step(QuorumPacket(PacketType.DIFF, 0, None, None), 0)
    f.ready()
    f.step(QuorumPacket(PacketType.PING, 0, None, None), 0)
    assert not any(isinstance(a, zf.PingReply) for a in f.ready())


def test_an_observer_gets_inform_and_never_votes() -> None:
    net = make(4, observers=(2,))
    net.pump()
    z = make_zxid(1, 1)
    net.leader.propose(z, b"x")
    net.pump()
    net.leader.logged(z)
    net.pump()
    assert "L->2 INFORM" in net.log and "L->2 PROPOSAL" not in net.log
    assert net.applied[2] == [z]


def test_quorum_sync_waits_for_a_ping_round() -> None:
    net = make(quorum_sync=True)
    net.pump()
    net.leader.check_quorum(7)
    # the learners' replies to the check's PINGs are what confirm it
    net.pump()
    assert net.confirmed == [7]


def test_a_learners_sync_is_answered_after_the_requests_it_forwarded_before() -> None:
    """An Apache learner's CommitProcessor expects the answers to its own requests, syncs
    included, in the order it forwarded them: a SYNC answered before the COMMIT of a write the
    same learner forwarded first wedged every session on it (the mixed-ensemble CI failure)."""
    net = make()
    net.pump()
    head = struct.Struct(">qii")
    write = QuorumPacket(PacketType.REQUEST, 0, head.pack(0x51, 7, 1) + b"create-body", [])
    sync = QuorumPacket(PacketType.REQUEST, 0, head.pack(0x52, 1, 9) + b"sync-body", [])
    net.leader.step(1, write, 0)
    net.leader.step(1, sync, 0)
    actions = net.leader.ready()
    kinds = [type(a).__name__ for a in actions]
    assert kinds == ["LearnerRequest", "LearnerSync"]  # in arrival order; the sync is not a request
    # the shell proposes what the write became, then hands the sync back
    z = make_zxid(1, 1)
    net.leader.propose(z, b"create-txn")
    net.leader.learner_sync(actions[1].cid)
    net.pump()
    assert "L->1 SYNC" not in net.log  # not before the write it follows has committed
    net.leader.logged(z)
    net.pump()
    to_1 = [entry for entry in net.log if entry.startswith("L->1 ")]
    assert to_1.index("L->1 COMMIT") < to_1.index("L->1 SYNC")
    # with nothing outstanding, a sync is answered at once
    net.leader.learner_sync(1)
    net.pump()
    assert [entry for entry in net.log if entry == "L->1 SYNC"] == ["L->1 SYNC", "L->1 SYNC"]


def test_leader_steps_down_without_a_synced_quorum() -> None:
    net = make()
    net.pump()
    net.leader.tick(10_000)  # nothing heard for longer than syncLimit
    actions = net.leader.ready()
    assert any(isinstance(a, zl.Failed) for a in actions)


@pytest.mark.parametrize("peer,committed,last,kind,zxid,txns", [
    (5, [3, 4, 5], 5, SyncKind.DIFF, 5, []),  # in sync
    (3, [3, 4, 5], 5, SyncKind.DIFF, 5, [4, 5]),  # behind, within the log
    (7, [3, 4, 5], 5, SyncKind.TRUNC, 5, []),  # ahead of the committed log
    (1, [3, 4, 5], 5, SyncKind.SNAP, 5, []),  # older than the log
    (make_zxid(1, 0), [3, make_zxid(1, 1), make_zxid(1, 2)], make_zxid(1, 2), SyncKind.DIFF, make_zxid(1, 2),
     [make_zxid(1, 1), make_zxid(1, 2)]),  # a fresh epoch's zxid is never truncated
    # older than the in-memory log: ZooKeeper would read its txn log files; zkpy sends a snapshot
    (make_zxid(1, 0), [make_zxid(1, 1), make_zxid(1, 2)], make_zxid(1, 2), SyncKind.SNAP, make_zxid(1, 2), []),
])
def test_plan_sync_chooses_as_zookeeper(peer: int, committed: list[int], last: int, kind: SyncKind, zxid: int,
                                        txns: list[int]) -> None:
    plan = plan_sync(peer, CommittedLog(LoggedTxn(z, b"") for z in committed), last)
    assert (plan.kind, plan.zxid, [t.zxid for t in plan.txns]) == (kind, zxid, txns)


def test_plan_sync_truncates_a_txn_the_leader_never_had() -> None:
    log = CommittedLog(LoggedTxn(z, b"") for z in [make_zxid(1, 1), make_zxid(1, 2), make_zxid(2, 1)])
    # the peer logged (1, 3), which never committed: cut back to (1, 2)? No: a TRUNC may not
    # cross into epoch 2, so it gets a snapshot
    assert plan_sync(make_zxid(1, 3), log, make_zxid(2, 1)).kind is SyncKind.SNAP
    log2 = CommittedLog(LoggedTxn(z, b"") for z in [make_zxid(1, 1), make_zxid(1, 2), make_zxid(1, 4)])
    plan = plan_sync(make_zxid(1, 3), log2, make_zxid(1, 4))
    assert (plan.kind, plan.zxid, [t.zxid for t in plan.txns]) == (SyncKind.TRUNC, make_zxid(1, 2),
                                                                   [make_zxid(1, 4)])
