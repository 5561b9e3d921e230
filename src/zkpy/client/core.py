"""The client's session logic as a pure state machine (sans-I/O, like h11).

No sockets, clocks, threads or ambient randomness: the shell (``aio.py``) feeds bytes and
``now_ms`` in and writes the bytes that come out. One ``ClientCore`` lives for one session
(across reconnects) and owns:

* the state (``ClientState``) and its transitions (one table, ``_TRANSITIONS``);
* the session (id, password, negotiated timeout) and ``last_zxid`` (sent on reconnect);
* xid allocation (positive int32, wraps to 1) and the pending FIFO: replies come back in
  request order, so a reply must match the head of the FIFO or the connection is broken;
* chroot: prepended to every path going out, stripped from every path coming in
  (created paths, multi results, sync, ephemerals, watch events);
* the watch registry (one-time data/exist/child watches, persistent and persistent-recursive
  watches) and which callbacks an incoming ``WatcherEvent`` fires (ZKWatchManager.materialize);
* the host list (shuffled once with an injected RNG) and the choice of the next host;
* the handshake (ConnectRequest + readOnly byte), auth replay and watch restoration
  (setWatches/setWatches2 split so each packet's watch paths stay near 128 KiB, as
  ClientCnxn.primeConnection does: a packet is closed once the summed path lengths reach
  128 * 1024 characters, so it may exceed that by its last path);
* timing from ``now_ms``: a ping after a third of the negotiated timeout without sending
  (ClientCnxn: readTimeout = 2/3 timeout, ping at readTimeout/2), and the connection is dead
  when nothing was heard for two thirds of it (or for the connect timeout while handshaking);
* while connected read-only, the search for a read-write server (ClientCnxn.pingRwServer):
  ``rw_probe`` names the next other host to ask ``isro``, first after 100 ms, then at
  intervals doubling up to a minute; ``rw_server_found`` makes the host that answered ``rw``
  the next one connected to (the shell drops the read-only connection). A client that has only
  had read-only sessions starts a new session there (its read-only session is local to the
  server that gave it), as Java's does (``seenRwServerBefore``).

``receive(data, now_ms)`` returns typed events in the order the server's bytes imply; the
shell must act on them in that order (that is what keeps watch callbacks and completions in
the server's order).

A session may be resumed (``session=(id, password)``, kazoo's ``client_id``): the first
ConnectRequest then carries it, and a server that no longer knows it answers EXPIRED. The host
list may be replaced (``set_hosts``) with the chroot unchanged; the new list is used from the
next connection attempt on, and the current connection is kept.
"""

from __future__ import annotations

import dataclasses
import struct
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final, Protocol

from zkpy.errors import (
    AuthFailedError,
    Code,
    ConnectionClosedError,
    ConnectionLoss,
    InvariantError,
    ProtocolError,
    SessionExpiredError,
    ZookeeperError,
    error_for,
)
from zkpy.wire.consts import (
    DEFAULT_MAX_BUFFER,
    PROTOCOL_VERSION,
    EventType,
    KeeperState,
    OpCode,
    WatcherType,
    Xid,
)
from zkpy.wire.framing import FrameDecoder
from zkpy.wire.jute import INT, Record
from zkpy.wire.multi import Op, OpResult, read_multi_response, write_multi_request
from zkpy.wire.proto import (
    AuthPacket,
    ConnectRequest,
    ConnectResponse,
    Create2Response,
    CreateResponse,
    ExistsResponse,
    GetACLResponse,
    GetAllChildrenNumberResponse,
    GetChildren2Response,
    GetChildrenResponse,
    GetDataResponse,
    GetEphemeralsRequest,
    GetEphemeralsResponse,
    ReplyHeader,
    RequestHeader,
    SetACLResponse,
    SetDataResponse,
    SetWatches,
    SetWatches2,
    SyncResponse,
    WatcherEvent,
    WhoAmIResponse,
)

RW_PROBE_MIN_MS = 100  # ClientCnxn.minPingRwTimeout
RW_PROBE_MAX_MS = 60_000  # ClientCnxn.maxPingRwTimeout
SET_WATCHES_MAX_LENGTH = 128 * 1024  # ClientCnxn.SET_WATCHES_MAX_LENGTH (summed path characters)
MAX_XID = 0x7FFFFFFF
_REPLY_HEADER_LEN = 16  # xid int, zxid long, err int
DEFAULT_PORT = 2181

Watcher = Callable[["WatchedEvent"], Any]


class ClientState(Enum):
    CONNECTING = "CONNECTING"
    CONNECTED = "CONNECTED"
    CONNECTED_READ_ONLY = "CONNECTED_READ_ONLY"
    SUSPENDED = "SUSPENDED"
    EXPIRED = "EXPIRED"
    AUTH_FAILED = "AUTH_FAILED"
    CLOSED = "CLOSED"

    @property
    def is_connected(self) -> bool:
        return self in (ClientState.CONNECTED, ClientState.CONNECTED_READ_ONLY)

    @property
    def is_terminal(self) -> bool:
        return self in (ClientState.EXPIRED, ClientState.AUTH_FAILED, ClientState.CLOSED)


