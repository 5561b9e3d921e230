"""`DataWatch` and `ChildrenWatch`: call a function with a node's data or children on every change.

**Protocol** (paper §2.4, "Configuration Management"). Read with a watch; when the watch fires,
read again with a new watch, and call the function with what was read. A watch reports that
something changed, not each change: three quick changes may give one call, with the latest
state, which is all a reader needs (the paper's point about stale information).

kazoo's shapes: ``DataWatch(client, path, func)`` calls ``func(data, stat)`` (``(None, None)``
while the node does not exist), ``ChildrenWatch(client, path, func)`` calls ``func(children)``;
a function that also takes an ``event`` argument gets the `WatchedEvent` (None the first time);
returning ``False`` stops the watching. Both work as decorators in the blocking form:
``@zk.DataWatch("/config")``. Calls are made one at a time, in the order of the changes; the
asyncio form awaits an async function before it reads again.

**Failures.** ConnectionLoss is retried; while SUSPENDED nothing is called, and the client
re-registers the watch on the next server, which fires it if the node changed meanwhile. When
the session ends the watching stops (``stopped`` is set). A `ChildrenWatch` stops when its node
is deleted (kazoo's rule); a `DataWatch` goes on and reports the node's return.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Any

from zkpy.client.aio import AsyncClient
from zkpy.client.core import WatchedEvent
from zkpy.client.retry import RetryPolicy
from zkpy.client.sync import Client
from zkpy.errors import NoNodeError, ZookeeperError
from zkpy.wire.proto import Stat

from .blocking import Dispatched
from .support import DEFAULT_RETRY, Waiter, call_user

__all__ = ["AsyncChildrenWatch", "AsyncDataWatch", "ChildrenWatch", "DataWatch"]

log = logging.getLogger(__name__)


def _takes_event(func: Callable[..., Any], plain_args: int) -> bool:
    """Does ``func`` accept one argument more than ``plain_args`` (kazoo's ``event`` argument)?"""
    target = func.fn if isinstance(func, Dispatched) else func
    try:
        inspect.signature(target).bind(*([None] * (plain_args + 1)))
    except TypeError:
        return False
    except ValueError:
        return False  # no signature (a builtin): call it the plain way
    return True


class _Watching:
    """The loop shared by both watches: read with a watch, call, wait for the watch, again."""

    def __init__(self, client: AsyncClient, path: str, func: Callable[..., Any] | None,
                 retry: RetryPolicy) -> None:
        self.client = client
        self.path = path
        self.func = func
        self.retry = retry
        self.stopped = False
        self._waiter = Waiter(client)
        self._task: asyncio.Task[None] | None = None
        self._send_event = False

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """Decorator form: set the function (then `start` the watch)."""
        self.func = func
        return func

    async def start(self) -> None:
        """Read and call the function once (done when this returns), then keep watching."""
        if self.func is None:
            raise ValueError("no function to call: pass one, or use the watch as a decorator")
        if self._task is not None:
            raise RuntimeError("already started")
        self._send_event = _takes_event(self.func, self._plain_args)
        go_on = await self._round(None)
        if go_on:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Stop watching (no more calls)."""
        self.stopped = True
        self._waiter.cancel()
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        while not self.stopped:
            try:
                await self._waiter.wait()
            except Exception:  # the session ended, or stop() was called
                self.stopped = True
                return
            if not await self._round(self._waiter.last_event):
                return

    async def _round(self, event: WatchedEvent | None) -> bool:
        """Read with a new watch and call the function; False once the watching is over."""
        self._waiter.arm()
        try:
            args = await self._read()
        except ZookeeperError as exc:
            log.debug("%s on %s stops: %s", type(self).__name__, self.path, exc)
            self.stopped = True
            return False
        if args is None:
            self.stopped = True
            return False
        if self._send_event:
            args = (*args, event)
        assert self.func is not None
        try:
            result = await call_user(self.func, *args)
        except Exception:
            log.exception("%s function %r failed", type(self).__name__, self.func)
            result = None
        if result is False:
            self.stopped = True
            return False
        return True

    _plain_args = 0

    async def _read(self) -> tuple[Any, ...] | None:
        raise NotImplementedError


class AsyncDataWatch(_Watching):
    """``func(data, stat)`` now and on every change of the node (kazoo's ``DataWatch``)."""

    _plain_args = 2

    def __init__(self, client: AsyncClient, path: str, func: Callable[..., Any] | None = None,
                 *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        super().__init__(client, path, func, retry)

    async def _read(self) -> tuple[bytes | None, Stat | None]:
        while True:
            try:
                data, stat = await self.retry(self.client.get, self.path, self._waiter.fire)
                return data, stat
            except NoNodeError:
                # watch for the node's creation; if it came back meanwhile, read it
                if await self.retry(self.client.exists, self.path, self._waiter.fire) is None:
                    return None, None


class AsyncChildrenWatch(_Watching):
    """``func(children)`` now and on every change of the node's children (kazoo's
    ``ChildrenWatch``); stops when the node is deleted."""

    _plain_args = 1

    def __init__(self, client: AsyncClient, path: str, func: Callable[..., Any] | None = None,
                 *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        super().__init__(client, path, func, retry)

    async def _read(self) -> tuple[list[str]] | None:
        try:
            return (await self.retry(self.client.get_children, self.path, self._waiter.fire),)
        except NoNodeError:
            return None


class DataWatch:
    """The blocking form of `AsyncDataWatch` (kazoo's ``DataWatch``); ``func`` runs on the
    client's dispatch thread. Starts at once when given ``func``, else when used as a decorator."""

    _async_class: type[_Watching] = AsyncDataWatch

    def __init__(self, client: Client, path: str, func: Callable[..., Any] | None = None,
                 *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self.client = client
        self.aio = self._async_class(client.aio, path, retry=retry)  # type: ignore[call-arg]
        if func is not None:
            self(func)

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        self.aio.func = Dispatched(self.client, func)
        self.client.run(self.aio.start)
        return func

    @property
    def stopped(self) -> bool:
        return self.aio.stopped

    def stop(self) -> None:
        self.client.run(self.aio.stop)


class ChildrenWatch(DataWatch):
    """The blocking form of `AsyncChildrenWatch` (kazoo's ``ChildrenWatch``)."""

    _async_class = AsyncChildrenWatch
