"""A TCP proxy for tests: put it between a client and a server, then cut, heal or move the link.

The proxy runs its own asyncio loop on a daemon thread, so blocking tests (kazoo, ``Client``) and
asyncio tests alike drive it with plain method calls; every call returns once the change is in
effect. It listens on ``127.0.0.1:<ephemeral>`` (``TcpProxy.port``, ``TcpProxy.hosts``).

``cut(mode)`` simulates a partition between the client and the server:

- ``"reset"``: every current connection is reset (RST to the client, close to the server) and new
  connections are reset as soon as they are accepted: the client sees the loss at once.
- ``"blackhole"``: current connections are frozen (bytes in either direction are read and dropped,
  nothing is closed) and new connections are accepted and held without ever reaching the server,
  as with a partition: the client notices only through its own timeouts.

``restore()`` heals the link: connections frozen or held during a blackhole are reset (their bytes
are lost, as after a real partition the peers would have given up on them) and new connections
are forwarded again. ``retarget(host, port)`` changes where *new* connections go; connections
already open stay with their server.

``lose_reply(opcodes, skip=0)`` (a proxy made with ``zk_frames=True``, which reads ZooKeeper's
frames in both directions) forwards the next request whose opcode is one of ``opcodes`` (after
``skip`` of them) and, when its reply
comes back, resets that connection instead of passing the reply on: the request took effect on
the server but its client sees ConnectionLoss, the case of the recipe guide's "Recoverable
Errors". ``lost`` counts the replies lost so far.

``reset_next(n)`` accepts the next ``n`` connections and resets each at once, without dialling
the server, as a proxy, load balancer or sidecar does in front of a server not listening yet;
``reset_early`` counts them.

``delay(ms)`` holds every chunk that long, each way, keeping the order (a slow link, where the
kernel has no netem); ``loss(percent, rto_ms)`` loses that share of the chunks as TCP shows a lost
segment to the programs at both ends: the chunk, and every chunk behind it, arrives a
retransmission timeout later (doubled for each time the retransmission is lost too, six times at
most),
``retransmitted`` counts them; ``listen_host`` makes it listen on another address than 127.0.0.1 (a test
bed's own, ``zkpy.testing.netbed``).

``TcpProxy(host, port, ssl_context=...)`` terminates TLS: it accepts TLS connections from the
client (the context holds the server's certificate) and forwards the plain bytes over TCP to the
server, so a TLS client can be tested against servers that speak only plain TCP.

Invariant: a byte is forwarded only on a connection opened while the proxy was not cut, and
only while the proxy is still not cut.
"""

from __future__ import annotations

import asyncio
import random
import socket
import ssl
import struct
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

CutMode = Literal["reset", "blackhole"]

_T = TypeVar("_T")
_CHUNK = 65536
MAX_RETRANSMISSIONS = 6  # a chunk ``loss`` loses is held at most 63 timeouts (its 7th try arrives)


def _reset(writer: asyncio.StreamWriter | None) -> None:
    """Close abruptly: SO_LINGER 0 makes close() send RST instead of FIN."""
    if writer is None or writer.transport.is_closing():
        return
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()


_LENGTH = struct.Struct(">i")
_REQUEST_HEADER = struct.Struct(">ii")  # xid, type


