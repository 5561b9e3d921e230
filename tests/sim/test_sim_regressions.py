"""Scripted fault schedules in the simulator, named after the ZooKeeper bugs they replay (and
the zkpy bugs the simulator found). Each scripts the faults at exact protocol steps; the
checker watches every state change (one established leader per epoch, nothing committed lost
or reordered, same zxid -> same digest, ...) and each test then asserts its specific outcome.

The tests named after zkpy bugs are ones the simulator found in the cores (now fixed); they
run the exact schedule that exposed each.

The simulator runs the member cores and request pipelines that ``runtime`` runs, so each fix
these tests guard lives in shared code, and each test fails when its fix is reverted there
(checked by reverting each, 2026-11-24):

* ZOOKEEPER-1154 and ZOOKEEPER-2832 (a learner keeps txns the quorum never committed): the
  leader's TRUNC for a learner ahead of it (``quorum.sync.plan_sync``) and the learner's
  `Truncate` (``quorum.learner``): ``test_zookeeper_1154_*`` and ``test_zookeeper_2832_*_behind_it``.
* ZOOKEEPER-3642 (a snapshot or currentEpoch written on the strength of SNAP alone):
  ``quorum.learner`` takes both only at NEWLEADER: ``test_zookeeper_3642_*``.
* ZOOKEEPER-3911 (NEWLEADER acked before the synced txns are on disk): ``quorum.learner`` acks
  after the fsync: ``test_zookeeper_3911_*``.
* An interrupted sync's txns of an epoch never adopted (``storage.truncate.drop_unadopted_epoch``):
  ``test_an_interrupted_sync_leaves_no_txn_of_an_unadopted_epoch``.
* The term carry-over (a leader's logged, uncommitted txns applied into the next term's tree,
  ``member.leading.LeadingCore.carry_over``): ``test_zookeeper_1154_*[False]`` and
  ``test_zookeeper_3911_*``.
* The late fsync report (``member.term.TermCore.durable`` and ``stop``):
  ``test_a_late_fsync_report_after_the_term_ended_applies_nothing``.
* A learner's sync answered before the writes it forwarded earlier (``member.leading``, issue
  9's mixed-ensemble failure) is a member-core transcript: ``tests/transcripts/testdata/member/learner_sync.txt``.
"""

from __future__ import annotations

import dataclasses

import pytest

from zkpy.ids import make_zxid, zxid_counter, zxid_epoch
from zkpy.storage.epochs import ACCEPTED_EPOCH, CURRENT_EPOCH, read_epoch
from zkpy.storage.txnlog import scan_log
from zkpy.testing.sim import SimConfig
from zkpy.testing.sim.disk import SimDisk
from zkpy.wire.quorum import PacketType, QuorumPacket

from .scenario import SCRIPT, Script

Z = make_zxid


def logged_zxids(s: Script, sid: int) -> set[int]:
    node = s.node(sid)
    out: set[int] = set()
    for _, path in node.dirs.logs(node.disk):
        out.update(e.hdr.zxid for e in scan_log(path, node.disk.read(path)).entries)
    return out


def snapshots(s: Script, sid: int) -> list[int]:
    node = s.node(sid)
    return sorted(z for z, _ in node.dirs.snapshots(node.disk))


def epoch_file(s: Script, sid: int, name: str) -> int | None:
    node = s.node(sid)
    return read_epoch(node.disk, node.dirs.snap_dir, name)


# ---------------------------------------------------------------- ZooKeeper's bugs


