"""The client port: one component for a standalone server and an ensemble member alike.

It listens, counts connections per IP (``maxClientCnxns``), hands every byte a client sends to
the serving request pipeline (``ServerCore``) and writes each connection's output with one
``write`` per flush. While nothing serves (an ensemble member between terms) it answers
four-letter words only and closes every other connection, as ZooKeeper does.

TLS (``secureClientPort``, and ``client.portUnification`` on the plain port) runs per connection
in ``tlsconn.TlsConnection``; when its handshake is done, the client's certificate becomes its
``x509:`` identity (``ServerCore.tls_established``).

Back-pressure (the bounds are ``server.connection``'s): the pipeline takes a connection's requests
while its queued output (replies and events not yet taken by the socket) is under
``MAX_QUEUED_OUTPUT`` bytes and it has fewer than ``MAX_OUTSTANDING`` requests in flight, at most
``MAX_FRAMES_PER_TURN`` per turn of the loop. The socket is read only while the pipeline takes the
connection's requests and no complete request waits in its decoder, so what a client sends and
what it is sent are both bounded per connection; a connection with requests left gets another
turn of the loop (``call_soon``), after every other connection's input of this turn.

A connection that has not sent its ConnectRequest within ``SESSIONLESS_CNXN_TIMEOUT_MS`` is
closed (ZooKeeper's ``zookeeper.nio.sessionlessCnxnTimeout``). Lines a peer can make us repeat
are rate-limited per peer (``zkpy.ratelimit``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
from collections.abc import Callable
from typing import cast

from zkpy.admin.fourletter import COMMANDS as FOUR_LETTER_WORDS
from zkpy.admin.fourletter import answer as answer_four_letter_word
from zkpy.admin.view import ServerView
from zkpy.config import ServerConfig
from zkpy.ratelimit import LogLimiter
from zkpy.runtime.clock import now_ms, wall_ms
from zkpy.runtime.listen_error import ListenError
from zkpy.runtime.tlsconn import TlsConnection, looks_like_tls
from zkpy.server.connection import (
    MAX_OUTSTANDING,
    MAX_UNREAD_OUTPUT,
    RESUME_QUEUED_OUTPUT,
    Connection,
    ConnState,
)
from zkpy.server.core import ServerCore

log = logging.getLogger("zkpy.server")

MAX_OUTSTANDING_PER_CONNECTION = MAX_OUTSTANDING  # requests in flight per connection (server.connection)
SESSIONLESS_CNXN_TIMEOUT_MS = 10_000  # close a connection without a ConnectRequest after this (as ZooKeeper)
LISTEN_BACKLOG = 1024  # reported by the conf four-letter word


class ClientProtocol(asyncio.Protocol):
    """One client socket; everything it receives goes straight to the serving pipeline."""

    def __init__(self, port: ClientPort, secure: bool = False) -> None:
        self.port = port
        self.secure = secure  # accepted on the TLS port: every byte is TLS
        self.tls: TlsConnection | None = None
        self.first_bytes = True  # nothing received yet (port unification looks at the first bytes)
        self.transport: asyncio.Transport | None = None
        self.conn: Connection | None = None
        self.pipeline: ServerCore | None = None  # the pipeline it was opened on (an ensemble's term may end)
        self.idle: bytearray | None = None  # bytes of a connection made while no pipeline serves
        self.writing_paused = False  # the transport's buffer is over its high-water mark
        self.reading = True  # the transport is being read
        self.turn: asyncio.Handle | None = None  # a turn of the loop to take more requests, scheduled
        self.handshake_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # (uvloop's is not an asyncio.Transport subclass)
        peer = transport.get_extra_info("peername") or ("?", 0)
        ip, remote_port = peer[0], peer[1]
        port = self.port
        limit = port.config.max_client_cnxns
        if limit > 0 and port.per_ip.get(ip, 0) >= limit:
            port.log_peer(log.warning, "too many", ip, f"Too many connections from {ip} - max is {limit}")
            if port.pipeline is not None:
                port.pipeline.metrics.counters["connection_rejected"] += 1
            self.transport.abort()
            return
        # the socket takes what fits; past this its buffer pauses us (pause_writing), and the pipeline
        # counts it in the connection's queued output (Connection.unsent)
        self.transport.set_write_buffer_limits(high=RESUME_QUEUED_OUTPUT, low=RESUME_QUEUED_OUTPUT // 2)
        self.handshake_timer = asyncio.get_running_loop().call_later(SESSIONLESS_CNXN_TIMEOUT_MS / 1000,
                                                                     self._handshake_timeout)
        pipeline = port.pipeline
        if pipeline is None:  # an ensemble member between terms: four-letter words only
            self.idle = bytearray()
            return
        port.per_ip[ip] = port.per_ip.get(ip, 0) + 1
        self.pipeline = pipeline
        pipeline.set_time(now_ms(), wall_ms())
        self.conn = pipeline.open(next(port.conn_ids), ip, remote_port)
        port.protocols[self.conn.conn_id] = self
        if log.isEnabledFor(logging.DEBUG):
            log.debug("connection %d from %s:%d accepted", self.conn.conn_id, ip, remote_port)

    def data_received(self, data: bytes) -> None:
        if self.first_bytes:
            self.first_bytes = False
            if self.secure or (self.port.unified and looks_like_tls(data)):
                assert self.port.tls_context is not None
                self.tls = TlsConnection(self.port.tls_context)
            elif looks_like_tls(data):
                self._refuse("a TLS client on the plain client port (use secureClientPort, or set "
                             "client.portUnification=true)")
                return
        if self.tls is not None:
            data = self._decrypt(data)
            if not data:
                return
        conn, pipeline = self.conn, self.pipeline
        if conn is None or pipeline is None:
            if self.idle is not None and self.transport is not None:
                self._idle_data(data)
            return
        pipeline.set_time(now_ms(), wall_ms())
        if self.port.before_input is not None:
            self.port.before_input()
        debug = log.isEnabledFor(logging.DEBUG)
        session_before = conn.session_id if debug else 0
        word = pipeline.receive(conn, data)
        if debug:  # the request path and session decisions, cheaply: one line per read
            if conn.session_id != session_before:
                log.debug("connection %d from %s:%d: session 0x%x, timeout %d ms negotiated", conn.conn_id, conn.ip,
                          conn.port, conn.session_id, conn.timeout_ms)
            log.debug("connection %d (session 0x%x) from %s:%d: %d bytes in, %d requests outstanding, last op %s, "
                      "cxid %d", conn.conn_id, conn.session_id, conn.ip, conn.port, len(data), conn.outstanding,
                      conn.last_op, conn.last_cxid)
        if word is not None:
            assert self.transport is not None
            self._send(answer_four_letter_word(word, self.port.view, conn).encode("utf-8"))
            self.transport.close()
            return
        self.port.on_input()
        self._regulate()

    def _regulate(self) -> None:
        """Read the socket only while the pipeline takes this connection's requests and none waits
        in its decoder; give the connection another turn of the loop when the pipeline would take more."""
        conn, pipeline, transport = self.conn, self.pipeline, self.transport
        if conn is None or pipeline is None or transport is None or conn.closing:
            return
        if self.turn is None and pipeline.wants_turn(conn):
            self.turn = asyncio.get_running_loop().call_soon(self._take_turn)
        reading = not (conn.paused or self.writing_paused or conn.decoder.has_frame())
        if reading != self.reading:
            self.reading = reading
            if reading:
                transport.resume_reading()
            else:
                transport.pause_reading()

    def _take_turn(self) -> None:
        self.turn = None
        conn, pipeline = self.conn, self.pipeline
        if conn is None or pipeline is None:
            return
        pipeline.set_time(now_ms(), wall_ms())
        if self.port.before_input is not None:
            self.port.before_input()
        pipeline.resume(conn)
        self.port.on_input()
        self._regulate()

    def _handshake_timeout(self) -> None:
        """No ConnectRequest within the bound: close, as ZooKeeper's connection expirer does."""
        self.handshake_timer = None
        conn, transport = self.conn, self.transport
        if transport is None or transport.is_closing():
            return
        if conn is not None and conn.state is not ConnState.AWAIT_CONNECT:
            return
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.port.log_peer(log.info, "no handshake", peer[0],
                           f"closing connection from {peer[0]}:{peer[1]}: no session request within "
                           f"{SESSIONLESS_CNXN_TIMEOUT_MS} ms")
        if self.port.pipeline is not None:
            self.port.pipeline.metrics.counters["sessionless_connections_expired"] += 1
        transport.close()

    def _refuse(self, why: str) -> None:
        peer = self.transport.get_extra_info("peername") if self.transport is not None else None
        where = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.port.log_peer(log.warning, "refused", peer[0] if peer else "?", f"closing connection from {where}: {why}")
        if self.transport is not None:
            self.transport.abort()

    def _decrypt(self, data: bytes) -> bytes:
        """The plaintext in ``data``; sends the handshake's records; refuses a failed handshake."""
        tls, transport = self.tls, self.transport
        assert tls is not None and transport is not None
        was_done = tls.handshake_done
        try:
            plain = tls.receive(data)
        except ssl.SSLError as exc:
            out = tls.take_output()  # the alert, if any
            if out:
                transport.write(out)
            self._refuse(f"TLS failed: {exc.reason or exc}")
            return b""
        out = tls.take_output()
        if out:
            transport.write(out)
        if tls.handshake_done and not was_done and self.conn is not None and self.pipeline is not None:
            self.pipeline.tls_established(self.conn, tls.peer_certificate())
            if self.conn.closing:
                self.flush()
                return b""
        if tls.closed:
            transport.close()
        return plain

    def _send(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(self.tls.encrypt(data) if self.tls is not None else data)

    def _idle_data(self, data: bytes) -> None:
        """Not serving: answer a four-letter word, refuse anything else (ZooKeeper closes it)."""
        assert self.idle is not None and self.transport is not None
        self.idle += data
        if len(self.idle) < 4:
            return
        word = bytes(self.idle[:4]).decode("ascii", "replace")
        if word in FOUR_LETTER_WORDS:
            self._send(answer_four_letter_word(word, self.port.view).encode("utf-8"))
        else:
            peer = self.transport.get_extra_info("peername") or ("?", 0)
            self.port.log_peer(log.info, "not serving", peer[0],
                               f"refusing a client connection from {peer[0]}: this server is not serving (no quorum)")
        self.transport.close()
        self.idle = None

    def connection_lost(self, exc: Exception | None) -> None:
        for handle in (self.turn, self.handshake_timer):
            if handle is not None:
                handle.cancel()
        self.turn = self.handshake_timer = None
        conn = self.conn
        if conn is None:
            return
        port = self.port
        count = port.per_ip.get(conn.ip, 1) - 1
        if count:
            port.per_ip[conn.ip] = count
        else:
            port.per_ip.pop(conn.ip, None)
        port.protocols.pop(conn.conn_id, None)
        if exc is not None:  # dropped under us (reset, timeout), not closed by either side in order
            port.log_peer(log.info, "dropped", conn.ip, f"connection {conn.conn_id} (session 0x{conn.session_id:x}) "
                          f"from {conn.ip}:{conn.port} dropped: {exc}")
        elif log.isEnabledFor(logging.DEBUG):
            log.debug("connection %d (session 0x%x) from %s:%d closed", conn.conn_id, conn.session_id, conn.ip,
                      conn.port)
        if self.pipeline is not None:
            self.pipeline.disconnected(conn)
        port.on_input()
        self.conn = None

    def pause_writing(self) -> None:
        # the client is slow to read: stop reading its requests until its output drains
        self.writing_paused = True
        self._output_taken()

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._output_taken()

    def _output_taken(self) -> None:
        if self.conn is not None and self.transport is not None:
            self.conn.unsent = self.transport.get_write_buffer_size()
        self._regulate()

    def flush(self) -> None:
        conn, transport = self.conn, self.transport
        if conn is None or transport is None:
            return
        if transport.is_closing():
            conn.take_output()  # closed (below): what is left goes nowhere
            return
        if conn.out:
            chunks = conn.take_output()
            if self.tls is None:
                transport.writelines(chunks)  # no copy of them all into one (uvloop writes them with writev)
            else:
                self._send(b"".join(chunks))
            conn.unsent = transport.get_write_buffer_size()
            if conn.unsent > MAX_UNREAD_OUTPUT:
                self.port.log_peer(log.warning, "not reading", conn.ip,
                                   f"closing connection {conn.ip}:{conn.port}: it has not read {conn.unsent} bytes "
                                   f"of replies and events (the bound is {MAX_UNREAD_OUTPUT})")
                transport.abort()
                return
        if conn.closing:
            if conn.close_reason not in (None, "closeSession", "client went away"):
                self.port.log_peer(log.info, "closing", conn.ip,
                                   f"closing connection {conn.ip}:{conn.port}: {conn.close_reason}")
            transport.close()
        else:
            self._regulate()


class ServesClients:
    """What the four-letter words read of a server's client port (``admin.view.ServerView``),
    for a server that owns one as ``clients``."""

    clients: ClientPort

    @property
    def port(self) -> int:
        return self.clients.port

    @property
    def listen_backlog(self) -> int:
        return self.clients.listen_backlog

    @property
    def connection_count(self) -> int:
        return self.clients.connection_count


class ClientPort:
    """The listener and connections of a server's client port. ``pipeline`` is the request pipeline
    that serves new connections (None: not serving); ``on_input`` is called after client input,
    for the owner to flush (once per loop turn); ``view`` is what four-letter words read.
    ``reuse_port``: the listeners set SO_REUSEPORT, so the processes of one server
    (``serverWorkers``, ``runtime.workers``) listen on the same ports and the kernel spreads
    new connections over them; ``before_input`` is called before the pipeline takes a client's input
    (a worker reads the member's applied zxid there: ``ServerCore.read_barrier``).

    With ``reuse_port`` the ports are first reserved: bound, never listening, for as long as the
    port lives (``reserve``). A dedicated member (``ServerConfig.dedicated_member``) holds only the
    reservation while its workers serve, so the kernel hands it no connection, and the port stays
    its own (a clientPort of 0 keeps its number) when it listens again (``stop_listening``,
    ``listen``): an ensemble member serves four-letter words between terms and read-only
    clients."""

    def __init__(self, config: ServerConfig, view: ServerView, on_input: Callable[[], None],
                 reuse_port: bool = False) -> None:
        self.config = config
        self.reuse_port = reuse_port
        self.before_input: Callable[[], None] | None = None  # called before the pipeline takes client input
        self.view = view
        self.on_input = on_input
        self.pipeline: ServerCore | None = None
        self.protocols: dict[int, ClientProtocol] = {}
        self.per_ip: dict[str, int] = {}
        self.conn_ids = itertools.count(1)
        self.listen_backlog = LISTEN_BACKLOG
        self.limiter = LogLimiter()
        self.unified = config.port_unification and config.tls is not None
        needs_tls = config.secure_client_port is not None or self.unified
        # raises admin.tls.TlsConfigError (the CLI checks it before serving, and exits 2)
        self.tls_context: ssl.SSLContext | None = None
        if needs_tls and config.tls is not None:
            from zkpy.admin.tls import server_context  # jks and cryptography: only TLS ports need them

            self.tls_context = server_context(config.tls)
        self._server: asyncio.base_events.Server | None = None
        self._secure_server: asyncio.base_events.Server | None = None
        self._reserved: dict[bool, asyncio.base_events.Server] = {}  # secure? -> bound, not listening

    def log_peer(self, write: Callable[[str], None], kind: str, ip: str, message: str) -> None:
        """Log a line a peer can make us repeat, rate-limited per ``kind`` and ``ip``."""
        self.limiter.log(write, kind, ip, now_ms(), message)

    async def reserve(self) -> None:
        """Bind the ports without listening (``reuse_port`` only): the port numbers are known
        and the port is this server's; the kernel hands connections only to listeners."""
        assert self.reuse_port
        if self._reserved:
            return
        for address, port, secure in self._addresses():
            self._reserved[secure] = await self._bind(address, port, secure, start_serving=False)

    async def listen(self) -> None:
        """Listen on the ports (on the reserved port numbers, with ``reuse_port``); a no-op
        while listening."""
        if self._server is not None or self._secure_server is not None:
            return
        if self.reuse_port:
            await self.reserve()
        for address, port, secure in self._addresses():
            reserved = self._reserved.get(secure)
            if reserved is not None and reserved.sockets:
                port = int(reserved.sockets[0].getsockname()[1])
            server = await self._bind(address, port, secure, start_serving=True)
            if secure:
                self._secure_server = server
                log.info("serving TLS clients on %s:%d", address, self.secure_port)
            else:
                self._server = server

    def stop_listening(self) -> None:
        """Take no more connections and drop those taken (the reservation stays): a dedicated
        member's workers serve the port now."""
        for server in (self._server, self._secure_server):
            if server is not None:
                server.close()
        self._server = self._secure_server = None
        self.drop_all()

    def _addresses(self) -> list[tuple[str, int, bool]]:
        """(address, port, secure) of each port configured."""
        config = self.config
        found = []
        if config.client_port_enabled:
            found.append((config.client_port_address, config.client_port, False))
        if config.secure_client_port is not None and self.tls_context is not None:
            found.append((config.secure_client_port_address or config.client_port_address,
                          config.secure_client_port, True))
        return found

    async def _bind(self, address: str, port: int, secure: bool, start_serving: bool) -> asyncio.base_events.Server:
        loop = asyncio.get_running_loop()
        try:
            return await loop.create_server(lambda: ClientProtocol(self, secure=secure), address, port,
                                            reuse_address=True, reuse_port=self.reuse_port or None,
                                            backlog=self.listen_backlog, start_serving=start_serving)
        except OSError as exc:
            raise ListenError("the secure client port" if secure else "the client port", address, port, exc) from exc

    @property
    def secure_port(self) -> int | None:
        """The TLS port bound (``secureClientPort`` before ``listen``; None without one)."""
        server = self._secure_server or self._reserved.get(True)
        if server is None or not server.sockets:
            return self.config.secure_client_port
        return int(server.sockets[0].getsockname()[1])

    @property
    def port(self) -> int:
        """The port bound (``clientPort`` before ``listen``)."""
        server = self._server or self._reserved.get(False)
        if server is None or not server.sockets:
            return self.config.client_port
        return int(server.sockets[0].getsockname()[1])

    @property
    def connection_count(self) -> int:
        return len(self.protocols)

    def write(self, conn: Connection) -> None:
        """Write out what the serving pipeline has for ``conn`` (an `Output`), in one write."""
        proto = self.protocols.get(conn.conn_id)
        if proto is not None:
            proto.flush()

    def drop_all(self, abort: bool = False) -> None:
        """Close every client connection (``abort``: without another byte)."""
        for proto in list(self.protocols.values()):
            if proto.transport is not None:
                if abort:
                    proto.transport.abort()
                else:
                    proto.transport.close()

    async def close(self) -> None:
        servers = [s for s in (self._server, self._secure_server, *self._reserved.values()) if s is not None]
        for server in servers:
            server.close()
        self.drop_all()
        for server in servers:
            await server.wait_closed()
