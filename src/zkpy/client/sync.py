"""`Client`: the `AsyncClient` API as blocking calls, for code that does not run an event loop.

A `Client` owns two daemon threads:

* the **loop thread** runs a private asyncio event loop (``loop.run_forever()``) on which the
  `AsyncClient` lives; every call into the `AsyncClient` is made on that thread;
* the **dispatch thread** runs every user callback: watch callbacks, listener callbacks and the
  done-callbacks of the ``concurrent.futures.Future`` returned by the ``<op>_async`` methods.

Invariants this module owns:

- user callbacks run on the dispatch thread only, one at a time, in the order the `AsyncClient`
  handed them over (one ``queue.Queue``, one consumer), never on the loop thread; so a callback
  may block, and may call the client's blocking methods: that blocks the dispatch thread while the
  loop thread keeps serving the connection;
- a blocking method is completed by the loop thread, never by the dispatch thread, so calling it
  from a callback cannot deadlock; waiting on an ``<op>_async`` future from a callback would
  (the dispatch thread would wait for itself), so ``result()`` raises RuntimeError there instead;
- the dispatch queue is unbounded on purpose: bounding it would make the loop thread wait for a
  callback, and a callback that waits for the loop would then deadlock (the Java client's
  EventThread queue is unbounded for the same reason); the pending FIFO and the socket bound it;
- ``close()`` is idempotent, closes the session, stops the loop and joins both threads (the
  dispatch thread is not joined when ``close()`` is called from a callback on it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import queue
import threading
import warnings
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Literal, ParamSpec, Self, TypeVar, overload

from zkpy.client.aio import AsyncClient
from zkpy.client.aio import Transaction as AsyncTransaction
from zkpy.client.core import ClientState, WatchedEvent
from zkpy.errors import (
    AuthFailedError,
    ConnectionClosedError,
    SessionExpiredError,
    ZookeeperError,
)
from zkpy.wire.consts import EventType, KeeperState, WatcherType
from zkpy.wire.proto import ACL, ClientInfo, Stat

from .retry import KazooRetry, RetryPolicy

if TYPE_CHECKING:
    import random
    import ssl

__all__ = ["Client", "Transaction"]

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

WatchCallback = Callable[[WatchedEvent], object]
StateListener = Callable[[ClientState], object]
TransactionResult = list["str | Stat | bool | ZookeeperError"]
MultiReadResult = list["tuple[bytes, Stat] | list[str] | ZookeeperError"]

_STOP = object()


class _Dispatcher:
    """One thread running queued calls in order; exceptions from a call are logged, not fatal."""

    def __init__(self, name: str) -> None:
        self._queue: queue.Queue[Any] = queue.Queue()  # unbounded: see the module doc
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def submit(self, fn: Callable[..., object], *args: Any) -> None:
        self._queue.put((fn, args))

    def stop(self) -> None:
        """Run what is queued, then end (the thread exits after the last queued call)."""
        self._queue.put(_STOP)

    @property
    def on_thread(self) -> bool:
        return threading.current_thread() is self.thread

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            fn, args = item
            try:
                fn(*args)
            except Exception:
                log.exception("zkpy callback %r raised", fn)


class _OnDispatcher:
    """Wraps a user callback so the loop thread only hands it to the dispatch thread.

    The `AsyncClient` calls watch and listener callbacks inline while it processes a batch of
    events, but the coroutine awaiting a reply resumes one loop step after the reply resolved its
    future (``set_result`` schedules the wake-up with ``call_soon``). So the hand-over is made one
    ``call_soon`` step later too: both kinds then reach the dispatch queue in the order the
    `AsyncClient` produced them (see `Client._run_async`).

    Equal (and hashing) like the callback it wraps, so the `AsyncClient` matches wrappers made
    at different times for the same callback (watch dedup, remove_watches, remove_listener)."""

    __slots__ = ("_dispatcher", "_loop", "fn")

    def __init__(self, dispatcher: _Dispatcher, loop: asyncio.AbstractEventLoop, fn: Callable[..., object]) -> None:
        self._dispatcher = dispatcher
        self._loop = loop
        self.fn = fn

    def __call__(self, *args: Any) -> None:  # on the loop thread
        self._loop.call_soon(self._dispatcher.submit, self.fn, *args)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _OnDispatcher) and (other.fn is self.fn or other.fn == self.fn)

    def __hash__(self) -> int:
        try:
            return hash(self.fn)
        except TypeError:  # an unhashable callable is matched by identity
            return id(self.fn)

    def __repr__(self) -> str:
        return f"_OnDispatcher({self.fn!r})"


class _DispatchedFuture(concurrent.futures.Future[T], Generic[T]):
    """A Future completed on the dispatch thread, whose done-callbacks always run there
    (also those added after it completed, which a plain Future runs in the adding thread)."""

    def __init__(self, dispatcher: _Dispatcher) -> None:
        super().__init__()
        self._dispatcher = dispatcher

    def add_done_callback(self, fn: Callable[[concurrent.futures.Future[T]], object]) -> None:
        if self.done():
            self._dispatcher.submit(fn, self)
        else:
            # set on the dispatch thread, so the callback runs there; if the Future completed
            # between the check and here, Future.add_done_callback runs it at once in this
            # thread: re-route it to the dispatch thread.
            super().add_done_callback(lambda f: fn(f) if self._dispatcher.on_thread
                                      else self._dispatcher.submit(fn, f))

    def result(self, timeout: float | None = None) -> T:
        self._check_not_dispatcher()
        return super().result(timeout)

    # kazoo's IAsyncResult names
    def get(self, block: bool = True, timeout: float | None = None) -> T:
        """kazoo's ``get``: the result (raises the error); ``block=False`` is `get_nowait`."""
        if not block and not self.done():
            raise TimeoutError("not done")
        return self.result(timeout)

    def get_nowait(self) -> T:
        return self.get(block=False)

    def rawlink(self, callback: Callable[[concurrent.futures.Future[T]], object]) -> None:
        """kazoo's ``rawlink``: `add_done_callback` (the callback runs on the dispatch thread)."""
        self.add_done_callback(callback)

    def successful(self) -> bool:
        return self.done() and not self.cancelled() and super().exception(0) is None

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._check_not_dispatcher()
        return super().exception(timeout)

    def _check_not_dispatcher(self) -> None:
        if not self.done() and self._dispatcher.on_thread:
            raise RuntimeError("waiting on a zkpy _async future from a callback would deadlock: "
                               "call the blocking method instead, or add a done-callback")


