"""The transcript driver of the member core (``member.peer.PeerCore``): whole members, each over
its own in-memory data dir, their elections, their terms and their processes' crashes.

Each member is a member core run as ``runtime.peer`` runs it: `Recover` reads its data dir
(``member.datadir`` over a ``SimDisk``), `Elect` opens a round of its election core
(``quorum.election``), `StartTerm` runs the term core it names over in-memory links and a log on
that disk (``sim.disk.SimLog``: writes stay unsynced until ``fsync``), `Reconfigure` gives the
election the new config. Nothing moves unless a command moves it:

    peers N [observers=SID,SID] [reconfig] [read-only]
                                             members 1..N with empty data dirs (not started),
                                             with reconfigEnabled, readonlymode.enabled
    boot [SID...]                            the processes start (all without SIDs)
    elect                                    the members' election cores exchange notifications,
                                             in order, until none is in flight
    run                                      the terms run until nothing moves: learners connect,
                                             packets arrive, fsyncs complete, terms that ended
                                             are closed and their members go on
    client SID VERB ARGS...                  a client command (``pipeline``'s) on SID's pipeline
    crash SID [kill]                         power loss: what SID wrote and did not sync is lost
                                             (kill: kill -9, every written byte stays); its process
                                             and its connections are gone
    reset SID                                learner SID's link to its leader is reset (what was in
                                             flight on it is lost), as by a proxy in front of a
                                             leader not listening yet
    fail SID                                 SID's term breaks off with a failure (an exception in
                                             its shell): it is closed, and hands no tree on
    hold SID                                 bytes sent to SID wait (a slow link)
    stall SID                                SID's fsyncs wait (a slow disk)
    release SID                              both go on
    tick MS                                  every member's clock moves on and its timers run

Shown: the member cores' effects (``recover``, ``elect``, ``designate``, ``term``, ``serving``,
``reconfigure``, ``read-only``), each election's decision, the terms' ends, the epoch files and
snapshots written, and what clients read; the Zab traffic itself is the member transcripts'
(``members``).
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any, assert_never

from zkpy.config import LearnerType, QuorumConfig, QuorumServer, ServerConfig
from zkpy.member import effects as fx
from zkpy.member.datadir import recover_data_dir, truncate_data_dir
from zkpy.member.leading import LeadingCore
from zkpy.member.learning import LearningCore
from zkpy.member.peer import (
    Designate,
    Elect,
    PeerCore,
    PeerEffect,
    PeerEpoch,
    Reconfigure,
    Recover,
    ServeReadOnly,
    StartTerm,
    StopReadOnly,
)
from zkpy.quorum.dynconfig import config_data, verifier_of
from zkpy.quorum.election import Election
from zkpy.quorum.election import LearnerType as ElectionLearnerType
from zkpy.server.outputs import Output
from zkpy.storage.epochs import write_epoch
from zkpy.storage.files import DataDirs
from zkpy.storage.snapshot import write_snapshot_file
from zkpy.testing.sim.disk import SimDisk, SimLog
from zkpy.tree.acl import digest_id
from zkpy.wire.quorum import ServerState

from .datadriven import Driver
from .pipeline import CLIENT_VERBS, START_MS, WALL_MS, Clients, Names

TICK_MS = 100
SUPER_DIGEST = digest_id("super:secret")  # ``auth c1 digest super:secret`` makes a client super
ELECTION_STEP_MS = 50  # how far ``elect`` moves the clock while a round is open


@dataclass
class Term:
    """A running term: its core, the bytes in flight to it, its log."""

    core: LeadingCore | LearningCore
    log: SimLog
    inbox: deque[tuple[int, bytes]] = field(default_factory=deque)  # (from sid, bytes)
    links: set[int] = field(default_factory=set)  # a leader's learners connected; a learner's: {leader}
    syncs: list[Any] = field(default_factory=list)  # the log's fsyncs not completed yet
    ended: str | None = None


@dataclass
class Member:
    sid: int
    config: ServerConfig  # the active config: what a restarted process reads
    disk: SimDisk = field(default_factory=SimDisk)
    core: PeerCore | None = None
    election: Election | None = None
    term: Term | None = None
    outbox: deque[tuple[int, Any]] = field(default_factory=deque)  # election notifications: (to, notification)


class PeersDriver(Driver):
    def __init__(self) -> None:
        self.names = Names()
        self.clients = Clients(self.names)
        self.now = START_MS
        self.members: dict[int, Member] = {}
        self.held: set[int] = set()  # members whose incoming bytes wait
        self.stalled: set[int] = set()  # members whose fsyncs wait
        self.rng = random.Random(0)

    # ---- commands

    def cmd_peers(self, n: str, *args: str) -> None:
        opts = dict(_option(a) for a in args)
        count = int(n)
        observers = {int(s) for s in opts.get("observers", "").split(",") if s}
        servers = tuple(QuorumServer(sid, f"10.0.0.{sid}", 2888, 3888,  # type: ignore[arg-type]
                                     LearnerType.OBSERVER if sid in observers else LearnerType.PARTICIPANT)
                        for sid in range(1, count + 1))
        for sid in range(1, count + 1):
            quorum = QuorumConfig(servers, my_id=sid, init_limit_ticks=10, sync_limit_ticks=5,  # type: ignore[arg-type]
                                  standalone_enabled=False)
            config = ServerConfig(tick_ms=TICK_MS, data_dir=f"/peer/{sid}", server_id=sid, quorum=quorum,
                                  reconfig_enabled="reconfig" in opts, read_only_mode="read-only" in opts,
                                  super_digest=SUPER_DIGEST)
            self.members[sid] = Member(sid, config)

    def cmd_boot(self, *sids: str) -> list[str]:
        lines = []
        for m in self._chosen(sids):
            if m.core is not None:
                raise ValueError(f"server {m.sid} is running")
            m.core = PeerCore(m.config, self.now, WALL_MS + self.now)
            m.core.start()
            lines += self._pump(m)
        return lines

    def cmd_elect(self) -> list[str]:
        """Notifications in flight arrive, in order; while a round is still open (a decision
        waits out finalizeWait, a silence is resent) time moves on 50 ms at a time, up to 10 s."""
        lines: list[str] = []
        for _ in range(200):
            while any(m.outbox for m in self.members.values()):
                for m in self.members.values():
                    while m.outbox:
                        to, n = m.outbox.popleft()
                        dest = self.members.get(to)
                        if dest is None or dest.election is None or dest.core is None:
                            continue
                        dest.election.step(m.sid, n, self.now)
                        lines += self._election_ready(dest)
            open_rounds = [m for m in self.members.values()
                           if m.core is not None and m.election is not None and not m.election.decided]
            if not open_rounds:
                return lines
            self.now += ELECTION_STEP_MS
            for m in open_rounds:
                assert m.election is not None
                m.election.tick(self.now)
                lines += self._election_ready(m)
        return lines + ["(rounds still open after 10 s)"]

    def cmd_run(self) -> list[str]:
        lines: list[str] = []
        for _ in range(1000):
            moved = self._connect_learners()
            for m in self.members.values():
                moved += self._pump_term(m)
            for m in self.members.values():
                term = m.term
                if term is None:
                    continue
                while term.inbox and m.sid not in self.held:
                    src, data = term.inbox.popleft()
                    moved.append("")
                    self._time(m)
                    if isinstance(term.core, LeadingCore):
                        term.core.link_data(src, data)
                    else:
                        term.core.link_data(data)
                if m.sid not in self.stalled:
                    syncs, term.syncs = term.syncs, []
                    for sync in syncs:
                        sync()
                        moved.append("")
            for m in self.members.values():
                if m.term is not None and m.term.ended is not None:
                    moved += self._end_term(m)
            lines += [line for line in moved if line]
            if not moved:
                return lines
        raise AssertionError("the terms do not settle")

    def cmd_client(self, sid: str, verb: str, *args: str) -> list[str]:
        m = self.members[int(sid)]
        term = m.term
        pipeline = term.core.pipeline if term is not None else (m.core.read_only if m.core is not None else None)
        if pipeline is None:
            raise ValueError(f"server {sid} does not serve")
        pipeline.set_time(self.now, WALL_MS + self.now)
        if verb == "connect":
            self.clients.connect(pipeline, *args)
        elif verb in CLIENT_VERBS:
            self.clients.request(verb, *args)
        else:
            raise ValueError(f"unknown client command {verb!r}")
        lines = self._pump_term(m) if term is not None else self._pump(m)
        return [line for line in lines if line]

    def cmd_crash(self, sid: str, mode: str = "power") -> list[str]:
        m = self.members[int(sid)]
        m.disk.crash_now(self.rng, mode)
        m.core, m.election, m.term = None, None, None
        m.outbox.clear()
        lines = [f"{m.sid}: crashed ({mode})"]
        for other in self.members.values():  # its connections break
            term = other.term
            if term is None or m.sid not in term.links:
                continue
            term.links.discard(m.sid)
            self._time(other)
            if isinstance(term.core, LeadingCore):
                term.core.link_lost(m.sid)
            else:
                term.core.link_lost()
        return lines

    def cmd_reset(self, sid: str) -> list[str]:
        m = self.members[int(sid)]
        term = m.term
        if term is None or not isinstance(term.core, LearningCore) or not term.links:
            raise ValueError(f"server {sid} has no link to a leader")
        leader = self.members[term.core.leader_sid]
        term.links.clear()
        term.inbox.clear()
        if leader.term is not None and m.sid in leader.term.links:
            leader.term.links.discard(m.sid)
            leader.term.inbox = deque((src, data) for src, data in leader.term.inbox if src != m.sid)
            self._time(leader)
            assert isinstance(leader.term.core, LeadingCore)
            leader.term.core.link_lost(m.sid)
        self._time(m)
        retry_ms = term.core.link_lost()
        then = f"connecting again in {retry_ms} ms" if retry_ms is not None else "the term ends"
        return [f"{m.sid}: the link to leader {leader.sid} is reset: {then}",
                *(line for line in self._pump_term(m) + self._pump_term(leader) if line)]

    def cmd_fail(self, sid: str) -> list[str]:
        m = self.members[int(sid)]
        if m.term is None:
            raise ValueError(f"server {sid} runs no term")
        m.term.ended = "a failure in its shell"
        return self._end_term(m, crashed=True)

    def cmd_hold(self, sid: str) -> None:
        self.held.add(int(sid))

    def cmd_stall(self, sid: str) -> None:
        self.stalled.add(int(sid))

    def cmd_release(self, sid: str) -> None:
        self.held.discard(int(sid))
        self.stalled.discard(int(sid))

    def cmd_tick(self, ms: str) -> list[str]:
        self.now += int(ms)
        lines = []
        for m in self.members.values():
            if m.core is None:
                continue
            self._time(m)
            if m.term is not None:
                m.term.core.tick()
                lines += self._pump_term(m)
            else:
                m.core.tick()
                if m.election is not None and not m.election.decided:
                    m.election.tick(self.now)
                    lines += self._election_ready(m)
                lines += self._pump(m)
        return lines

    # ---- the member core's effects (as runtime.peer runs them)

    def _pump(self, m: Member) -> list[str]:
        lines = []
        core = m.core
        assert core is not None
        while effects := core.ready():
            for effect in effects:
                lines += self._peer_effect(m, core, effect)
        return lines

    def _peer_effect(self, m: Member, core: PeerCore, effect: PeerEffect) -> list[str]:
        who = f"{m.sid}:"
        match effect:
            case Recover():
                state = recover_data_dir(m.disk, DataDirs.of(m.config.data_dir), effect.carried)
                tree = state.history.tree
                if state.recovered is None:
                    line = f"{who} carry the term's tree over: zxid 0x{tree.last_processed_zxid:x}"
                    if effect.carried is not None and effect.carried.carried:
                        line += f", {len(effect.carried.carried)} logged txns applied"
                else:
                    line = f"{who} recover the data dir: zxid 0x{tree.last_processed_zxid:x}"
                    if state.fresh_snapshot is not None:
                        line += f", {state.fresh_snapshot.rsplit('/', 1)[1]} written"
                    if state.dropped_epoch is not None:
                        line += f", the txns of unadopted epoch {state.dropped_epoch} dropped"
                core.recovered(state)
                return [f"{line} (epochs current={state.epochs.current} accepted={state.epochs.accepted})"]
            case Elect():
                if m.election is None:
                    m.election = Election(m.sid, core.verifier, last_zxid=effect.last_zxid,
                                          current_epoch=effect.current_epoch, config_data=config_data(core.quorum),
                                          learner_type=self._learner_type(core),
                                          adopt_newer_configs=m.config.reconfig_enabled)
                m.election.start(self.now, last_zxid=effect.last_zxid, current_epoch=effect.current_epoch)
                return [f"{who} elect with zxid 0x{effect.last_zxid:x} epoch {effect.current_epoch}",
                        *self._election_ready(m)]
            case Designate():
                assert m.election is not None
                decision = m.election.designate(effect.leader, effect.last_zxid)
                self._time(m)
                core.decided(decision)
                return [f"{who} take the designated leader {effect.leader} ({ServerState(decision.state).name})"]
            case StartTerm():
                term_core = effect.term
                log = SimLog(m.disk, DataDirs.of(m.config.data_dir).log_dir, prealloc_bytes=4096, snap_count=100_000,
                             rng=self.rng, post=lambda _ms, fn, *a: term.syncs.append(lambda: fn(*a)),
                             fsync_delay=lambda: 0, on_durable=lambda n: self._durable(m, n), on_roll=lambda: None)
                term = m.term = Term(term_core, log)
                what = term_core.role if isinstance(term_core, LeadingCore) \
                    else f"{term_core.role} of {term_core.leader_sid}"
                return [f"{who} term as {what}"]
            case ServeReadOnly():
                return [f"{who} serve read-only clients at zxid 0x{effect.pipeline.tree.last_processed_zxid:x}"]
            case StopReadOnly():
                return [f"{who} read-only service ends"]
            case Reconfigure():
                m.config = core.config
                if m.election is not None:
                    m.election.reconfigure(verifier_of(effect.quorum), config_data(effect.quorum),
                                           self._learner_type(core))
                voters = ",".join(str(s.sid) for s in effect.quorum.participants)
                return [f"{who} reconfigure: config 0x{effect.quorum.config_version:x}, voters {voters}"]
            case PeerEpoch():
                assert m.election is not None
                m.election.update_peer_epoch(effect.epoch)
                return []
            case Output():
                return [f"{who} {line}" for line in self.clients.render(effect.conn)]
            case _:
                assert_never(effect)

    @staticmethod
    def _learner_type(core: PeerCore) -> ElectionLearnerType:
        return ElectionLearnerType.OBSERVER if core.observer else ElectionLearnerType.PARTICIPANT

    def _election_ready(self, m: Member) -> list[str]:
        election, core = m.election, m.core
        assert election is not None and core is not None
        ready = election.ready()
        for send in ready.sends:
            targets = [send.to] if send.to is not None else sorted(election.voters - {m.sid})
            for to in targets:
                m.outbox.append((to, send.notification))
        lines = []
        if ready.decision is not None:
            d = ready.decision
            lines.append(f"{m.sid}: decided: leader {d.leader} ({ServerState(d.state).name})")
            self._time(m)
            core.decided(d)
            lines += self._pump(m)
        elif ready.newer_config is not None:
            core.newer_config(ready.newer_config)
            lines += self._pump(m)
            lines += self._election_ready(m)
        return lines

    # ---- the terms (as runtime.term runs them)

    def _connect_learners(self) -> list[str]:
        lines = []
        for m in self.members.values():
            term = m.term
            if term is None or not isinstance(term.core, LearningCore) or term.links or term.ended is not None:
                continue
            leader = self.members[term.core.leader_sid]
            if leader.term is not None and isinstance(leader.term.core, LeadingCore) and leader.term.ended is None:
                term.links.add(leader.sid)
                leader.term.links.add(m.sid)
                self._time(leader)
                leader.term.core.link_connected(m.sid)
                self._time(m)
                term.core.connected()
                lines.append(f"{m.sid}: connected to leader {leader.sid}")
            else:
                self._time(m)
                if term.core.connect_failed() is None:
                    term.ended = f"could not connect to leader {leader.sid}"
                lines.append("")
        return lines

    def _pump_term(self, m: Member) -> list[str]:
        term = m.term
        if term is None:
            return []
        lines = []
        while effects := term.core.ready():
            for effect in effects:
                lines += self._term_effect(m, term, effect)
        return lines

    def _term_effect(self, m: Member, term: Term, effect: fx.Effect) -> list[str]:
        who = f"{m.sid}:"
        core = m.core
        assert core is not None
        match effect:
            case fx.Send():
                dests = [effect.link] if isinstance(term.core, LeadingCore) else list(term.links)
                for dest in dests:
                    other = self.members[dest].term
                    if other is not None and m.sid in other.links:
                        other.inbox.append((m.sid, effect.data))
                return [""]
            case fx.AppendLog():
                term.log.log_payloads(effect.zxids, effect.payloads)
                return [""]
            case fx.WriteEpoch():
                write_epoch(m.disk, DataDirs.of(m.config.data_dir).snap_dir, effect.name, effect.value)
                return [f"{who} write {effect.name}={effect.value}"]
            case fx.WriteSnapshot():
                path = write_snapshot_file(m.disk, DataDirs.of(m.config.data_dir).snap_dir, effect.tree)
                return [f"{who} write {path.rsplit('/', 1)[1]}"]
            case fx.Truncate():
                term.log.close()
                recovered = truncate_data_dir(m.disk, DataDirs.of(m.config.data_dir), effect.zxid)
                assert isinstance(term.core, LearningCore)
                term.core.truncated(recovered)
                return [f"{who} truncate the log to 0x{effect.zxid:x}"]
            case fx.Serving():
                self._time(m)
                core.term_serving(effect.epoch)
                return [f"{who} serving epoch={effect.epoch} as {term.core.role}", *self._pump(m)]
            case fx.ActivateConfig():
                core.config_activated(effect.quorum)
                return self._pump(m)
            case fx.EndTerm():
                term.ended = effect.reason
                return [""]
            case fx.CloseLink():
                term.links.discard(effect.link)
                other = self.members[effect.link].term
                if other is not None:
                    other.links.discard(m.sid)
                    other.ended = other.ended or "the leader closed the connection"
                return [""]
            case fx.Output():
                return [f"{who} {line}" for line in self.clients.render(effect.conn)]
            case fx.StartWorkers() | fx.PublishApplied() | fx.ToWorker():
                raise AssertionError(f"no serving processes in these transcripts: {effect!r}")
            case fx.PacketIn() | fx.PacketOut() | fx.Proposed() | fx.Logged() | fx.Applied() | fx.SnapshotLoaded():
                raise AssertionError(f"a trace effect from a core made without trace: {effect!r}")
            case _:
                assert_never(effect)

    def _durable(self, m: Member, count: int) -> None:
        if m.term is not None:
            self._time(m)
            m.term.core.durable(count)

    def _end_term(self, m: Member, crashed: bool = False) -> list[str]:
        """The term's shell closes the term (its links and its log): the member core goes on."""
        term, core = m.term, m.core
        assert term is not None and core is not None
        lines = [f"{m.sid}: term ends: {term.ended}"]
        term.core.stop("term closed")
        term.core.ready()  # a closed term's effects reach nothing
        for other_sid in list(term.links):
            other = self.members[other_sid]
            if other.term is not None and m.sid in other.term.links:
                other.term.links.discard(m.sid)
                self._time(other)
                if isinstance(other.term.core, LeadingCore):
                    other.term.core.link_lost(m.sid)
                else:
                    other.term.core.link_lost()
        unreported = term.log.close()
        self._durable(m, unreported)
        m.term = None
        self._time(m)
        core.term_ended(crashed)
        return lines + self._pump(m)

    # ---- helpers

    def _time(self, m: Member) -> None:
        if m.core is not None:
            m.core.set_time(self.now, WALL_MS + self.now)
        if m.term is not None:
            m.term.core.set_time(self.now, WALL_MS + self.now)

    def _chosen(self, sids: tuple[str, ...]) -> list[Member]:
        return [self.members[int(s)] for s in sids] if sids else list(self.members.values())


def _option(arg: str) -> tuple[str, str]:
    """``key=value``, or a bare ``key`` (a flag)."""
    key, _, value = arg.partition("=")
    return key, value
