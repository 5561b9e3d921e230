"""What every recipe shares: its retry policy, its one way of waiting, its clean-up on the way out.

How a recipe waits (the paper's "watches allow for efficient waiting"): it arms a `Waiter`, sets
a watch whose callback is the waiter's `fire`, and awaits the waiter. The wait ends when

* the watch fires (any event: the recipe then looks again at what it watches; a spurious wake-up
  costs one read and is never wrong),
* the session ends (EXPIRED, AUTH_FAILED, CLOSED): the wait raises SessionExpiredError,
  AuthFailedError or ConnectionClosedError,
* the recipe's ``cancel()`` is called: the wait raises `CancelledError`.

A SUSPENDED connection does not end a wait: the client re-registers its watches on the next
server (setWatches) and the server fires those whose nodes changed meanwhile.

``fire`` is one bound method per waiter, so watches set again and again on the same path with it
are one registration in the client, not one more each time (no growth in a long wait).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from zkpy.client.aio import AsyncClient
from zkpy.client.core import ClientState, WatchedEvent
from zkpy.client.retry import RetryPolicy
from zkpy.errors import AuthFailedError, ConnectionClosedError, NoNodeError, SessionExpiredError

from .errors import CancelledError, LockTimeout, RecipeTimeout

T = TypeVar("T")

__all__ = ["DEFAULT_RETRY", "Waiter", "acquire_once", "call_user", "cleanup_after", "fire_and_forget",
           "read_children_data", "session_error", "wait_gone", "within"]

DEFAULT_RETRY = RetryPolicy(max_tries=None, delay=0.05, backoff=2.0, max_delay=1.0, jitter=0.2)
"""Recipes retry ConnectionLoss for as long as they wait: a retry is only ever a read or an
idempotent step (creates go through `sequential.create_once`); the caller's ``timeout`` or a
cancellation bounds it, and SessionExpiredError ends it."""


def session_error(state: ClientState) -> Exception | None:
    """The error a recipe raises once the session is over, or None while it may go on."""
    if state is ClientState.EXPIRED:
        return SessionExpiredError("the session expired")
    if state is ClientState.AUTH_FAILED:
        return AuthFailedError("the server refused the session's credentials")
    if state is ClientState.CLOSED:
        return ConnectionClosedError("client is closed")
    return None


class Waiter:
    """One recipe's wake-up: armed before the watch is set, fired by the watch, the end of the
    session or ``cancel()``. Create it anywhere; use it on the client's event loop."""

    def __init__(self, zk: AsyncClient) -> None:
        self._zk = zk
        self._wakeup: asyncio.Future[None] | None = None
        self.cancelled = False
        self.last_event: WatchedEvent | None = None
        self.notifications = 0  # watch events received: how a test sees the herd effect, or its absence

    def arm(self) -> None:
        """Start a new wait: a wake-up from now on ends the next `wait`."""
        self._wakeup = asyncio.get_running_loop().create_future()

    def fire(self, event: WatchedEvent | None = None) -> None:
        """The watch callback (and the session listener): wake the current wait, if any."""
        if event is not None:
            self.last_event = event
            self.notifications += 1
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    @property
    def fired(self) -> bool:
        """The armed wake-up has come (a later `wait` returns at once)."""
        return self._wakeup is not None and self._wakeup.done()

    def _on_state(self, state: ClientState) -> None:
        if state.is_terminal:
            self.fire()

    def cancel(self) -> None:
        """Make the current and every later `wait` raise `CancelledError` (loop thread only)."""
        self.cancelled = True
        self.fire()

    def check(self) -> None:
        """Raise if the wait cannot go on: cancelled, or the session is over."""
        if self.cancelled:
            raise CancelledError("cancelled")
        err = session_error(self._zk.state)
        if err is not None:
            raise err

    async def wait(self) -> None:
        """Until the armed wake-up fires. Raises `CancelledError`, or the session's error."""
        wakeup = self._wakeup
        if wakeup is None:
            raise RuntimeError("Waiter.wait() without arm()")
        self._zk.add_listener(self._on_state)
        try:
            self.check()
            await wakeup
        finally:
            self._zk.remove_listener(self._on_state)
            self._wakeup = None
        self.check()