class _Frames:
    """Splits one direction of a ZooKeeper connection into frames (length-prefixed; the first
    frame is the connect request or response, without a header)."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self.handshake_done = False

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        frames = []
        while len(self._buf) >= 4:
            (size,) = _LENGTH.unpack_from(self._buf, 0)
            if len(self._buf) < 4 + size:
                break
            frames.append(bytes(self._buf[:4 + size]))
            del self._buf[:4 + size]
        return frames


@dataclass(eq=False)
class _Link:
    """One client connection and, unless it is held, its server connection."""

    client: asyncio.StreamWriter
    server: asyncio.StreamWriter | None = None
    frozen: bool = False
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    requests: _Frames = field(default_factory=_Frames)
    replies: _Frames = field(default_factory=_Frames)
    doomed_xid: int | None = None  # the request whose reply lose_reply() drops

    def reset(self) -> None:
        _reset(self.client)
        _reset(self.server)
        for task in self.tasks:
            task.cancel()


class TcpProxy:
    """A cuttable TCP proxy on loopback; see the module docstring for the cut modes."""

    def __init__(self, target_host: str, target_port: int, *, ssl_context: ssl.SSLContext | None = None,
                 zk_frames: bool = False, listen_host: str = "127.0.0.1") -> None:
        self._target = (target_host, target_port)
        self._listen_host = listen_host
        self._delay_s = 0.0
        self._loss = 0.0  # the share of chunks lost once or more (``loss``)
        self._rto_s = 0.2
        self._rng = random.Random(0)
        self._ssl_context = ssl_context
        self._zk_frames = zk_frames
        self._lose: frozenset[int] = frozenset()
        self._lose_skip = 0
        self._reset_next = 0
        self.reset_early = 0  # connections reset_next() reset
        self.lost = 0  # replies dropped by lose_reply()
        self._mode: CutMode | None = None
        self._links: set[_Link] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self.port = 0
        self.accepted = 0  # connections accepted since start(), whatever became of them
        self.forwarded = 0  # connections that reached a server
        self.delayed = 0  # chunks put in a delay line (``delay``)
        self.dropped = 0  # of those, chunks a blackhole cut dropped before they were due
        self.retransmitted = 0  # chunks ``loss`` lost (each once per retransmission)

    # -- the test's side (any thread) -------------------------------------------------------

    @property
    def hosts(self) -> str:
        return f"{self._listen_host}:{self.port}"

    @property
    def target(self) -> tuple[str, int]:
        return self._target

    @property
    def is_cut(self) -> bool:
        return self._mode is not None

    def start(self) -> TcpProxy:
        if self._thread is not None:
            raise RuntimeError("proxy already started")
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name=f"TcpProxy->{self._target}", daemon=True)
        self._thread.start()
        self._call(self._listen)
        return self

    def cut(self, mode: CutMode = "reset") -> None:
        if mode not in ("reset", "blackhole"):
            raise ValueError(f"unknown cut mode {mode!r}")
        self._call(lambda: self._cut(mode))

    def restore(self) -> None:
        self._call(self._restore)

    def retarget(self, host: str, port: int) -> None:
        self._call(lambda: self._retarget(host, port))

    def lose_reply(self, opcodes: set[int] | frozenset[int], skip: int = 0) -> None:
        """Drop the reply to the next request with one of ``opcodes`` (after letting ``skip``
        such requests through) and reset its connection (see the module doc). Needs
        ``zk_frames=True``."""
        if not self._zk_frames:
            raise RuntimeError("lose_reply needs a proxy made with zk_frames=True")
        self._lose_skip = skip
        self._lose = frozenset(opcodes)

    def loss(self, percent: float, rto_ms: float = 200.0, seed: int = 0) -> None:
        """Lose ``percent`` of the chunks from now on, each way, as TCP shows a loss (see the module
        doc: the chunk and those behind it come ``rto_ms`` later, doubled per repeated loss, six
        times at most; 200 ms is Linux's least retransmission timeout), drawn from ``seed``; 0: none."""
        if not 0 <= percent < 100:
            raise ValueError(f"loss must be in [0, 100): {percent}")
        self._rng = random.Random(seed)
        self._rto_s = rto_ms / 1000
        self._loss = percent / 100

    def _held_s(self) -> float:
        """How long the next chunk is held: the delay, and a retransmission timeout for each time
        it is lost."""
        held, rto = self._delay_s, self._rto_s
        for _ in range(MAX_RETRANSMISSIONS):
            if not (self._loss and self._rng.random() < self._loss):
                break
            self.retransmitted += 1
            held += rto
            rto *= 2
        return held

    def reset_next(self, n: int) -> None:
        """Reset each of the next ``n`` connections as soon as it is accepted (see the module doc)."""
        self._reset_next = n

    def delay(self, ms: float) -> None:
        """Hold every chunk ``ms`` milliseconds each way from now on (0: none), as a slow link
        would where the kernel has no netem."""
        self._delay_s = max(0.0, ms / 1000)

    def connection_count(self) -> int:
        return self._call(self._count)

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        if self._loop.is_running():
            self._call(self._shutdown)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10.0)
        self._loop.close()
        self._loop = None
        self._thread = None

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _call(self, fn: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
        if self._loop is None:
            raise RuntimeError("proxy not started")
        return asyncio.run_coroutine_threadsafe(fn(), self._loop).result(10.0)

    # -- the proxy's loop -------------------------------------------------------------------

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._accept, self._listen_host, 0, ssl=self._ssl_context)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _count(self) -> int:
        return len(self._links)

    async def _cut(self, mode: CutMode) -> None:
        self._mode = mode
        for link in list(self._links):
            if mode == "reset":
                link.reset()
                self._links.discard(link)
            else:
                link.frozen = True

    async def _restore(self) -> None:
        self._mode = None
        for link in list(self._links):
            if link.frozen:
                link.reset()
                self._links.discard(link)

    async def _retarget(self, host: str, port: int) -> None:
        self._target = (host, port)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            link.reset()
        self._links.clear()
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        writer.transport.set_write_buffer_limits(high=1 << 20)
        link = _Link(writer)
        if self._mode == "reset":
            _reset(writer)
            return
        if self._reset_next > 0 and self._mode is None:
            self._reset_next -= 1
            self.reset_early += 1
            _reset(writer)
            return
        self._links.add(link)
        if self._mode == "blackhole":
            link.frozen = True
            await self._drain_into_void(reader, link)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            self._links.discard(link)
            _reset(writer)
            return
        link.server = up_writer
        if link.frozen or link not in self._links:  # cut while we were connecting
            link.reset()
            self._links.discard(link)
            return
        self.forwarded += 1
        to_server, to_client = ((self._requests_seen, self._replies_to_pass) if self._zk_frames
                                else (_as_is, _as_is))
        link.tasks = [asyncio.create_task(self._pump(reader, up_writer, link, to_server)),
                      asyncio.create_task(self._pump(up_reader, writer, link, to_client))]

    async def _drain_into_void(self, reader: asyncio.StreamReader, link: _Link) -> None:
        try:
            while await reader.read(_CHUNK):
                pass
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            self._links.discard(link)

    def _requests_seen(self, link: _Link, data: bytes) -> bytes | None:
        """Client to server: pass everything on; note the request whose reply is to be lost."""
        for frame in link.requests.feed(data):
            if not link.requests.handshake_done:
                link.requests.handshake_done = True
                continue
            if len(frame) >= 12 and self._lose:
                xid, op = _REQUEST_HEADER.unpack_from(frame, 4)
                if op in self._lose:
                    if self._lose_skip:
                        self._lose_skip -= 1
                        continue
                    self._lose = frozenset()
                    link.doomed_xid = xid
        return data

    def _replies_to_pass(self, link: _Link, data: bytes) -> bytes | None:
        """Server to client: whole frames only; None (reset the link) at the doomed reply."""
        out = bytearray()
        for frame in link.replies.feed(data):
            if not link.replies.handshake_done:
                link.replies.handshake_done = True
            elif link.doomed_xid is not None and len(frame) >= 8 \
                    and _LENGTH.unpack_from(frame, 4)[0] == link.doomed_xid:
                self.lost += 1
                return None
            out += frame
        return bytes(out)

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, link: _Link,
                    inspect: Callable[[_Link, bytes], bytes | None]) -> None:
        """Copy ``src`` to ``dst`` until either side closes; drop the bytes while frozen;
        ``inspect`` may hold bytes back or, returning None, end the link with a reset. With a
        ``delay``, each chunk leaves that long after it came, in order.

        A clean close on one side is passed on as a clean close (FIN) of the other."""
        line = _DelayLine(dst, link, self)
        try:
            while data := await src.read(_CHUNK):
                if not link.frozen:
                    passed = inspect(link, data)
                    if passed is None:
                        link.reset()
                        self._links.discard(link)
                        return
                    await line.put(passed, self._held_s())
            await line.flush()
        except (OSError, asyncio.CancelledError):
            line.cancel()
            link.reset()
            self._links.discard(link)
            return
        if not link.frozen:
            for w in (link.client, link.server):
                if w is not None and not w.transport.is_closing():
                    w.close()
            self._links.discard(link)


