"""One simulated ensemble member: ``runtime.peer.QuorumPeer`` over the simulated network,
disk and clock: the process (start, crash, pause, resume), its data dir (recovery, snapshots,
epoch files) and its election; the terms it runs in between elections are in ``terms``.

It runs the same loop as the real shell: election, then one term as leader or learner, over
and over. Each term starts from disk (the data dir is recovered: snapshot + every logged txn,
committed or not; txns of an epoch whose NEWLEADER was never acknowledged are dropped first,
as ``storage.truncate.drop_unadopted_epoch`` does). When a term ends nothing of its memory survives into
the next.

Simulator-only bookkeeping: ``history`` (the zxids the current tree applied, in order) rides
along with the tree so the checker can compare replicas; each snapshot file's history is
remembered by path (``snap_history``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from zkpy.config import LearnerType, QuorumConfig, QuorumServer, ServerConfig
from zkpy.member.history import History
from zkpy.member.read_only import ReadOnlyGate
from zkpy.quorum.dynconfig import activation, config_data, verifier_of
from zkpy.quorum.election import Decision, Election
from zkpy.quorum.election import LearnerType as ElectionLearnerType
from zkpy.quorum.sync import DEFAULT_COMMITTED_LOG, LoggedTxn
from zkpy.quorum.verifier import config_string, quorum_verifier
from zkpy.server.connection import Connection
from zkpy.server.core import ServerCore
from zkpy.server.outputs import Output
from zkpy.server.read_only import ReadOnlyServerCore
from zkpy.storage.disk import join
from zkpy.storage.epochs import Epochs, load_epochs, write_epoch
from zkpy.storage.files import DataDirs
from zkpy.storage.recovery import Recovered, recover
from zkpy.storage.snapshot import snapshot_name, write_snapshot
from zkpy.storage.truncate import drop_unadopted_epoch
from zkpy.storage.txnlog import encode_payload, scan_log
from zkpy.tree.datatree import DataTree
from zkpy.wire.quorum import decode_notification, encode_notification, frame, read_frame

from . import terms
from .disk import SimDisk, SimLog
from .scheduler import Scheduler
from .sessions import Link, Sessions
from .terms import LeaderTerm, LearnerTerm

WALL_EPOCH_MS = 1_700_000_000_000  # what the simulated wall clock reads at t=0
TICK_INTERVAL_MS = 50  # the election's and the terms' timers


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
        self.observer = sid > cfg.nodes - cfg.observers
        self.quorum = QuorumConfig(
            tuple(QuorumServer(n, f"10.0.0.{n}", 2888, 3888,  # type: ignore[arg-type]
                               LearnerType.OBSERVER if n > cfg.nodes - cfg.observers else LearnerType.PARTICIPANT)
                  for n in range(1, cfg.nodes + 1)),
            my_id=sid, init_limit_ticks=cfg.init_limit, sync_limit_ticks=cfg.sync_limit,  # type: ignore[arg-type]
            quorum_sync=cfg.quorum_sync, groups=cfg.groups, weights=cfg.weights,
            local_sessions=cfg.local_sessions, local_sessions_upgrading=cfg.local_sessions_upgrading,
            standalone_enabled=False)
        self.verifier = quorum_verifier(self.quorum)  # this server's: a reconfig changes it (``activate``)
        self.config_data = config_string(self.quorum).encode("utf-8")
        self.config = ServerConfig(tick_ms=cfg.tick_ms, data_dir=f"/sim/{sid}", server_id=sid,
                                   snap_count=cfg.snap_count, prealloc_kb=max(1, cfg.prealloc_bytes // 1024),
                                   quorum=self.quorum, reconfig_enabled=cfg.reconfig)
        self.disk = SimDisk()
        self.dirs = DataDirs.of(self.config.data_dir)
        self.incarnation = 0
        self.alive = False
        self.paused = False
        self.deferred: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self.election: Election | None = None
        self.term: LeaderTerm | LearnerTerm | None = None
        self.mode = "down"  # down, looking, leading, following (leader: once established; follower: serving)
        self.tree: DataTree | None = None
        self.history: list[int] = []
        self.recovered: Recovered | None = None
        self.committed: list[LoggedTxn] = []  # the history's recent txns: a new leader's committed log
        self.epochs = Epochs(0, 0)
        self.snap_history: dict[str, tuple[int, ...]] = {}  # snapshot path -> history of the tree it holds
        self.term_seq = 0
        self.fsync_ms: tuple[int, int] | None = None  # this server's fsync latency, if not the cluster's
        self.client_links: dict[int, Link] = {}  # real clients' connections to this server, by conn id (sessions.py)
        self.read_only_gate = ReadOnlyGate(cfg.read_only, cfg.tick_ms)  # runtime.peer's read-only switch
        self.read_only: ReadOnlyServerCore | None = None  # the read-only pipeline while looking

    # ------------------------------------------------------------ events

    @property
    def now(self) -> int:
        return self.c.sched.now

    @property
    def wall_ms(self) -> int:
        return WALL_EPOCH_MS + self.c.sched.now

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
        if self.read_only is not None:
            self._flush_read_only()
        term = self.term
        if term is not None:
            if term.flush_due and term.ended is None:
                term.flush()
            if term.ended is not None:
                self._end_term(term.ended)

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
        self._begin_looking()
        self.c.sched.after(TICK_INTERVAL_MS, self._tick_event, self.incarnation)
        self.c.net.node_started(self.sid)

    def crash(self, mode: str = "power") -> list[str]:
        """The process dies; ``mode`` says what its disk keeps (``SimDisk.crash_now``)."""
        assert self.alive
        self.alive = False
        self.paused = False
        self.deferred = []
        self.term = None
        self.election = None
        self.tree = None
        self.mode = "down"
        self.read_only_gate.decided()
        self.read_only = None
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
        if inc != self.incarnation or not self.alive:
            return
        self.c.sched.after(TICK_INTERVAL_MS, self._tick_event, inc)
        if self.paused:
            return  # a stopped process's timers fire when it continues (the next tick)
        if self.term is not None:
            self.term.tick()
        elif self.election is not None and not self.election.decided:
            self.election.tick(self.now)
            self._pump()
            if self.read_only_gate.tick(self.now):
                self._serve_read_only()
            if self.read_only is not None:
                self.read_only.set_time(self.now, self.wall_ms)
                self.read_only.tick()
        self._after_event()

    # ------------------------------------------------------------ disk

    def recover(self) -> Recovered:
        """QuorumPeer._recover: recover the data dir (dropping the txns of an epoch whose NEWLEADER
        was never acknowledged, writing snapshot.0 on a fresh one) and rebuild ``history``."""
        rec = recover(self.disk, self.dirs)
        epoch = drop_unadopted_epoch(self.disk, self.dirs, rec.tree.last_processed_zxid)
        if epoch is not None:
            self.c.stats["unadopted_epoch_dropped"] += 1
            self.c.trace_event(self.sid, "dropped unadopted epoch", epoch)
            rec = recover(self.disk, self.dirs)
        if rec.fresh:
            self.take_snapshot(rec.tree, [])
        self.tree = rec.tree
        self.history = self._recovered_history(rec)
        self.recovered = rec
        self.committed = [LoggedTxn(h.zxid, encode_payload(h, t)) for h, t in rec.replayed_tail]
        for hdr, txn in rec.replayed_tail:
            self.c.checker.check_txn(self, hdr.zxid, encode_payload(hdr, txn), "recovered")
        self.c.checker.on_tree(self, rec.tree)
        return rec

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

    def take_snapshot(self, tree: DataTree, history: list[int]) -> None:
        """Persistence.write_initial_snapshot: tmp file, sync, rename."""
        data = write_snapshot(tree)
        path = join(self.dirs.snap_dir, snapshot_name(tree.last_processed_zxid))
        tmp = join(self.dirs.snap_dir, "tmp." + snapshot_name(tree.last_processed_zxid))
        self.disk.makedirs(self.dirs.snap_dir)
        f = self.disk.create(tmp)
        f.write(data)
        f.sync()
        f.close()
        self.disk.rename(tmp, path)
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

    # ------------------------------------------------------------ election

    def carry(self, history: History) -> None:
        """runtime.peer's hand-over: the ended term's tree goes on (its core applied the txns it
        logged and never applied: ``history.carried``) instead of a recovery from disk."""
        for txn in history.carried:
            self.c.checker.check_txn(self, txn.zxid, txn.data, "recovered")
            self.history.append(txn.zxid)
        self.tree = history.tree
        self.committed = history.committed[-DEFAULT_COMMITTED_LOG:]
        self.c.stats["carried_over"] += 1
        self.c.checker.on_tree(self, history.tree)

    def _begin_looking(self, carried: bool = False, designated: int | None = None) -> None:
        if not carried:
            self.recover()
        assert self.tree is not None
        last = self.tree.last_processed_zxid
        self.epochs = load_epochs(self.disk, self.dirs.snap_dir, last)
        self.mode = "looking"
        if self.election is None:
            self.election = Election(self.sid, self.verifier, last_zxid=last, current_epoch=self.epochs.current,
                                     config_data=self.config_data,
                                     learner_type=ElectionLearnerType.OBSERVER if self.observer
                                     else ElectionLearnerType.PARTICIPANT,
                                     adopt_newer_configs=self.config.reconfig_enabled)
        if designated is not None and self.election.decided:
            # runtime.peer: a committed reconfig named the next leader; no round
            self.c.trace_event(self.sid, "designated", designated)
            self._decided(self.election.designate(designated, last))
            return
        self.c.trace_event(self.sid, "looking", (last, self.epochs.current, carried))
        self.read_only_gate.looking(self.now)
        self.election.start(self.now, last_zxid=last, current_epoch=self.epochs.current)
        self._pump()

    def activate(self, quorum: QuorumConfig) -> None:
        """runtime.peer.activate: a newer config is this server's (the dynamic config file it
        would write survives a crash: this object does)."""
        self.c.trace_event(self.sid, "config", quorum.config_version)
        self.c.stats["configs_activated"] += 1
        self.quorum = quorum
        self.config = replace(self.config, quorum=quorum)
        self.config_data = config_data(quorum)
        self.verifier = verifier_of(quorum)
        me = quorum.me
        self.observer = me is not None and me.role is LearnerType.OBSERVER
        if self.election is not None:
            self.election.reconfigure(self.verifier, self.config_data, ElectionLearnerType.OBSERVER
                                      if self.observer else ElectionLearnerType.PARTICIPANT)

    def _adopt(self, data: bytes) -> None:
        """The election heard of a newer config (runtime.peer._newer_config)."""
        act = activation(self.quorum, data, leader=-1, designated=None)
        if act is not None:
            self.activate(act.quorum)

    def on_notification(self, src: int, payload: bytes) -> None:
        if self.election is None:
            return
        got = read_frame(payload)
        assert got is not None
        n = decode_notification(got[0])
        self.election.step(src, n, self.now)
        self._pump()

    def _pump(self) -> None:
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
        elif ready.newer_config is not None:
            self._adopt(ready.newer_config)
            self._pump()

    def _decided(self, decision: Decision) -> None:
        if self.read_only_gate.decided():
            self.c.trace_event(self.sid, "read-only service ended", None)
            self.read_only = None
            self.close_clients()
        self.term_seq += 1
        self.c.trace_event(self.sid, "decided", (decision.leader, decision.vote.zxid, decision.vote.peer_epoch))
        term: LeaderTerm | LearnerTerm
        if decision.leader == self.sid:
            term = LeaderTerm(self, self.committed, self.epochs.accepted, self.epochs.current)
            self.mode = "leading-sync"
        else:
            term = LearnerTerm(self, decision.leader, self.epochs.accepted, self.epochs.current, self.observer)
            self.mode = "observing-sync" if self.observer else "following-sync"
        self.term = term
        term.start()

    def _end_term(self, reason: str) -> None:
        term = self.term
        assert term is not None
        self.c.trace_event(self.sid, "term-ended", reason)
        self.c.stats["terms_ended"] += 1
        self.close_clients()
        term.close()
        self.term = None
        self._begin_looking(carried=term.carry_over(), designated=term.member.designated)

    # ------------------------------------------------------------ read-only service

    def _serve_read_only(self) -> None:
        """runtime.peer: looking for the gate's delay, the server serves read-only clients from its tree."""
        assert self.tree is not None
        self.read_only = ReadOnlyServerCore(self.config, self.now, self.wall_ms, tree=self.tree)
        self.mode = "read-only"
        self.c.stats["read_only_served"] += 1
        self.c.trace_event(self.sid, "read-only service", hex(self.tree.last_processed_zxid))

    def _flush_read_only(self) -> None:
        assert self.read_only is not None
        for o in self.read_only.ready():
            if not isinstance(o, Output):  # it must never propose, forward or ack anything
                self.c.checker.fail(f"server {self.sid}'s read-only pipeline produced {o!r}")
            else:
                self.client_output(o.conn)

    @property
    def client_core(self) -> ServerCore | None:
        """The pipeline a client connecting now gets: the term's while it serves, else the
        read-only one while that serves, else none."""
        if not self.alive or self.paused:
            return None
        if self.serving:
            assert self.term is not None
            return self.term.core
        return self.read_only

    # ------------------------------------------------------------ clients

    def submit(self, session: int, cxid: int, op: int, body: bytes) -> bool:
        """A client request on this server; False if it is not serving (the client moves on)."""
        term = self.term
        if term is None or not self.alive or self.paused or term.ended is not None or term.core is None:
            return False
        term.client_request(session, cxid, op, body)
        self._after_event()
        return True

    @property
    def serving(self) -> bool:
        t = self.term
        return self.alive and t is not None and t.ended is None and t.core is not None
