"""The blocking form of the recipes: each one drives its asyncio recipe on the `Client`'s loop.

There is one copy of every protocol, the asyncio one; a blocking recipe holds an instance of it
(built on ``Client.aio``) and runs its coroutines with ``Client.run``, which blocks the calling
thread until they are done. So the blocking and the asyncio forms cannot drift apart.

* User callbacks (watch functions, ownership listeners, revocation handlers) run on the client's
  dispatch thread, in order with every other callback of that client, as `Client` promises; a
  callback's return value (a `DataWatch` function's ``False``) still reaches the recipe.
* ``cancel()`` may be called from any thread: it is handed to the loop thread.
* An interrupted blocking call (KeyboardInterrupt) cancels its coroutine, which then deletes the
  nodes it created, as a cancelled asyncio recipe does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from zkpy.client.sync import Client

from .ownership import Ownership, OwnershipListener

__all__ = ["BlockingHold", "BlockingOwner", "Dispatched", "dispatched", "on_loop"]


class Dispatched:
    """A user callback moved to the client's dispatch thread. Called on the loop thread, it
    returns an asyncio future of the callback's result. Equal to another wrapper of the same
    callback, so ``remove_listener(fn)`` finds the wrapper ``add_listener(fn)`` made."""

    __slots__ = ("client", "fn")

    def __init__(self, client: Client, fn: Callable[..., Any]) -> None:
        self.client = client
        self.fn = fn

    def __call__(self, *args: Any) -> asyncio.Future[Any]:
        return asyncio.wrap_future(self.client.dispatch(self.fn, *args))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Dispatched) and other.fn == self.fn

    def __hash__(self) -> int:
        return hash(self.fn)


def dispatched(client: Client, fn: Callable[..., Any] | None) -> Any:
    return None if fn is None else Dispatched(client, fn)


def on_loop(client: Client, fn: Callable[..., Any], *args: Any) -> Any:
    """Call a plain function of an asyncio recipe on the client's loop; block for its result."""
    return client.run(_plain, fn, *args)


async def _plain(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


class _Owner(Protocol):
    """What the asyncio recipes that hold something (a lock, a lease, leadership) share."""

    @property
    def ownership(self) -> Ownership: ...
    def add_listener(self, listener: OwnershipListener) -> None: ...
    def remove_listener(self, listener: OwnershipListener) -> None: ...
    def cancel(self) -> None: ...


class _Holdable(_Owner, Protocol):
    """What the asyncio lock-like recipes (locks, semaphore) have in common."""

    is_acquired: bool

    async def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool: ...
    async def release(self) -> bool: ...


OwnerT = TypeVar("OwnerT", bound=_Owner)
H = TypeVar("H", bound=_Holdable)


class BlockingOwner(Generic[OwnerT]):
    """The blocking form of an asyncio recipe ``aio`` that holds something: ``ownership``,
    listeners on the dispatch thread, ``cancel()`` from any thread."""

    def __init__(self, client: Client, aio: OwnerT) -> None:
        self.client = client
        self.aio = aio

    @property
    def ownership(self) -> Ownership:
        return self.aio.ownership

    def add_listener(self, listener: OwnershipListener) -> None:
        """``listener(Ownership)`` on each change while held, on the dispatch thread."""
        on_loop(self.client, self.aio.add_listener, Dispatched(self.client, listener))

    def remove_listener(self, listener: OwnershipListener) -> None:
        on_loop(self.client, self.aio.remove_listener, Dispatched(self.client, listener))

    def cancel(self) -> None:
        """Cancel a pending wait; safe from any thread."""
        self.client.call_soon(self.aio.cancel)


class BlockingHold(BlockingOwner[H]):
    """The blocking form of a lock-like asyncio recipe: acquire, release, ``with``."""

    @property
    def is_acquired(self) -> bool:
        return self.aio.is_acquired

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """As the asyncio recipe's ``acquire``: True once held; raises `LockTimeout`,
        `CancelledError`, SessionExpiredError, ConnectionClosedError."""
        return self.client.run(self.aio.acquire, blocking, timeout)

    def release(self) -> bool:
        return self.client.run(self.aio.release)

    def __enter__(self) -> BlockingHold[H]:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
