"""A worker process of a server with ``serverWorkers`` > 1: ``python -m zkpy.runtime.worker FD ZXID_FD``.

``FD`` is this process's end of its link to the member (a Unix socket pair, ``runtime.workers``);
``ZXID_FD`` is a shared 8-byte map (`SharedZxid`) where the member writes the zxid it applied
before it answers anyone: a read waits until this worker applied what it said when the read
arrived (``ServerCore.read_barrier``), so it sees every write any process acknowledged before.
The member writes a hello first (a 4-byte length, then a pickled `Hello`: the server's config
with the client ports it bound, this worker's index and the process count, the log level);
then the link carries ``member.workers`` packets: the replica (SNAP), then committed txns.
Once the replica is loaded, the worker listens on the same client port(s) with SO_REUSEPORT
(the kernel spreads new connections over the processes) and serves them with a learner's
pipeline (``server.learner.LearnerServerCore``) fed by ``member.workers.WorkerFeed``.

The worker lives as long as its link: when the member exits (or is killed) the kernel closes
the link, and the worker drops its clients and exits, so no worker outlives its member.
Four-letter words answered here describe this process (its connections, its replica: the
member's mode, ``standalone`` or its role in the ensemble, the replica's zxid and node count;
no quorum lines in ``mntr``); the AdminServer and /metrics are the member's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import logging.handlers
import mmap
import os
import pickle
import signal
import socket
import struct
import sys
import tempfile
import time

from zkpy.admin.fourletter import DEFAULT_TRACE_MASK
from zkpy.config import ServerConfig
from zkpy.member.workers import WorkerFeed
from zkpy.runtime import gcpolicy
from zkpy.runtime.clientport import ClientPort, ServesClients
from zkpy.runtime.clock import now_ms, wall_ms
from zkpy.server.learner import LearnerServerCore

log = logging.getLogger("zkpy.worker")
_ZXID = struct.Struct(">q")


class SharedZxid:
    """8 bytes of memory shared by a server's processes (an unlinked file each maps): the zxid
    the member has applied. Written by the member only; read twice until two reads agree, so a
    read never takes a value torn by a write in progress."""

    def __init__(self, fd: int, writable: bool) -> None:
        self.fd = fd
        self.map = mmap.mmap(fd, _ZXID.size, access=mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ)

    @classmethod
    def create(cls) -> SharedZxid:
        if hasattr(os, "memfd_create"):
            fd = os.memfd_create("zkpy-applied-zxid")
        else:
            with tempfile.TemporaryFile() as f:
                fd = os.dup(f.fileno())
        os.ftruncate(fd, _ZXID.size)
        return cls(fd, writable=True)

    def set(self, zxid: int) -> None:
        _ZXID.pack_into(self.map, 0, zxid)

    def get(self) -> int:
        while True:
            (first,) = _ZXID.unpack_from(self.map, 0)
            (second,) = _ZXID.unpack_from(self.map, 0)
            if first == second:
                return int(first)


@dataclasses.dataclass(frozen=True, slots=True)
class Hello:
    """What the member tells a new worker before anything else."""

    config: ServerConfig  # with the client ports the member bound (clientPort=0 became a real port)
    index: int  # 1 .. count-1 (the member is 0)
    count: int  # the server's processes: the member and its workers
    log_level: int
    log_file: str | None = None  # the member's log file (--log-dir), appended to by the worker too
    log_formatter: logging.Formatter | None = None  # the member's formatter (text or JSON)
    mode: str = "standalone"  # the member's mode, as four-letter words say it (a member's role)
    leader_id: int = -1  # a member's leader


def read_hello(sock: socket.socket) -> Hello:
    def exactly(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("the member closed the link before its hello")
            buf += chunk
        return buf

    size = int.from_bytes(exactly(4), "big")
    hello = pickle.loads(exactly(size))  # our own member, over a socket pair only it and we hold
    assert isinstance(hello, Hello)
    return hello


def encode_hello(hello: Hello) -> bytes:
    data = pickle.dumps(hello)
    return len(data).to_bytes(4, "big") + data


class _Link(asyncio.Protocol):
    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def data_received(self, data: bytes) -> None:
        self.worker.link_data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.worker.link_lost()


class Worker(ServesClients):
    """One worker process's server: a replica fed by the member, serving the shared client port
    (``member.workers.WorkerFeed`` is its ``core``)."""

    mode = "standalone"
    leader_id = -1

    def __init__(self, hello: Hello, applied: SharedZxid) -> None:
        self.config = hello.config
        self.hello = hello
        self.mode = hello.mode
        self.leader_id = hello.leader_id
        self.applied = applied
        self.core = WorkerFeed(self.config, hello.index, hello.count, now_ms(), wall_ms(), log=log.info)
        self.clients = ClientPort(self.config, self, self.schedule_flush, reuse_port=True)
        self.trace_mask = DEFAULT_TRACE_MASK
        self.transport: asyncio.Transport | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stopped = asyncio.Event()
        self._flush_scheduled = False
        self._ticker: asyncio.TimerHandle | None = None

    @property
    def pipeline(self) -> LearnerServerCore | None:
        return self.core.pipeline

    def quorum_metrics(self) -> list[tuple[str, object]]:
        return []

    def fsync_summaries(self) -> None:
        return None

    async def run(self, sock: socket.socket) -> None:
        self.loop = asyncio.get_running_loop()
        # Ctrl-C reaches the whole process group: the member decides; SIGTERM stops this worker only
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        self.loop.add_signal_handler(signal.SIGTERM, self.stopped.set)
        transport, _ = await self.loop.create_unix_connection(lambda: _Link(self), sock=sock)
        self.transport = transport
        await self.stopped.wait()
        if self._ticker is not None:
            self._ticker.cancel()
        await self.clients.close()

    def link_data(self, data: bytes) -> None:
        self.core.set_time(now_ms(), wall_ms())
        try:
            loaded = self.core.receive(data)
        except Exception:
            log.exception("bad data from the member: stopping")
            self.stopped.set()
            return
        if loaded:
            self._replica_loaded()
        self.schedule_flush()

    def _replica_loaded(self) -> None:
        pipeline = self.core.pipeline
        assert pipeline is not None and self.loop is not None
        self.clients.pipeline = pipeline
        self.clients.before_input = self._read_barrier
        log.info("replica at zxid 0x%x, %d znodes", pipeline.tree.last_processed_zxid, pipeline.tree.node_count())
        self.loop.create_task(self._listen())
        self._tick()

    async def _listen(self) -> None:
        try:
            await self.clients.listen()
        except OSError as exc:  # the member restarts this worker after a delay
            log.error("cannot listen on %s:%d: %s", self.config.client_port_address,
                      self.config.client_port, exc)
            self.stopped.set()
            return
        log.info("serving %s:%d", self.config.client_port_address, self.port)

    def _read_barrier(self) -> None:
        """Client input arrives: its reads wait for what the member has applied by now."""
        self.core.before_input(self.applied.get())

    def link_lost(self) -> None:
        log.info("the member closed the link: stopping")
        self.stopped.set()

    def _tick(self) -> None:
        assert self.loop is not None
        self.core.set_time(now_ms(), wall_ms())
        self.core.tick()
        self.flush()
        self._ticker = self.loop.call_later(self.config.tick_interval_ms / 1000, self._tick)

    def schedule_flush(self) -> None:
        if not self._flush_scheduled and self.loop is not None:
            self._flush_scheduled = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        self._flush_scheduled = False
        data, conns = self.core.ready()
        for conn in conns:
            self.clients.write(conn)
        if data and self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)


class _WorkerMark(logging.Filter):
    """Every line this process logs says which worker wrote it."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self.mark = f"[worker {index}] "

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and not record.msg.startswith(self.mark):
            record.msg = self.mark + record.msg
        return True


