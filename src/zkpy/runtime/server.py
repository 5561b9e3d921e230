"""The asyncio shell around ServerCore: recovery, client listener, flushing, timers, shutdown.

One event loop per process. Each loop turn's input is processed by the core; a single flush
per turn hands the turn's new txns to the fsync worker and writes every connection's output
with one ``write`` per connection. When the worker reports txns durable, they are applied and
answered (then flushed again): a write's reply never leaves before its fsync.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import time

from zkpy.admin.fourletter import COMMANDS as FOUR_LETTER_WORDS
from zkpy.admin.fourletter import DEFAULT_TRACE_MASK
from zkpy.admin.fourletter import answer as answer_four_letter_word
from zkpy.config import ServerConfig
from zkpy.runtime.osdisk import OsDisk
from zkpy.runtime.persistence import Persistence
from zkpy.server.connection import Connection
from zkpy.server.core import ServerCore
from zkpy.storage.disk import Disk, FaultPlan
from zkpy.storage.files import DataDirs, purge
from zkpy.storage.recovery import Recovered, recover

log = logging.getLogger("zkpy.server")

MAX_OUTSTANDING_PER_CONNECTION = 1000  # stop reading a connection past this many queued requests


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _wall_ms() -> int:
    return int(time.time() * 1000)


class ClientProtocol(asyncio.Protocol):
    """One client socket; everything it receives goes straight to the core."""

    def __init__(self, server: ZkServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.conn: Connection | None = None
        self.core: ServerCore | None = None
        self.idle: bytearray | None = None  # bytes of a connection made while no core serves
        self.writing_paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername") or ("?", 0)
        ip, port = peer[0], peer[1]
        srv = self.server
        limit = srv.config.max_client_cnxns
        if limit > 0 and srv.per_ip.get(ip, 0) >= limit:
            log.warning("Too many connections from %s - max is %d", ip, limit)
            transport.abort()
            return
        if srv.core is None:  # an ensemble member between terms: four-letter words only
            self.idle = bytearray()
            return
        srv.per_ip[ip] = srv.per_ip.get(ip, 0) + 1
        self.core = srv.core
        srv.core.set_time(_now_ms(), _wall_ms())
        self.conn = srv.core.open(next(srv.conn_ids), ip, port)
        srv.protocols[self.conn.conn_id] = self

    def data_received(self, data: bytes) -> None:
        conn = self.conn
        if conn is None:
            if self.idle is not None and self.transport is not None:
                self._idle_data(data)
            return
        srv = self.server
        srv.core.set_time(_now_ms(), _wall_ms())
        word = srv.core.receive(conn, data)
        if word is not None:
            assert self.transport is not None
            self.transport.write(answer_four_letter_word(word, srv, conn).encode("utf-8"))
            self.transport.close()
            return
        srv.schedule_flush()
        if conn.outstanding > MAX_OUTSTANDING_PER_CONNECTION and self.transport is not None:
            self.transport.pause_reading()
            conn.paused = True

    def _idle_data(self, data: bytes) -> None:
        """Not serving: answer a four-letter word, refuse anything else (ZooKeeper closes it)."""
        assert self.idle is not None and self.transport is not None
        self.idle += data
        if len(self.idle) < 4:
            return
        word = bytes(self.idle[:4]).decode("ascii", "replace")
        if word in FOUR_LETTER_WORDS:
            self.transport.write(answer_four_letter_word(word, self.server).encode("utf-8"))
        else:
            log.info("refusing a client connection: this server is not serving (no quorum)")
        self.transport.close()
        self.idle = None

    def connection_lost(self, exc: Exception | None) -> None:
        conn = self.conn
        if conn is None:
            return
        srv = self.server
        count = srv.per_ip.get(conn.ip, 1) - 1
        if count:
            srv.per_ip[conn.ip] = count
        else:
            srv.per_ip.pop(conn.ip, None)
        srv.protocols.pop(conn.conn_id, None)
        if self.core is not None:
            self.core.disconnected(conn)  # the core it was opened on (an ensemble's term may be over)
        srv.schedule_flush()
        self.conn = None

    def pause_writing(self) -> None:
        # the client is not reading: stop reading its requests until its output drains
        self.writing_paused = True
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.writing_paused = False
        if self.transport is not None and self.conn is not None and not self.conn.paused:
            self.transport.resume_reading()

    def flush(self) -> None:
        conn, transport = self.conn, self.transport
        if conn is None or transport is None:
            return
        if conn.out:
            transport.write(b"".join(conn.out))
            conn.out.clear()
        if conn.closing:
            if conn.close_reason not in (None, "closeSession", "client went away"):
                log.info("closing connection %s:%d: %s", conn.ip, conn.port, conn.close_reason)
            transport.close()
        elif conn.paused and conn.outstanding <= MAX_OUTSTANDING_PER_CONNECTION // 2:
            conn.paused = False
            if not self.writing_paused:
                transport.resume_reading()


class DiskFailure(Exception):
    """The txn log could not be written or synced: the server stopped without acknowledging it."""


class ZkServer:
    """A standalone zkpy server: recovers its data dir, then serves its client port."""

    def __init__(self, config: ServerConfig, disk: Disk | None = None, faults: FaultPlan | None = None) -> None:
        self.config = config
        self.disk = disk or OsDisk(faults, config.force_sync)
        self.dirs = DataDirs.of(config.data_dir, config.data_log_dir)
        t0 = time.monotonic()
        # building a million nodes would run the cyclic collector over the growing tree again and
        # again (a third of the load time); loading makes no cycles, so it runs without it
        gc.disable()
        try:
            self.recovered: Recovered = recover(self.disk, self.dirs, log.info)
        finally:
            gc.enable()
        recovery_s = time.monotonic() - t0
        tree = self.recovered.tree
        log.info("recovered zxid 0x%x, %d znodes, %d sessions, digest 0x%x in %.2fs", tree.last_processed_zxid,
                 tree.node_count(), len(tree.sessions), tree.digest, recovery_s)
        self.core = ServerCore(config, _now_ms(), _wall_ms(), log=log.info, tree=tree)
        # the recovered tree lives as long as the server: keep the collector from walking it
        gc.collect()
        gc.freeze()
        self.persistence = Persistence(config, self.disk, self.dirs)
        self.handed = 0  # proposals handed to the fsync worker and not yet applied
        self.protocols: dict[int, ClientProtocol] = {}
        self.per_ip: dict[str, int] = {}
        self.conn_ids = itertools.count(1)
        self.listen_backlog = 1024  # reported by the conf four-letter word
        self.trace_mask = DEFAULT_TRACE_MASK  # gtmk/stmk; zkpy does no tracing
        self._flush_scheduled = False
        self._server: asyncio.base_events.Server | None = None
        self._ticker: asyncio.TimerHandle | None = None
        self._purger: asyncio.TimerHandle | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.failure: BaseException | None = None
        self.stopped = asyncio.Event()

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.persistence.start(self.loop, self._durable, self._disk_failed)
        if self.recovered.fresh:
            self.persistence.write_initial_snapshot(self.core.tree)
        elif self.recovered.txns_replayed:
            self.persistence.start_snapshot(self.core.tree)  # the next restart replays less
        self._server = await self.loop.create_server(
            lambda: ClientProtocol(self), self.config.client_port_address, self.config.client_port,
            reuse_address=True, backlog=self.listen_backlog)
        log.info("binding to port %s:%d", self.config.client_port_address, self.port)
        self._schedule_tick()
        if self.config.autopurge_purge_interval_h > 0:
            self._autopurge()

    def _autopurge(self) -> None:
        """Purge now and every purgeInterval hours (DatadirCleanupManager), off the loop."""
        assert self.loop is not None
        retain = self.config.autopurge_snap_retain_count
        self.loop.run_in_executor(None, purge, self.disk, self.dirs, retain, log.info)
        self._purger = self.loop.call_later(self.config.autopurge_purge_interval_h * 3600, self._autopurge)

    def _tick_interval(self) -> float:
        return max(10, min(100, self.config.tick_ms // 4)) / 1000

    def _schedule_tick(self) -> None:
        assert self.loop is not None
        self._ticker = self.loop.call_later(self._tick_interval(), self._tick)

    def _tick(self) -> None:
        self.core.set_time(_now_ms(), _wall_ms())
        self.core.tick()
        self.flush()
        self._schedule_tick()

    def schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            assert self.loop is not None
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        """Hand this turn's new txns to the fsync worker, then write every connection's output."""
        self._flush_scheduled = False
        core = self.core
        if len(core.proposals) > self.handed:
            self.persistence.log_txns([(p.hdr, p.txn) for p in core.proposals[self.handed:]], core.tree)
            self.handed = len(core.proposals)
        for conn in core.take_dirty():
            proto = self.protocols.get(conn.conn_id)
            if proto is not None:
                proto.flush()

    def _durable(self, count: int) -> None:
        """The worker fsynced ``count`` more txns: apply and answer them."""
        if self.failure is not None:
            return
        self.core.set_time(_now_ms(), _wall_ms())
        self.core.apply_persisted(count)
        self.handed -= count
        self.flush()

    def _disk_failed(self, exc: BaseException) -> None:
        """Fail-stop: drop every client without another byte, so nothing unlogged is acknowledged."""
        self.failure = exc
        log.critical("cannot write the txn log (%s): stopping; no write after zxid 0x%x was acknowledged",
                     exc, self.core.tree.last_processed_zxid)
        for proto in list(self.protocols.values()):
            if proto.transport is not None:
                proto.transport.abort()
        self.stopped.set()

    async def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
        if self._purger is not None:
            self._purger.cancel()
        if self._server is not None:
            self._server.close()
            for proto in list(self.protocols.values()):
                if proto.transport is not None:
                    proto.transport.close()
            await self._server.wait_closed()
        self.persistence.close()
        log.info("server shut down")


async def serve(config: ServerConfig, stop: asyncio.Event, faults: FaultPlan | None = None) -> None:
    """Recover, then serve until ``stop`` is set; raise DiskFailure if the log could not be written."""
    server = ZkServer(config, faults=faults)
    await server.start()
    waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(server.stopped.wait())]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
        await server.close()
    if server.failure is not None:
        raise DiskFailure(str(server.failure)) from server.failure
