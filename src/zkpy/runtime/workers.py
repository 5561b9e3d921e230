"""A dedicated member's worker processes (``serverWorkers`` = N > 1): spawn N, link, feed, restart.

Each worker is ``python -m zkpy.runtime.worker FD ZXID_FD`` with one end of a Unix socket pair as
its link (no port, no path: only the two processes hold it) and the shared map of the member's
applied zxid (``runtime.worker.SharedZxid``). The member writes the hello
(``runtime.worker.Hello``) on the link first, then the link carries ``member.workers`` packets: when
the link is connected the hub sends the tree as it is at that turn of the loop (SNAP), then
every txn the member applies after it. A worker that dies is started again after
``RESTART_DELAY_S`` (doubled, up to ``MAX_RESTART_DELAY_S``, while it keeps dying within
``STABLE_S`` of its start); its clients reconnect (to any process) and keep their sessions, as after
any server move. Closing the pool closes the links; the workers exit when theirs closes (also
when the member is killed: the kernel closes its end), and are killed if they have not within
``STOP_WAIT_S``.

A link's output is unbounded only while its worker starts (the SNAP and the txns applied
meanwhile wait in the socket's buffer); a worker that stops reading for ``STALL_LIMIT_BYTES``
is killed and restarted, so a stuck worker cannot exhaust the member's memory.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Callable

from zkpy.config import ServerConfig
from zkpy.member.workers import WorkerHub, snapshot_packet
from zkpy.runtime.snapfork import fork_available, fork_child, wait_child, write_all
from zkpy.runtime.worker import Hello, SharedZxid, encode_hello

log = logging.getLogger("zkpy.server")

RESTART_DELAY_S = 1.0
MAX_RESTART_DELAY_S = 60.0
STABLE_S = 10.0  # a worker that ran this long before it died is started again after RESTART_DELAY_S
STOP_WAIT_S = 5.0
STALL_LIMIT_BYTES = 256 << 20


class _Link(asyncio.Protocol):
    def __init__(self, pool: WorkerPool, index: int) -> None:
        self.pool = pool
        self.index = index
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.pool.attached(self.index, transport)
        self.pool.on_input()

    def data_received(self, data: bytes) -> None:
        try:
            self.pool.hub.receive(self.index, data)
        except Exception as exc:
            log.error("worker %d sent what no worker sends (%s): restarting it", self.index, exc)
            assert self.transport is not None
            self.transport.abort()
            return
        self.pool.on_input()

    def connection_lost(self, exc: Exception | None) -> None:
        self.pool.link_lost(self.index)


class WorkerPool:
    """The workers 1..count-1 of a server whose member is process 0; ``on_input`` asks the owner
    to flush (pipeline and links)."""

    def __init__(self, config: ServerConfig, count: int, hub: WorkerHub, on_input: Callable[[], None],
                 mode: str = "standalone", leader_id: int = -1) -> None:
        self.config = config
        self.mode = mode  # what the workers' four-letter words call the server (a member's role)
        self.leader_id = leader_id
        self.count = count
        self.hub = hub
        self.on_input = on_input
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.links: dict[int, _Link] = {}
        self.started: dict[int, float] = {}  # index -> when its current process started (loop time)
        self.delays: dict[int, float] = {}  # index -> the delay before its next start
        self.closing = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self.applied = SharedZxid.create()
        self.applied.set(hub.pipeline.tree.last_processed_zxid)

    def start(self, port: int, secure_port: int | None) -> None:
        """Start the workers, listening on the ports the member bound."""
        self.loop = asyncio.get_running_loop()
        self._config = dataclasses.replace(self.config, client_port=port, secure_client_port=secure_port,
                                           admin_enabled=False, metrics_prometheus=False)
        log.info("serving the client port from %d worker processes (serverWorkers=%d); this member serves "
                 "no client", self.count - 1, self.config.server_workers)
        for index in range(1, self.count):
            self._spawn(index)

    def _spawn(self, index: int) -> None:
        if self.closing:
            return
        assert self.loop is not None
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            proc = subprocess.Popen([sys.executable, "-m", "zkpy.runtime.worker", str(theirs.fileno()),
                                     str(self.applied.fd)], pass_fds=[theirs.fileno(), self.applied.fd],
                                    stdin=subprocess.DEVNULL)
        finally:
            theirs.close()
        self.procs[index] = proc
        self.started[index] = self.loop.time()
        log.info("worker %d started: pid %d", index, proc.pid)
        mine.sendall(encode_hello(self._hello(index)))
        mine.setblocking(False)
        link = _Link(self, index)
        self.links[index] = link
        self.loop.create_task(self.loop.create_unix_connection(lambda: link, sock=mine))

    def attached(self, index: int, transport: asyncio.BaseTransport) -> None:
        """Worker ``index``'s link is up: it is sent the tree as it is now. Where the OS can fork,
        a child writes it (the loop pauses for the fork, not for serialising the tree; the
        link's other output waits for the child); else it is serialised here."""
        sock = transport.get_extra_info("socket")
        if not fork_available() or sock is None:
            self.hub.attach(index)
            return
        self.hub.attach(index, streamed=True)
        tree, fd = self.hub.pipeline.tree, sock.fileno()
        try:
            pid = fork_child(lambda: write_all(fd, snapshot_packet(tree)), keep_fd=fd)
        except OSError as exc:
            log.error("cannot fork to send worker %d its replica (%s): restarting it", index, exc)
            transport.abort()  # type: ignore[attr-defined]
            return
        assert self.loop is not None
        waited = self.loop.run_in_executor(None, wait_child, pid)
        waited.add_done_callback(lambda done: self._snapshot_written(index, transport, done))

    def _snapshot_written(self, index: int, transport: asyncio.BaseTransport, waited: asyncio.Future[int]) -> None:
        if waited.cancelled() or waited.exception() is not None:
            return  # the loop is closing (an exception: the child was reaped elsewhere, it cannot be)
        code = waited.result()
        link = self.links.get(index)
        if link is None or link.transport is not transport or transport.is_closing():
            return  # that worker's link is gone (a worker started again since has a child of its own)
        if code != 0:
            log.error("the child sending worker %d its replica failed (exit %d): restarting it", index, code)
            link.transport.abort()
            return
        self.hub.snapshot_sent(index)
        self.on_input()

    def applied_up_to(self, zxid: int) -> None:
        """The member applied up to ``zxid``: said before any reply or txn about it leaves, so
        that a read on any worker after it waits for it (``runtime.worker.SharedZxid``). A worker
        whose SNAP is still being written with ``STALL_LIMIT_BYTES`` of txns waiting behind it
        (it stopped reading: the child cannot finish) is restarted, as one that stops reading later."""
        self.applied.set(zxid)
        for index in self.hub.held_over(STALL_LIMIT_BYTES):
            log.error("worker %d has not read its replica with %d MiB of txns waiting: restarting it", index,
                      STALL_LIMIT_BYTES >> 20)
            self._restart(index)

    def _hello(self, index: int) -> Hello:
        """What worker ``index`` is told first: the config, and how the member logs (its log
        file, if any, and its formatter, so that the worker's lines look like the member's)."""
        root = logging.getLogger()
        log_file = formatter = None
        for h in root.handlers:
            if isinstance(h, logging.FileHandler):
                log_file, formatter = h.baseFilename, h.formatter
                break
        else:
            formatter = next((h.formatter for h in root.handlers if h.formatter is not None), None)
        try:
            encode_hello(Hello(self._config, index, self.count, root.getEffectiveLevel(), log_file, formatter,
                               self.mode, self.leader_id))
        except Exception:  # a formatter that does not pickle: the worker's own text lines then
            formatter = None
        return Hello(self._config, index, self.count, root.getEffectiveLevel(), log_file, formatter, self.mode,
                     self.leader_id)

    def send(self, index: int, data: bytes) -> None:
        """Write ``data`` on worker ``index``'s link (nothing while it has none)."""
        link = self.links.get(index)
        if link is None or link.transport is None or link.transport.is_closing():
            return
        link.transport.write(data)
        if link.transport.get_write_buffer_size() > STALL_LIMIT_BYTES:
            log.error("worker %d has not read %d bytes of txns: restarting it", index,
                      link.transport.get_write_buffer_size())
            self._restart(index)

    def _restart(self, index: int) -> None:
        """Kill worker ``index`` and drop its link: ``link_lost`` starts it again."""
        proc = self.procs.get(index)
        if proc is not None:
            proc.kill()
        link = self.links.get(index)
        if link is not None and link.transport is not None:
            link.transport.abort()

    def link_lost(self, index: int) -> None:
        self.hub.detach(index)
        self.links.pop(index, None)
        proc = self.procs.pop(index, None)
        if proc is None or self.loop is None:
            return
        self.loop.create_task(self._reap(index, proc))

    async def _reap(self, index: int, proc: subprocess.Popen[bytes]) -> None:
        assert self.loop is not None
        try:
            code = await asyncio.wait_for(self.loop.run_in_executor(None, proc.wait), STOP_WAIT_S)
        except TimeoutError:
            proc.kill()
            code = await self.loop.run_in_executor(None, proc.wait)
        if self.closing:
            return
        lived = self.loop.time() - self.started.get(index, 0.0)
        delay = RESTART_DELAY_S if lived >= STABLE_S else min(MAX_RESTART_DELAY_S,
                                                              2 * self.delays.get(index, RESTART_DELAY_S / 2))
        self.delays[index] = delay
        log.warning("worker %d (pid %d) exited with %s after %.1fs: starting it again in %.0fs", index, proc.pid,
                    code, lived, delay)
        self.loop.call_later(delay, self._spawn, index)

    def stop(self) -> None:
        """Close the links: the workers drop their clients and exit; none is started again."""
        self.closing = True
        for link in list(self.links.values()):
            if link.transport is not None:
                link.transport.close()

    async def close(self) -> None:
        """``stop``, then wait for the workers to exit (killed after ``STOP_WAIT_S``)."""
        procs = list(self.procs.values())
        self.stop()
        assert self.loop is not None or not procs
        for proc in procs:
            assert self.loop is not None
            try:
                await asyncio.wait_for(self.loop.run_in_executor(None, proc.wait), STOP_WAIT_S)
            except TimeoutError:
                proc.kill()
                await self.loop.run_in_executor(None, proc.wait)
        self.applied.map.close()
        os.close(self.applied.fd)