def _configure_logging(hello: Hello) -> None:
    """Log as the member does: to its log file when it has one (a WatchedFileHandler, which
    follows the member's rotation), with its formatter; else, and for warnings, to stderr."""
    formatter = hello.log_formatter or logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(formatter)
    handlers: list[logging.Handler] = [stderr]
    if hello.log_file is not None:
        try:
            file_handler = logging.handlers.WatchedFileHandler(hello.log_file, encoding="utf-8")
        except OSError:
            pass
        else:
            file_handler.setFormatter(formatter)
            handlers.append(file_handler)
            stderr.setLevel(logging.WARNING)
    mark = _WorkerMark(hello.index)
    for h in handlers:
        h.addFilter(mark)
        root.addHandler(h)
    root.setLevel(hello.log_level)


def main(argv: list[str]) -> None:
    sock = socket.socket(fileno=int(argv[1]))
    applied = SharedZxid(int(argv[2]), writable=False)
    sock.setblocking(True)
    hello = read_hello(sock)
    sock.setblocking(False)
    _configure_logging(hello)
    gcpolicy.tune()
    t0 = time.monotonic()

    async def runner() -> None:
        await Worker(hello, applied).run(sock)

    try:
        import uvloop
    except ImportError:
        asyncio.run(runner())
    else:
        uvloop.run(runner())
    log.info("stopped after %.1fs", time.monotonic() - t0)


if __name__ == "__main__":
    # run as the module itself, so that the pickled Hello is this module's class, not __main__'s
    from zkpy.runtime.worker import main as _main

    _main(sys.argv)