@pytest.mark.parametrize("restart_old_leader", [False, True])
def test_zookeeper_1154_uncommitted_txns_are_truncated_when_their_server_rejoins(restart_old_leader: bool) -> None:
    """A leader cut off from its followers logs txns nobody else gets; the others elect a new
    leader; when the old one rejoins it gets TRUNC, and the txns leave its log and its tree."""
    s = Script()
    assert s.converge().sid == 3
    s.open_session(3)
    s.create(3, "/a")
    s.wait(lambda: s.acked("/a"), "/a")
    s.converge()
    committed = s.node(3).history[-1]

    s.c.partition([3], [1, 2], notify_p=0)
    s.create(3, "/x1")  # server 3 still leads: it logs these, nobody acks them
    s.create(3, "/x2")
    s.run(50)
    uncommitted = {Z(1, zxid_counter(committed) + 1), Z(1, zxid_counter(committed) + 2)}
    assert uncommitted <= logged_zxids(s, 3)
    assert s.has(3, "/x1") is False  # proposed, not applied

    truncs: list[tuple[int, int]] = []
    s.c.send_hooks.append(lambda node, peer, p: truncs.append((peer, p.zxid)) if p.type == PacketType.TRUNC else None)
    s.wait(lambda: s.leading(2), "servers 1 and 2 to elect 2")
    if restart_old_leader:  # its tree is rebuilt from its log, uncommitted txns included
        s.c.crash(3)
        s.c.restart(3)
    s.c.heal()
    s.final()

    assert truncs == [(3, committed)]
    assert s.nowhere("/x1") and s.nowhere("/x2")
    assert not uncommitted & logged_zxids(s, 3)
    assert s.everywhere("/a")
    s.c.crash(3)  # the truncation is on disk, not only in memory
    s.c.restart(3)
    s.final()
    assert s.nowhere("/x1")


SYNC_STEPS = ["DIFF", "PROPOSAL", "NEWLEADER", "NEWLEADER-ACK", "UPTODATE"]


@pytest.mark.parametrize("mode", ["power", "kill", "torn"])
@pytest.mark.parametrize("step", SYNC_STEPS)
def test_zookeeper_2832_follower_restarts_during_diff_sync(step: str, mode: str) -> None:
    """A follower behind by a few txns gets DIFF and crashes at a step of the synchronisation;
    it comes back, synchronises again, and ends with the leader's data, nothing more or less."""
    config = dataclasses.replace(SCRIPT, fsync_ms=(20, 40))  # a window between NEWLEADER and its ack
    s = Script(config=config)
    s.converge()
    s.open_session(3)
    s.create(3, "/a")
    s.wait(lambda: s.acked("/a"), "/a")
    s.converge()
    s.c.crash(1)
    for i in range(5):
        s.create(3, f"/b{i}")
    s.wait(lambda: s.acked("/b4"), "the writes while server 1 is down")

    fired: list[str] = []

    def crash_1() -> None:
        fired.append(step)
        s.c.crash(1, mode)
        s.c.sched.after(100, s.c.restart, 1)

    def on_receive(node: object, peer: int, p: QuorumPacket) -> None:
        if getattr(node, "sid", None) != 1 or fired:
            return
        name = PacketType(p.type).name
        if name == step and (step != "PROPOSAL" or p.zxid == s.node(3).history[-2]):
            s.c.defer(crash_1)

    def on_send(node: object, peer: int, p: QuorumPacket) -> None:
        if getattr(node, "sid", None) == 1 and not fired and step == "NEWLEADER-ACK" \
                and p.type == PacketType.ACK and zxid_counter(p.zxid) == 0:
            s.c.defer(crash_1)

    s.c.packet_hooks.append(on_receive)
    s.c.send_hooks.append(on_send)
    s.c.restart(1)
    s.wait(lambda: bool(fired), f"server 1 to reach {step}")
    s.final()
    assert s.c.stats["DIFF"] >= 2
    for i in range(5):
        assert s.everywhere(f"/b{i}")
    assert s.node(1).history == s.node(3).history


