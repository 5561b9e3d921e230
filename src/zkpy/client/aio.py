"""``AsyncClient``: the asyncio shell around ``ClientCore`` (one TCP or TLS connection at a time).

The shell owns the transport, the clock (``loop.time()``), the reconnect loop and the futures;
every protocol decision is the core's. Ordering: the core turns each batch of received bytes
into events in the server's order and the shell acts on them in that order, inside
``buffer_updated`` (the connection's receive callback):

* a watch callback is called inline, synchronously, when its notification is processed —
  before the futures of any later reply are resolved;
* a reply resolves its future with ``set_result``; asyncio wakes the awaiting coroutines later,
  but in the order the futures were resolved, so user code awaiting results sees completions in
  the server's order, and after every watch callback that preceded them.

Requests issued while the client is connecting or suspended wait for the connection (at most
the session timeout) and then fail with ``ConnectionLoss``.

While connected read-only, the shell asks the host the core names (``rw_probe``) ``isro`` on a
separate short connection, one probe at a time; on ``rw`` it drops the read-only connection and
the reconnect loop goes to that host (``rw_server_found``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import re
import ssl
import warnings
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, ParamSpec, Self, TypeVar, overload

from zkpy.errors import (
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NoWatcherError,
    ProtocolError,
    RolledBackError,
    SessionExpiredError,
    ZookeeperError,
    error_for,
)
from zkpy.wire.consts import AddWatchMode, CreateMode, EventType, KeeperState, OpCode, Perms, WatcherType
from zkpy.wire.multi import Op, OpResult
from zkpy.wire.proto import (
    ACL,
    AddWatchRequest,
    CheckVersionRequest,
    CheckWatchesRequest,
    ClientInfo,
    CreateRequest,
    CreateTTLRequest,
    DeleteRequest,
    ExistsRequest,
    GetACLRequest,
    GetAllChildrenNumberRequest,
    GetChildren2Request,
    GetChildrenRequest,
    GetDataRequest,
    GetEphemeralsRequest,
    Id,
    ReconfigRequest,
    RemoveWatchesRequest,
    SetACLRequest,
    SetDataRequest,
    Stat,
    SyncRequest,
)

from .core import (
    ClientCore,
    ClientEvent,
    ClientState,
    Connected,
    Reply,
    RequestFailed,
    StateChanged,
    WatchedEvent,
    WatchFired,
    WatchRegistration,
    WatchRemoval,
    parse_hosts,
    validate_path,
)
from .retry import KazooRetry, RetryPolicy, retry_policy

P = ParamSpec("P")
T = TypeVar("T")

log = logging.getLogger(__name__)

OPEN_ACL_UNSAFE = [ACL(int(Perms.ALL), Id("world", "anyone"))]
Listener = Callable[[ClientState], Any]
WatchCallback = Callable[[WatchedEvent], Any]
RetryArg = RetryPolicy | KazooRetry | Mapping[str, Any] | None  # a policy, or kazoo's KazooRetry arguments

_VERSION = re.compile(r"(\d+(?:\.\d+)+)")


RECV_BUFFER_BYTES = 64 * 1024  # one reusable receive buffer per connection


class _Connection(asyncio.BufferedProtocol):
    """Receives into one preallocated buffer: a plain ``Protocol`` makes the selector transport
    call ``sock.recv(256 KiB)``, which allocates (and the allocator maps and unmaps) a fresh
    256 KiB object for every read, most of the client's cost per small reply."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self.transport: asyncio.Transport | None = None
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._buffer = memoryview(bytearray(RECV_BUFFER_BYTES))

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.client._on_connection_made(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._buffer

    def buffer_updated(self, nbytes: int) -> None:
        self.client._on_data(self, bytes(self._buffer[:nbytes]))  # a copy: the buffer is reused

    def connection_lost(self, exc: Exception | None) -> None:
        try:
            self.client._on_connection_lost(self)
        finally:  # whatever happened above, the reconnect loop waiting on ``lost`` must go on
            if not self.lost.done():
                self.lost.set_result(None)


def _report_crash(task: asyncio.Task[None]) -> None:
    """The reconnect loop never ends with an exception; if it does, say so at once (a silent
    end would leave the client suspended for ever)."""
    if not task.cancelled() and task.exception() is not None:
        log.error("the client's connection loop stopped", exc_info=task.exception())


class Transaction:
    """Ops collected for one multi; ``await tx.commit()`` sends them."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client
        self._ops: list[Op] = []
        self.committed = False

    def create(self, path: str, value: bytes = b"", acl: Sequence[ACL] | None = None, ephemeral: bool = False,
               sequence: bool = False, *, container: bool = False, ttl_ms: int | None = None) -> None:
        op, rec = self._client._create_record(path, value, acl, ephemeral, sequence, container, ttl_ms, False)
        self._ops.append(Op(op, rec))

    def delete(self, path: str, version: int = -1) -> None:
        validate_path(path)
        self._ops.append(Op(OpCode.DELETE, DeleteRequest(path, version)))

    def set_data(self, path: str, value: bytes, version: int = -1) -> None:
        validate_path(path)
        self._ops.append(Op(OpCode.SET_DATA, SetDataRequest(path, value, version)))

    def check(self, path: str, version: int) -> None:
        validate_path(path)
        self._ops.append(Op(OpCode.CHECK, CheckVersionRequest(path, version)))

    async def commit(self) -> list[Any]:
        """One result per op: the path (create), ``Stat`` (set_data), ``True`` (delete, check); if the
        multi failed, the ``ZookeeperError`` of each op (for the ops that were not the cause,
        ``RolledBackError`` before it and ``RuntimeInconsistency`` after it, as kazoo reports them)."""
        if self.committed:
            raise ValueError("transaction already committed")
        self.committed = True
        if not self._ops:
            return []
        reply = await self._client._submit(OpCode.MULTI, list(self._ops))
        results: list[OpResult] = reply.response or []
        if reply.err and not results:
            raise error_for(reply.err)
        out: list[Any] = []
        for op, r in zip(self._ops, results):
            if r.type == OpCode.ERROR:
                out.append(error_for(r.err, getattr(op.request, "path", None)) if r.err
                           else RolledBackError("", getattr(op.request, "path", None)))
            elif r.type in (OpCode.CREATE, OpCode.CREATE2, OpCode.CREATE_TTL, OpCode.CREATE_CONTAINER):
                out.append(r.path)
            elif r.type == OpCode.SET_DATA:
                out.append(r.stat)
            else:
                out.append(True)
        return out

    async def __aenter__(self) -> Transaction:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if exc[0] is None and not self.committed:
            await self.commit()


class AsyncClient:
    """A ZooKeeper session over asyncio; see docs/client.md for the whole API."""

    def __init__(self, hosts: str = "127.0.0.1:2181", *, session_timeout: float = 10.0,
                 connect_timeout: float | None = None, read_only: bool = False,
                 auth: Sequence[tuple[str, bytes | str]] = (), default_acl: Sequence[ACL] | None = None,
                 ssl_context: ssl.SSLContext | None = None, rng: random.Random | None = None,
                 max_outstanding: int = 10_000, client_id: tuple[int, bytes] | None = None,
                 randomize_hosts: bool = True, connection_retry: RetryArg = None,
                 command_retry: RetryArg = None, create_chroot: bool = False) -> None:
        if max_outstanding < 1:
            raise ValueError("max_outstanding must be at least 1")
        parse_hosts(hosts)  # a bad connect string fails here, not at start()
        self._rng = rng if rng is not None else random.Random()
        self.randomize_hosts = randomize_hosts
        self._connect_timeout = connect_timeout
        self.read_only = read_only
        self.auth = [(scheme, cred.encode() if isinstance(cred, str) else cred) for scheme, cred in auth]
        self.hosts = hosts
        self.session_timeout = session_timeout
        self.create_chroot = create_chroot
        self.connection_retry = retry_policy(connection_retry)
        self.command_retry = retry_policy(command_retry) or RetryPolicy()
        self._core = self._new_core(client_id)
        self.session_timeout = session_timeout
        self.default_acl = list(default_acl) if default_acl is not None else OPEN_ACL_UNSAFE
        self.ssl_context = ssl_context
        self._listeners: list[Listener] = []
        self._state_waiters: list[asyncio.Future[None]] = []
        self._conn: _Connection | None = None
        self._run_task: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._rw_probe: asyncio.Future[None] | None = None  # an isro probe in flight (read-only)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last_connect_error: str | None = None  # why the latest connection attempt failed
        # the bound on requests in flight: a slot per request from _submit until its reply or
        # failure; a full client queues callers FIFO in _slot_waiters and hands a freed slot over
        self.max_outstanding = max_outstanding
        self._outstanding = 0
        self._slot_waiters: deque[asyncio.Future[None]] = deque()

    # ------------------------------------------------------------------ properties

    @property
    def state(self) -> ClientState:
        return self._core.state

    @property
    def connected(self) -> bool:
        return self._core.state.is_connected

    @property
    def last_zxid(self) -> int:
        return self._core.last_zxid

    @property
    def session_id(self) -> int:
        return self._core.session_id

    @property
    def client_id(self) -> tuple[int, bytes]:
        """``(session_id, password)``: pass it as ``client_id=`` to resume this session from
        another client (``(0, ...)`` before the first session)."""
        return self._core.session_id, self._core.session_passwd

    @property
    def client_state(self) -> ClientState:
        """kazoo's name for `state`."""
        return self._core.state

    def unchroot(self, path: str) -> str:
        """``path`` (a server path) relative to the chroot."""
        return self._core.client_path(path)

    @property
    def negotiated_timeout_ms(self) -> int:
        return self._core.negotiated_timeout_ms

    @property
    def chroot(self) -> str | None:
        return self._core.chroot

    def add_listener(self, callback: Listener) -> None:
        self._listeners.append(callback)

    def remove_listener(self, callback: Listener) -> None:
        self._listeners.remove(callback)

    # ------------------------------------------------------------------ lifecycle

    def _new_core(self, session: tuple[int, bytes] | None) -> ClientCore:
        return ClientCore(
            self.hosts,
            session_timeout_ms=int(self.session_timeout * 1000),
            connect_timeout_ms=None if self._connect_timeout is None else int(self._connect_timeout * 1000),
            read_only=self.read_only,
            rng=self._rng if self.randomize_hosts else None,
            auth=self.auth,
            session=session,
        )

    async def start(self, timeout: float = 15.0) -> None:
        """Connect and establish the session; ConnectionLoss if no server accepts it in time.

        A client that was stopped (or whose session ended) starts a new session, as kazoo's
        does; its listeners stay, its watches are gone. With a chroot that does not exist,
        warns (``UserWarning``), or creates it if the client was made with ``create_chroot``."""
        warning = await self._start(timeout)
        if warning is not None:
            log.warning("%s", warning)
            warnings.warn(warning, UserWarning, stacklevel=2)

    async def _start(self, timeout: float) -> str | None:
        """`start`, returning the warning to give (the chroot is missing) for the caller to give."""
        if self._run_task is not None and self._run_task.done():
            self._run_task = None  # the connection loop gave up (connection_retry)
        if self._run_task is not None:
            raise RuntimeError("start() called twice")
        if self._core.state.is_terminal:
            self._core = self._new_core(None)
        self._loop = asyncio.get_running_loop()
        self._run_task = self._loop.create_task(self._run(), name="zkpy-client-connect")
        self._run_task.add_done_callback(_report_crash)
        try:
            await self._wait_connected(timeout)
            if self._core.chroot is not None:
                return await self._check_chroot(self._core.chroot)
            return None
        except BaseException:
            await self._shutdown()
            raise

    async def _check_chroot(self, chroot: str) -> str | None:
        if await self.exists("/") is not None:
            return None
        if not self.create_chroot:
            return (f"the chroot {chroot} does not exist on the server: create it, or make the "
                    "client with create_chroot=True")
        parts = chroot.split("/")[1:]
        for i in range(1, len(parts) + 1):
            node = "/" + "/".join(parts[:i])
            try:
                await self._call(OpCode.CREATE, CreateRequest(node, b"", self.default_acl, int(CreateMode.PERSISTENT)),
                                 node, absolute=True)
            except NodeExistsError:
                pass
        return None

    async def stop(self) -> None:
        """kazoo's name for `close`: close the session and the connection (``start()`` again
        makes a new session)."""
        await self.close()

    async def restart(self) -> None:
        """`stop`, then `start` (a new session)."""
        await self.close()
        await self.start()

    def set_hosts(self, hosts: str, randomize_hosts: bool | None = None) -> None:
        """Use another host list from the next connection attempt on; the current connection
        is kept. ValueError if ``hosts`` names another chroot."""
        if randomize_hosts is not None:
            self.randomize_hosts = randomize_hosts
        self._core.set_hosts(hosts, self._rng if self.randomize_hosts else None)
        self.hosts = hosts

    async def close(self) -> None:
        """Close the session (closeSession: its ephemerals go) and the connection."""
        core = self._core
        if core.state is ClientState.CLOSED and self._run_task is None:
            return
        conn = self._conn
        if core.state.is_connected and conn is not None and conn.transport is not None:
            fut = asyncio.get_running_loop().create_future()
            try:
                conn.transport.write(core.close_request(fut))
                await asyncio.wait_for(fut, max(1.0, self.session_timeout / 2))
            except (ZookeeperError, TimeoutError):
                pass
        await self._shutdown()

    async def _shutdown(self) -> None:
        self._dispatch(self._core.close() if self._core.state is not ClientState.CLOSED else [])
        conn, self._conn = self._conn, None
        if conn is not None and conn.transport is not None:
            conn.transport.close()
        self._cancel_timer()
        if self._rw_probe is not None:
            self._rw_probe.cancel()
            self._rw_probe = None
        task, self._run_task = self._run_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _run(self) -> None:
        """Connect, wait for the connection to drop, move to the next host; until the session ends."""
        loop = asyncio.get_running_loop()
        core = self._core
        while not core.state.is_terminal:
            delay = core.backoff_ms()
            policy = self.connection_retry
            if delay and policy is not None:  # every host failed again: the policy decides
                rounds = core.failed_rounds + 1
                if policy.max_tries is not None and rounds >= policy.max_tries:
                    log.warning("no server accepted a connection in %d rounds (connection_retry): "
                                "closing the client", rounds)
                    self._dispatch(core.close())
                    return
                delay = int(policy.next_delay(rounds) * 1000)
            if delay:
                await asyncio.sleep(delay / 1000)
            host, port = core.next_host()
            log.debug("connecting to %s:%s (state %s)", host, port, core.state.name)
            try:
                _, conn = await asyncio.wait_for(
                    loop.create_connection(lambda: _Connection(self), host, port, ssl=self.ssl_context,
                                           server_hostname=host if self.ssl_context is not None else None),
                    core.connect_timeout_ms / 1000)
            except (OSError, TimeoutError, ssl.SSLError) as exc:
                log.debug("connect to %s:%s failed: %s", host, port, exc)
                self._last_connect_error = f"{host}:{port}: {type(exc).__name__}: {exc}"
                continue
            except Exception:  # a bug must not end the reconnect loop silently
                log.exception("connecting to %s:%s failed unexpectedly", host, port)
                await asyncio.sleep(0.1)
                continue
            log.debug("connected to %s:%s", host, port)
            await conn.lost  # the timer drops a silent connection
            log.debug("connection to %s:%s lost (state %s)", host, port, core.state.name)

    def _now_ms(self) -> int:
        return int(asyncio.get_running_loop().time() * 1000)

    def _on_connection_made(self, conn: _Connection) -> None:
        if self._core.state.is_terminal:
            conn.transport.close()  # type: ignore[union-attr]
            return
        self._conn = conn
        conn.transport.write(self._core.connection_made(self._now_ms()))  # type: ignore[union-attr]
        self._schedule_timer()

    def _on_data(self, conn: _Connection, data: bytes) -> None:
        if conn is not self._conn:
            return
        try:
            events = self._core.receive(data, self._now_ms())
        except ProtocolError as exc:
            log.warning("protocol error from server, dropping the connection: %s", exc)
            if not self._core.state.is_connected:
                self._last_connect_error = f"{type(exc).__name__}: {exc}"
            conn.transport.abort()  # type: ignore[union-attr]
            return
        self._dispatch(events)
        if not self._core.has_connection and conn.transport is not None:
            conn.transport.close()  # the session ended (expired, auth failed, closed)

    def _on_connection_lost(self, conn: _Connection) -> None:
        if conn is not self._conn:
            return
        self._conn = None
        self._cancel_timer()
        if self._core.has_connection:
            self._dispatch(self._core.connection_lost())

    # ------------------------------------------------------------------ timer

    def _schedule_timer(self) -> None:
        self._cancel_timer()
        core = self._core
        now = self._now_ms()
        wake = core.dead_at_ms()
        if core.state.is_connected:
            wake = min(wake, core.next_ping_ms(now))
        probe = core.next_rw_probe_ms()
        if probe is not None and self._rw_probe is None:
            wake = min(wake, probe)
        self._timer = asyncio.get_running_loop().call_later(max(0, wake - now) / 1000 + 0.001, self._on_timer)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _on_timer(self) -> None:
        self._timer = None
        conn = self._conn
        if conn is None or conn.transport is None:
            return
        now = self._now_ms()
        core = self._core
        if core.is_dead(now):
            log.info("nothing heard from the server for too long; trying the next one")
            conn.transport.abort()
            return
        if core.should_ping(now):
            conn.transport.write(core.ping(now))
        if self._rw_probe is None:
            host = core.rw_probe(now)
            if host is not None:
                self._rw_probe = asyncio.ensure_future(self._probe_rw(conn, host))
        self._schedule_timer()

    async def _probe_rw(self, conn: _Connection, host: tuple[str, int]) -> None:
        """Ask ``host`` ``isro`` (ClientCnxn.pingRwServer); on ``rw``, drop the read-only
        connection ``conn``: the reconnect goes to ``host`` first."""
        try:
            answer = await asyncio.wait_for(self._ask_isro(host), self._core.connect_timeout_ms / 1000)
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            log.debug("isro to %s:%s failed: %s", host[0], host[1], exc)
            answer = b""
        self._rw_probe = None
        if conn is self._conn and answer != b"rw":
            self._schedule_timer()  # the next probe
        if answer == b"rw" and conn is self._conn and conn.transport is not None \
                and self._core.state is ClientState.CONNECTED_READ_ONLY:
            log.info("found a read-write server at %s:%s; moving there", host[0], host[1])
            self._core.rw_server_found(host)
            conn.transport.abort()

    async def _ask_isro(self, host: tuple[str, int]) -> bytes:
        reader, writer = await asyncio.open_connection(host[0], host[1], ssl=self.ssl_context,
                                                       server_hostname=host[0] if self.ssl_context else None)
        try:
            writer.write(b"isro")
            answer = b""
            while len(answer) < 16 and (chunk := await reader.read(16)):  # the server closes after its answer
                answer += chunk
            return answer
        finally:
            writer.close()

    # ------------------------------------------------------------------ events

    def _dispatch(self, events: list[ClientEvent]) -> None:
        for ev in events:
            if isinstance(ev, Reply):
                fut = ev.handle
                if not fut.done():
                    fut.set_result(ev)
            elif isinstance(ev, WatchFired):
                for cb in ev.callbacks:
                    try:
                        cb(ev.event)
                    except Exception:
                        log.exception("watch callback %r failed", cb)
            elif isinstance(ev, RequestFailed):
                fut = ev.handle
                if not fut.done():
                    fut.set_exception(ev.error)
            elif isinstance(ev, Connected):
                if self._conn is not None and self._conn.transport is not None and ev.setup:
                    self._conn.transport.write(ev.setup)
            elif isinstance(ev, StateChanged):
                for listener in list(self._listeners):
                    try:
                        listener(ev.new)
                    except Exception:
                        log.exception("state listener %r failed", listener)
                waiters, self._state_waiters = self._state_waiters, []
                for w in waiters:
                    if not w.done():
                        w.set_result(None)

    async def _wait_connected(self, timeout: float | None = None) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.session_timeout if timeout is None else timeout)
        while True:
            st = self._core.state
            if st.is_connected:
                return
            if st is ClientState.EXPIRED:
                raise SessionExpiredError()
            if st.is_terminal:
                if st is ClientState.AUTH_FAILED:
                    raise error_for(-115)
                raise ConnectionClosedError("client is closed")
            if self._run_task is None:
                raise ConnectionClosedError("client not started")
            w = loop.create_future()
            self._state_waiters.append(w)
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise ConnectionLoss("not connected")
            if math.isinf(remaining):  # start_async(None): until connected or closed
                await w
                continue
            try:
                await asyncio.wait_for(w, remaining)
            except TimeoutError:
                why = f" (last connect error: {self._last_connect_error})" if self._last_connect_error else ""
                raise ConnectionLoss(f"no server accepted the session in time{why}") from None

    async def _submit(self, op: int, record: Any, watch: WatchRegistration | WatchRemoval | None = None,
                      absolute: bool = False) -> Reply:
        await self._acquire_slot()
        try:
            if not self._core.state.is_connected or self._conn is None:
                await self._wait_connected()
            conn = self._conn
            assert conn is not None and conn.transport is not None
            fut: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
            conn.transport.write(self._core.request(op, record, fut, watch=watch, now_ms=self._now_ms(),
                                                    absolute=absolute))
            return await fut
        finally:
            self._release_slot()

    async def _acquire_slot(self) -> None:
        """Take one of ``max_outstanding`` slots, waiting (FIFO) while all are taken."""
        if self._outstanding < self.max_outstanding and not self._slot_waiters:
            self._outstanding += 1
            return
        w: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._slot_waiters.append(w)
        try:
            await w  # _release_slot hands its slot over: _outstanding is unchanged
        except asyncio.CancelledError:
            if w.done() and not w.cancelled():
                self._release_slot()  # the slot was handed over just before the cancel
            elif w in self._slot_waiters:
                self._slot_waiters.remove(w)
            raise

    def _release_slot(self) -> None:
        while self._slot_waiters:
            w = self._slot_waiters.popleft()
            if not w.done():
                w.set_result(None)
                return
        self._outstanding -= 1

    async def _call(self, op: int, record: Any, path: str | None,
                    watch: WatchRegistration | WatchRemoval | None = None, absolute: bool = False) -> Any:
        reply = await self._submit(op, record, watch, absolute)
        if reply.err:
            raise error_for(reply.err, path)
        return reply.response

    # ------------------------------------------------------------------ operations

    def _create_record(self, path: str, value: bytes, acl: Sequence[ACL] | None, ephemeral: bool, sequence: bool,
                       container: bool, ttl_ms: int | None, include_stat: bool) -> tuple[int, Any]:
        validate_path(path)
        acl_list = list(acl) if acl is not None else self.default_acl
        if container:
            if ephemeral or sequence or ttl_ms is not None:
                raise ValueError("a container node cannot be ephemeral, sequential or have a TTL")
            return OpCode.CREATE_CONTAINER, CreateRequest(path, value, acl_list, CreateMode.CONTAINER)
        if ttl_ms is not None:
            if ephemeral:
                raise ValueError("an ephemeral node cannot have a TTL")
            if ttl_ms <= 0:
                raise ValueError("ttl_ms must be positive")
            mode = CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL if sequence else CreateMode.PERSISTENT_WITH_TTL
            return OpCode.CREATE_TTL, CreateTTLRequest(path, value, acl_list, mode, ttl_ms)
        if ephemeral:
            mode = CreateMode.EPHEMERAL_SEQUENTIAL if sequence else CreateMode.EPHEMERAL
        else:
            mode = CreateMode.PERSISTENT_SEQUENTIAL if sequence else CreateMode.PERSISTENT
        return (OpCode.CREATE2 if include_stat else OpCode.CREATE), CreateRequest(path, value, acl_list, int(mode))

    @overload
    async def create(self, path: str, value: bytes = ..., acl: Sequence[ACL] | None = ...,
                     ephemeral: bool = ..., sequence: bool = ..., makepath: bool = ...,
                     include_data: Literal[False] = ..., *, container: bool = ..., ttl_ms: int | None = ...,
                     make_parents: bool = ..., include_stat: Literal[False] = ...) -> str: ...
    @overload
    async def create(self, path: str, value: bytes = ..., acl: Sequence[ACL] | None = ...,
                     ephemeral: bool = ..., sequence: bool = ..., makepath: bool = ...,
                     include_data: bool = ..., *, container: bool = ..., ttl_ms: int | None = ...,
                     make_parents: bool = ..., include_stat: Literal[True]) -> tuple[str, Stat]: ...
    @overload
    async def create(self, path: str, value: bytes = ..., acl: Sequence[ACL] | None = ...,
                     ephemeral: bool = ..., sequence: bool = ..., makepath: bool = ..., *,
                     include_data: Literal[True], container: bool = ..., ttl_ms: int | None = ...,
                     make_parents: bool = ..., include_stat: bool = ...) -> tuple[str, Stat]: ...
    async def create(self, path: str, value: bytes = b"", acl: Sequence[ACL] | None = None,
                     ephemeral: bool = False, sequence: bool = False, makepath: bool = False,
                     include_data: bool = False, *, container: bool = False,
                     ttl_ms: int | None = None, make_parents: bool = False,
                     include_stat: bool = False) -> str | tuple[str, Stat]:
        """Create a node; returns its path (``(path, Stat)`` with ``include_stat``).
        ``makepath`` and ``include_data`` are kazoo's names of ``make_parents`` and ``include_stat``
        (positional in kazoo's order: ``path, value, acl, ephemeral, sequence, makepath, include_data``).

        Raises NodeExistsError, NoNodeError (parent missing, unless ``make_parents``),
        NoChildrenForEphemeralsError, InvalidACLError, NoAuthError, ConnectionLoss, SessionExpiredError."""
        make_parents = make_parents or makepath
        include_stat = include_stat or include_data
        op, rec = self._create_record(path, value, acl, ephemeral, sequence, container, ttl_ms, include_stat)
        try:
            resp = await self._call(op, rec, path)
        except NoNodeError:
            if not make_parents or path.rsplit("/", 1)[0] in ("", "/"):
                raise
            await self.ensure_path(path.rsplit("/", 1)[0], acl)
            resp = await self._call(op, rec, path)
        if include_stat:
            return resp.path, resp.stat
        return resp.path  # type: ignore[no-any-return]

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        """Delete a node (with ``recursive``, its subtree, children first; a missing node is fine).

        Raises NoNodeError, BadVersionError, NotEmptyError, NoAuthError, ConnectionLoss, SessionExpiredError."""
        validate_path(path)
        if recursive:
            await self._delete_recursive(path)
            return
        await self._call(OpCode.DELETE, DeleteRequest(path, version), path)

    async def _delete_recursive(self, path: str) -> None:
        try:
            children = await self.get_children(path)
        except NoNodeError:
            return
        for child in children:
            await self._delete_recursive(path.rstrip("/") + "/" + child)
        if path == "/":
            return
        try:
            await self._call(OpCode.DELETE, DeleteRequest(path, -1), path)
        except NoNodeError:
            pass

    async def exists(self, path: str, watch: WatchCallback | None = None) -> Stat | None:
        """The node's Stat or None; ``watch`` is set either way (a data watch or an exist watch)."""
        validate_path(path)
        reg = WatchRegistration("exists", path, watch) if watch is not None else None
        try:
            resp = await self._call(OpCode.EXISTS, ExistsRequest(path, watch is not None), path, reg)
        except NoNodeError:
            return None
        return resp.stat  # type: ignore[no-any-return]

    async def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        """``(data, Stat)``; raises NoNodeError, NoAuthError, ConnectionLoss, SessionExpiredError."""
        validate_path(path)
        reg = WatchRegistration("data", path, watch) if watch is not None else None
        resp = await self._call(OpCode.GET_DATA, GetDataRequest(path, watch is not None), path, reg)
        return resp.data or b"", resp.stat

    get_data = get

    async def set(self, path: str, value: bytes, version: int = -1) -> Stat:
        """Set the data; raises NoNodeError, BadVersionError, NoAuthError, ConnectionLoss, SessionExpiredError."""
        validate_path(path)
        resp = await self._call(OpCode.SET_DATA, SetDataRequest(path, value, version), path)
        return resp.stat  # type: ignore[no-any-return]

    set_data = set

    @overload
    async def get_children(self, path: str, watch: WatchCallback | None = ...,
                           include_data: Literal[False] = ..., *,
                           include_stat: Literal[False] = ...) -> list[str]: ...
    @overload
    async def get_children(self, path: str, watch: WatchCallback | None = ...,
                           include_data: bool = ..., *, include_stat: Literal[True]) -> tuple[list[str], Stat]: ...
    @overload
    async def get_children(self, path: str, watch: WatchCallback | None = ..., *,
                           include_data: Literal[True], include_stat: bool = ...) -> tuple[list[str], Stat]: ...
    async def get_children(self, path: str, watch: WatchCallback | None = None, include_data: bool = False, *,
                           include_stat: bool = False) -> list[str] | tuple[list[str], Stat]:
        """Child names (``(names, Stat)`` with ``include_stat``, or kazoo's name ``include_data``);
        raises NoNodeError, NoAuthError, ..."""
        include_stat = include_stat or include_data
        validate_path(path)
        reg = WatchRegistration("child", path, watch) if watch is not None else None
        if include_stat:
            resp = await self._call(OpCode.GET_CHILDREN2, GetChildren2Request(path, watch is not None), path, reg)
            return list(resp.children), resp.stat
        resp = await self._call(OpCode.GET_CHILDREN, GetChildrenRequest(path, watch is not None), path, reg)
        return list(resp.children)

    async def get_all_children_number(self, path: str) -> int:
        validate_path(path)
        resp = await self._call(OpCode.GET_ALL_CHILDREN_NUMBER, GetAllChildrenNumberRequest(path), path)
        return int(resp.totalNumber)

    async def get_ephemerals(self, prefix: str = "/") -> list[str]:
        resp = await self._call(OpCode.GET_EPHEMERALS, GetEphemeralsRequest(prefix), prefix)
        return list(resp.ephemerals)

    async def get_acl(self, path: str) -> tuple[list[ACL], Stat]:
        validate_path(path)
        resp = await self._call(OpCode.GET_ACL, GetACLRequest(path), path)
        return list(resp.acl), resp.stat

    async def set_acl(self, path: str, acl: Sequence[ACL], version: int = -1) -> Stat:
        validate_path(path)
        resp = await self._call(OpCode.SET_ACL, SetACLRequest(path, list(acl), version), path)
        return resp.stat  # type: ignore[no-any-return]

    get_acls = get_acl  # kazoo's names
    set_acls = set_acl

    async def reconfig(self, joining: str | None = None, leaving: str | None = None,
                       new_members: str | None = None, from_config: int = -1) -> tuple[bytes, Stat]:
        """ZooKeeper's reconfig (incremental ``joining``/``leaving``, comma-separated, or the whole
        ``new_members`` list; ``from_config``: the config version it applies to, -1: any). The new
        config string and the Stat of /zookeeper/config. Raises ReconfigDisabledError,
        NoAuthError, BadArgumentsError, BadVersionError, NewConfigNoQuorumError,
        ReconfigInProcessError, ConnectionLoss."""
        request = ReconfigRequest(joining, leaving, new_members, from_config)  # type: ignore[arg-type]  # null strings
        resp = await self._call(OpCode.RECONFIG, request,
                                "/zookeeper/config")
        return bytes(resp.data or b""), resp.stat

    # ------------------------------------------------------------------ around the session

    async def retry(self, fn: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """``await fn(*args, **kwargs)`` under ``command_retry`` (kazoo's ``zk.retry``): retried
        on ConnectionLoss and OperationTimeoutError."""
        return await self.command_retry(fn, *args, **kwargs)

    async def command(self, cmd: bytes = b"ruok") -> str:
        """Send a four-letter word (``ruok``, ``srvr``, ``envi``, ``mntr``...) to the server this
        client is connected to, on a connection of its own; returns the answer as text.

        Raises ConnectionLoss when not connected, OSError when the command connection fails."""
        host = self._core.current_host
        if not self._core.state.is_connected or host is None:
            raise ConnectionLoss("not connected to a server")
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host[0], host[1], ssl=self.ssl_context,
                                    server_hostname=host[0] if self.ssl_context else None),
            self._core.connect_timeout_ms / 1000)
        try:
            writer.write(cmd)
            chunks: list[bytes] = []
            async with asyncio.timeout(self.session_timeout):
                while chunk := await reader.read(65536):  # the server closes after its answer
                    chunks.append(chunk)
            return b"".join(chunks).decode("utf-8", "replace")
        finally:
            writer.close()

    async def server_version(self, retries: int = 3) -> tuple[int, ...]:
        """The connected server's version, e.g. ``(3, 8, 4)``, from ``envi``'s ``zookeeper.version``
        (asked up to ``1 + retries`` times while the answer has no minor number).

        Raises ConnectionLoss when not connected, ZookeeperError when no version can be read
        (e.g. ``envi`` is not in the server's 4lw.commands.whitelist)."""
        for _ in range(retries + 1):
            answer = await self.command(b"envi")
            for line in answer.splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "zookeeper.version":
                    m = _VERSION.match(value.strip())
                    if m is not None:
                        return tuple(int(d) for d in m.group(1).split("."))
        raise ZookeeperError(f"no server version in the answer to envi: {answer[:200]!r}")

    async def sync(self, path: str = "/") -> str:
        validate_path(path)
        resp = await self._call(OpCode.SYNC, SyncRequest(path), path)
        return resp.path  # type: ignore[no-any-return]

    def transaction(self) -> Transaction:
        return Transaction(self)

    async def multi_read(self, ops: Sequence[tuple[str, str]]) -> list[Any]:
        """``ops``: ``("get", path)`` or ``("children", path)``; one result or ZookeeperError each."""
        records: list[Op] = []
        for kind, path in ops:
            validate_path(path)
            if kind == "get":
                records.append(Op(OpCode.GET_DATA, GetDataRequest(path, False)))
            elif kind == "children":
                records.append(Op(OpCode.GET_CHILDREN, GetChildrenRequest(path, False)))
            else:
                raise ValueError(f"multi_read op must be 'get' or 'children', not {kind!r}")
        if not records:
            return []
        reply = await self._submit(OpCode.MULTI_READ, records)
        results: list[OpResult] = reply.response or []
        if reply.err and not results:
            raise error_for(reply.err)
        out: list[Any] = []
        for (_, path), r in zip(ops, results):
            if r.type == OpCode.ERROR:
                out.append(error_for(r.err, path))
            elif r.type == OpCode.GET_DATA:
                out.append((r.data or b"", r.stat))
            else:
                out.append(list(r.children or []))
        return out

    async def add_auth(self, scheme: str, credential: bytes | str) -> None:
        """Add credentials to the session (replayed after reconnects); raises AuthFailedError.
        A ``str`` credential is sent as UTF-8 (kazoo takes ``"user:password"``)."""
        if isinstance(credential, str):
            credential = credential.encode()
        if not self._core.state.is_connected or self._conn is None:
            await self._wait_connected()
        conn = self._conn
        assert conn is not None and conn.transport is not None
        fut: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        conn.transport.write(self._core.auth_request(scheme, credential, fut, now_ms=self._now_ms()))
        reply = await fut
        if reply.err:
            raise error_for(reply.err)

    async def add_watch(self, path: str, callback: WatchCallback, recursive: bool = False) -> None:
        """A persistent (or persistent-recursive) watch: fires on every change until remove_watches."""
        validate_path(path)
        mode = AddWatchMode.PERSISTENT_RECURSIVE if recursive else AddWatchMode.PERSISTENT
        reg = WatchRegistration("recursive" if recursive else "persistent", path, callback)
        await self._call(OpCode.ADD_WATCH, AddWatchRequest(path, int(mode)), path, reg)

    async def remove_watches(self, path: str, kind: WatcherType = WatcherType.ANY,
                             callback: WatchCallback | None = None) -> None:
        """Remove this client's watches of ``kind`` on ``path`` (only ``callback``'s when given);
        the removed callbacks get a *_WATCH_REMOVED event. NoWatcherError if none matched."""
        validate_path(path)
        core = self._core
        if not core.has_watch(path, kind, callback):
            raise NoWatcherError(path, path)
        op = core.removal_op(path, kind, callback)
        cls = CheckWatchesRequest if op == OpCode.CHECK_WATCHES else RemoveWatchesRequest
        await self._call(op, cls(path, int(kind)), path, WatchRemoval(path, kind, callback))

    async def check_watches(self, path: str, kind: WatcherType = WatcherType.ANY) -> None:
        """NoWatcherError unless the server holds a watch of ``kind`` on ``path`` for this session."""
        validate_path(path)
        await self._call(OpCode.CHECK_WATCHES, CheckWatchesRequest(path, int(kind)), path)

    async def whoami(self) -> list[ClientInfo]:
        resp = await self._call(OpCode.WHO_AM_I, None, None)
        return list(resp.clientInfo)

    async def ensure_path(self, path: str, acl: Sequence[ACL] | None = None) -> None:
        """Create every missing node of ``path`` (persistent, empty)."""
        validate_path(path)
        if path == "/" or await self.exists(path) is not None:
            return
        parts = path.split("/")[1:]
        for i in range(1, len(parts) + 1):
            node = "/" + "/".join(parts[:i])
            try:
                await self.create(node, b"", acl)
            except NodeExistsError:
                pass

    async def watch(self, path: str, recursive: bool = False) -> AsyncIterator[WatchedEvent]:
        """``async for event in zk.watch(path)``: a persistent watch for the life of the iteration.

        Ends when the watch is removed; raises SessionExpiredError when the session expires."""
        queue: asyncio.Queue[WatchedEvent] = asyncio.Queue()
        callback = queue.put_nowait
        await self.add_watch(path, callback, recursive)
        try:
            while True:
                event = await queue.get()
                if event.type == EventType.PERSISTENT_WATCH_REMOVED:
                    return
                if event.type == EventType.NONE:
                    if event.state == KeeperState.EXPIRED:
                        raise SessionExpiredError("", path)
                    if event.state == KeeperState.AUTH_FAILED:
                        raise error_for(-115, path)
                    continue
                yield event
        finally:
            if self._core.state.is_connected and self._core.has_watch(path, WatcherType.ANY, callback):
                try:
                    await self.remove_watches(path, WatcherType.ANY, callback)
                except ZookeeperError:
                    pass
