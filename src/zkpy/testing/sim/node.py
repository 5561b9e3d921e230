"""One simulated ensemble member: the member core (``member.peer.PeerCore``, the one
``runtime.peer.QuorumPeer`` drives) run over the simulated network, disk and clock, with the
process around it (start, crash, pause, resume).

As the real shell does, this one runs the core's effects and nothing else: it recovers the data
dir when asked (``member.datadir``, over the simulated disk), runs election rounds
(``quorum.election`` over the simulated network), runs each term through its role's shell
(``terms``), and hands the serving pipeline (the term's, or the read-only one) to the real
clients (``sessions``). A crash loses the process and its memory; its disk keeps what
``SimDisk.crash_now`` says, and its active config (the dynamic config file it wrote) survives.

Simulator-only bookkeeping: ``history`` (the zxids the current tree applied, in order) rides
along with the tree so the checker can compare replicas; each snapshot file's history is
remembered by path (``snap_history``).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping
from typing import Any, Protocol, assert_never

from zkpy.config import LearnerType, QuorumConfig, QuorumServer, ServerConfig
from zkpy.member import peer as lifecycle
from zkpy.member.datadir import recover_data_dir
from zkpy.member.leading import LeadingCore
from zkpy.member.peer import PeerCore
from zkpy.quorum.dynconfig import config_data, verifier_of
from zkpy.quorum.election import TICK_MS as ELECTION_TICK_MS
from zkpy.quorum.election import Decision, Election
from zkpy.quorum.election import LearnerType as ElectionLearnerType
from zkpy.server.connection import Connection
from zkpy.server.core import ServerCore
from zkpy.server.outputs import Output
from zkpy.storage.epochs import write_epoch
from zkpy.storage.files import DataDirs
from zkpy.storage.recovery import Recovered
from zkpy.storage.snapshot import write_snapshot_file
from zkpy.storage.txnlog import encode_payload, scan_log
from zkpy.tree.datatree import DataTree
from zkpy.wire.quorum import decode_notification, encode_notification, frame, read_frame

from . import terms
from .disk import SimDisk, SimLog
from .scheduler import Scheduler
from .sessions import Link, Sessions
from .terms import SimLeaderTerm, SimLearnerTerm

WALL_EPOCH_MS = 1_700_000_000_000  # what the simulated wall clock reads at t=0


class Ensemble(terms.Ensemble, Protocol):
    """What a server uses of the ensemble (``cluster.Cluster``): what its terms use, and the clock,
    the RNG, its peers and the real clients."""

    @property
    def sched(self) -> Scheduler: ...

    @property
    def rng(self) -> random.Random: ...

    @property
    def nodes(self) -> Mapping[int, SimNode]: ...

    @property
    def sessions(self) -> Sessions: ...


class SimNode:
    def __init__(self, cluster: Ensemble, sid: int) -> None:
        self.c = cluster
        self.sid = sid
        cfg = cluster.config
        quorum = QuorumConfig(
            tuple(QuorumServer(n, f"10.0.0.{n}", 2888, 3888,  # type: ignore[arg-type]
                               LearnerType.OBSERVER if n > cfg.nodes - cfg.observers else LearnerType.PARTICIPANT)
                  for n in range(1, cfg.nodes + 1)),
            my_id=sid, init_limit_ticks=cfg.init_limit, sync_limit_ticks=cfg.sync_limit,  # type: ignore[arg-type]
            quorum_sync=cfg.quorum_sync, groups=cfg.groups, weights=cfg.weights,
            local_sessions=cfg.local_sessions, local_sessions_upgrading=cfg.local_sessions_upgrading,
            standalone_enabled=False)
        # the config a (re)started process reads: a reconfig changes it, and it survives a crash
        # (the dynamic config file the real shell writes)
        self.config = ServerConfig(tick_ms=cfg.tick_ms, data_dir=f"/sim/{sid}", server_id=sid,
                                   snap_count=cfg.snap_count, prealloc_kb=max(1, cfg.prealloc_bytes // 1024),
                                   quorum=quorum, reconfig_enabled=cfg.reconfig, read_only_mode=cfg.read_only,
                                   server_workers=cfg.server_workers)
        self.disk = SimDisk()
        self.dirs = DataDirs.of(self.config.data_dir)
        self.incarnation = 0
        self.alive = False
        self.paused = False
        self.deferred: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self.core: PeerCore | None = None  # the process's member core (None while it is down)
        self.election: Election | None = None
        self.term: SimLeaderTerm | SimLearnerTerm | None = None
        self.history: list[int] = []
        self.snap_history: dict[str, tuple[int, ...]] = {}  # snapshot path -> history of the tree it holds
        self.term_seq = 0
        self.fsync_ms: tuple[int, int] | None = None  # this server's fsync latency, if not the cluster's
        self.client_links: dict[int, Link] = {}  # real clients' connections to this server, by conn id (sessions.py)

    # ------------------------------------------------------------ what the others read

    @property
    def quorum(self) -> QuorumConfig:
        assert self.config.quorum is not None
        return self.config.quorum

    @property
    def observer(self) -> bool:
        me = self.quorum.me
        return me is not None and me.role is LearnerType.OBSERVER

    @property
    def mode(self) -> str:
        """down, or what the member core says (looking, read-only, leader, follower, observer)."""
        return self.core.mode if self.core is not None else "down"

    @property
    def tree(self) -> DataTree | None:
        return self.core.tree if self.core is not None else None

    @property
    def epochs(self) -> object:
        state = self.core.state if self.core is not None else None
        return state.epochs if state is not None else None

    @property
    def now(self) -> int:
        return self.c.sched.now

    @property
    def wall_ms(self) -> int:
        return WALL_EPOCH_MS + self.c.sched.now

    # ------------------------------------------------------------ events

    def post(self, delay_ms: int, fn: Callable[..., Any], *args: Any) -> None:
        """An event of this process: dropped if it has crashed since, held while it is paused."""
        self.c.sched.after(delay_ms, self.run_event, self.incarnation, fn, *args)

    def run_event(self, inc: int, fn: Callable[..., Any], *args: Any) -> None:
        if inc != self.incarnation or not self.alive:
            return
        if self.paused:
            self.deferred.append((fn, args))
            return
        fn(*args)
        self._after_event()

    def _after_event(self) -> None:
        term = self.term
        if term is not None:
            if term.flush_due and term.ended is None:
                term.flush()
            if term.ended is not None:
                self._end_term(term.ended)
        elif self.core is not None:
            self.run_core()  # read-only clients' replies

    def client_output(self, conn: Connection) -> None:
        """The pipeline's `Output`: what it wrote on a client connection goes out in one write
        (and the connection closes after it, if it is closing), as the client port does."""
        link = self.client_links.get(conn.conn_id)
        if link is None or link.conn is not conn:
            return
        data = b"".join(conn.take_output())
        if conn.closing:
            del self.client_links[conn.conn_id]
        self.c.sessions.delivered(link, data, conn.closing)
        if conn.paused and conn.can_resume:  # it took no request while too many were in flight: now it may
            self.post(0, self.c.sessions.server_turn, link)

    def close_clients(self) -> None:
        """Every client connection is closed (the term ended, or the process died)."""
        links, self.client_links = list(self.client_links.values()), {}
        for link in links:
            self.c.sched.after(1, self.c.sessions.server_closed, link)

    # ------------------------------------------------------------ life cycle

    def start(self) -> None:
        """Start the process (first boot or restart after a crash)."""
        assert not self.alive
        self.incarnation += 1
        self.alive = True
        self.paused = False
        self.deferred = []
        self.election = None
        self.c.trace_event(self.sid, "start", self.incarnation)
        self.core = PeerCore(self.config, self.now, self.wall_ms, trace=True)
        self.core.start()
        self.run_core()
        self.c.sched.after(self.config.tick_interval_ms, self._tick_event, self.incarnation)
        self.c.sched.after(ELECTION_TICK_MS, self._election_tick, self.incarnation)
        self.c.net.node_started(self.sid)

    def crash(self, mode: str = "power") -> list[str]:
        """The process dies; ``mode`` says what its disk keeps (``SimDisk.crash_now``)."""
        assert self.alive
        self.alive = False
        self.paused = False
        self.deferred = []
        self.term = None
        self.election = None
        self.core = None
        kept = self.disk.crash_now(self.c.rng, mode)
        self.c.net.node_crashed(self.sid)
        self.close_clients()
        self.c.trace_event(self.sid, f"crash ({mode})", kept)
        return kept

    def pause(self) -> None:
        self.paused = True
        self.c.trace_event(self.sid, "pause", None)

    def resume(self) -> None:
        """SIGCONT: everything that arrived meanwhile is handled now, in order."""
        if not self.paused:
            return
        self.paused = False
        self.c.trace_event(self.sid, "resume", len(self.deferred))
        inc = self.incarnation
        while self.deferred and self.alive and not self.paused and self.incarnation == inc:
            fn, args = self.deferred.pop(0)
            fn(*args)
            self._after_event()

    def _tick_event(self, inc: int) -> None:
        """The process's timers (``ServerConfig.tick_interval_ms``): the term's, else the member core's."""
        if inc != self.incarnation or not self.alive:
            return
        self.c.sched.after(self.config.tick_interval_ms, self._tick_event, inc)
        if self.paused:
            return  # a stopped process's timers fire when it continues (the next tick)
        if self.term is not None:
            self.term.tick()
        elif self.core is not None:
            self._time()
            self.core.tick()
            self.run_core()
        self._after_event()

    def _election_tick(self, inc: int) -> None:
        """An open round's timers (``quorum.election.TICK_MS``, as ``runtime.election_net``'s)."""
        if inc != self.incarnation or not self.alive:
            return
        self.c.sched.after(ELECTION_TICK_MS, self._election_tick, inc)
        if self.paused or self.election is None or self.election.decided:
            return
        self.election.tick(self.now)
        self._pump_election()
        self._after_event()

    def _time(self) -> None:
        assert self.core is not None
        self.core.set_time(self.now, self.wall_ms)

    # ------------------------------------------------------------ the member core's effects

    def run_core(self) -> None:
        """Run the member core's effects, batch after batch, until it has none."""
        core = self.core
        assert core is not None
        while effects := core.ready():
            for effect in effects:
                match effect:
                    case Output():
                        self.client_output(effect.conn)
                    case lifecycle.Recover():
                        self._recover(core, effect)
                    case lifecycle.Elect():
                        self._elect(effect)
                    case lifecycle.Designate():
                        assert self.election is not None
                        self.c.trace_event(self.sid, "designated", effect.leader)
                        self._decided(self.election.designate(effect.leader, effect.last_zxid))
                    case lifecycle.PeerEpoch():
                        assert self.election is not None
                        self.election.update_peer_epoch(effect.epoch)
                    case lifecycle.Reconfigure():
                        self._reconfigure(effect.quorum)
                    case lifecycle.StartTerm():
                        self._start_term(effect)
                    case lifecycle.ServeReadOnly():
                        self.c.stats["read_only_served"] += 1
                        self.c.trace_event(self.sid, "read-only service",
                                           hex(effect.pipeline.tree.last_processed_zxid))
                    case lifecycle.StopReadOnly():
                        self.c.trace_event(self.sid, "read-only service ended", None)
                        self.close_clients()
                    case _:
                        assert_never(effect)

    def _recover(self, core: PeerCore, effect: lifecycle.Recover) -> None:
        """``member.datadir`` over the simulated disk; the history and the checker follow it."""
        state = recover_data_dir(self.disk, self.dirs, effect.carried)
        if state.recovered is None:
            assert effect.carried is not None
            for txn in effect.carried.carried:
                self.c.checker.check_txn(self, txn.zxid, txn.data, "recovered")
                self.history.append(txn.zxid)
            self.c.stats["carried_over"] += 1
        else:
            if state.dropped_epoch is not None:
                self.c.stats["unadopted_epoch_dropped"] += 1
                self.c.trace_event(self.sid, "dropped unadopted epoch", state.dropped_epoch)
            if state.fresh_snapshot is not None:
                self.snap_history[state.fresh_snapshot] = ()
                self.c.stats["snapshots"] += 1
            self.recovered_from(state.recovered)
        self.c.checker.on_tree(self, state.history.tree)
        core.recovered(state)

    def recovered_from(self, rec: Recovered) -> None:
        """The tree was recovered from disk (at a start, or after a TRUNC): its history is the
        snapshot's and the txns replayed over it, each of which a leader proposed."""
        self.history = self._recovered_history(rec)
        for hdr, txn in rec.replayed_tail:
            self.c.checker.check_txn(self, hdr.zxid, encode_payload(hdr, txn), "recovered")

    def _recovered_history(self, rec: Recovered) -> list[int]:
        if rec.snapshot_path is not None:
            base = self.snap_history.get(rec.snapshot_path)
            if base is None:
                raise RuntimeError(f"simulator: server {self.sid} loaded {rec.snapshot_path}, which it never wrote")
            history = list(base)
        else:
            history = []
        if rec.txns_replayed == len(rec.replayed_tail):
            history.extend(hdr.zxid for hdr, _ in rec.replayed_tail)
        else:  # more than the tail keeps: read the logs again
            start = rec.snapshot_zxid or 0
            end = rec.tree.last_processed_zxid
            for _, path in self.dirs.logs(self.disk):
                scan = scan_log(path, self.disk.read(path), after_zxid=start)
                history.extend(e.hdr.zxid for e in scan.entries if e.hdr.zxid <= end)
        return history

    def _elect(self, effect: lifecycle.Elect) -> None:
        last, epoch = effect.last_zxid, effect.current_epoch
        if self.election is None:
            assert self.core is not None
            self.election = Election(self.sid, self.core.verifier, last_zxid=last, current_epoch=epoch,
                                     config_data=config_data(self.quorum), learner_type=self._learner_type(),
                                     adopt_newer_configs=self.config.reconfig_enabled)
        self.c.trace_event(self.sid, "looking", (last, epoch))
        self.election.start(self.now, last_zxid=last, current_epoch=epoch)
        self._pump_election()

    def _learner_type(self) -> ElectionLearnerType:
        return ElectionLearnerType.OBSERVER if self.observer else ElectionLearnerType.PARTICIPANT

    def _decided(self, decision: Decision) -> None:
        assert self.core is not None
        self.c.trace_event(self.sid, "decided", (decision.leader, decision.vote.zxid, decision.vote.peer_epoch))
        self._time()
        self.core.decided(decision)

    def _start_term(self, effect: lifecycle.StartTerm) -> None:
        self.term_seq += 1
        core = effect.term
        term: SimLeaderTerm | SimLearnerTerm
        term = SimLeaderTerm(self, core) if isinstance(core, LeadingCore) else SimLearnerTerm(self, core)
        self.term = term
        term.start()

    def _end_term(self, reason: str) -> None:
        term = self.term
        assert term is not None and self.core is not None
        self.c.trace_event(self.sid, "term-ended", reason)
        self.c.stats["terms_ended"] += 1
        self.close_clients()
        term.close()
        self.term = None
        self._time()
        self.core.term_ended()
        self.run_core()

    def _reconfigure(self, quorum: QuorumConfig) -> None:
        """runtime.peer's Reconfigure: the election takes the config (and the dynamic config file
        the real shell writes survives a crash: ``config`` does)."""
        self.c.trace_event(self.sid, "config", quorum.config_version)
        self.c.stats["configs_activated"] += 1
        self.config = dataclasses.replace(self.config, quorum=quorum)
        if self.election is not None:
            self.election.reconfigure(verifier_of(quorum), config_data(quorum), self._learner_type())

    # ------------------------------------------------------------ election

    def on_notification(self, src: int, payload: bytes) -> None:
        if self.election is None:
            return
        got = read_frame(payload)
        assert got is not None
        n = decode_notification(got[0])
        self.election.step(src, n, self.now)
        self._pump_election()

    def _pump_election(self) -> None:
        election = self.election
        assert election is not None
        ready = election.ready()
        for send in ready.sends:
            payload = frame(encode_notification(send.notification))
            targets = [send.to] if send.to is not None else sorted(election.voters - {self.sid})
            for sid in targets:
                if sid == self.sid:
                    self.post(0, self.on_notification, sid, payload)
                elif sid in self.c.nodes:
                    self.c.net.send_notification(self.sid, sid, payload)
        if ready.decision is not None:
            self._decided(ready.decision)
            self.run_core()
        elif ready.newer_config is not None:
            assert self.core is not None
            self.core.newer_config(ready.newer_config)
            self.run_core()
            self._pump_election()

    # ------------------------------------------------------------ disk (what the terms write)

    def take_snapshot(self, tree: DataTree, history: list[int]) -> None:
        """A snapshot, written at once (``storage.snapshot.write_snapshot_file``)."""
        path = write_snapshot_file(self.disk, self.dirs.snap_dir, tree)
        self.snap_history[path] = tuple(history)
        self.c.stats["snapshots"] += 1

    def write_epoch(self, name: str, value: int) -> None:
        write_epoch(self.disk, self.dirs.snap_dir, name, value)
        self.c.checker.on_epoch(self, name, value)

    def new_log(self, on_durable: Callable[[int], None], on_roll: Callable[[], None]) -> SimLog:
        cfg = self.c.config
        return SimLog(self.disk, self.dirs.log_dir, prealloc_bytes=cfg.prealloc_bytes, snap_count=cfg.snap_count,
                      rng=self.c.rng, post=self.post, fsync_delay=self._fsync_delay, on_durable=on_durable,
                      on_roll=on_roll)

    def _fsync_delay(self) -> int:
        span = self.fsync_ms if self.fsync_ms is not None else self.c.config.fsync_ms
        return self.c.rng.randint(*span)

    # ------------------------------------------------------------ clients

    def pipeline_for_client(self) -> ServerCore | None:
        """The pipeline a client connecting now gets while a term serves: the member's, or with
        a dedicated member one of the workers whose replica is loaded (the kernel spreads
        connections over them; none listens before), else the read-only one while that serves,
        else none."""
        if not self.alive or self.paused:
            return None
        term = self.term
        if self.serving:
            assert term is not None and term.pipeline is not None
            if not term.workers:
                return term.pipeline
            pipelines = [w.pipeline for w in term.workers if w.pipeline is not None]
            if not pipelines:
                return None
            self.c.stats["client_on_worker"] += 1
            return self.c.rng.choice(pipelines)
        return self.core.read_only if self.core is not None else None

    def serves(self, pipeline: ServerCore) -> bool:
        """Does ``pipeline`` still serve clients here (its process lives, its term goes on)?"""
        if not self.alive or self.paused:
            return False
        term = self.term
        if term is not None:
            return self.serving and (pipeline is term.pipeline or any(w.pipeline is pipeline for w in term.workers))
        return self.core is not None and pipeline is self.core.read_only

    def before_input(self, pipeline: ServerCore) -> None:
        """Client input reaches ``pipeline``: a worker's reads wait for the member's applied zxid."""
        for worker in self.term.workers if self.term is not None else ():
            if worker.pipeline is pipeline:
                worker.before_input()

    def input_taken(self, pipeline: ServerCore) -> None:
        """``pipeline`` took client input: its process flushes at the end of the event."""
        term = self.term
        if term is None:
            return  # (a read-only pipeline's output is written after each event)
        term.flush_due = True
        for worker in term.workers:
            if worker.pipeline is pipeline:
                worker.flush_due = True

    def submit(self, session: int, cxid: int, op: int, body: bytes) -> bool:
        """A client request on this server; False if it is not serving (the client moves on)."""
        term = self.term
        if term is None or not self.alive or self.paused or term.ended is not None or term.pipeline is None:
            return False
        term.client_request(session, cxid, op, body)
        self._after_event()
        return True

    @property
    def serving(self) -> bool:
        t = self.term
        return self.alive and t is not None and t.ended is None and t.pipeline is not None