def _settle(future: concurrent.futures.Future[T], result: T | None, exc: BaseException | None) -> None:
    """Complete ``future`` (on the dispatch thread, so its done-callbacks run there)."""
    if future.done() or not future.set_running_or_notify_cancel():
        return  # already settled, or the caller cancelled it
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)  # type: ignore[arg-type]


class Transaction:
    """A multi built op by op on the `Client`; ``commit()`` blocks and returns one result per op."""

    def __init__(self, client: Client, tx: AsyncTransaction) -> None:
        self._client = client
        self._tx = tx

    def create(self, path: str, value: bytes = b"", acl: Sequence[ACL] | None = None,
               ephemeral: bool = False, sequence: bool = False, *, container: bool = False,
               ttl_ms: int | None = None) -> Transaction:
        self._client._on_loop(lambda: self._tx.create(path, value, acl, ephemeral=ephemeral, sequence=sequence,
                                                      container=container, ttl_ms=ttl_ms))
        return self

    def delete(self, path: str, version: int = -1) -> Transaction:
        self._client._on_loop(lambda: self._tx.delete(path, version))
        return self

    def set_data(self, path: str, value: bytes, version: int = -1) -> Transaction:
        self._client._on_loop(lambda: self._tx.set_data(path, value, version))
        return self

    def check(self, path: str, version: int) -> Transaction:
        self._client._on_loop(lambda: self._tx.check(path, version))
        return self

    def commit(self) -> TransactionResult:
        """One result per op (path, Stat or True) or, if the multi failed, each op's error.

        Raises ConnectionLoss, SessionExpiredError."""
        return self._client._run(self._tx.commit)

    def commit_async(self) -> _DispatchedFuture[TransactionResult]:
        return self._client._run_async(self._tx.commit)

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None and not self._tx.committed:
            self.commit()