async def call_user(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a user callback that may be plain or async (or return an awaitable); its result."""
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


_BACKGROUND: set[asyncio.Task[Any]] = set()


def fire_and_forget(fn: Callable[..., Any], *args: Any) -> None:
    """Call a user notification callback without waiting for it; an async one runs as a task
    (kept referenced until done). Its exceptions are logged by asyncio, never raised here."""
    result = fn(*args)
    if inspect.iscoroutine(result):
        task = asyncio.get_running_loop().create_task(result)
        _BACKGROUND.add(task)
        task.add_done_callback(_BACKGROUND.discard)


async def cleanup_after(step: Awaitable[T], cleanup: Callable[[], Coroutine[Any, Any, None]]) -> T:
    """Await ``step``; if it fails or is cancelled, run ``cleanup()`` to the end before the error
    goes on. The clean-up runs in its own task, so a second cancellation of the caller does not
    cut it short (it then finishes in the background)."""
    try:
        return await step
    except BaseException:
        await asyncio.shield(asyncio.ensure_future(cleanup()))
        raise


async def acquire_once(local: asyncio.Lock, waiter: Waiter, what: str, *, blocking: bool, timeout: float | None,
                       contend: Callable[[], Awaitable[bool]],
                       abandon: Callable[[], Coroutine[Any, Any, None]]) -> bool:
    """The acquire of a lock-like recipe (lock, semaphore): take the object's ``local`` lock (one
    hold per object; a second acquire waits for the release), then ``contend()``. If that does
    not win, for whatever reason (False, timeout, ``cancel()``, task cancellation, session end),
    ``abandon()`` deletes what it created and gives ``local`` back before the result or error.

    Raises `LockTimeout` after ``timeout`` seconds, `CancelledError` after ``cancel()`` (which
    then stops applying: kazoo's rule), and the session's error."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    if not blocking and local.locked():
        return False
    try:
        async with asyncio.timeout_at(deadline):
            await local.acquire()
    except TimeoutError:
        raise LockTimeout(f"{what} not acquired within {timeout}s") from None
    won = False
    scope = asyncio.timeout_at(deadline)
    try:
        async with scope:
            won = await contend()
    except TimeoutError:
        if not scope.expired():
            raise
        raise LockTimeout(f"{what} not acquired within {timeout}s") from None
    except CancelledError:
        waiter.cancelled = False
        raise
    finally:
        if not won:
            await asyncio.shield(asyncio.ensure_future(abandon()))
    return won


async def read_children_data(zk: AsyncClient, parent: str, names: list[str]) -> dict[str, bytes]:
    """The data of ``parent``'s children ``names``, by name in that order, read pipelined (one
    round trip for all, as the paper's asynchronous API allows); a child deleted meanwhile is
    left out."""
    reads = await asyncio.gather(*(zk.get(f"{parent}/{name}") for name in names), return_exceptions=True)
    out = {}
    for name, result in zip(names, reads):
        if isinstance(result, NoNodeError):
            continue
        if isinstance(result, BaseException):
            raise result
        out[name] = result[0]
    return out


async def within(timeout: float | None, what: str, step: Awaitable[T]) -> T:
    """Await ``step`` for at most ``timeout`` seconds (None: no limit); `RecipeTimeout` after
    that, once ``step`` has been cancelled (and so has cleaned up)."""
    scope = asyncio.timeout(timeout)
    try:
        async with scope:
            return await step
    except TimeoutError:
        if scope.expired():
            raise RecipeTimeout(f"{what} did not finish within {timeout}s") from None
        raise


async def wait_gone(zk: AsyncClient, path: str, waiter: Waiter, retry: RetryPolicy) -> None:
    """Until ``path`` does not exist: ``exists`` with a watch, again after each notification."""
    while True:
        waiter.arm()
        if await retry(zk.exists, path, waiter.fire) is None:
            return
        await waiter.wait()
