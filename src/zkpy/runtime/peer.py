"""The shell of an ensemble member (QuorumPeer): election, then one term as leader or learner,
over and over, until stopped.

At startup the data dir is recovered (snapshot + every logged txn, committed or not). A term
that ends hands its tree on to the next (``History``): the txns it logged but never applied
are applied to it first, as ZooKeeper's fastForwardDataBase does, so the tree equals what a
recovery from disk would give without reading the disk again. A learner term that ended before
it served (its synchronisation unfinished: a snapshot not yet written, an epoch not adopted)
hands nothing on, and the next term recovers from disk. The election runs with the last zxid
of that history. The Zab cores (``zkpy.quorum.leader`` / ``learner``) decide; this
module moves their packets over the quorum port, runs their persistence actions in order, and
plugs the request pipeline (``ServerCore``) in once the term serves. When a term ends every
client connection is closed (clients move to another server with their session) and nothing of
the term's memory survives into the next.

Invariants kept here: an action that persists (an epoch file, a truncation, a snapshot) is
complete before the next action runs; a learner's ACK of a proposal leaves only after the fsync
that covers it (the core emits it only once ``logged`` says so); the leader counts its own ack
only after its own fsync.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from zkpy.admin.fourletter import DEFAULT_TRACE_MASK
from zkpy.admin.http import AdminServer
from zkpy.admin.metrics_endpoint import MetricsEndpoint
from zkpy.admin.tls import quorum_tls
from zkpy.admin.view import Summary
from zkpy.config import LearnerType, QuorumConfig, ServerConfig
from zkpy.member.history import History
from zkpy.member.read_only import ReadOnlyGate
from zkpy.quorum.dynconfig import activation, verifier_of
from zkpy.quorum.verifier import config_string, quorum_verifier
from zkpy.runtime.banner import serving_line
from zkpy.runtime.clientport import ClientPort, ServesClients
from zkpy.runtime.dynfiles import write_dynamic_config
from zkpy.runtime.election_net import ElectionService
from zkpy.runtime.gcpolicy import loading_tree
from zkpy.runtime.leader_term import LeaderTerm
from zkpy.runtime.learner_term import LearnerTerm
from zkpy.runtime.osdisk import OsDisk
from zkpy.runtime.persistence import Persistence
from zkpy.runtime.read_only import ReadOnlyService
from zkpy.runtime.server import DiskFailure
from zkpy.runtime.snapfork import sum_in_child
from zkpy.runtime.term import TermEnded
from zkpy.server.connection import Connection
from zkpy.server.core import ServerCore
from zkpy.server.metrics import ServerMetrics
from zkpy.storage.disk import FaultPlan
from zkpy.storage.epochs import load_epochs, write_epoch
from zkpy.storage.files import DataDirs
from zkpy.storage.recovery import Progress, recover
from zkpy.storage.truncate import drop_unadopted_epoch
from zkpy.tree.datatree import DataTree

log = logging.getLogger("zkpy.quorum")


class QuorumPeer(ServesClients):
    """An ensemble member: client port always open, serving only while a term is established."""

    def __init__(self, config: ServerConfig, faults: FaultPlan | None = None,
                 recovery_progress: Progress | None = None) -> None:
        assert config.quorum is not None and config.quorum.my_id is not None
        self.config = config
        self.recovery_progress = recovery_progress  # told how the first recovery goes
        self.quorum = config.quorum
        self.sid = int(self.quorum.my_id)  # type: ignore[arg-type]
        me = self.quorum.me
        self.observer = me is not None and me.role is LearnerType.OBSERVER
        self.verifier = quorum_verifier(self.quorum)
        self.disk = OsDisk(faults, config.force_sync)
        self.dirs = DataDirs.of(config.data_dir, config.data_log_dir)
        # serverWorkers > 1: while this member leads, worker processes share its client port
        self.clients = ClientPort(config, self, self.schedule_flush, reuse_port=config.server_workers > 1)
        self.quorum_tls = quorum_tls(config.quorum_tls)  # sslQuorum (raises TlsConfigError; the CLI checks first)
        self.mode = "looking"
        self.persistence: Persistence | None = None
        self.trace_mask = DEFAULT_TRACE_MASK
        self.loop: asyncio.AbstractEventLoop | None = None
        self.failure: BaseException | None = None
        self.stopped = asyncio.Event()
        self.admin = AdminServer(self)
        self.metrics_endpoint = MetricsEndpoint(self)  # metricsProvider.*: /metrics on this loop
        self.election: ElectionService | None = None
        self.term: LeaderTerm | LearnerTerm | None = None
        self._flush_scheduled = False
        self.metrics = ServerMetrics()  # one registry for the process: every term's core records into it
        self._looking_since = 0.0  # when the last election began (the loop's clock)
        self.read_only_gate = ReadOnlyGate(config.read_only_mode, config.tick_ms)
        self.read_only: ReadOnlyService | None = None  # serving read-only clients while looking
        self._read_only_timer: asyncio.TimerHandle | None = None
        self._designated: int | None = None  # the leader a committed reconfig named for the next term

    # ---- what the four-letter words read (admin.view.ServerView) ----

    @property
    def core(self) -> ServerCore | None:
        """The core serving clients (None between terms)."""
        return self.clients.core

    @core.setter
    def core(self, core: ServerCore | None) -> None:
        if core is not None:
            core.metrics = self.metrics
        self.clients.core = core

    def fsync_summaries(self) -> tuple[Summary, Summary] | None:
        commit = self.persistence.commit if self.persistence is not None else None
        return None if commit is None else (commit.fsync_time_ms, commit.batch_size)

    # ---- client input and output ----

    def schedule_flush(self) -> None:
        if not self._flush_scheduled and self.loop is not None:
            self._flush_scheduled = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        self._flush_scheduled = False
        if self.term is not None:
            self.term.flush()
        elif self.read_only is not None:
            self.read_only.flush()

    def write_client(self, conn: Connection) -> None:
        self.clients.write(conn)

    def client_ports(self) -> tuple[int, int | None]:
        """The client ports listened on (the TLS one, if any): where a leader's workers listen too."""
        return self.clients.port, self.clients.secure_port if self.config.secure_client_port is not None else None

    def close_clients(self) -> None:
        self.clients.drop_all()
        self.core = None

    # ---- life cycle ----

    async def run(self, stop: asyncio.Event) -> None:
        self.loop = asyncio.get_running_loop()
        history = self._recover()
        epochs = load_epochs(self.disk, self.dirs.snap_dir, history.tree.last_processed_zxid, log.info)
        self.election = ElectionService(self.config, last_zxid=history.tree.last_processed_zxid,
                                        current_epoch=epochs.current, cnx_timeout_ms=self.quorum.cnx_timeout_ms,
                                        tls=self.quorum_tls)
        self.election.on_newer_config = self._newer_config
        await self.election.start()
        await self.admin.start()  # before the client port, as QuorumPeerMain; a port it cannot bind costs a log line
        await self.metrics_endpoint.start()  # likewise
        await self.clients.listen()
        log.info("server %d: %s", self.sid, serving_line(self.config, self.port, self.admin.port))
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set() and self.failure is None:
                carried = await self._one_term(history, stopping)
                if stop.is_set() or self.failure is not None:
                    break
                history = carried if carried is not None else self._recover()
        finally:
            stopping.cancel()
            self.close_clients()
            if self.election is not None:
                await self.election.close()
            await self.admin.close()
            await self.metrics_endpoint.close()
            await self.clients.close()
            log.info("server %d shut down", self.sid)
        if self.failure is not None:
            raise DiskFailure(str(self.failure)) from self.failure

    def _recover(self) -> History:
        for directory in (self.dirs.snap_dir, self.dirs.log_dir):
            self.disk.makedirs(directory)
        with loading_tree():
            recovered = recover(self.disk, self.dirs, log.info, self.recovery_progress, sum_in_child)
            self.recovery_progress = None
            if drop_unadopted_epoch(self.disk, self.dirs, recovered.tree.last_processed_zxid, log.warning):
                recovered = recover(self.disk, self.dirs, log.info)
        if recovered.fresh:
            p = Persistence(self.config, self.disk, self.dirs)
            p.write_initial_snapshot(recovered.tree)
            p.close()
        return History.of(recovered)

    async def _one_term(self, history: History, stopping: asyncio.Future[Any]) -> History | None:
        """Elect, then run one term; the history for the next term, or None to recover from disk."""
        assert self.election is not None
        tree = history.tree
        epochs = load_epochs(self.disk, self.dirs.snap_dir, tree.last_processed_zxid, log.info)
        self.mode = "looking"
        self.metrics.counters["looking_count"] += 1
        looking_since = self._looking_since = asyncio.get_running_loop().time()
        designated, self._designated = self._designated, None
        if designated is not None:
            decision = self.election.designate(designated, tree.last_processed_zxid)
        else:
            electing = asyncio.ensure_future(self.election.elect(tree.last_processed_zxid, epochs.current))
            self._look(tree)
            try:
                await asyncio.wait([electing, stopping], return_when=asyncio.FIRST_COMPLETED)
            finally:
                self._looked()
            if not electing.done():
                electing.cancel()
                return None
            decision = electing.result()
        self.metrics.record("election_time", int((asyncio.get_running_loop().time() - looking_since) * 1000))
        log.info("server %d: election decided: leader %d, I am %s", self.sid, decision.leader, decision.state.name)
        term: LeaderTerm | LearnerTerm
        if decision.leader == self.sid:
            term = LeaderTerm(self, self.verifier, history, epochs.accepted, epochs.current)
        else:
            term = LearnerTerm(self, history, decision.leader, epochs.accepted, epochs.current, self.observer)
        term.core.metrics = self.metrics  # one registry across terms: what the term counts shows in mntr
        self.term = term
        running = asyncio.ensure_future(term.run())
        crashed = False
        try:
            await asyncio.wait([running, stopping], return_when=asyncio.FIRST_COMPLETED)
            if running.done():
                exc = running.exception()
                crashed = exc is not None
                reason = running.result() if exc is None else f"{type(exc).__name__}: {exc}"
                if exc is not None and not isinstance(exc, (OSError, TermEnded)):
                    log.error("server %d: %s term failed", self.sid, term.role, exc_info=exc)
                log.warning("server %d: %s term ended: %s", self.sid, term.role, reason)
            else:
                running.cancel()
                try:
                    await running
                except (asyncio.CancelledError, TermEnded):
                    pass
        finally:
            term.close()
            self.term = None
            self._designated = term.core.designated
            self.close_clients()
            self.mode = "looking"
            await term.close_workers()  # their clients were dropped with close(): wait for them to exit
        # a term that broke off with an exception may have left its tree half-way: start from disk
        return term.carry_over() if self.failure is None and not crashed else None

    # ---- read-only service while looking (readonlymode.enabled) ----

    def _look(self, tree: DataTree) -> None:
        """An election began: read-only service is due after the gate's delay."""
        self.read_only_gate.looking(int(asyncio.get_running_loop().time() * 1000))
        self._arm_read_only(tree)

    def _arm_read_only(self, tree: DataTree) -> None:
        due = self.read_only_gate.due_ms()
        if due is not None:
            self._read_only_timer = asyncio.get_running_loop().call_at(due / 1000, self._serve_read_only, tree)

    def _serve_read_only(self, tree: DataTree) -> None:
        self._read_only_timer = None
        if self.failure is not None:
            return
        if not self.read_only_gate.tick(int(asyncio.get_running_loop().time() * 1000)):
            self._arm_read_only(tree)  # the loop may run a timer a little early
            return
        service = self.read_only = ReadOnlyService(self.config, self.clients, tree)
        self.core = service.core
        self.mode = "read-only"
        service.start()
        log.info("server %d: no quorum: serving read-only clients", self.sid)

    def _looked(self) -> None:
        """The election decided (or the member stops): read-only clients are disconnected."""
        if self._read_only_timer is not None:
            self._read_only_timer.cancel()
            self._read_only_timer = None
        if self.read_only_gate.decided() and self.read_only is not None:
            self.read_only.stop()
            self.read_only = None
            self.close_clients()
            self.mode = "looking"
            log.info("server %d: read-only service ended", self.sid)

    @property
    def leader_id(self) -> int:
        """The leader of the current term (-1 while looking)."""
        term = self.term
        if isinstance(term, LeaderTerm):
            return self.sid
        return term.leader_sid if isinstance(term, LearnerTerm) else -1

    def quorum_metrics(self) -> list[tuple[str, object]]:
        """mntr's quorum lines (ZooKeeper 3.8 prints them on the leader): learners connected,
        voters and observers synced (forwarded to), syncs waiting for a commit."""
        term = self.term
        return term.core.quorum_metrics() if isinstance(term, LeaderTerm) else []

    # ---- what a term needs of its server (runtime.term.TermHost) ----

    def serving(self, server: ServerCore, role: str, epoch: int) -> None:
        self.core = server
        self.mode = role
        unavailable_ms = int((asyncio.get_running_loop().time() - self._looking_since) * 1000)
        self.metrics.record("unavailable_time", unavailable_ms)  # from looking to serving, as ZooKeeper's
        if role == "leader":
            self.metrics.record("leader_unavailable_time", unavailable_ms)
        assert self.election is not None
        self.election.update_peer_epoch(epoch)

    def uses(self, persistence: Persistence | None) -> None:
        self.persistence = persistence
        if persistence is not None:
            persistence.metrics = self.metrics

    def disk_failed(self, exc: BaseException) -> None:
        """Fail-stop, as standalone: nothing unlogged is ever acknowledged."""
        self.failure = exc
        log.critical("cannot write the txn log (%s): stopping", exc)
        self.clients.drop_all(abort=True)
        if self.term is not None:
            self.term.end("disk failure")

    def write_epoch(self, name: str, value: int) -> None:
        write_epoch(self.disk, self.dirs.snap_dir, name, value)

    def _newer_config(self, data: bytes) -> None:
        """The election heard of a config newer than mine (QuorumPeer.processReconfig from
        FastLeaderElection): adopt it, and the round starts over with it."""
        try:
            act = activation(self.quorum, data, leader=-1, designated=None)
        except ValueError as exc:
            log.warning("server %d: a peer's config cannot be read (%s): ignored", self.sid, exc)
            return
        if act is not None:
            self.activate(act.quorum)

    def activate(self, quorum: QuorumConfig) -> None:
        """A newer config is active (a committed reconfig, or the leader's): the election and the
        next terms use it, and it is written as 3.8 writes it (``write_dynamic_config``)."""
        log.info("server %d: config version 0x%x active: %s", self.sid, quorum.config_version,
                 config_string(quorum).replace("\n", ", "))
        self.quorum = quorum
        self.config = replace(self.config, quorum=quorum)
        me = quorum.me
        self.observer = me is not None and me.role is LearnerType.OBSERVER
        self.verifier = verifier_of(quorum)
        if self.election is not None:
            self.election.reconfigure(quorum)
        if quorum.static_path:
            try:
                write_dynamic_config(quorum)
            except OSError as exc:
                log.error("server %d: cannot write config version 0x%x beside %s: %s", self.sid,
                          quorum.config_version, quorum.static_path, exc)


async def serve_quorum(config: ServerConfig, stop: asyncio.Event, faults: FaultPlan | None = None,
                       on_ready: Callable[[QuorumPeer], None] | None = None,
                       recovery_progress: Progress | None = None) -> None:
    """Run an ensemble member until ``stop`` is set; DiskFailure if its log could not be written."""
    peer = QuorumPeer(config, faults, recovery_progress)
    if on_ready is not None:
        on_ready(peer)
    await peer.run(stop)