@pytest.mark.parametrize("step", ["TRUNC", "NEWLEADER", "UPTODATE"])
def test_zookeeper_2832_follower_with_uncommitted_txn_syncs_with_a_leader_behind_it(step: str) -> None:
    """A follower logged (and acked) a proposal the leader never committed; the leader and the
    other follower lose it in a crash and form a new epoch without it; the follower rejoins the
    leader whose last zxid is lower than its own, gets TRUNC, and crashes mid-sync. It must end
    without the txn, with the same data as the others."""
    s = Script()
    s.converge()
    s.open_session(3)
    s.create(3, "/a")
    s.wait(lambda: s.acked("/a"), "/a")
    s.converge()
    s.node(2).fsync_ms = (5000, 5000)  # only server 1 gets the next proposal onto its disk
    s.node(3).fsync_ms = (5000, 5000)  # and the leader cannot ack it: it never commits
    s.create(3, "/x")
    s.run(30)
    x = s.node(3).term.logging[-1]  # type: ignore[union-attr]
    assert x in logged_zxids(s, 1) and not s.has(1, "/x")
    for sid in (1, 2, 3):
        s.c.crash(sid)  # power loss: /x survives on server 1 only
    s.node(2).fsync_ms = s.node(3).fsync_ms = None
    assert x in logged_zxids(s, 1) and x not in logged_zxids(s, 2) | logged_zxids(s, 3)
    s.c.restart(2)
    s.c.restart(3)
    s.wait(lambda: s.leading(3), "3 to lead 2 and 3")

    fired: list[int] = []

    def on_receive(node: object, peer: int, p: QuorumPacket) -> None:
        if getattr(node, "sid", None) == 1 and not fired and PacketType(p.type).name == step:
            fired.append(1)
            s.c.defer(lambda: s.c.crash(1))
            s.c.defer(lambda: s.c.sched.after(50, s.c.restart, 1))

    s.c.packet_hooks.append(on_receive)
    s.c.restart(1)
    s.wait(lambda: bool(fired), f"server 1 to get {step}")
    s.final()
    assert s.c.stats["TRUNC"] >= 1
    assert s.nowhere("/x") and x not in logged_zxids(s, 1)
    assert s.everywhere("/a")


@pytest.mark.parametrize("victim", ["leader", "learner"])
def test_zookeeper_3642_crash_between_snap_and_newleader(victim: str) -> None:
    """A learner installs the leader's snapshot (SNAP) and then the leader (or the learner)
    crashes before NEWLEADER arrives. The learner must not have written a snapshot or advanced
    its currentEpoch on the strength of it, and no data may be lost or diverge afterwards."""
    s = Script()
    s.converge()
    s.open_session(3)
    for name in ("/a", "/b", "/c"):
        s.create(3, name)
    s.wait(lambda: s.acked("/c"), "/a, /b, /c")
    s.converge()
    s.c.crash(1)
    s.node(1).disk = SimDisk()  # a new, empty data dir: it can only be synchronised by SNAP
    s.node(1).snap_history.clear()

    fired: list[int] = []

    def on_receive(node: object, peer: int, p: QuorumPacket) -> None:
        if getattr(node, "sid", None) == 1 and p.type == PacketType.SNAP and not fired:
            fired.append(p.zxid)
            s.c.defer(lambda: s.c.crash(3 if victim == "leader" else 1))

    s.c.packet_hooks.append(on_receive)
    s.c.restart(1)
    s.wait(lambda: bool(fired), "server 1 to install the SNAP")
    assert s.node(1).alive == (victim == "leader")
    assert epoch_file(s, 1, CURRENT_EPOCH) == 0  # NEWLEADER never came
    assert snapshots(s, 1) == [0]
    if victim == "learner":
        s.c.restart(1)
    else:
        s.wait(lambda: s.leading(2), "servers 1 and 2 to elect 2")
        s.c.restart(3)
    s.final()
    for name in ("/a", "/b", "/c"):
        assert s.everywhere(name)
    leader = s.c.leader()
    assert leader is not None
    assert epoch_file(s, 1, CURRENT_EPOCH) == epoch_file(s, leader.sid, CURRENT_EPOCH)


