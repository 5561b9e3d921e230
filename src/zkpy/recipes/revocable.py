"""Revocable locks: a holder releases its lock when asked (the recipe guide, "Revocable Shared Locks").

**Protocol.** A revocable lock is an ordinary lock (`lock`) whose holder also watches its own
node's data (getData with a watch, set again on every change; read once when the lock is won, in
case the request came while it waited). To ask for the lock, a revoker writes ``unlock`` into
the holder's node (`revoke`). The holder sees it, finishes what it must, and releases: revocation
needs the holder's *consent*, because only the holder knows when its work is in a safe state.

With ``force_after`` (opt-in; the guide's "Freaking Laser Beams") the revoker deletes the nodes
that are still there after that many seconds. A holder whose node is deleted that way is told
through ``ownership`` (LOST) and its listeners, as after a session loss.

The holder learns of a request through ``revoke_requested`` and the ``on_revoke`` callback
(plain or async, called once per hold; in the blocking form on the client's dispatch thread).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from zkpy.client.aio import AsyncClient
from zkpy.client.retry import RetryPolicy
from zkpy.client.sync import Client
from zkpy.errors import NoNodeError

from .blocking import dispatched
from .lock import AsyncLock, AsyncReadLock, AsyncWriteLock, Lock, lock_holders
from .support import DEFAULT_RETRY, Waiter, fire_and_forget, wait_gone

__all__ = ["UNLOCK", "AsyncRevocableLock", "AsyncRevocableReadLock", "AsyncRevocableWriteLock", "RevocableLock",
           "RevocableReadLock", "RevocableWriteLock", "revoke", "revoke_blocking"]

UNLOCK = b"unlock"

RevokeHandler = Callable[[], Any]


class _Revocable(AsyncLock):
    """The holder's side: notice ``unlock`` in its node's data."""

    def __init__(self, client: AsyncClient, path: str, identifier: str | None = None,
                 extra_lock_patterns: Sequence[str] = (), *, on_revoke: RevokeHandler | None = None,
                 retry: RetryPolicy = DEFAULT_RETRY) -> None:
        super().__init__(client, path, identifier, extra_lock_patterns, retry=retry)
        self.on_revoke = on_revoke
        self.revoke_requested = False

    async def _hold(self, path: str) -> None:
        self.revoke_requested = False
        await super()._hold(path)

    def _on_node_data(self, data: bytes) -> None:
        if data == UNLOCK and not self.revoke_requested:
            self.revoke_requested = True
            if self.on_revoke is not None:
                fire_and_forget(self.on_revoke)


class AsyncRevocableLock(_Revocable, AsyncLock):
    """An exclusive lock whose holder is asked to give it up by `revoke`."""


class AsyncRevocableWriteLock(_Revocable, AsyncWriteLock):
    """The write side of a revocable shared lock."""


class AsyncRevocableReadLock(_Revocable, AsyncReadLock):
    """The read side of a revocable shared lock."""


async def revoke(client: AsyncClient, path: str, *, nodes: Sequence[str] | None = None,
                 force_after: float | None = None, retry: RetryPolicy = DEFAULT_RETRY) -> list[str]:
    """Ask the holders of the lock at ``path`` to release it: write ``unlock`` into their nodes
    (``nodes``, default: whoever holds it now, `lock.lock_holders`). With ``force_after``,
    wait that many seconds for them to go and delete the nodes still there. Returns the nodes
    asked (the names, not paths)."""
    if nodes is None:
        nodes = lock_holders(await retry(client.get_children, path))
    asked = []
    for name in nodes:
        try:
            await retry(client.set, f"{path}/{name}", UNLOCK)
            asked.append(name)
        except NoNodeError:
            pass  # released meanwhile
    if force_after is not None:
        waiter = Waiter(client)

        async def all_gone() -> None:
            for name in asked:
                await wait_gone(client, f"{path}/{name}", waiter, retry)

        try:
            await asyncio.wait_for(all_gone(), force_after)
        except TimeoutError:
            for name in asked:
                try:
                    await retry(client.delete, f"{path}/{name}")
                except NoNodeError:
                    pass
    return asked


class RevocableLock(Lock):
    """The blocking form of `AsyncRevocableLock`; ``on_revoke`` runs on the dispatch thread."""

    _async_class: type[_Revocable] = AsyncRevocableLock
    aio: _Revocable

    def __init__(self, client: Client, path: str, identifier: str | None = None,
                 extra_lock_patterns: Sequence[str] = (), *, on_revoke: RevokeHandler | None = None,
                 retry: RetryPolicy = DEFAULT_RETRY) -> None:
        super().__init__(client, path, identifier, extra_lock_patterns, retry=retry)
        self.aio.on_revoke = dispatched(client, on_revoke)

    @property
    def revoke_requested(self) -> bool:
        return self.aio.revoke_requested


class RevocableWriteLock(RevocableLock):
    _async_class = AsyncRevocableWriteLock


class RevocableReadLock(RevocableLock):
    _async_class = AsyncRevocableReadLock


def revoke_blocking(client: Client, path: str, *, nodes: Sequence[str] | None = None,
                    force_after: float | None = None) -> list[str]:
    """`revoke` for blocking code."""
    return client.run(revoke, client.aio, path, nodes=nodes, force_after=force_after)