class KazooState:
    """kazoo's three connection states as sets of `ClientState`: where kazoo code compares
    ``state == KazooState.LOST``, zkpy code tests ``state in KazooState.LOST``."""

    CONNECTED: Final = frozenset({ClientState.CONNECTED, ClientState.CONNECTED_READ_ONLY})
    SUSPENDED: Final = frozenset({ClientState.SUSPENDED})
    LOST: Final = frozenset({ClientState.EXPIRED, ClientState.AUTH_FAILED, ClientState.CLOSED})


_S = ClientState
_TRANSITIONS: dict[ClientState, frozenset[ClientState]] = {
    _S.CONNECTING: frozenset({_S.CONNECTED, _S.CONNECTED_READ_ONLY, _S.EXPIRED, _S.AUTH_FAILED, _S.CLOSED}),
    _S.CONNECTED: frozenset({_S.SUSPENDED, _S.EXPIRED, _S.AUTH_FAILED, _S.CLOSED}),
    _S.CONNECTED_READ_ONLY: frozenset({_S.SUSPENDED, _S.EXPIRED, _S.AUTH_FAILED, _S.CLOSED}),
    _S.SUSPENDED: frozenset({_S.CONNECTED, _S.CONNECTED_READ_ONLY, _S.EXPIRED, _S.AUTH_FAILED, _S.CLOSED}),
    _S.EXPIRED: frozenset({_S.CLOSED}),
    _S.AUTH_FAILED: frozenset({_S.CLOSED}),
    _S.CLOSED: frozenset(),
}


class Shuffler(Protocol):
    def shuffle(self, x: list[Any]) -> None: ...


@dataclass(frozen=True, slots=True)
class WatchedEvent:
    """What a watch callback receives; ``path`` is relative to the chroot (None for state events)."""

    type: EventType
    state: KeeperState
    path: str | None


# --- events returned by ClientCore ---


@dataclass(frozen=True, slots=True)
class StateChanged:
    old: ClientState
    new: ClientState


@dataclass(frozen=True, slots=True)
class Connected:
    """The handshake succeeded; ``setup`` (auth replay, setWatches) must be written first."""

    session_id: int
    timeout_ms: int
    read_only: bool
    setup: bytes


@dataclass(frozen=True, slots=True)
class Reply:
    """The reply to ``handle``'s request: ``error`` is None on success, ``response`` the decoded body.

    ``response`` is a jute record (paths already stripped of the chroot), ``None`` when the
    reply has no body, or ``list[OpResult]`` for multi and multiRead."""

    handle: Any
    op: int
    xid: int
    zxid: int
    err: int
    response: Any
    error: ZookeeperError | None


@dataclass(frozen=True, slots=True)
class RequestFailed:
    """A request that will get no reply (connection lost, session expired, client closed)."""

    handle: Any
    op: int
    error: ZookeeperError


@dataclass(frozen=True, slots=True)
class WatchFired:
    """Call every callback in ``callbacks`` with ``event``, in order, before the next event."""

    event: WatchedEvent
    callbacks: tuple[Watcher, ...]


ClientEvent = StateChanged | Connected | Reply | RequestFailed | WatchFired


@dataclass(frozen=True, slots=True)
class WatchRegistration:
    """Registers ``callback`` when the reply arrives: kind ``data``, ``exists`` (data watch if
    the node exists, else exist watch), ``child``, ``persistent`` or ``recursive``."""

    kind: str
    path: str  # client path
    callback: Watcher


@dataclass(frozen=True, slots=True)
class WatchRemoval:
    """Removes watches when the removeWatches/checkWatches reply succeeds."""

    path: str
    kind: WatcherType
    callback: Watcher | None


@dataclass(slots=True)
class _Pending:
    xid: int
    op: int
    handle: Any
    watch: WatchRegistration | WatchRemoval | None


def parse_hosts(hosts: str) -> tuple[list[tuple[str, int]], str | None]:
    """A connect string, ``host:port[,host:port...][/chroot]`` → (hosts, chroot or None).

    The one parser of connect strings (the client's, the cli's, the bench's): entries are split at
    commas and stripped, blank ones skipped; a port is 1..65535, and 2181 where none is given
    (``host``, ``host:``); an IPv6 address is written in brackets (``[::1]:2181``), or bare with
    the default port (``::1``). The chroot is checked as a path (``validate_path``); ``/`` alone
    is no chroot. Raises ValueError naming what is wrong: an entry that ``has '[' and no ']'``,
    ``is not host:port`` (an empty host, text after the ``]``) or ``has no valid port``, or
    ``no host:port given``."""
    hosts = hosts.strip()
    chroot: str | None = None
    slash = hosts.find("/")
    if slash >= 0:
        chroot = hosts[slash:]
        hosts = hosts[:slash]
        if chroot == "/":
            chroot = None
        else:
            validate_path(chroot)
    out = [parse_host(part) for part in (p.strip() for p in hosts.split(",")) if part]
    if not out:
        raise ValueError("no host:port given")
    return out, chroot