class Client:
    """ZooKeeper client with blocking calls (see docs/client.md); callbacks run on one thread.

    Every operation raises the `zkpy.errors` class of the server's error code, ConnectionLoss
    if the connection dropped before the reply (or the client is closed), SessionExpiredError
    once the session is gone."""

    def __init__(
        self,
        hosts: str = "127.0.0.1:2181",
        *,
        session_timeout: float = 10.0,
        connect_timeout: float | None = None,
        read_only: bool = False,
        auth: Sequence[tuple[str, bytes | str]] = (),
        default_acl: Sequence[ACL] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        rng: random.Random | None = None,
        max_outstanding: int = 10_000,
        client_id: tuple[int, bytes] | None = None,
        randomize_hosts: bool = True,
        connection_retry: RetryPolicy | KazooRetry | Mapping[str, Any] | None = None,
        command_retry: RetryPolicy | KazooRetry | Mapping[str, Any] | None = None,
        create_chroot: bool = False,
    ) -> None:
        """See `AsyncClient` and docs/client.md. ``client_id`` resumes a session (kazoo's
        ``client_id``); ``connection_retry`` paces (and with ``max_tries`` bounds) the rounds of
        connection attempts; ``command_retry`` is the policy of `retry` (by default: retry without
        limit, as kazoo's); both take a `RetryPolicy`, a `KazooRetry` or a dict of KazooRetry's
        arguments. ``create_chroot`` creates a missing chroot at `start` (else a warning)."""
        self._closed = False
        self._close_lock = threading.Lock()
        self._close_done = threading.Event()
        self._dispatcher = _Dispatcher(name=f"zkpy-dispatch-{id(self):x}")
        self._loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(target=self._run_loop, name=f"zkpy-loop-{id(self):x}", daemon=True)
        self._loop_thread.start()

        async def make() -> AsyncClient:
            return AsyncClient(hosts, session_timeout=session_timeout, connect_timeout=connect_timeout,
                               read_only=read_only, auth=auth, default_acl=default_acl,
                               ssl_context=ssl_context, rng=rng, max_outstanding=max_outstanding,
                               client_id=client_id, randomize_hosts=randomize_hosts,
                               connection_retry=connection_retry, command_retry=command_retry,
                               create_chroot=create_chroot)

        try:
            self._async: AsyncClient = asyncio.run_coroutine_threadsafe(make(), self._loop).result()
        except BaseException:
            self._stop_threads()
            raise

    # ------------------------------------------------------------------ threads

    def _run_loop(self) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            try:
                # flush callbacks queued before stop() (they may start tasks), then cancel
                # tasks until none is left: each cancelled _async call settles its Future
                loop.run_until_complete(asyncio.sleep(0))
                while tasks := asyncio.all_tasks(loop):
                    for task in tasks:
                        task.cancel()
                    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    def _stop_threads(self) -> None:
        if self._loop_thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._loop_thread.join()
        self._dispatcher.stop()  # after the loop: whatever the loop enqueued runs first
        if not self._dispatcher.on_thread:
            self._dispatcher.thread.join()

    @property
    def loop_thread(self) -> threading.Thread:
        """The thread running the private event loop (no user callback ever runs on it)."""
        return self._loop_thread

    @property
    def dispatch_thread(self) -> threading.Thread:
        """The thread running every watch, listener and future callback, in order."""
        return self._dispatcher.thread

    def _check_open(self) -> None:
        if self._closed:
            raise ConnectionClosedError("client is closed")
        if threading.current_thread() is self._loop_thread:
            raise RuntimeError("a blocking zkpy call on the client's own loop thread would deadlock")

    def _on_loop(self, fn: Callable[[], T]) -> T:
        """Run a plain function on the loop thread and return its result (blocking)."""
        self._check_open()

        async def call() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result()

    def _run(self, fn: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """Await ``fn(*args, **kwargs)`` on the loop thread; block until it is done. A wait cut
        short by an exception in this thread (KeyboardInterrupt) cancels the coroutine."""
        self._check_open()
        coro = fn(*args, **kwargs)  # inert until the loop runs it; no wrapper coroutine per call
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)  # type: ignore[arg-type]
        try:
            return future.result()
        except concurrent.futures.CancelledError:  # close() cancelled it
            raise ConnectionClosedError("client is closed") from None
        except BaseException:
            future.cancel()  # no-op once done; else the coroutine gets CancelledError and cleans up
            raise

    def run(self, fn: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """Await the coroutine function ``fn(*args, **kwargs)`` on the client's event loop, where
        `aio` lives, and block until it is done: how blocking code uses asyncio code written for
        `AsyncClient` (the blocking recipes are built this way). An interrupted wait
        (KeyboardInterrupt) cancels the coroutine, so it can clean up.

        Raises what ``fn`` raises, ConnectionClosedError if the client is (or gets) closed, and
        RuntimeError on the loop thread (it would wait for itself)."""
        return self._run(fn, *args, **kwargs)

    @property
    def aio(self) -> AsyncClient:
        """The `AsyncClient` this client runs on its loop thread. Use it only in coroutines
        passed to `run` (it belongs to that loop, not to the calling thread)."""
        return self._async

    def call_soon(self, fn: Callable[..., object], *args: Any) -> None:
        """Call ``fn(*args)`` on the client's loop thread, from any thread, without waiting."""
        self._loop.call_soon_threadsafe(fn, *args)

    def dispatch(self, fn: Callable[..., T], *args: Any) -> concurrent.futures.Future[T]:
        """Call ``fn(*args)`` on the dispatch thread, in order with every other callback; the
        Future holds its result or exception. The blocking recipes run user callbacks this way."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def call() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args))
            except BaseException as exc:
                future.set_exception(exc)

        self._dispatcher.submit(call)
        return future

    def _run_async(self, fn: Callable[P, Awaitable[T]], *args: P.args,
                   **kwargs: P.kwargs) -> _DispatchedFuture[T]:
        """Start ``fn(*args, **kwargs)`` on the loop; the Future completes on the dispatch thread.

        The completion is queued by the coroutine itself as soon as it resumes with the reply
        (one ``call_soon`` step after the `AsyncClient` resolved the reply's future, the same step
        `_OnDispatcher` adds to callbacks), not by a task done-callback, which would add a step
        and let a later watch callback overtake it."""
        self._check_open()
        future: _DispatchedFuture[T] = _DispatchedFuture(self._dispatcher)
        submit = self._dispatcher.submit

        async def call() -> None:
            try:
                result = await fn(*args, **kwargs)
            except asyncio.CancelledError:
                submit(_settle, future, None, ConnectionClosedError("client is closed"))
                raise
            except BaseException as exc:
                submit(_settle, future, None, exc)
            else:
                submit(_settle, future, result, None)

        def start() -> None:  # on the loop thread
            task = self._loop.create_task(call())
            # a task cancelled before its first step never enters call()'s try block
            task.add_done_callback(lambda t: submit(_settle, future, None, ConnectionClosedError("client is closed"))
                                   if t.cancelled() else None)

        self._loop.call_soon_threadsafe(start)
        return future

    def _wrap(self, fn: Callable[..., object] | None) -> Any:
        return None if fn is None else _OnDispatcher(self._dispatcher, self._loop, fn)

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout: float = 15.0) -> None:
        """Connect and establish the session. Raises ConnectionLoss if no server accepts it in time.

        After `stop` (or the end of a session) it starts a new session, as kazoo's does. A
        missing chroot gets a UserWarning (or is created, with ``create_chroot``)."""
        warning = self._run(self._async._start, timeout)
        if warning is not None:
            log.warning("%s", warning)
            warnings.warn(warning, UserWarning, stacklevel=2)

    def start_async(self, timeout: float | None = 15.0) -> threading.Event:
        """Start connecting and return at once (kazoo's ``start_async``): the Event is set once
        the session is established; if it is not within ``timeout``, it stays unset and the
        client stops trying. ``None``: it keeps trying until `stop`, as kazoo's does."""
        connected = threading.Event()
        future = self._run_async(self._async._start, math.inf if timeout is None else timeout)

        def done(f: concurrent.futures.Future[str | None]) -> None:
            if f.exception() is None:
                warning = f.result()
                if warning is not None:
                    log.warning("%s", warning)
                connected.set()

        future.add_done_callback(done)
        return connected

    def stop(self) -> None:
        """Close the session (ephemerals go) and the connection, as kazoo's ``stop``; the client
        may `start` again (a new session). `close` also ends the client's threads."""
        if not self._closed:
            self._run(self._async.close)

    def restart(self) -> None:
        """`stop`, then `start`: a new session, the listeners kept."""
        self.stop()
        self.start()

    def set_hosts(self, hosts: str, randomize_hosts: bool | None = None) -> None:
        """Use another host list (same chroot) from the next connection attempt on; the current
        connection is kept. Raises ValueError if the chroot differs."""
        self._on_loop(lambda: self._async.set_hosts(hosts, randomize_hosts))

    def command(self, cmd: bytes = b"ruok") -> str:
        """A four-letter word's answer from the connected server (kazoo's ``command``).

        Raises ConnectionLoss when not connected, OSError when the command connection fails."""
        return self._run(self._async.command, cmd)

    def server_version(self, retries: int = 3) -> tuple[int, ...]:
        """The connected server's version, e.g. ``(3, 8, 4)``, from ``envi``.

        Raises ConnectionLoss, ZookeeperError (no version in the answer)."""
        return self._run(self._async.server_version, retries)

    def retry(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Call the blocking ``fn(*args, **kwargs)`` under ``command_retry`` (kazoo's ``zk.retry``):
        retried on ConnectionLoss and OperationTimeoutError, by default without limit."""
        return self._async.command_retry.run_sync(fn, *args, **kwargs)

    def close(self) -> None:
        """Close the session (ephemerals go) and the connection, stop the loop and join both
        threads. Idempotent; a second caller waits for the first to finish (except on the
        dispatch thread, which the first caller may be joining)."""
        with self._close_lock:
            first = not self._closed
            self._closed = True
        if not first:
            if not self._dispatcher.on_thread:
                self._close_done.wait()
            return
        try:
            asyncio.run_coroutine_threadsafe(self._async.close(), self._loop).result()
        finally:
            self._stop_threads()
            self._close_done.set()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def state(self) -> ClientState:
        return self._async.state

    @property
    def session_id(self) -> int:
        return self._async.session_id

    @property
    def client_id(self) -> tuple[int, bytes]:
        """``(session_id, password)``: ``Client(hosts, client_id=...)`` resumes this session."""
        return self._async.client_id

    @property
    def client_state(self) -> ClientState:
        """kazoo's name for `state`."""
        return self._async.state

    @property
    def connected(self) -> bool:
        return self._async.connected

    @property
    def chroot(self) -> str | None:
        return self._async.chroot

    @property
    def hosts(self) -> str:
        return self._async.hosts

    @property
    def default_acl(self) -> list[ACL]:
        """The ACL of nodes created without one."""
        return self._async.default_acl

    @property
    def read_only(self) -> bool:
        return self._async.read_only

    @property
    def randomize_hosts(self) -> bool:
        return self._async.randomize_hosts

    def unchroot(self, path: str) -> str:
        """``path`` (a server path) relative to the chroot."""
        return self._async.unchroot(path)

    @property
    def last_zxid(self) -> int:
        return self._async.last_zxid

    @property
    def closed(self) -> bool:
        return self._closed

    def add_listener(self, callback: StateListener) -> None:
        """Call ``callback(state)`` on every state transition, on the dispatch thread, in order."""
        self._on_loop(lambda: self._async.add_listener(self._wrap(callback)))

    def remove_listener(self, callback: StateListener) -> None:
        self._on_loop(lambda: self._async.remove_listener(self._wrap(callback)))

    # ------------------------------------------------------------------ operations (blocking)

    @overload
    def create(self, path: str, value: bytes = ..., acl: Sequence[ACL] | None = ...,
               ephemeral: bool = ..., sequence: bool = ..., makepath: bool = ...,
               include_data: Literal[False] = ..., *, container: bool = ..., ttl_ms: int | None = ...,
               make_parents: bool = ..., include_stat: Literal[False] = ...) -> str: ...
    @overload
    def create(self, path: str, value: bytes = ..., acl: Sequence[ACL] | None = ...,
               ephemeral: bool = ..., sequence: bool = ..., makepath: bool = ...,
               include_data: bool = ..., *, container: bool = ..., ttl_ms: int | None = ...,
               make_parents: bool = ..., include_stat: Literal[True]) -> tuple[str, Stat]: ...
    @overload
    def create(self, path: str, value: bytes = ..., acl: Sequence[ACL] | None = ...,
               ephemeral: bool = ..., sequence: bool = ..., makepath: bool = ..., *,
               include_data: Literal[True], container: bool = ..., ttl_ms: int | None = ...,
               make_parents: bool = ..., include_stat: bool = ...) -> tuple[str, Stat]: ...
    def create(self, path: str, value: bytes = b"", acl: Sequence[ACL] | None = None,
               ephemeral: bool = False, sequence: bool = False, makepath: bool = False,
               include_data: bool = False, *, container: bool = False,
               ttl_ms: int | None = None, make_parents: bool = False,
               include_stat: bool = False) -> str | tuple[str, Stat]:
        """Create a node; returns its path (with ``include_stat``, ``(path, Stat)``).
        ``makepath``/``include_data`` are kazoo's names of ``make_parents``/``include_stat``.

        Raises NodeExistsError, NoNodeError (parent missing), NoChildrenForEphemeralsError,
        InvalidACLError, NoAuthError, ConnectionLoss, SessionExpiredError."""
        return self._run(self._async.create, path, value, acl, ephemeral=ephemeral, sequence=sequence,  # type: ignore[arg-type]  # an overload
                         container=container, ttl_ms=ttl_ms, make_parents=make_parents or makepath,
                         include_stat=include_stat or include_data)

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        """Delete a node (``recursive``: its subtree, children first).

        Raises NoNodeError, BadVersionError, NotEmptyError, NoAuthError, ConnectionLoss,
        SessionExpiredError."""
        self._run(self._async.delete, path, version, recursive=recursive)

    def exists(self, path: str, watch: WatchCallback | None = None) -> Stat | None:
        """The node's Stat or None; ``watch`` fires on its creation, deletion or data change.

        Raises NoAuthError, ConnectionLoss, SessionExpiredError."""
        return self._run(self._async.exists, path, self._wrap(watch))

    def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        """``(data, Stat)``; ``watch`` fires on the node's deletion or data change.

        Raises NoNodeError, NoAuthError, ConnectionLoss, SessionExpiredError."""
        return self._run(self._async.get, path, self._wrap(watch))

    get_data = get

    def set(self, path: str, value: bytes, version: int = -1) -> Stat:
        """Set the node's data; returns the new Stat.

        Raises NoNodeError, BadVersionError, NoAuthError, ConnectionLoss, SessionExpiredError."""
        return self._run(self._async.set, path, value, version)

    set_data = set

    @overload
    def get_children(self, path: str, watch: WatchCallback | None = ...,
                     include_data: Literal[False] = ..., *, include_stat: Literal[False] = ...) -> list[str]: ...
    @overload
    def get_children(self, path: str, watch: WatchCallback | None = ...,
                     include_data: bool = ..., *, include_stat: Literal[True]) -> tuple[list[str], Stat]: ...
    @overload
    def get_children(self, path: str, watch: WatchCallback | None = ..., *,
                     include_data: Literal[True], include_stat: bool = ...) -> tuple[list[str], Stat]: ...
    def get_children(self, path: str, watch: WatchCallback | None = None, include_data: bool = False, *,
                     include_stat: bool = False) -> list[str] | tuple[list[str], Stat]:
        """The children's names (with ``include_stat``, or kazoo's ``include_data``: ``(names,
        Stat)``); ``watch`` fires on the node's deletion or a change of its children.

        Raises NoNodeError, NoAuthError, ConnectionLoss, SessionExpiredError."""
        return self._run(self._async.get_children, path, self._wrap(watch),  # type: ignore[arg-type]  # an overload
                         include_stat=include_stat or include_data)

    def get_all_children_number(self, path: str) -> int:
        """The number of nodes below ``path``. Raises NoNodeError, ConnectionLoss, SessionExpiredError."""
        return self._run(self._async.get_all_children_number, path)

    def get_ephemerals(self, prefix: str = "/") -> list[str]:
        """This session's ephemeral nodes under ``prefix``. Raises ConnectionLoss, SessionExpiredError."""
        return self._run(self._async.get_ephemerals, prefix)

    def get_acl(self, path: str) -> tuple[list[ACL], Stat]:
        """Raises NoNodeError, NoAuthError, ConnectionLoss, SessionExpiredError."""
        return self._run(self._async.get_acl, path)

    def set_acl(self, path: str, acl: Sequence[ACL], version: int = -1) -> Stat:
        """Raises NoNodeError, BadVersionError, InvalidACLError, NoAuthError, ConnectionLoss,
        SessionExpiredError."""
        return self._run(self._async.set_acl, path, acl, version)

    get_acls = get_acl  # kazoo's names
    set_acls = set_acl

    def reconfig(self, joining: str | None = None, leaving: str | None = None, new_members: str | None = None,
                 from_config: int = -1) -> tuple[bytes, Stat]:
        """ZooKeeper's reconfig (see ``AsyncClient.reconfig``): the new config string and the Stat of
        /zookeeper/config."""
        return self._run(self._async.reconfig, joining, leaving, new_members, from_config)

    def sync(self, path: str = "/") -> str:
        """Wait until the server has caught up with the leader. Raises ConnectionLoss, SessionExpiredError."""
        return self._run(self._async.sync, path)

    def transaction(self) -> Transaction:
        """A `Transaction` to build; ``commit()`` sends it as one multi."""
        self._check_open()
        return Transaction(self, self._on_loop(self._async.transaction))

    def multi_read(self, ops: Sequence[tuple[str, str]]) -> MultiReadResult:
        """Read several nodes at once: ``("get", path)`` or ``("children", path)`` per op; each
        result is ``(data, Stat)``, a list of names or the op's error.

        Raises ConnectionLoss, SessionExpiredError."""
        return self._run(self._async.multi_read, ops)

    def add_auth(self, scheme: str, credential: bytes | str) -> None:
        """Raises AuthFailedError, ConnectionLoss, SessionExpiredError."""
        self._run(self._async.add_auth, scheme, credential)

    def add_watch(self, path: str, callback: WatchCallback, recursive: bool = False) -> None:
        """A persistent (``recursive``: persistent-recursive) watch calling ``callback`` on the
        dispatch thread until removed. Raises ConnectionLoss, SessionExpiredError."""
        self._run(self._async.add_watch, path, self._wrap(callback), recursive)

    def remove_watches(self, path: str, kind: WatcherType = WatcherType.ANY,
                       callback: WatchCallback | None = None) -> None:
        """Raises NoWatcherError if no watch matched, ConnectionLoss, SessionExpiredError."""
        self._run(self._async.remove_watches, path, kind, self._wrap(callback))

    def check_watches(self, path: str, kind: WatcherType = WatcherType.ANY) -> None:
        """Raises NoWatcherError if the server has none, ConnectionLoss, SessionExpiredError."""
        self._run(self._async.check_watches, path, kind)

    def whoami(self) -> list[ClientInfo]:
        """The identities of this session. Raises ConnectionLoss, SessionExpiredError."""
        return self._run(self._async.whoami)

    def ensure_path(self, path: str, acl: Sequence[ACL] | None = None) -> None:
        """Create every missing node on the way to ``path``.

        Raises NoAuthError, ConnectionLoss, SessionExpiredError."""
        self._run(self._async.ensure_path, path, acl)

    def watch(self, path: str, recursive: bool = False) -> Iterator[WatchedEvent]:
        """Iterate over the events of a persistent watch on ``path`` for the life of the iteration
        (as `AsyncClient.watch`: ends when the watch is removed; raises SessionExpiredError or
        AuthFailedError when the session ends).

        Unlike callbacks, events reach the iterating thread directly from the loop thread, so
        the iteration works on any thread, the dispatch thread included."""
        events: queue.Queue[WatchedEvent] = queue.Queue()
        callback = _DirectWatch(events)
        self._run(self._async.add_watch, path, callback, recursive)

        def iterate() -> Iterator[WatchedEvent]:
            try:
                while True:
                    event = events.get()
                    if event.type == EventType.PERSISTENT_WATCH_REMOVED:
                        return
                    if event.type == EventType.NONE:
                        if event.state == KeeperState.EXPIRED:
                            raise SessionExpiredError("", path)
                        if event.state == KeeperState.AUTH_FAILED:
                            raise AuthFailedError("", path)
                        continue
                    yield event
            finally:
                if not self._closed:
                    try:
                        self._run(self._async.remove_watches, path, WatcherType.ANY, callback)
                    except ZookeeperError:
                        pass

        return iterate()

    # ------------------------------------------------------------------ operations (futures)
    # Each returns a concurrent.futures.Future completed on the dispatch thread, in order with
    # the watch and listener callbacks; errors are the blocking method's, set on the Future.

    def create_async(self, path: str, value: bytes = b"", acl: Sequence[ACL] | None = None,
                     ephemeral: bool = False, sequence: bool = False, makepath: bool = False,
                     include_data: bool = False, *, container: bool = False,
                     ttl_ms: int | None = None, make_parents: bool = False,
                     include_stat: bool = False) -> _DispatchedFuture[str | tuple[str, Stat]]:
        return self._run_async(self._async.create, path, value, acl, ephemeral=ephemeral, sequence=sequence,  # type: ignore[arg-type]  # an overload
                               container=container, ttl_ms=ttl_ms, make_parents=make_parents or makepath,
                               include_stat=include_stat or include_data)

    def delete_async(self, path: str, version: int = -1,
                     recursive: bool = False) -> _DispatchedFuture[None]:
        return self._run_async(self._async.delete, path, version, recursive=recursive)

    def exists_async(self, path: str,
                     watch: WatchCallback | None = None) -> _DispatchedFuture[Stat | None]:
        return self._run_async(self._async.exists, path, self._wrap(watch))

    def get_async(self, path: str,
                  watch: WatchCallback | None = None) -> _DispatchedFuture[tuple[bytes, Stat]]:
        return self._run_async(self._async.get, path, self._wrap(watch))

    get_data_async = get_async

    def set_async(self, path: str, value: bytes, version: int = -1) -> _DispatchedFuture[Stat]:
        return self._run_async(self._async.set, path, value, version)

    set_data_async = set_async

    def get_children_async(
        self, path: str, watch: WatchCallback | None = None, include_data: bool = False, *,
        include_stat: bool = False,
    ) -> _DispatchedFuture[list[str] | tuple[list[str], Stat]]:
        return self._run_async(self._async.get_children, path, self._wrap(watch),  # type: ignore[arg-type]  # an overload
                               include_stat=include_stat or include_data)

    def get_all_children_number_async(self, path: str) -> _DispatchedFuture[int]:
        return self._run_async(self._async.get_all_children_number, path)

    def get_ephemerals_async(self, prefix: str = "/") -> _DispatchedFuture[list[str]]:
        return self._run_async(self._async.get_ephemerals, prefix)

    def get_acl_async(self, path: str) -> _DispatchedFuture[tuple[list[ACL], Stat]]:
        return self._run_async(self._async.get_acl, path)

    def set_acl_async(self, path: str, acl: Sequence[ACL], version: int = -1) -> _DispatchedFuture[Stat]:
        return self._run_async(self._async.set_acl, path, acl, version)

    get_acls_async = get_acl_async
    set_acls_async = set_acl_async

    def reconfig_async(self, joining: str | None, leaving: str | None, new_members: str | None,
                       from_config: int = -1) -> _DispatchedFuture[tuple[bytes, Stat]]:
        return self._run_async(self._async.reconfig, joining, leaving, new_members, from_config)

    def sync_async(self, path: str = "/") -> _DispatchedFuture[str]:
        return self._run_async(self._async.sync, path)

    def multi_read_async(self, ops: Sequence[tuple[str, str]]) -> _DispatchedFuture[MultiReadResult]:
        return self._run_async(self._async.multi_read, ops)

    def add_auth_async(self, scheme: str, credential: bytes | str) -> _DispatchedFuture[None]:
        return self._run_async(self._async.add_auth, scheme, credential)

    def add_watch_async(self, path: str, callback: WatchCallback,
                        recursive: bool = False) -> _DispatchedFuture[None]:
        return self._run_async(self._async.add_watch, path, self._wrap(callback), recursive)

    def remove_watches_async(self, path: str, kind: WatcherType = WatcherType.ANY,
                             callback: WatchCallback | None = None) -> _DispatchedFuture[None]:
        return self._run_async(self._async.remove_watches, path, kind, self._wrap(callback))

    def check_watches_async(self, path: str,
                            kind: WatcherType = WatcherType.ANY) -> _DispatchedFuture[None]:
        return self._run_async(self._async.check_watches, path, kind)

    def whoami_async(self) -> _DispatchedFuture[list[ClientInfo]]:
        return self._run_async(self._async.whoami)

    def ensure_path_async(self, path: str,
                          acl: Sequence[ACL] | None = None) -> _DispatchedFuture[None]:
        return self._run_async(self._async.ensure_path, path, acl)


class _DirectWatch:
    """A persistent-watch callback for `Client.watch`: puts events on the iterator's queue."""

    __slots__ = ("_events",)

    def __init__(self, events: queue.Queue[WatchedEvent]) -> None:
        self._events = events

    def __call__(self, event: WatchedEvent) -> None:
        self._events.put(event)
