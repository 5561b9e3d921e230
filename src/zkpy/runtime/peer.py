"""The shell of an ensemble member (QuorumPeer): it runs the member core's effects
(``member.peer.PeerCore``, its ``core``) on the operating system, and nothing else.

The core decides the lifecycle (recovery or carry-over, the election or the designated leader,
the role of each term, configs, read-only service); this module recovers the data dir when asked
(``member.datadir``), runs election rounds on the election port (``runtime.election_net``), runs
each term through its role's shell (``runtime.leader_term``, ``runtime.learner_term``), plugs the
serving pipeline (the term's, or the read-only one while looking) into the client port, and
writes the dynamic config files. When a term ends every client connection is closed (clients
move to another server with their session) and the core hears of it (``term_ended``), unless the
member stops: then, as when its log cannot be written (fail-stop), the process ends and its core
with it. Every input to the core comes after the clock it reads was set (``_time``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, assert_never

from zkpy.admin.fourletter import DEFAULT_TRACE_MASK
from zkpy.admin.http import AdminServer
from zkpy.admin.metrics_endpoint import MetricsEndpoint
from zkpy.admin.tls import quorum_tls
from zkpy.admin.view import Summary
from zkpy.config import QuorumConfig, ServerConfig
from zkpy.member import peer as lifecycle
from zkpy.member.datadir import recover_data_dir
from zkpy.member.leading import LeadingCore
from zkpy.member.peer import PeerCore
from zkpy.quorum.verifier import config_string
from zkpy.runtime import sdnotify
from zkpy.runtime.banner import serving_line
from zkpy.runtime.clientport import ClientPort, ServesClients
from zkpy.runtime.clock import now_ms, wall_ms
from zkpy.runtime.dynfiles import write_dynamic_config
from zkpy.runtime.election_net import ElectionService
from zkpy.runtime.gcpolicy import loading_tree
from zkpy.runtime.leader_term import LeaderTerm
from zkpy.runtime.learner_term import LearnerTerm
from zkpy.runtime.osdisk import OsDisk
from zkpy.runtime.persistence import Persistence
from zkpy.runtime.server import DiskFailure
from zkpy.runtime.snapfork import sum_in_child
from zkpy.runtime.term import TermEnded, TermHost
from zkpy.server.connection import Connection
from zkpy.server.core import ServerCore
from zkpy.server.metrics import ServerMetrics
from zkpy.server.outputs import Output
from zkpy.storage.disk import FaultPlan
from zkpy.storage.epochs import write_epoch
from zkpy.storage.files import DataDirs
from zkpy.storage.recovery import Progress

log = logging.getLogger("zkpy.quorum")


class QuorumPeer(ServesClients):
    """An ensemble member: client port always open, serving only while a term (or read-only
    service) serves."""

    def __init__(self, config: ServerConfig, faults: FaultPlan | None = None,
                 recovery_progress: Progress | None = None) -> None:
        assert config.quorum is not None and config.quorum.my_id is not None
        self.sid = int(config.quorum.my_id)
        self.metrics = ServerMetrics()  # one registry for the process: every term's core records into it
        self.core = PeerCore(config, now_ms(), wall_ms(), metrics=self.metrics,
                             log=lambda m: log.info("server %d: %s", self.sid, m))
        self.recovery_progress = recovery_progress  # told how the first recovery goes
        self.disk = OsDisk(faults, config.force_sync)
        self.dirs = DataDirs.of(config.data_dir, config.data_log_dir)
        # serverWorkers > 1: while a term serves, its worker processes take the client port
        self.clients = ClientPort(config, self, self.schedule_flush, reuse_port=config.dedicated_member)
        self.quorum_tls = quorum_tls(config.quorum_tls)  # sslQuorum (raises TlsConfigError; the CLI checks first)
        self.persistence: Persistence | None = None
        self.trace_mask = DEFAULT_TRACE_MASK
        self.loop: asyncio.AbstractEventLoop | None = None
        self.failure: BaseException | None = None
        self.admin = AdminServer(self)
        self.metrics_endpoint = MetricsEndpoint(self)  # metricsProvider.*: /metrics on this loop
        self.election: ElectionService | None = None
        self.term: LeaderTerm | LearnerTerm | None = None  # the running term's shell
        self._elect: lifecycle.Elect | None = None  # the round the core asked for, not opened yet
        self._flush_scheduled = False
        self._ticker: asyncio.TimerHandle | None = None

    # ---- what the four-letter words and the terms read (admin.view.ServerView, runtime.term.TermHost) ----

    @property
    def config(self) -> ServerConfig:
        return self.core.config

    @property
    def quorum(self) -> QuorumConfig:
        return self.core.quorum

    @property
    def mode(self) -> str:
        return self.core.mode

    @property
    def pipeline(self) -> ServerCore | None:
        """The pipeline serving clients (None while nothing serves)."""
        return self.clients.pipeline

    @property
    def leader_id(self) -> int:
        """The leader of the current term (-1 while looking)."""
        term = self.term
        if isinstance(term, LeaderTerm):
            return self.sid
        return term.leader_sid if isinstance(term, LearnerTerm) else -1

    def quorum_metrics(self) -> list[tuple[str, object]]:
        """mntr's quorum lines (ZooKeeper 3.8 prints them on the leader)."""
        term = self.term
        return term.core.quorum_metrics() if isinstance(term, LeaderTerm) else []

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
        else:
            self._pump()  # read-only clients' replies

    def write_client(self, conn: Connection) -> None:
        self.clients.write(conn)

    def client_ports(self) -> tuple[int, int | None]:
        """The client ports listened on (the TLS one, if any): where a term's workers listen too."""
        return self.clients.port, self.clients.secure_port if self.config.secure_client_port is not None else None

    def close_clients(self) -> None:
        self.clients.drop_all()
        self.clients.pipeline = None

    # ---- life cycle ----

    async def run(self, stop: asyncio.Event) -> None:
        self.loop = asyncio.get_running_loop()
        self._time()
        self.core.start()
        self._pump()  # the first recovery, then the first round is asked for
        first = self._elect
        assert first is not None
        self.election = ElectionService(self.config, last_zxid=first.last_zxid, current_epoch=first.current_epoch,
                                        cnx_timeout_ms=self.quorum.cnx_timeout_ms, tls=self.quorum_tls)
        self.election.on_newer_config = self._newer_config
        await self.election.start()
        await self.admin.start()  # before the client port, as QuorumPeerMain; a port it cannot bind costs a log line
        await self.metrics_endpoint.start()  # likewise
        await self.clients.listen()
        line = serving_line(self.config, self.port, self.admin.port)
        log.info("server %d: %s", self.sid, line)
        sdnotify.ready(line)
        self._tick()
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set() and self.failure is None:
                if self._elect is not None:
                    await self._run_round(stopping)
                elif self.term is not None:
                    await self._run_term(stopping)
                else:
                    raise AssertionError(f"server {self.sid}: the member core asked for neither a round nor a term")
        finally:
            stopping.cancel()
            if self._ticker is not None:
                self._ticker.cancel()
            self.core.stop()
            self._pump()
            self.close_clients()
            if self.election is not None:
                await self.election.close()
            await self.admin.close()
            await self.metrics_endpoint.close()
            await self.clients.close()
            log.info("server %d shut down", self.sid)
        if self.failure is not None:
            raise DiskFailure(str(self.failure)) from self.failure

    async def _run_round(self, stopping: asyncio.Future[Any]) -> None:
        """Open the election round the core asked for; its decision goes back to the core."""
        request, self._elect = self._elect, None
        assert request is not None and self.election is not None
        electing = asyncio.ensure_future(self.election.elect(request.last_zxid, request.current_epoch))
        await asyncio.wait([electing, stopping], return_when=asyncio.FIRST_COMPLETED)
        if not electing.done():
            electing.cancel()
            return
        self._time()
        self.core.decided(electing.result())
        self._pump()

    async def _run_term(self, stopping: asyncio.Future[Any]) -> None:
        """Run the term the core started until it ends (or the member stops), then close it."""
        term = self.term
        assert term is not None
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
            self.close_clients()
            await term.close_workers()  # their clients were dropped with close(): wait for them to exit
        if stopping.done() or self.failure is not None:
            return  # (the core stops with the loop: a member that stops recovers nothing)
        try:
            await self.clients.listen()  # a dedicated member's workers are gone: four-letter words, read-only
        except OSError as exc:
            log.error("server %d: cannot listen on the client port again: %s", self.sid, exc)
        self._time()
        self.core.term_ended(crashed=crashed)
        self._pump()

    def _tick(self) -> None:
        """The core's timers (read-only service) run while the member lives."""
        self._time()
        self.core.tick()
        self._pump()
        assert self.loop is not None
        self._ticker = self.loop.call_later(self.config.tick_interval_ms / 1000, self._tick)

    def _time(self) -> None:
        self.core.set_time(now_ms(), wall_ms())

    # ---- the core's effects ----

    def _pump(self) -> None:
        """Run the member core's effects, batch after batch, until it has none."""
        while effects := self.core.ready():
            for effect in effects:
                match effect:
                    case Output():
                        self.clients.write(effect.conn)
                    case lifecycle.Recover():
                        self._recover(effect)
                    case lifecycle.Elect():
                        self._elect = effect  # the run loop opens it
                    case lifecycle.Designate():
                        assert self.election is not None
                        decision = self.election.designate(effect.leader, effect.last_zxid)
                        self._time()
                        self.core.decided(decision)
                    case lifecycle.StartTerm():
                        core, host = effect.term, self._term_host()
                        self.term = LeaderTerm(host, core) if isinstance(core, LeadingCore) else LearnerTerm(host, core)
                    case lifecycle.ServeReadOnly():
                        self.clients.pipeline = effect.pipeline
                    case lifecycle.StopReadOnly():
                        self.close_clients()
                    case lifecycle.Reconfigure():
                        self._reconfigure(effect.quorum)
                    case lifecycle.PeerEpoch():
                        assert self.election is not None
                        self.election.update_peer_epoch(effect.epoch)
                    case _:
                        assert_never(effect)

    def _recover(self, effect: lifecycle.Recover) -> None:
        with loading_tree():
            state = recover_data_dir(self.disk, self.dirs, effect.carried, log=log.info, warn=log.warning,
                                     progress=self.recovery_progress, digest_apart=sum_in_child)
        self.recovery_progress = None
        self._time()  # (the round's clock starts after the recovery, however long it took)
        self.core.recovered(state)

    def _reconfigure(self, quorum: QuorumConfig) -> None:
        """A newer config is active: the election uses it from now on, and it is written as 3.8
        writes it (``write_dynamic_config``)."""
        log.info("server %d: config version 0x%x active: %s", self.sid, quorum.config_version,
                 config_string(quorum).replace("\n", ", "))
        if self.election is not None:
            self.election.reconfigure(quorum)
        if quorum.static_path:
            try:
                write_dynamic_config(quorum)
            except OSError as exc:
                log.error("server %d: cannot write config version 0x%x beside %s: %s", self.sid,
                          quorum.config_version, quorum.static_path, exc)

    def _newer_config(self, data: bytes) -> None:
        """The election heard of a config newer than mine: the core decides."""
        self.core.newer_config(data)
        self._pump()

    # ---- what a term needs of its server (runtime.term.TermHost) ----

    def _term_host(self) -> TermHost:
        return TermHost(self.config, self.sid, self.quorum, self.disk, self.dirs, self.quorum_tls, self.write_epoch,
                        self.serving, self.uses, self.disk_failed, self.write_client, self.activate,
                        self.schedule_flush, self.client_ports, self.clients.stop_listening)

    def serving(self, server: ServerCore, role: str, epoch: int) -> None:
        self.clients.pipeline = server
        self._time()
        self.core.term_serving(epoch)
        self._pump()

    def activate(self, quorum: QuorumConfig) -> None:
        self.core.config_activated(quorum)
        self._pump()

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


async def serve_quorum(config: ServerConfig, stop: asyncio.Event, faults: FaultPlan | None = None,
                       on_ready: Callable[[QuorumPeer], None] | None = None,
                       recovery_progress: Progress | None = None) -> None:
    """Run an ensemble member until ``stop`` is set; DiskFailure if its log could not be written."""
    peer = QuorumPeer(config, faults, recovery_progress)
    if on_ready is not None:
        on_ready(peer)
    await peer.run(stop)
