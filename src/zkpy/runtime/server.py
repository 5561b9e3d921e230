"""The asyncio shell around ServerCore: recovery, client listener, flushing, timers, shutdown.

One event loop per process. Each loop turn's input is processed by the core; a single flush
per turn writes the turn's new txns to the log (group commit) and every connection's output
with one ``write`` per connection. When the log's fsync reports txns durable, they are applied and
answered (then flushed again): a write's reply never leaves before its fsync.

With ``serverWorkers`` = N > 1 this process is a dedicated member behind N worker processes
(``runtime.workers``): it serves no client (it only reserves the client port, which the workers
listen on with SO_REUSEPORT); its pipeline is a leader's, which preps what the workers forward,
and it sends each applied txn to the workers right after applying it (``member.workers.WorkerHub``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import assert_never

from zkpy.admin.fourletter import DEFAULT_TRACE_MASK
from zkpy.admin.http import AdminServer
from zkpy.admin.metrics_endpoint import MetricsEndpoint
from zkpy.admin.view import Summary
from zkpy.config import ServerConfig
from zkpy.member.workers import WorkerHub
from zkpy.runtime import sdnotify
from zkpy.runtime.banner import serving_line
from zkpy.runtime.clientport import ClientPort, ServesClients
from zkpy.runtime.clock import now_ms, wall_ms
from zkpy.runtime.gcpolicy import loading_tree
from zkpy.runtime.osdisk import OsDisk, describe_error
from zkpy.runtime.persistence import Persistence
from zkpy.runtime.snapfork import sum_in_child
from zkpy.runtime.workers import WorkerPool
from zkpy.server import outputs as out
from zkpy.server.connection import Connection
from zkpy.server.core import ServerCore
from zkpy.server.leader import LeaderServerCore
from zkpy.storage.disk import Disk, FaultPlan
from zkpy.storage.files import DataDirs, purge
from zkpy.storage.recovery import Progress, Recovered, recover
from zkpy.storage.txnlog import encode_payload

log = logging.getLogger("zkpy.server")

class DiskFailure(Exception):
    """The txn log could not be written or synced: the server stopped without acknowledging it."""


class ZkServer(ServesClients):
    """A standalone zkpy server: recovers its data dir, then serves its client port."""

    def __init__(self, config: ServerConfig, disk: Disk | None = None, faults: FaultPlan | None = None,
                 recovery_progress: Progress | None = None) -> None:
        self.config = config
        self.disk = disk or OsDisk(faults, config.force_sync)
        self.dirs = DataDirs.of(config.data_dir, config.data_log_dir)
        t0 = time.monotonic()
        with loading_tree():
            self.recovered: Recovered = recover(self.disk, self.dirs, log.info, recovery_progress, sum_in_child)
        recovery_s = time.monotonic() - t0
        tree = self.recovered.tree
        log.info("recovered zxid 0x%x, %d znodes, %d sessions, digest 0x%x in %.2fs", tree.last_processed_zxid,
                 tree.node_count(), len(tree.sessions), tree.digest, recovery_s)
        self.hub: WorkerHub | None = None
        self.workers: WorkerPool | None = None
        if config.dedicated_member:
            leader = LeaderServerCore(config, now_ms(), wall_ms(), log=log.info, tree=tree)
            leader.sessions.partition(0, config.process_count)
            self.core: ServerCore = leader
            self.hub = WorkerHub(leader)
            self.workers = WorkerPool(config, config.process_count, self.hub, self.schedule_flush)
        else:
            self.core = ServerCore(config, now_ms(), wall_ms(), log=log.info, tree=tree)
        self.core.metrics.record("dbinittime", int(recovery_s * 1000))
        self.persistence = Persistence(config, self.disk, self.dirs)
        self.persistence.metrics = self.core.metrics
        self.clients = ClientPort(config, self, self.schedule_flush, reuse_port=config.dedicated_member)
        self.clients.pipeline = self.core
        self.trace_mask = DEFAULT_TRACE_MASK  # gtmk/stmk; zkpy does no tracing
        self._flush_scheduled = False
        self._ticker: asyncio.TimerHandle | None = None
        self._purger: asyncio.TimerHandle | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.failure: BaseException | None = None
        self.stopped = asyncio.Event()
        self.admin = AdminServer(self)
        self.metrics_endpoint = MetricsEndpoint(self)  # metricsProvider.*: /metrics on this loop

    # ---- what the four-letter words read (admin.view.ServerView) ----

    mode = "standalone"
    leader_id = -1

    @property
    def pipeline(self) -> ServerCore:
        return self.core

    def quorum_metrics(self) -> list[tuple[str, object]]:
        return []

    def fsync_summaries(self) -> tuple[Summary, Summary] | None:
        commit = self.persistence.commit
        return None if commit is None else (commit.fsync_time_ms, commit.batch_size)

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.persistence.start(self.loop, self._durable, self._disk_failed)
        if self.recovered.fresh:
            self.persistence.write_snapshot_now(self.core.tree)
        elif self.recovered.txns_replayed:
            self.persistence.start_snapshot(self.core.tree)  # the next restart replays less
        # As ZooKeeperServerMain: the admin and metrics endpoints listen before the client port, so
        # a client that reaches the server (a readiness probe) finds them up too.
        await self.admin.start()  # a port it cannot bind costs a log line, not the server
        await self.metrics_endpoint.start()  # likewise
        if self.workers is None:
            await self.clients.listen()
        else:  # the workers listen, once their replicas are loaded
            await self.clients.reserve()
            secure = self.clients.secure_port if self.config.secure_client_port is not None else None
            self.workers.start(self.port, secure)
        log.info("binding to port %s:%d", self.config.client_port_address, self.port)
        line = serving_line(self.config, self.port, self.admin.port)
        log.info("%s", line)
        sdnotify.ready(line)
        self._schedule_tick()
        if self.config.autopurge_purge_interval_h > 0:
            self._autopurge()

    def _autopurge(self) -> None:
        """Purge now and every purgeInterval hours (DatadirCleanupManager), off the loop."""
        assert self.loop is not None
        retain = self.config.autopurge_snap_retain_count
        self.loop.run_in_executor(None, purge, self.disk, self.dirs, retain, log.info)
        self._purger = self.loop.call_later(self.config.autopurge_purge_interval_h * 3600, self._autopurge)

    def _schedule_tick(self) -> None:
        assert self.loop is not None
        self._ticker = self.loop.call_later(self.config.tick_interval_ms / 1000, self._tick)

    def _tick(self) -> None:
        self.core.set_time(now_ms(), wall_ms())
        self.core.tick()
        self.flush()
        self._schedule_tick()

    def schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            assert self.loop is not None
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write this turn's new txns to the log (their sync starts or waits its turn), then every
        connection's output."""
        self._flush_scheduled = False
        txns: list[out.Propose] = []
        conns: list[Connection] = []
        for o in self.core.ready():
            match o:
                case out.Propose():
                    txns.append(o)
                case out.Output():
                    conns.append(o.conn)
                case out.CheckQuorum() | out.Forward() | out.Revalidate() | out.Touches() | out.Relayed() | out.TxnApplied():
                    raise AssertionError(f"a standalone server's pipeline produced {o!r}")
                case _:
                    assert_never(o)
        if txns:
            if self.hub is None:
                self.persistence.log_txns(txns, self.core.tree)
            else:  # serialized once, for the log and for the workers
                zxids = [p.hdr.zxid for p in txns]
                payloads = [encode_payload(p.hdr, p.txn, p.body) for p in txns]
                self.persistence.log_payloads(zxids, payloads, self.core.tree)
                self.hub.proposed(zxids, payloads)
        for conn in conns:
            self.clients.write(conn)
        if self.workers is not None and self.hub is not None:
            for index, data in self.hub.take():
                self.workers.send(index, data)

    def _durable(self, count: int) -> None:
        """Group commit made ``count`` more txns durable: apply and answer them."""
        if self.failure is not None:
            return
        self.core.set_time(now_ms(), wall_ms())
        self.core.apply_persisted(count)
        if self.hub is not None and self.workers is not None:
            self.workers.applied_up_to(self.core.tree.last_processed_zxid)  # before any reply about them
            self.hub.applied(count)
        self.flush()

    def _disk_failed(self, exc: BaseException) -> None:
        """Fail-stop: drop every client without another byte, so nothing unlogged is acknowledged."""
        self.failure = exc
        log.critical("cannot write the txn log (%s): stopping; no write after zxid 0x%x was acknowledged",
                     exc, self.core.tree.last_processed_zxid)
        self.clients.drop_all(abort=True)
        self.stopped.set()

    async def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
        if self._purger is not None:
            self._purger.cancel()
        if self.workers is not None:
            await self.workers.close()
        await self.admin.close()
        await self.metrics_endpoint.close()
        await self.clients.close()
        self.persistence.close()
        log.info("server shut down")


async def serve(config: ServerConfig, stop: asyncio.Event, faults: FaultPlan | None = None,
                recovery_progress: Progress | None = None) -> None:
    """Recover (telling ``recovery_progress``, see zkpy.storage.recovery), then serve until ``stop``
    is set; raise DiskFailure if the log could not be written."""
    server = ZkServer(config, faults=faults, recovery_progress=recovery_progress)
    await server.start()
    waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(server.stopped.wait())]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
        await server.close()
    if server.failure is not None:
        raise DiskFailure(describe_error(server.failure)) from server.failure