def test_zookeeper_3911_quorum_crashes_right_after_acking_newleader() -> None:
    """The old leader logged txns nobody else has; it wins the next election, a follower gets
    them by DIFF and acks NEWLEADER, the epoch is established (those txns are now committed and
    served), then both crash. The follower must have fsynced them before its ack: the servers
    that come back without the old leader still have every one of them."""
    config = dataclasses.replace(SCRIPT, fsync_ms=(2, 4))
    s = Script(config=config)
    s.converge()
    s.open_session(3)
    s.create(3, "/a")
    s.wait(lambda: s.acked("/a"), "/a")
    s.converge()
    s.c.partition([3], [1, 2], notify_p=0)  # the links die silently: server 3 goes on leading a while
    s.c.crash(1)
    s.c.crash(2)
    s.c.heal()
    s.create(3, "/x1")  # logged by server 3 only: not committed yet
    s.create(3, "/x2")
    s.run(50)
    xs = [z for z in s.node(3).term.zab.outstanding]  # type: ignore[union-attr]
    assert len(xs) == 2 and all(z.zxid in logged_zxids(s, 3) for z in xs)
    s.wait(lambda: not s.leading(3), "server 3 to lose its quorum")

    s.node(1).fsync_ms = (40, 80)  # a slow disk: an ack before the fsync would be caught
    fired: list[int] = []

    def on_receive(node: object, peer: int, p: QuorumPacket) -> None:
        if getattr(node, "sid", None) == 3 and peer == 1 and p.type == PacketType.ACK \
                and zxid_counter(p.zxid) == 0 and not fired:
            fired.append(p.zxid)
            s.c.defer(lambda: s.c.crash(3))
            s.c.defer(lambda: s.c.crash(1))

    s.c.packet_hooks.append(on_receive)
    s.c.restart(1)
    s.wait(lambda: bool(fired), "server 1 to ack NEWLEADER")
    assert s.c.checker.leaders.get(2) == 3  # epoch 2 was established: /x1 and /x2 are committed
    assert s.node(3).tree is None
    s.node(1).fsync_ms = None
    s.c.restart(1)
    s.c.restart(2)
    s.wait(lambda: s.c.leader() is not None, "servers 1 and 2 to elect a leader")
    assert s.has(1, "/x1") and s.has(1, "/x2")
    s.c.restart(3)
    s.final()
    assert s.everywhere("/x1") and s.everywhere("/x2") and s.everywhere("/a")


# ---------------------------------------------------------------- zkpy's bugs the simulator found


def _expire_while_losing_quorum(config: SimConfig, offset_ms: int, wait_ms: int) -> Script | None:
    """Server 3 starts ``offset_ms`` after the others (its timers tick at another phase), leads a
    session nobody touches, and ``wait_ms`` later is cut off from its followers; the session's
    expiry may fall in the very tick in which it notices that it lost its quorum. None if
    server 3 does not lead."""
    s = Script(config=dataclasses.replace(config, tick_ms=100, session_timeout_ms=600), start=(1, 2))
    s.run(offset_ms)
    s.c.start(3)
    s.converge()
    if not s.leading(3):
        return None
    s.open_session(3)
    s.run(wait_ms)
    s.c.partition([3], [1, 2], notify_p=0)  # only the timeouts tell
    s.wait(lambda: not s.leading(3) and s.c.leader() is not None, "the leader to change", 10_000)
    return s


def _expiry_in_the_failing_tick() -> tuple[int, int]:
    for offset_ms in range(0, 25):
        for wait_ms in range(0, 400, 10):
            s = _expire_while_losing_quorum(SCRIPT, offset_ms, wait_ms)
            if s is not None and s.c.stats["expiry_as_leader_stops"]:
                return offset_ms, wait_ms
    raise AssertionError("no schedule makes the session expiry and the loss of quorum meet")


def test_a_session_expiring_as_the_leader_loses_its_quorum_ends_the_term() -> None:
    """zkpy bug found here: Leader.propose raised ZabError once the leader had stopped. A tick that
    fails the term (Close + Failed queued) and expires a session (a new proposal) then broke out
    of the shell's tick before Failed ran, and a leader cut off from its followers stayed in its
    term. The Zab leader now ignores a proposal once stopped, and the member core no longer
    offers one: it takes the pipeline's proposals only after the Zab core's actions ran, and
    none once the term ended. The expiry stays unproposed; the term ends; the next leader
    expires the session."""
    offset_ms, wait_ms = _expiry_in_the_failing_tick()
    s = _expire_while_losing_quorum(SCRIPT, offset_ms, wait_ms)
    assert s is not None and not s.leading(3)
    s.c.heal()
    s.final()