class _DelayLine:
    """Bytes for ``dst``, each written ``delay_s`` after it was put, in the order put (a chunk put
    with no delay waits for those still in the line); nothing once the link is frozen."""

    def __init__(self, dst: asyncio.StreamWriter, link: _Link, proxy: TcpProxy) -> None:
        self._dst = dst
        self._link = link  # a chunk due after the link froze (a blackhole cut) is dropped
        self._proxy = proxy  # counts the chunks delayed and dropped
        self._queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue(maxsize=1024)  # bounded
        self._task: asyncio.Task[None] | None = None

    async def put(self, data: bytes, delay_s: float) -> None:
        if delay_s <= 0 and self._task is None:
            self._dst.write(data)
            await self._dst.drain()
            return
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        await self._queue.put((asyncio.get_running_loop().time() + delay_s, data))
        self._proxy.delayed += 1

    async def flush(self) -> None:
        """Wait until every chunk put has been written."""
        if self._task is not None:
            await self._queue.put(None)
            await self._task

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while (item := await self._queue.get()) is not None:
            due, data = item
            if due > loop.time():
                await asyncio.sleep(due - loop.time())
            if self._link.frozen:
                self._proxy.dropped += 1
                continue
            self._dst.write(data)
            await self._dst.drain()


def _as_is(link: _Link, data: bytes) -> bytes:
    return data
