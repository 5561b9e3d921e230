"""The election port: one server's connections to its peers, driving the pure FastLeaderElection core.

This is ZooKeeper 3.8's QuorumCnxManager (plus FastLeaderElection's messenger) on asyncio. The
``Election`` core decides; this shell only moves notifications and time in and out of it.

Invariants and the 3.8 behaviour they follow:

- Handshake: the initiating side writes the initial message first: protocol version V1
  (``-65536``; 3.8 sends V2 only with multiAddress.enabled, which zkpy's zoo.cfg does not accept),
  its sid, and its own election address as configured, ``host:port`` (NetUtils.formatInetAddr).
  The accepting side reads it within the quorum socket timeout (tickTime * syncLimit) and closes
  the connection, with a log line, on anything malformed (wire.quorum.decode_initial_message).
- One connection per pair, the one the higher sid dialled: an initiator keeps its connection only
  if its sid is larger than the peer's (otherwise it closes it right after the handshake); an
  acceptor keeps a connection from a larger sid, and answers one from a smaller sid by dropping
  its own link to that sid, closing the new socket and dialling back (to the address the
  handshake named). A connection claiming my own sid is closed. A newly kept connection replaces
  the previous link to the same sid. An observer without an id (``OBSERVER_ID``) is given a fresh
  negative sid. Sids that are not in the configuration are served like any other: only the
  core decides what their notifications count for.
- Frames are a 4-byte big-endian length and a payload of 1..PACKET_MAX_SIZE bytes; another length
  closes the connection. A payload that is not a notification is dropped and the link stays.
- Each peer has a send queue of SEND_CAPACITY (1) notification: a newer one replaces an unsent
  older one. The last notification written to a peer is written again first on its next link
  (lastMessageSent) unless something newer is queued. A peer is dialled when something is queued
  for it and there is no link, and again when a link breaks with something still queued; the
  connect gives up after ``cnx_timeout_ms`` (zoo.cfg ``cnxTimeout``, 5000 ms by default). Unlike
  3.8, ``start`` also dials the voters with smaller sids at once (links it would keep anyway).
  The state kept for a sid outside the configuration is dropped once it has no link.
- Notifications to myself never reach the network (the core loops them back itself; a Send
  addressed to me is looped back here too). Notifications that arrive before the first round are
  kept, the newest RECV_CAPACITY of them, and handed to the core when the round opens.
- While a round is open the core is ticked every ``quorum.election.TICK_MS``; between rounds it answers
  LOOKING peers with its current vote as notifications arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from zkpy.admin.tls import QuorumTls
from zkpy.config import LearnerType as ConfigLearnerType
from zkpy.config import QuorumConfig, QuorumServer, ServerConfig
from zkpy.errors import ProtocolError
from zkpy.quorum.election import TICK_MS as ELECTION_TICK_MS
from zkpy.quorum.election import Decision, Election, ElectionError, LearnerType
from zkpy.quorum.verifier import address_string, config_string, quorum_verifier
from zkpy.ratelimit import LogLimiter
from zkpy.runtime.clock import now_ms
from zkpy.runtime.listen_error import ListenError
from zkpy.runtime.quorum_auth import QuorumAuthError, authenticate_to, check_peer
from zkpy.wire.quorum import (
    PROTOCOL_VERSION_V1,
    InitialMessage,
    Notification,
    NotificationError,
    decode_initial_message,
    decode_notification,
    encode_initial_message,
    encode_notification,
    frame,
    read_frame,
    split_host_port,
)

log = logging.getLogger("zkpy.election")

SEND_CAPACITY = 1  # QuorumCnxManager.SEND_CAPACITY: notifications queued per peer
RECV_CAPACITY = 100  # QuorumCnxManager.RECV_CAPACITY: notifications held before the first round
DEFAULT_CNX_TIMEOUT_MS = 5000  # QuorumCnxManager.cnxTO (zookeeper.cnxTimeout)
UNACKED_LIMIT_MS = 2000  # an election link whose sent bytes stay unacknowledged this long is reset (_tune_link)
_HANDSHAKE_HEAD = 20  # protocolVersion, sid, address length


class _Link:
    """One kept election connection to a peer: a sender and a receiver task over one socket."""

    def __init__(self, sid: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.sid = sid
        self.reader = reader
        self.writer = writer
        self.tasks: list[asyncio.Task[None]] = []
        self.closed = False

    @property
    def endpoints(self) -> tuple[Any, Any]:
        return self.writer.get_extra_info("sockname"), self.writer.get_extra_info("peername")


class _Peer:
    """What I keep per remote sid: its one-slot send queue, last message and current link."""

    def __init__(self, sid: int) -> None:
        self.sid = sid
        self.queue: deque[bytes] = deque(maxlen=SEND_CAPACITY)  # a full queue drops its oldest
        self.queued = asyncio.Event()
        self.last_sent: bytes | None = None
        self.link: _Link | None = None
        self.connecting: asyncio.Task[None] | None = None


class ElectionService:
    """One server's election port: connections to every other voter, and the FLE driver."""

    def __init__(self, config: ServerConfig, *, last_zxid: int, current_epoch: int, logical_clock: int = 0,
                 cnx_timeout_ms: int = DEFAULT_CNX_TIMEOUT_MS, tls: QuorumTls | None = None) -> None:
        quorum = config.quorum
        if quorum is None or quorum.my_id is None or quorum.me is None:
            raise ValueError("an election needs server.N lines and this server's own id (myid) among them")
        self._quorum = quorum
        self.sid: int = quorum.my_id
        self._me: QuorumServer = quorum.me
        learner_type = LearnerType.OBSERVER if self._me.role is ConfigLearnerType.OBSERVER else LearnerType.PARTICIPANT
        self.config_data = config_string(quorum).encode("utf-8")
        self._election = Election(self.sid, quorum_verifier(quorum), last_zxid=last_zxid, current_epoch=current_epoch,
                                  logical_clock=logical_clock, learner_type=learner_type,
                                  config_data=self.config_data, adopt_newer_configs=config.reconfig_enabled)
        # reconfigEnabled: what to do with a newer config a notification carries (the peer adopts it)
        self.on_newer_config: Callable[[bytes], None] | None = None
        self._cnx_timeout_s = cnx_timeout_ms / 1000
        self._unacked_ms = max(UNACKED_LIMIT_MS, cnx_timeout_ms)  # see _tune_link
        self._log_limiter = LogLimiter()  # lines a peer can make us repeat: a few per minute per kind and peer
        self._tls = tls  # sslQuorum: every election link is TLS
        self._sasl = config.quorum_sasl  # quorum.auth.enableSasl: links authenticate first
        sync_ms = config.tick_ms * quorum.sync_limit_ticks
        self._handshake_timeout_s = (sync_ms if sync_ms > 0 else cnx_timeout_ms) / 1000
        self._initial_message = encode_initial_message(
            InitialMessage(self.sid, (address_string(self._me.host, self._me.election_port),), PROTOCOL_VERSION_V1))
        self._peers: dict[int, _Peer] = {}
        self._observer_ids = itertools.count(-1, -1)  # QuorumCnxManager.observerCounter
        self._early: deque[tuple[int, Notification]] = deque(maxlen=RECV_CAPACITY)
        self._started = False  # whether the core has opened its first round
        self._round_open = asyncio.Event()
        self._decision: asyncio.Future[Decision] | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._sockets: set[asyncio.StreamWriter] = set()
        self._closed = False

    # ------------------------------------------------------------------ public

    @property
    def election(self) -> Election:
        """The core, for inspection (current vote, logical clock); drive it only through this service."""
        return self._election

    async def start(self) -> None:
        """Listen on my election address (``QuorumConfig.listen_host``) and dial the voters
        with smaller sids: those links I keep. Larger sids dial me (3.8 itself dials only on demand)."""
        host = self._quorum.listen_host()
        try:
            self._server = await asyncio.start_server(
                self._accept, host, self._me.election_port, reuse_address=True,
                ssl=self._tls.server if self._tls else None,
                ssl_handshake_timeout=self._cnx_timeout_s if self._tls else None)
        except OSError as exc:
            raise ListenError(f"the election port of server.{self.sid}", host, self._me.election_port, exc) from exc
        log.info("%d is accepting election connections on %s:%d", self.sid, host, self._me.election_port)
        self._spawn(self._tick_loop())
        for sid in sorted(self._election.voters):
            if sid < self.sid:
                self._connect_one(sid)

    async def elect(self, last_zxid: int, current_epoch: int) -> Decision:
        """Open a round with my latest zxid and epoch, and wait for its decision.

        If an earlier ``elect`` was cancelled before its round decided, this waits for that round
        instead (its zxid and epoch stand). Only one caller may wait at a time."""
        if self._server is None or self._closed:
            raise ElectionError("elect on an election service that is not running")
        if self._decision is not None and not self._decision.done():
            raise ElectionError("a round is already open")
        self._decision = asyncio.get_running_loop().create_future()
        decision = self._decision
        if self._round_open.is_set():
            return await decision
        log.info("%d is LOOKING: zxid 0x%x, epoch %d, round %d", self.sid, last_zxid, current_epoch,
                 self._election.logical_clock + 1)
        self._election.start(now_ms(), last_zxid=last_zxid, current_epoch=current_epoch)
        self._started = True
        self._round_open.set()
        self._pump()
        early, self._early = self._early, deque()
        for sid, n in early:
            if decision.done():
                break
            self._receive(sid, n)
        return await decision

    def reconfigure(self, quorum: QuorumConfig) -> None:
        """A newer config is active: its voters, addresses and config string from now on (my own
        election address stays the one I listen on)."""
        self._quorum = quorum
        me = quorum.me
        learner_type = LearnerType.OBSERVER if me is not None and me.role is ConfigLearnerType.OBSERVER \
            else LearnerType.PARTICIPANT
        self.config_data = config_string(quorum).encode("utf-8")
        self._election.reconfigure(quorum_verifier(quorum, quorum.config_version), self.config_data, learner_type)

    def designate(self, leader: int, zxid: int) -> Decision:
        """Take the role a committed reconfig designated, without an election round."""
        decision = self._election.designate(leader, zxid)
        log.info("%d takes the designated leader %d: %s", self.sid, leader, decision.state.name)
        return decision

    def update_peer_epoch(self, epoch: int) -> None:
        """The epoch Zab settled on: what LOOKING peers are told from now on."""
        self._election.update_peer_epoch(epoch)

    def links(self) -> dict[int, tuple[Any, Any]]:
        """(my address, peer address) of the kept connection to each connected sid."""
        return {sid: p.link.endpoints for sid, p in self._peers.items() if p.link is not None}

    @property
    def open_sockets(self) -> int:
        """Every election socket open now: kept links, handshakes in progress, connects."""
        return len(self._sockets)

    async def close(self) -> None:
        """Stop listening and close every connection; a round still waiting fails with ElectionError."""
        if self._closed:
            return
        self._closed = True
        self._round_open.clear()
        if self._server is not None:
            self._server.close()
        for peer in list(self._peers.values()):
            if peer.link is not None:
                self._drop(peer.link, "election service closed")
        for writer in list(self._sockets):
            writer.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
        if self._decision is not None and not self._decision.done():
            self._decision.set_exception(ElectionError("the election service closed during the round"))
        log.info("%d closed its election port", self.sid)

    # ------------------------------------------------------------------ the core

    def _receive(self, sid: int, n: Notification) -> None:
        if not self._started:
            self._early.append((sid, n))
            return
        self._election.step(sid, n, now_ms())
        self._pump()

    def _pump(self) -> None:
        """Hand out what the core produced: sends to the peers' queues, then the decision."""
        ready = self._election.ready()
        for send in ready.sends:
            payload = encode_notification(send.notification)
            targets = [send.to] if send.to is not None else sorted(self._election.voters - {self.sid})
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%d sends %s to %s", self.sid, send.notification, targets)
            for sid in targets:
                self._to_send(sid, payload)
        decision = ready.decision
        if decision is not None:
            self._round_open.clear()
            v = decision.vote
            log.info("%d decided %s: leader %d (zxid 0x%x, peer epoch %d, round %d)", self.sid,
                     decision.state.name, decision.leader, v.zxid, v.peer_epoch, v.election_epoch)
            if self._decision is not None and not self._decision.done():
                self._decision.set_result(decision)
        if ready.newer_config is not None and self.on_newer_config is not None:
            log.info("%d heard of a newer config: %r", self.sid, ready.newer_config)
            self.on_newer_config(ready.newer_config)  # reconfigure() starts the round over: its sends
            self._pump()

    async def _tick_loop(self) -> None:
        while True:
            await self._round_open.wait()
            await asyncio.sleep(ELECTION_TICK_MS / 1000)
            if self._round_open.is_set():
                self._election.tick(now_ms())
                self._pump()

    # ------------------------------------------------------------------ sending and connecting

    def _peer(self, sid: int) -> _Peer:
        peer = self._peers.get(sid)
        if peer is None:
            peer = self._peers[sid] = _Peer(sid)
        return peer

    def _to_send(self, sid: int, payload: bytes) -> None:
        if sid == self.sid:  # loopback, as toSend does for myself
            asyncio.get_running_loop().call_soon(self._receive, sid, decode_notification(payload))
            return
        peer = self._peer(sid)
        peer.queue.append(payload)
        peer.queued.set()
        self._connect_one(sid)

    def _connect_one(self, sid: int, address: tuple[str, int] | None = None) -> None:
        """Dial ``sid`` unless a link or a dial is already there (connectOne)."""
        if self._closed:
            return
        peer = self._peer(sid)
        if peer.link is not None or peer.connecting is not None:
            return
        if address is None:
            server = self._quorum.server(sid)
            if server is None:
                log.warning("%d has no election address for server id %d", self.sid, sid)
                self._forget_if_stranger(peer)
                return
            address = (server.host, server.election_port)
        peer.connecting = self._spawn(self._initiate(peer, address))

    async def _initiate(self, peer: _Peer, address: tuple[str, int]) -> None:
        """initiateConnection + startConnection: connect, introduce myself, keep the link if I am larger."""
        try:
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(*address, ssl=self._tls.client if self._tls else None,
                                            server_hostname=address[0] if self._tls else None),
                    self._cnx_timeout_s)
            except (OSError, TimeoutError) as exc:
                self._log_peer(log.warning, "cannot open", peer.sid,
                               f"{self.sid} cannot open an election connection to {peer.sid} at {address[0]}:"
                               f"{address[1]}: {exc or type(exc).__name__}")
                return
            self._sockets.add(writer)
            _tune_link(writer, self._unacked_ms)
            try:
                writer.write(self._initial_message)
                await asyncio.wait_for(writer.drain(), self._cnx_timeout_s)
                await authenticate_to(reader, writer, self._sasl, self._handshake_timeout_s)
            except (OSError, TimeoutError, QuorumAuthError) as exc:
                self._log_peer(log.warning, "cannot introduce", peer.sid,
                               f"{self.sid} cannot introduce itself to {peer.sid}: {exc or type(exc).__name__}")
                self._close_socket(writer)
                return
            if peer.sid > self.sid:
                self._log_peer(log.info, "smaller id", peer.sid,
                               f"{self.sid} has the smaller server id, so drops its connection to {peer.sid}")
                self._close_socket(writer)
                return
            self._keep(peer.sid, reader, writer)
        finally:
            peer.connecting = None
            self._forget_if_stranger(peer)

    def _log_peer(self, write: Callable[[str], None], kind: str, peer: object, message: str) -> None:
        """Log a line that a peer (a server id, or a remote address) can make us repeat, rate-limited
        per kind and peer (``zkpy.ratelimit``)."""
        self._log_limiter.log(write, kind, peer, now_ms(), message)

    # ------------------------------------------------------------------ accepting

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """receiveConnection + handleConnection."""
        self._sockets.add(writer)
        _tune_link(writer, self._unacked_ms)
        remote = writer.get_extra_info("peername")
        try:
            msg = await asyncio.wait_for(_read_initial_message(reader), self._handshake_timeout_s)
        except ProtocolError as exc:
            self._log_peer(log.warning, "bad initial message", _host(remote),
                           f"{self.sid} closes election connection from {remote}: bad initial message: {exc}")
            self._close_socket(writer)
            return
        except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
            if not self._closed:
                self._log_peer(log.warning, "no initial message", _host(remote),
                               f"{self.sid} closes election connection from {remote}: no initial message: "
                               f"{exc or type(exc).__name__}")
            self._close_socket(writer)
            return
        if self._sasl is not None:
            try:
                reader, user = await check_peer(reader, writer, self._sasl, self._handshake_timeout_s)
            except (OSError, QuorumAuthError) as exc:
                self._log_peer(log.warning, "quorum auth", _host(remote),
                               f"{self.sid} refuses election connection from {remote} (server {msg.sid}): {exc}")
                self._close_socket(writer)
                return
            if user is None:
                self._log_peer(log.warning, "unauthenticated", _host(remote),
                               f"{self.sid} keeps election connection from {remote} (server {msg.sid}) without "
                               "quorum SASL (quorum.auth.serverRequireSasl=false)")
        sid = msg.sid
        if msg.is_observer:
            sid = next(self._observer_ids)
            self._log_peer(log.info, "observer id", _host(remote), f"{self.sid} gives the observer at {remote} the id {sid}")
        if self._closed:
            self._close_socket(writer)
        elif sid < self.sid:
            peer = self._peer(sid)
            if peer.link is not None:
                self._drop(peer.link, f"server {sid} connected again", reconnect=False)
            self._close_socket(writer)
            self._connect_one(sid, _dial_back_address(msg))
        elif sid == self.sid:
            self._log_peer(log.warning, "own id", _host(remote),
                           f"{self.sid} got an election connection from {remote} claiming my own id; closing it")
            self._close_socket(writer)
        else:
            self._keep(sid, reader, writer)

    # ------------------------------------------------------------------ links

    def _keep(self, sid: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        old = self._peers.get(sid)
        if old is not None and old.link is not None:
            self._drop(old.link, "replaced by a new connection", reconnect=False)
        peer = self._peer(sid)  # after the drop, which may have forgotten a stranger
        link = _Link(sid, reader, writer)
        peer.link = link
        local, remote = link.endpoints
        self._log_peer(log.info, "connected", peer.sid,
                       f"{self.sid} has an election connection with {peer.sid} ({local} -> {remote})")
        link.tasks = [self._spawn(self._send_loop(peer, link)), self._spawn(self._recv_loop(peer, link))]

    async def _send_loop(self, peer: _Peer, link: _Link) -> None:
        """SendWorker: the last message again if nothing newer waits, then whatever is queued. A
        transport that closed under it (the peer reset the connection before the receiver saw it)
        drops the link: uvloop raises RuntimeError for a write there, asyncio only warns."""
        try:
            if not peer.queue and peer.last_sent is not None:
                await self._write(link, peer.last_sent)
            while not link.closed:
                while not peer.queue:
                    peer.queued.clear()
                    await peer.queued.wait()
                payload = peer.queue.popleft()
                peer.last_sent = payload
                await self._write(link, payload)
        except OSError as exc:
            self._drop(link, f"send failed: {exc}")

    async def _write(self, link: _Link, payload: bytes) -> None:
        if link.writer.is_closing():
            self._drop(link, "send failed: the connection closed")
            return
        link.writer.write(frame(payload))
        await link.writer.drain()

    async def _recv_loop(self, peer: _Peer, link: _Link) -> None:
        """RecvWorker: frames in, notifications to the core."""
        reason = "closed by the peer"
        try:
            while True:
                head = await link.reader.readexactly(4)
                read_frame(head)  # ProtocolError for a length outside 1..PACKET_MAX_SIZE
                payload = await link.reader.readexactly(int.from_bytes(head, "big", signed=True))
                try:
                    n = decode_notification(payload)
                except NotificationError as exc:
                    self._log_peer(log.warning, "malformed notification", peer.sid,
                                   f"{self.sid} drops a malformed notification from {peer.sid}: {exc}")
                    continue
                if log.isEnabledFor(logging.DEBUG):
                    log.debug("%d got a notification from %d: %s", self.sid, peer.sid, n)
                self._receive(peer.sid, n)
        except ProtocolError as exc:
            reason = str(exc)
        except asyncio.IncompleteReadError:
            pass
        except OSError as exc:
            reason = str(exc) or type(exc).__name__
        finally:
            self._drop(link, reason)

    def _drop(self, link: _Link, reason: str, *, reconnect: bool = True) -> None:
        """Close a link (SendWorker.finish); dial again if something is still queued for the peer."""
        if link.closed:
            return
        link.closed = True
        current = asyncio.current_task()
        for task in link.tasks:
            if task is not current:
                task.cancel()
        self._close_socket(link.writer)
        peer = self._peers.get(link.sid)
        if peer is None or peer.link is not link:
            return
        peer.link = None
        self._log_peer(log.info, "lost", link.sid, f"{self.sid} lost its election connection with {link.sid}: {reason}")
        if reconnect and peer.queue and not self._closed:
            self._connect_one(link.sid)
        self._forget_if_stranger(peer)

    def _forget_if_stranger(self, peer: _Peer) -> None:
        """Drop the state of an unconfigured sid once it has no link: strangers cannot grow my maps."""
        if peer.link is None and peer.connecting is None and self._quorum.server(peer.sid) is None:
            if self._peers.get(peer.sid) is peer:
                del self._peers[peer.sid]

    # ------------------------------------------------------------------ plumbing

    def _close_socket(self, writer: asyncio.StreamWriter) -> None:
        self._sockets.discard(writer)
        writer.close()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._reap)
        return task

    def _reap(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%d: election task failed", self.sid, exc_info=task.exception())


async def _read_initial_message(reader: asyncio.StreamReader) -> InitialMessage:
    """The peer's handshake, read no further than it goes (frames follow it on the same stream)."""
    buf = await reader.readexactly(8)
    while (got := decode_initial_message(buf)) is None:
        if len(buf) < _HANDSHAKE_HEAD:
            buf += await reader.readexactly(_HANDSHAKE_HEAD - len(buf))
        else:
            length = int.from_bytes(buf[16:20], "big", signed=True)
            buf += await reader.readexactly(_HANDSHAKE_HEAD + length - len(buf))
    return got[0]


def _dial_back_address(msg: InitialMessage) -> tuple[str, int] | None:
    """The first non-wildcard address a handshake named; None sends me to the configuration."""
    for address in msg.addresses:
        host, port = split_host_port(address)
        if host not in ("0.0.0.0", "::", "0:0:0:0:0:0:0:0"):
            return host, port
    return None


def _host(remote: object) -> object:
    """The host of a peername (the key its log lines are limited by)."""
    return remote[0] if isinstance(remote, tuple) and remote else remote


def _tune_link(writer: asyncio.StreamWriter, unacked_ms: int) -> None:
    """No Nagle delay on a notification; and (Linux) a connection whose sent bytes stay unacknowledged
    for ``unacked_ms`` is reset (TCP_USER_TIMEOUT). Across a partition a link would otherwise sit
    in TCP's retransmission back-off, and a notification sent while the network was down reach its
    peer only at the next retransmission, seconds after the heal (3.2-3.8 s after a 6 s isolation,
    on zkpy and ZooKeeper alike); reset, the link is dialled again by the next resend, within 2 s."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if hasattr(socket, "TCP_USER_TIMEOUT"):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, unacked_ms)