@pytest.mark.parametrize("sync", ["DIFF", "SNAP"])
def test_an_interrupted_sync_leaves_no_txn_of_an_unadopted_epoch(sync: str) -> None:
    """Found by the simulator: at NEWLEADER the learner logs (and, after SNAP, snapshots) the
    leader's history before it writes currentEpoch and acks. Killed in between (kill -9 keeps
    written bytes; a term that ends syncs what it was handed), it holds zxids of an epoch newer
    than its currentEpoch, which load_epochs refuses. The shell drops those txns at recovery
    (storage.truncate.drop_unadopted_epoch): none was acknowledged, and the next leader sends them again."""
    s = Script()
    s.converge()
    s.open_session(3)
    s.create(3, "/a")
    s.wait(lambda: s.acked("/a"), "/a")
    s.converge()
    s.c.crash(1)  # server 1 stays in epoch 1
    if sync == "SNAP":
        s.node(1).disk = SimDisk()  # ... with an empty data dir: only a SNAP brings it up to date
        s.node(1).snap_history.clear()
    s.c.crash(3)
    s.c.restart(3)
    s.wait(lambda: s.leading(3), "servers 2 and 3 to form epoch 2")
    s.open_session(3, client=1)
    s.create(3, "/b", client=1)
    s.wait(lambda: s.acked("/b"), "/b in epoch 2")
    s.node(2).fsync_ms = s.node(3).fsync_ms = (300, 300)  # a proposal outstanding while server 1 syncs
    s.create(3, "/c", client=1)
    s.node(1).fsync_ms = (50, 50)
    fired: list[int] = []

    def on_receive(node: object, peer: int, p: QuorumPacket) -> None:
        if getattr(node, "sid", None) == 1 and p.type == PacketType.NEWLEADER and not fired:
            fired.append(1)
            s.c.defer(lambda: s.c.crash(1, "kill"))  # what it wrote at NEWLEADER stays, unsynced or not

    s.c.packet_hooks.append(on_receive)
    s.c.restart(1)
    s.wait(lambda: bool(fired), "server 1 to get NEWLEADER")
    node = s.node(1)
    newest = max(max(logged_zxids(s, 1), default=0), max(snapshots(s, 1)))
    assert (epoch_file(s, 1, CURRENT_EPOCH) or 0) < 2 <= zxid_epoch(newest)  # an epoch it never adopted
    s.node(1).fsync_ms = s.node(2).fsync_ms = s.node(3).fsync_ms = None
    s.c.restart(1)
    assert s.c.stats["unadopted_epoch_dropped"] == 1
    assert node.tree is not None and node.tree.last_processed_zxid < Z(2, 0)
    s.final()
    assert s.everywhere("/a") and s.everywhere("/b") and s.everywhere("/c")


def test_trunc_keeps_the_state_at_the_trunc_zxid() -> None:
    """zkpy bug found here: a learner synchronised by SNAP right after a leader established its
    epoch holds that state only in snapshot.<e:0> (no log under it). If it logs a proposal and
    rejoins the same leader before that proposal commits, it gets TRUNC to the last committed zxid
    (< <e:0>); truncation removes snapshot.<e:0>, recovery falls back to an older state, and the
    learner used to build on a hole. Now a TRUNC that cannot reach its zxid ends the term, and the
    learner rejoins from the state it recovered."""
    s = Script(config=SCRIPT, start=(2, 3))
    s.converge(only=(2, 3))
    s.open_session(3)
    s.create(3, "/a")
    s.wait(lambda: s.acked("/a"), "/a")
    s.converge(only=(2, 3))
    s.c.crash(3)
    s.c.restart(3)
    s.wait(lambda: s.leading(3), "servers 2 and 3 to form epoch 2 (no txn in it yet)")
    s.c.start(1)  # a new server: SNAP at 0x200000000, then snapshot.200000000
    s.converge()
    assert snapshots(s, 1) == [0, Z(2, 0)] and not logged_zxids(s, 1)
    s.node(2).fsync_ms = s.node(3).fsync_ms = (1000, 1000)  # the next proposal commits late
    fired: list[int] = []

    def on_send(node: object, peer: int, p: QuorumPacket) -> None:
        if getattr(node, "sid", None) == 1 and p.type == PacketType.ACK and p.zxid == Z(2, 1) and not fired:
            fired.append(1)
            s.c.defer(lambda: s.c.crash(1))  # 0x2.1 is on its disk: it acked
            s.c.defer(lambda: s.c.restart(1))

    s.c.send_hooks.append(on_send)
    s.create(3, "/b")
    s.wait(lambda: bool(fired), "server 1 to ack 0x200000001")
    s.wait(lambda: s.c.stats["TRUNC"] >= 1, "server 1 to rejoin and get TRUNC")
    s.node(2).fsync_ms = s.node(3).fsync_ms = None
    s.final()
    assert s.everywhere("/a") and s.everywhere("/b")
    assert s.c.stats["trunc_would_lose_state"] >= 1