def parse_host(part: str) -> tuple[str, int]:
    """One entry of a connect string (see `parse_hosts`) → (host, port)."""
    if part.startswith("["):
        end = part.find("]")
        if end < 0:
            raise ValueError(f"{part!r} has '[' and no ']'")
        host, rest = part[1:end], part[end + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError(f"{part!r} is not host:port")
        port_text = rest[1:]
    elif part.count(":") > 1:
        host, port_text = part, ""  # a bare IPv6 address
    else:
        host, _, port_text = part.partition(":")
    if not host:
        raise ValueError(f"{part!r} is not host:port")
    if not port_text:
        return host, DEFAULT_PORT
    try:
        port = int(port_text)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise ValueError(f"{part!r} has no valid port")
    return host, port


def validate_path(path: str) -> None:
    """PathUtils.validatePath's main rules: absolute, no empty or relative segments, no trailing /."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"path must start with /: {path!r}")
    if path == "/":
        return
    if path.endswith("/"):
        raise ValueError(f"path must not end with /: {path!r}")
    for seg in path[1:].split("/"):
        if seg in ("", ".", ".."):
            raise ValueError(f"invalid path {path!r}")
    if "\x00" in path:
        raise ValueError(f"invalid path {path!r}")


# reply body decoders per opcode (None: no body)
_RESPONSES: dict[int, type[Record] | None] = {
    OpCode.CREATE: CreateResponse,
    OpCode.CREATE2: Create2Response,
    OpCode.CREATE_CONTAINER: Create2Response,
    OpCode.CREATE_TTL: Create2Response,
    OpCode.DELETE: None,
    OpCode.EXISTS: ExistsResponse,
    OpCode.GET_DATA: GetDataResponse,
    OpCode.SET_DATA: SetDataResponse,
    OpCode.GET_ACL: GetACLResponse,
    OpCode.SET_ACL: SetACLResponse,
    OpCode.GET_CHILDREN: GetChildrenResponse,
    OpCode.GET_CHILDREN2: GetChildren2Response,
    OpCode.SYNC: SyncResponse,
    OpCode.CHECK_WATCHES: None,
    OpCode.REMOVE_WATCHES: None,
    OpCode.GET_EPHEMERALS: GetEphemeralsResponse,
    OpCode.GET_ALL_CHILDREN_NUMBER: GetAllChildrenNumberResponse,
    OpCode.ADD_WATCH: None,
    OpCode.WHO_AM_I: WhoAmIResponse,
    OpCode.CLOSE_SESSION: None,
    OpCode.SET_WATCHES: None,
    OpCode.SET_WATCHES2: None,
    OpCode.CHECK: None,
    OpCode.RECONFIG: GetDataResponse,  # the new config and the Stat of /zookeeper/config
}

_WATCH_KINDS = ("data", "exist", "child", "persistent", "recursive")


class ClientCore:
    """One client session's state, from the first connect to expiry or close (see module doc)."""

    def __init__(
        self,
        hosts: str,
        *,
        session_timeout_ms: int = 10000,
        connect_timeout_ms: int | None = None,
        read_only: bool = False,
        rng: Shuffler | None = None,
        auth: Sequence[tuple[str, bytes]] = (),
        max_buffer: int = DEFAULT_MAX_BUFFER,
        session: tuple[int, bytes] | None = None,
    ) -> None:
        self.hosts, self.chroot = parse_hosts(hosts)
        if rng is not None:
            rng.shuffle(self.hosts)
        self.session_timeout_ms = session_timeout_ms
        self._connect_timeout_ms = connect_timeout_ms
        self.read_only = read_only
        self.max_buffer = max_buffer
        self.state = ClientState.CONNECTING
        self.session_id = 0
        self.session_passwd = bytes(16)
        self.negotiated_timeout_ms = 0
        self.last_zxid = 0
        self.auth: list[tuple[str, bytes]] = list(auth)
        self._seen_rw = False
        self._xid = 0
        self._pending: deque[_Pending] = deque()
        self._auth_pending: deque[Any] = deque()  # handles of add_auth calls (None for replays)
        self._decoder: FrameDecoder | None = None
        self._handshaking = False
        self._closing = False
        self._host_index = -1
        self._rw_host: tuple[str, int] | None = None  # a read-write server found while read-only: next to try
        self._rw_probe_index = -1
        self._rw_probe_interval_ms = RW_PROBE_MIN_MS
        self._rw_probe_at_ms = 0
        self._tried_since_connect = 0
        self._rounds = 0
        self._last_send_ms = 0
        self._last_recv_ms = 0
        self._watches: dict[str, dict[str, list[Watcher]]] = {k: {} for k in _WATCH_KINDS}
        if session is not None and session[0]:
            if len(session[1]) != 16:
                raise ValueError("a session password is 16 bytes")
            self.session_id, self.session_passwd = session[0], bytes(session[1])
            self._seen_rw = True  # a resumed session is sent in the first ConnectRequest

    # ------------------------------------------------------------------ state

    def _set_state(self, new: ClientState, out: list[ClientEvent]) -> None:
        old = self.state
        if old is new:
            return
        if new not in _TRANSITIONS[old]:
            raise InvariantError(f"client state {old.name} cannot go to {new.name}")
        self.state = new
        out.append(StateChanged(old, new))

    # ------------------------------------------------------------------ chroot

    def server_path(self, path: str) -> str:
        if self.chroot is None:
            return path
        return self.chroot if path == "/" else self.chroot + path

    def client_path(self, path: str) -> str:
        c = self.chroot
        if c is None or path is None:
            return path
        if path == c:
            return "/"
        if path.startswith(c + "/"):
            return path[len(c) :]
        return path

    def _chroot_record(self, record: Any) -> Any:
        if self.chroot is None or record is None:
            return record
        if isinstance(record, list):
            return [Op(op.type, self._chroot_record(op.request)) for op in record]
        if isinstance(record, GetEphemeralsRequest):
            p = record.prefixPath
            return GetEphemeralsRequest(self.chroot + p if p != "/" else self.chroot + "/")
        if hasattr(record, "path"):
            return dataclasses.replace(record, path=self.server_path(record.path))
        return record

    # ------------------------------------------------------------------ hosts and timing

    def set_hosts(self, hosts: str, rng: Shuffler | None) -> None:
        """Replace the host list (shuffled once with ``rng``; None keeps the order), from the
        next connection attempt on. ValueError if the connect string names another chroot."""
        new, chroot = parse_hosts(hosts)
        if chroot != self.chroot:
            raise ValueError(f"set_hosts cannot change the chroot ({self.chroot!r} to {chroot!r})")
        if rng is not None:
            rng.shuffle(new)
        current = self.current_host
        self.hosts = new
        # go on from the current host if it is still listed, else from the start of the new list
        self._host_index = new.index(current) if current in new else -1
        self._tried_since_connect = 0
        self._rw_probe_index = self._host_index

    @property
    def current_host(self) -> tuple[str, int] | None:
        """The host of the current (or latest) connection attempt."""
        if 0 <= self._host_index < len(self.hosts):
            return self.hosts[self._host_index]
        return None

    @property
    def failed_rounds(self) -> int:
        """How many times every host has been tried without a session since the last one."""
        return self._rounds

    def next_host(self) -> tuple[str, int]:
        """The next host to try (round robin over the shuffled list; a read-write server found
        while connected read-only first)."""
        if self._rw_host is not None and self._rw_host in self.hosts:
            self._host_index = self.hosts.index(self._rw_host) - 1
        self._rw_host = None
        self._host_index = (self._host_index + 1) % len(self.hosts)
        self._tried_since_connect += 1
        if self._tried_since_connect > len(self.hosts):
            self._rounds += 1
            self._tried_since_connect = 1
        return self.hosts[self._host_index]

    def backoff_ms(self) -> int:
        """How long to wait before the next attempt: 0 while untried hosts remain in this round,
        then growing (50 ms doubling, at most 1 s) once every host failed (StaticHostProvider waits 1 s)."""
        if self._tried_since_connect < len(self.hosts) or self._tried_since_connect == 0:
            return 0
        return min(1000, 50 << min(self._rounds, 5))

    @property
    def connect_timeout_ms(self) -> int:
        if self._connect_timeout_ms is not None:
            return self._connect_timeout_ms
        t = self.negotiated_timeout_ms or self.session_timeout_ms
        return max(1, t // len(self.hosts))

    @property
    def read_timeout_ms(self) -> int:
        return (self.negotiated_timeout_ms or self.session_timeout_ms) * 2 // 3

    def next_ping_ms(self, now_ms: int) -> int:
        """When the next ping is due (absolute ms; ``now_ms`` or earlier means now)."""
        del now_ms
        return self._last_send_ms + self.read_timeout_ms // 2

    def should_ping(self, now_ms: int) -> bool:
        return self.state.is_connected and not self._handshaking and now_ms >= self.next_ping_ms(now_ms)

    def dead_at_ms(self) -> int:
        """When the connection counts as dead if nothing arrives before then."""
        limit = self.connect_timeout_ms if self._handshaking else self.read_timeout_ms
        return self._last_recv_ms + limit

    def is_dead(self, now_ms: int) -> bool:
        return self._decoder is not None and now_ms >= self.dead_at_ms()

    def next_rw_probe_ms(self) -> int | None:
        """When the next search for a read-write server is due (absolute ms); None unless
        connected read-only to one of several hosts."""
        if self.state is not ClientState.CONNECTED_READ_ONLY or self._decoder is None or len(self.hosts) < 2:
            return None
        return self._rw_probe_at_ms

    def rw_probe(self, now_ms: int) -> tuple[str, int] | None:
        """The host to ask ``isro`` now (never the one connected to), or None when no probe is
        due; each probe doubles the wait before the next, up to ``RW_PROBE_MAX_MS``."""
        due = self.next_rw_probe_ms()
        if due is None or now_ms < due:
            return None
        self._rw_probe_interval_ms = min(2 * self._rw_probe_interval_ms, RW_PROBE_MAX_MS)
        self._rw_probe_at_ms = now_ms + self._rw_probe_interval_ms
        self._rw_probe_index = (self._rw_probe_index + 1) % len(self.hosts)
        if self._rw_probe_index == self._host_index:
            self._rw_probe_index = (self._rw_probe_index + 1) % len(self.hosts)
        return self.hosts[self._rw_probe_index]

    def rw_server_found(self, host: tuple[str, int]) -> None:
        """``host`` answered ``isro`` with ``rw``: it is the next host connected to."""
        self._rw_host = host

    def ping(self, now_ms: int) -> bytes:
        self._last_send_ms = now_ms
        return _frame(RequestHeader(Xid.PING, OpCode.PING).to_bytes())

    # ------------------------------------------------------------------ connection lifecycle

    @property
    def has_connection(self) -> bool:
        return self._decoder is not None

    def connection_made(self, now_ms: int) -> bytes:
        """A transport is up: returns the ConnectRequest to write."""
        if self.state.is_terminal:
            raise InvariantError(f"connecting in state {self.state.name}")
        self._decoder = FrameDecoder(self.max_buffer)
        self._handshaking = True
        self._last_recv_ms = self._last_send_ms = now_ms
        return self.connect_request()

    def connect_request(self) -> bytes:
        sid = self.session_id if self._seen_rw else 0
        passwd = self.session_passwd if self._seen_rw else bytes(16)
        body = bytearray()
        ConnectRequest(PROTOCOL_VERSION, self.last_zxid, self.session_timeout_ms, sid, passwd).write(body)
        body += b"\x01" if self.read_only else b"\x00"
        return _frame(bytes(body))

    def connection_lost(self) -> list[ClientEvent]:
        """The transport closed: every pending request fails with ConnectionLoss."""
        out: list[ClientEvent] = []
        self._decoder = None
        self._handshaking = False
        self._fail_pending(ConnectionClosedError if self._closing else ConnectionLoss, out)
        if self._closing and not self.state.is_terminal:
            self._set_state(ClientState.CLOSED, out)
        elif self.state.is_connected:
            self._set_state(ClientState.SUSPENDED, out)
        return out

    def close(self) -> list[ClientEvent]:
        """The client gives up the session locally (no server round trip): CLOSED."""
        out: list[ClientEvent] = []
        self._decoder = None
        self._fail_pending(ConnectionClosedError, out)
        if self.state is not ClientState.CLOSED:
            self._set_state(ClientState.CLOSED, out)
        return out

    def close_request(self, handle: Any = None) -> bytes:
        """closeSession; when its reply arrives the state becomes CLOSED."""
        self._closing = True
        return self.request(OpCode.CLOSE_SESSION, None, handle)

    def _fail_pending(self, cls: type[ZookeeperError], out: list[ClientEvent]) -> None:
        while self._pending:
            p = self._pending.popleft()
            if p.handle is not None:
                out.append(RequestFailed(p.handle, p.op, cls()))
        while self._auth_pending:
            h = self._auth_pending.popleft()
            if h is not None:
                out.append(RequestFailed(h, OpCode.AUTH, cls()))

    # ------------------------------------------------------------------ requests

    def _next_xid(self) -> int:
        self._xid = self._xid + 1 if self._xid < MAX_XID else 1
        return self._xid

    @property
    def pending_count(self) -> int:
        return len(self._pending) + len(self._auth_pending)

    def request(self, op: int, record: Any, handle: Any = None, *,
                watch: WatchRegistration | WatchRemoval | None = None, now_ms: int | None = None,
                absolute: bool = False) -> bytes:
        """Frame one request (RequestHeader + record, chroot applied unless ``absolute``) and
        queue it in the FIFO.

        ``record`` is a jute record, ``None``, or for multi/multiRead a ``list[Op]``."""
        if self.state.is_terminal and op != OpCode.CLOSE_SESSION:
            raise _terminal_error(self.state)
        if self._decoder is None or self._handshaking:
            raise ConnectionLoss("not connected")
        xid = self._next_xid()
        out = bytearray()
        RequestHeader(xid, int(op)).write(out)
        if not absolute:
            record = self._chroot_record(record)
        if isinstance(record, list):
            write_multi_request(out, record)
        elif record is not None:
            record.write(out)
        self._pending.append(_Pending(xid, int(op), handle, watch))
        if now_ms is not None:
            self._last_send_ms = now_ms
        return _frame(bytes(out))

    def auth_request(self, scheme: str, credential: bytes, handle: Any = None, *, now_ms: int | None = None) -> bytes:
        """addAuth: remembered for replay after reconnects; the reply (xid -4) completes ``handle``."""
        if self.state.is_terminal:
            raise _terminal_error(self.state)
        if self._decoder is None or self._handshaking:
            raise ConnectionLoss("not connected")
        self.auth.append((scheme, credential))
        self._auth_pending.append(handle)
        if now_ms is not None:
            self._last_send_ms = now_ms
        return _frame(RequestHeader(Xid.AUTH, OpCode.AUTH).to_bytes() + AuthPacket(0, scheme, credential).to_bytes())

    def _setup_packets(self) -> bytes:
        """Auth replay and setWatches after the handshake, in that order (as primeConnection sends)."""
        parts: list[bytes] = []
        for scheme, cred in self.auth:
            self._auth_pending.append(None)
            parts.append(_frame(RequestHeader(Xid.AUTH, OpCode.AUTH).to_bytes() + AuthPacket(0, scheme, cred).to_bytes()))
        for op, rec in self.set_watches_records():
            self._pending.append(_Pending(Xid.SET_WATCHES, op, None, None))
            parts.append(_frame(RequestHeader(Xid.SET_WATCHES, op).to_bytes() + rec.to_bytes()))
        return b"".join(parts)

    def set_watches_records(self) -> list[tuple[int, SetWatches | SetWatches2]]:
        """The setWatches/setWatches2 packets restoring every registered watch (server paths)."""
        lists = [[self.server_path(p) for p, cbs in self._watches[k].items() if cbs] for k in _WATCH_KINDS]
        if not any(lists):
            return []
        records: list[tuple[int, SetWatches | SetWatches2]] = []
        iters = [iter(lst) for lst in lists]
        remaining = sum(len(lst) for lst in lists)
        kind = 0
        while remaining:
            batch: list[list[str]] = [[] for _ in _WATCH_KINDS]
            length = 0
            while length < SET_WATCHES_MAX_LENGTH and remaining:
                while True:
                    p = next(iters[kind], None)
                    if p is not None:
                        break
                    kind += 1
                batch[kind].append(p)
                remaining -= 1
                length += len(p)
            if batch[3] or batch[4]:
                records.append((OpCode.SET_WATCHES2, SetWatches2(self.last_zxid, *batch)))
            else:
                records.append((OpCode.SET_WATCHES, SetWatches(self.last_zxid, batch[0], batch[1], batch[2])))
        return records

    # ------------------------------------------------------------------ receiving

    def receive(self, data: bytes, now_ms: int) -> list[ClientEvent]:
        """Bytes from the server → events, in the order the shell must act on them.

        Raises ProtocolError when the stream is broken (bad frame, reply out of order): the shell
        must drop the connection and call ``connection_lost()``."""
        if self._decoder is None:
            raise InvariantError("receive() without a connection")
        self._last_recv_ms = now_ms
        self._decoder.feed(data)
        out: list[ClientEvent] = []
        for frame in self._decoder.frames():
            if self._decoder is None:
                break  # the session ended inside this batch
            if self._handshaking:
                self._on_connect_response(frame, out)
            else:
                self._on_frame(frame, out)
        return out

    def _on_connect_response(self, frame: bytes, out: list[ClientEvent]) -> None:
        if len(frame) == _REPLY_HEADER_LEN:
            # Apache 3.8 answers a refused createSession with a bare ReplyHeader (xid 0), e.g. a
            # read-only server without localSessionsEnabled: NOTREADONLY.
            hdr, _ = ReplyHeader.read(frame, 0)
            raise ProtocolError(f"server refused the session: {type(error_for(hdr.err)).__name__} ({hdr.err})")
        try:
            resp, pos = ConnectResponse.read(frame, 0)
        except (struct.error, IndexError, ValueError) as exc:
            raise ProtocolError(f"malformed ConnectResponse ({len(frame)} bytes): {exc}") from exc
        ro = len(frame) > pos and frame[pos] != 0
        self._handshaking = False
        if resp.timeOut <= 0:
            self._expire(out)
            return
        self.negotiated_timeout_ms = resp.timeOut
        self.session_id = resp.sessionId
        self.session_passwd = resp.passwd or bytes(16)
        self._seen_rw = self._seen_rw or not ro
        self._tried_since_connect = 0
        self._rounds = 0
        new = ClientState.CONNECTED_READ_ONLY if ro else ClientState.CONNECTED
        if ro:  # look for a read-write server soon, then less and less often
            self._rw_probe_interval_ms = RW_PROBE_MIN_MS
            self._rw_probe_at_ms = self._last_recv_ms + RW_PROBE_MIN_MS
            self._rw_probe_index = self._host_index
        if self.state is not new:
            if self.state.is_connected:  # RO -> RW without a disconnect cannot happen
                raise InvariantError("handshake while connected")
            self._set_state(new, out)
        out.append(Connected(resp.sessionId, resp.timeOut, ro, self._setup_packets()))

    def _expire(self, out: list[ClientEvent]) -> None:
        self._decoder = None
        self._fail_pending(SessionExpiredError, out)
        self._set_state(ClientState.EXPIRED, out)
        cbs = self._all_watchers()
        for k in _WATCH_KINDS:
            self._watches[k].clear()
        if cbs:
            out.append(WatchFired(WatchedEvent(EventType.NONE, KeeperState.EXPIRED, None), cbs))

    def _all_watchers(self) -> tuple[Watcher, ...]:
        seen: dict[Any, Watcher] = {}
        for k in _WATCH_KINDS:
            for cbs in self._watches[k].values():
                for cb in cbs:
                    seen.setdefault(_key(cb), cb)
        return tuple(seen.values())

    def _on_frame(self, frame: bytes, out: list[ClientEvent]) -> None:
        hdr, pos = ReplyHeader.read(frame, 0)
        xid = hdr.xid
        if xid == Xid.PING:
            return
        if xid == Xid.NOTIFICATION:
            ev, _ = WatcherEvent.read(frame, pos)
            self._on_notification(ev, out)
            return
        if xid == Xid.AUTH:
            handle = self._auth_pending.popleft() if self._auth_pending else None
            if hdr.err == Code.AUTHFAILED:
                if handle is not None:
                    out.append(RequestFailed(handle, OpCode.AUTH, AuthFailedError()))
                self._decoder = None
                self._fail_pending(AuthFailedError, out)
                self._set_state(ClientState.AUTH_FAILED, out)
                cbs = self._all_watchers()
                if cbs:
                    out.append(WatchFired(WatchedEvent(EventType.NONE, KeeperState.AUTH_FAILED, None), cbs))
            elif handle is not None:
                out.append(Reply(handle, OpCode.AUTH, xid, hdr.zxid, hdr.err, None,
                                 error_for(hdr.err) if hdr.err else None))
            return
        if not self._pending:
            raise ProtocolError(f"reply with xid {xid} but nothing is pending")
        p = self._pending.popleft()
        if p.xid != xid:
            self._pending.appendleft(p)
            raise ProtocolError(f"xid out of order: got {xid}, expected {p.xid}")
        if hdr.zxid > 0:
            self.last_zxid = hdr.zxid
        err = hdr.err
        response: Any = None
        if p.op in (OpCode.MULTI, OpCode.MULTI_READ):
            if len(frame) > pos:
                results, _ = read_multi_response(frame, pos)
                response = [self._strip_result(r) for r in results]
        elif err == 0:
            cls = _RESPONSES.get(p.op)
            if cls is not None:
                rec, _ = cls.read(frame, pos)
                response = self._strip_response(rec)
        self._after_reply(p, err, out)
        if p.op == OpCode.CLOSE_SESSION:
            self._closing = True
            self._decoder = None
            self._fail_pending(ConnectionLoss, out)
            if p.handle is not None:
                out.append(Reply(p.handle, p.op, xid, hdr.zxid, err, None, None))
            if not self.state.is_terminal:
                self._set_state(ClientState.CLOSED, out)
            return
        if p.handle is not None:
            out.append(Reply(p.handle, p.op, xid, hdr.zxid, err, response, error_for(err) if err else None))

    def _strip_response(self, rec: Any) -> Any:
        if self.chroot is None:
            return rec
        if isinstance(rec, (CreateResponse, Create2Response, SyncResponse)):
            return dataclasses.replace(rec, path=self.client_path(rec.path))
        if isinstance(rec, GetEphemeralsResponse):
            return GetEphemeralsResponse([self.client_path(p) for p in rec.ephemerals])
        return rec

    def _strip_result(self, r: OpResult) -> OpResult:
        if self.chroot is None or r.path is None:
            return r
        return dataclasses.replace(r, path=self.client_path(r.path))

    # ------------------------------------------------------------------ watches

    def _after_reply(self, p: _Pending, err: int, out: list[ClientEvent]) -> None:
        w = p.watch
        if isinstance(w, WatchRegistration):
            kind = w.kind
            if kind == "exists":
                if err == 0:
                    kind = "data"
                elif err == Code.NONODE:
                    kind = "exist"
                else:
                    return
            elif err != 0:
                return
            self.register_watch(kind, w.path, w.callback)
        elif isinstance(w, WatchRemoval) and err == 0:
            self._remove_local(w, out)

    def register_watch(self, kind: str, path: str, callback: Watcher) -> None:
        cbs = self._watches[kind].setdefault(path, [])
        if all(_key(c) != _key(callback) for c in cbs):
            cbs.append(callback)

    def watches(self, kind: str) -> dict[str, list[Watcher]]:
        """The registry of one kind (data, exist, child, persistent, recursive): path → callbacks."""
        return self._watches[kind]

    def has_watch(self, path: str, kind: WatcherType, callback: Watcher | None = None) -> bool:
        """ZKWatchManager.containsWatcher: is there a local watch that remove_watches would remove?"""
        return any(self._matching(path, kind, callback).values())

    def _kinds_for(self, kind: WatcherType) -> tuple[str, ...]:
        if kind == WatcherType.CHILDREN:
            return ("child",)
        if kind == WatcherType.DATA:
            return ("data", "exist")
        return _WATCH_KINDS

    def _matching(self, path: str, kind: WatcherType, callback: Watcher | None) -> dict[str, list[Watcher]]:
        found: dict[str, list[Watcher]] = {}
        for k in self._kinds_for(kind):
            cbs = self._watches[k].get(path, [])
            found[k] = [c for c in cbs if callback is None or _key(c) == _key(callback)]
        return found

    def removal_op(self, path: str, kind: WatcherType, callback: Watcher | None) -> int:
        """REMOVE_WATCHES, or CHECK_WATCHES when other callbacks would keep the server's watch."""
        if callback is None:
            return OpCode.REMOVE_WATCHES
        for k in self._kinds_for(kind):
            if any(_key(c) != _key(callback) for c in self._watches[k].get(path, [])):
                return OpCode.CHECK_WATCHES
        return OpCode.REMOVE_WATCHES

    def _remove_local(self, w: WatchRemoval, out: list[ClientEvent]) -> None:
        removed = self._matching(w.path, w.kind, w.callback)
        events = {"data": EventType.DATA_WATCH_REMOVED, "exist": EventType.DATA_WATCH_REMOVED,
                  "child": EventType.CHILD_WATCH_REMOVED, "persistent": EventType.PERSISTENT_WATCH_REMOVED,
                  "recursive": EventType.PERSISTENT_WATCH_REMOVED}
        by_type: dict[EventType, dict[Any, Watcher]] = {}
        for k, cbs in removed.items():
            if not cbs:
                continue
            keys = {_key(c) for c in cbs}
            left = [c for c in self._watches[k].get(w.path, []) if _key(c) not in keys]
            if left:
                self._watches[k][w.path] = left
            else:
                self._watches[k].pop(w.path, None)
            for c in cbs:
                by_type.setdefault(events[k], {}).setdefault(_key(c), c)
        for et in (EventType.CHILD_WATCH_REMOVED, EventType.DATA_WATCH_REMOVED, EventType.PERSISTENT_WATCH_REMOVED):
            if et in by_type:
                out.append(WatchFired(WatchedEvent(et, KeeperState.SYNC_CONNECTED, w.path),
                                      tuple(by_type[et].values())))

    def materialize(self, etype: int, path: str) -> tuple[Watcher, ...]:
        """The callbacks an event on ``path`` (client path) fires; one-time watches are removed."""
        result: dict[Any, Watcher] = {}

        def take(kind: str) -> None:
            for cb in self._watches[kind].pop(path, []):
                result.setdefault(_key(cb), cb)

        if etype in (EventType.NODE_CREATED, EventType.NODE_DATA_CHANGED):
            take("data")
            take("exist")
        elif etype == EventType.NODE_CHILDREN_CHANGED:
            take("child")
        elif etype == EventType.NODE_DELETED:
            take("data")
            take("exist")
            take("child")
        else:
            return ()
        for cb in self._watches["persistent"].get(path, []):
            result.setdefault(_key(cb), cb)
        if etype != EventType.NODE_CHILDREN_CHANGED:
            for anc in _self_and_ancestors(path):
                for cb in self._watches["recursive"].get(anc, []):
                    result.setdefault(_key(cb), cb)
        return tuple(result.values())

    def _on_notification(self, ev: WatcherEvent, out: list[ClientEvent]) -> None:
        path = self.client_path(ev.path) if ev.path is not None else None
        try:
            etype = EventType(ev.type)
        except ValueError:
            raise ProtocolError(f"unknown watch event type {ev.type}") from None
        try:
            state = KeeperState(ev.state)
        except ValueError:
            raise ProtocolError(f"unknown keeper state {ev.state}") from None
        cbs = self.materialize(etype, path) if path is not None else ()
        out.append(WatchFired(WatchedEvent(etype, state, path), cbs))


def _self_and_ancestors(path: str) -> list[str]:
    out = [path]
    while path != "/":
        path = path.rsplit("/", 1)[0] or "/"
        out.append(path)
    return out


def _key(cb: Watcher) -> Hashable:
    """Callbacks are compared by equality when hashable (bound methods), else by identity."""
    try:
        hash(cb)
        return cb
    except TypeError:
        return id(cb)


def _frame(payload: bytes) -> bytes:
    return INT.pack(len(payload)) + payload


def _terminal_error(state: ClientState) -> ZookeeperError:
    if state is ClientState.EXPIRED:
        return SessionExpiredError()
    if state is ClientState.AUTH_FAILED:
        return AuthFailedError()
    return ConnectionClosedError("client is closed")