def test_accepted_epoch_is_persisted_before_ackepoch() -> None:
    """Zab's promise: a learner that acked a new epoch has it in acceptedEpoch, even across a crash."""
    s = Script()
    s.converge()
    acks: list[tuple[int, int | None]] = []
    s.c.send_hooks.append(lambda node, peer, p: acks.append((node.sid, epoch_file(s, node.sid, ACCEPTED_EPOCH)))
                          if p.type == PacketType.ACKEPOCH else None)
    s.c.crash(3)
    s.wait(lambda: s.leading(2), "servers 1 and 2 to elect 2")
    assert acks and all(epoch == 2 for _, epoch in acks)


def test_learner_with_a_newer_accepted_epoch_can_rejoin() -> None:
    """zkpy bug found here (liveness; ZooKeeper 3.8's learners refuse the same way): a learner
    whose acceptedEpoch is newer than the established leader's epoch (it acked a would-be leader
    that never got a quorum) failed at every LEADERINFO and looped for as long as that leader kept
    its quorum. Now the leader steps down when such a learner connects, and the next election
    picks an epoch past every accepted one."""
    s = Script(config=SCRIPT)
    s.converge()
    s.open_session(3)
    s.create(3, "/a")
    s.wait(lambda: s.acked("/a"), "/a")
    s.converge()
    s.c.crash(1)
    node = s.node(1)  # what acking a failed would-be leader's LEADERINFO of epoch 2 leaves on disk
    node.write_epoch(ACCEPTED_EPOCH, 2)
    s.c.restart(1)
    s.converge(timeout_ms=20_000)
    assert s.everywhere("/a")
    assert s.c.stats["leader_yields"] >= 1


def test_a_late_fsync_report_after_the_term_ended_applies_nothing() -> None:
    """Found by the real shell (commit 7895083), replayed here now that the simulator's terms are
    the runtime's member cores: a log's fsync worker reports its last sync after its term was
    closed. By then the term's tree belongs to the next term (``carry_over`` applied every txn the
    term logged), so the report must change nothing: a core that acted on it would apply the txns
    it completes a second time (the checker sees the history repeat)."""
    s = Script()
    assert s.converge().sid == 3
    s.open_session(3)
    s.create(3, "/a")
    s.wait(lambda: s.acked("/a"), "/a")
    s.converge()
    s.node(1).fsync_ms = (400, 400)  # server 1's next sync is still running when its term ends
    committed: list[int] = []

    def on_receive(node: object, peer: int, p: QuorumPacket) -> None:
        if getattr(node, "sid", None) == 1 and p.type == PacketType.COMMIT and not committed:
            committed.append(p.zxid)  # /b is committed, and server 1 still syncs it
            s.c.defer(lambda: s.c.crash(3))  # its term ends; the report of that sync comes after

    s.c.packet_hooks.append(on_receive)
    s.create(3, "/b")
    s.wait(lambda: bool(committed), "server 1 to get the COMMIT of /b")
    assert not s.has(1, "/b")
    s.wait(lambda: s.c.leader() is not None and s.c.leader().sid != 3, "servers 1 and 2 to elect a leader")
    s.node(1).fsync_ms = None
    s.c.restart(3)
    s.final()
    assert s.everywhere("/b")
    assert len(set(s.node(1).history)) == len(s.node(1).history)
