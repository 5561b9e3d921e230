"""Locks without herd effect: `Lock`, and the shared lock's `ReadLock` and `WriteLock`.

**Protocol** (paper §2.4, the recipe guide "Locks" and "Shared Locks"). The lock is a znode ``l``.

1. ``n = create(l + "/<guid>__lock__", EPHEMERAL|SEQUENTIAL)`` (a reader: ``__rlock__``);
2. ``C = getChildren(l)``, without a watch: a watch here would wake every waiter at every change;
3. if no node in ``C`` that blocks ``n`` has a lower sequence number, ``n`` holds the lock;
4. else ``exists(p, watch)`` on ``p``, the blocking node just below ``n``; if ``p`` is gone,
   go to 2, else wait for the watch and go to 2.

For `Lock` and `WriteLock` every lower lock node blocks; for `ReadLock` only lower write nodes
do, so readers overlap and wait only for writers queued before them. Each node is watched by
at most one contender, so a release wakes exactly one waiter (the readers queued behind one
writer all wake when it goes: they may all proceed). Contenders are served in the order their
nodes were created. Unlock deletes ``n``.

The node names are kazoo's (``<guid>__lock__NNNNNNNNNN``, ``__rlock__`` for readers), so a
zkpy lock and a kazoo lock on the same path exclude each other; ``extra_lock_patterns`` adds
other implementations' names (the paper's ``lock-``, ``write-``, Curator's ``-lock-``).

**Failures.**

* ConnectionLoss: every step is retried. A create whose reply was lost is found again by its
  GUID (`sequential.OnceCreator`), so it leaves neither an orphan nor a second node.
* SUSPENDED while waiting: the wait goes on (the client restores its watches on the next server).
  SUSPENDED while holding: ``ownership`` becomes SUSPENDED (the lock *may* be lost: stop acting
  on it) and HELD again once the client is back with its session and its node.
* Session expiry or close: a waiting ``acquire`` raises SessionExpiredError (or
  ConnectionClosedError); a holder's ``ownership`` becomes LOST and its listeners are told.
* ``timeout``, ``cancel()`` and asyncio cancellation end a wait with `LockTimeout`,
  `CancelledError` and ``asyncio.CancelledError``; in each case the contender's node is deleted
  (found by its GUID if the create's reply never came) before the error is raised.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

from zkpy.client.aio import AsyncClient
from zkpy.client.retry import RetryPolicy
from zkpy.client.sync import Client
from zkpy.errors import NoNodeError, ZookeeperError
from zkpy.wire.consts import WatcherType

from .blocking import BlockingHold
from .ownership import Owner
from .sequential import SEQUENCE_SUFFIX, OnceCreator, new_guid, sequence_of
from .support import DEFAULT_RETRY, Waiter, acquire_once, read_children_data

__all__ = ["AsyncLock", "AsyncReadLock", "AsyncWriteLock", "Lock", "ReadLock", "WriteLock", "lock_holders"]

LOCK_NAME = "__lock__"
READ_LOCK_NAME = "__rlock__"


def _pattern(names: Sequence[str]) -> re.Pattern[str]:
    return re.compile("(?:{}){}$".format("|".join(re.escape(n) for n in sorted(set(names))), SEQUENCE_SUFFIX))


class AsyncLock(Owner):
    """An exclusive lock (kazoo's ``Lock``): ``async with lock:`` or acquire/release.

    One object is one contender and is not re-entrant: a second ``acquire`` on it waits until
    the first hold is released. ``identifier`` is stored in the node (see `contenders`)."""

    node_name = LOCK_NAME
    blocked_by: tuple[str, ...] = (LOCK_NAME,)

    def __init__(self, client: AsyncClient, path: str, identifier: str | None = None,
                 extra_lock_patterns: Sequence[str] = (), *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        super().__init__()
        self.client = client
        self.path = path.rstrip("/") or "/"
        self.data = (identifier or "").encode("utf-8")
        self.retry = retry
        self._blocking = _pattern([*self.blocked_by, *extra_lock_patterns])
        self._contending = _pattern([*self.blocked_by, *extra_lock_patterns, self.node_name])
        self._waiter = Waiter(client)
        self._local = asyncio.Lock()  # one hold per object: taken by acquire, given back by release
        self._creator: OnceCreator | None = None
        self.is_acquired = False

    # -- what a holder sees ------------------------------------------------------------------

    @property
    def node(self) -> str | None:
        """This contender's node name (``<guid>__lock__NNNNNNNNNN``), once created."""
        return self._creator.name if self._creator is not None else None

    @property
    def notifications(self) -> int:
        """Watch notifications this contender has received while it waited (one per wake-up: a
        release wakes only the contender right behind it)."""
        return self._waiter.notifications

    # -- acquire / release -------------------------------------------------------------------

    def cancel(self) -> None:
        """Make a pending (or the next) ``acquire`` raise `CancelledError` (call it on the
        client's loop; the blocking `Lock.cancel` may be called from any thread)."""
        self._waiter.cancel()

    async def acquire(self, blocking: bool = True, timeout: float | None = None, ephemeral: bool = True) -> bool:
        """Wait for the lock; True once held. ``blocking=False``: True or False at once.

        Raises `LockTimeout` after ``timeout`` seconds, `CancelledError` after ``cancel()``,
        SessionExpiredError or ConnectionClosedError if the session ends first. With
        ``ephemeral=False`` the node outlives the session: the lock is then released only by
        `release` (or by hand)."""
        return await acquire_once(self._local, self._waiter, f"lock {self.path}", blocking=blocking,
                                  timeout=timeout, contend=lambda: self._contend(blocking, ephemeral),
                                  abandon=self._abandon)

    async def _contend(self, blocking: bool, ephemeral: bool) -> bool:
        """Steps 1-4 of the protocol; True once this contender holds the lock."""
        node = await self._queue_up(ephemeral)
        while True:
            self._waiter.check()
            children = await self.retry(self.client.get_children, self.path)
            if node not in children:  # deleted while we waited (by a revoker or by hand)
                node = await self._queue_up(ephemeral)
                continue
            blocker = self._predecessor(children, node)
            if blocker is None:
                await self._hold(f"{self.path}/{node}")
                return True
            if not blocking:
                return False
            self._waiter.arm()
            blocker_path = f"{self.path}/{blocker}"
            if await self.retry(self.client.exists, blocker_path, self._waiter.fire) is None:
                await self._drop_watch(blocker_path)
                continue
            await self._waiter.wait()

    async def _queue_up(self, ephemeral: bool) -> str:
        """Step 1: a node of our own, with a fresh GUID, created exactly once."""
        self._creator = OnceCreator(self.client, self.path, new_guid() + self.node_name, self.retry)
        return await self._creator.create(self.data, ephemeral=ephemeral)

    def _predecessor(self, children: Sequence[str], node: str) -> str | None:
        """The blocking node just below ``node``, or None if nothing blocks it."""
        mine = sequence_of(node)
        assert mine is not None
        best: tuple[int, str] | None = None
        for child in children:
            m = self._blocking.search(child)
            if m is None:
                continue
            seq = int(m.group(1))
            if seq < mine and (best is None or seq > best[0]):
                best = (seq, child)
        return None if best is None else best[1]

    async def _drop_watch(self, path: str) -> None:
        """The exists watch on a node that is already gone would wait for a create that never
        comes (sequence numbers are not reused): remove it, here and on the server."""
        try:
            await self.client.remove_watches(path, WatcherType.DATA, self._waiter.fire)
        except ZookeeperError:  # NoWatcherError: gone already; ConnectionLoss: it stays, harmless but kept
            pass

    async def _hold(self, path: str) -> None:
        self.is_acquired = True
        await self._start_holding(self.client, path, self._on_node_data)

    def _on_node_data(self, data: bytes) -> Any:
        """Hook for the revocable lock: the holder's node data changed."""
        return None

    async def _abandon(self) -> None:
        """The acquire failed or was given up: delete the node, free the object."""
        self._stop_holding()
        self.is_acquired = False
        if self._creator is not None:
            await self._creator.forget()
        self._local.release()

    async def release(self) -> bool:
        """Give the lock up (delete the node); False if it was not held. A holder whose session
        is gone has nothing to delete: the release still succeeds."""
        if not self.is_acquired:
            return False
        await self._abandon()
        return True

    async def contenders(self) -> list[str]:
        """The identifiers of the current contenders, holder(s) first (kazoo's order)."""
        try:
            children = await self.retry(self.client.get_children, self.path)
        except NoNodeError:
            return []
        ordered = sorted((int(m.group(1)), c) for c in children if (m := self._contending.search(c)))
        data = await self.retry(read_children_data, self.client, self.path, [c for _, c in ordered])
        return [d.decode("utf-8", "replace") for d in data.values()]

    async def __aenter__(self) -> AsyncLock:
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()


class AsyncWriteLock(AsyncLock):
    """The write side of a shared lock (kazoo's ``WriteLock``): excludes readers and writers."""

    node_name = LOCK_NAME
    blocked_by = (LOCK_NAME, READ_LOCK_NAME)


class AsyncReadLock(AsyncLock):
    """The read side of a shared lock (kazoo's ``ReadLock``): waits only for earlier writers."""

    node_name = READ_LOCK_NAME
    blocked_by = (LOCK_NAME,)


_HOLDER = re.compile(f"({re.escape(LOCK_NAME)}|{re.escape(READ_LOCK_NAME)}){SEQUENCE_SUFFIX}$")


def lock_holders(children: Sequence[str]) -> list[str]:
    """Which of a shared lock's children hold it now: the lowest node if it is a writer, else
    every reader below the lowest writer."""
    nodes = sorted((int(m.group(2)), m.group(1), c) for c in children
                   if (m := _HOLDER.search(c)))
    if not nodes:
        return []
    if nodes[0][1] == LOCK_NAME:
        return [nodes[0][2]]
    holders = []
    for _, kind, name in nodes:
        if kind == LOCK_NAME:
            break
        holders.append(name)
    return holders


class Lock(BlockingHold[AsyncLock]):
    """The blocking form of `AsyncLock` (kazoo's ``Lock``): ``with zk.Lock(path, "me"):``.

    ``Lock.aio`` is the asyncio recipe it drives on the client's loop (see `recipes.blocking`);
    ownership listeners run on the client's dispatch thread."""

    _async_class: type[AsyncLock] = AsyncLock

    def __init__(self, client: Client, path: str, identifier: str | None = None,
                 extra_lock_patterns: Sequence[str] = (), *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        super().__init__(client, self._async_class(client.aio, path, identifier, extra_lock_patterns, retry=retry))

    @property
    def path(self) -> str:
        return self.aio.path

    @property
    def node(self) -> str | None:
        return self.aio.node

    @property
    def notifications(self) -> int:
        return self.aio.notifications

    def acquire(self, blocking: bool = True, timeout: float | None = None, ephemeral: bool = True) -> bool:
        """As `AsyncLock.acquire`: True once held; raises `LockTimeout`, `CancelledError`,
        SessionExpiredError, ConnectionClosedError."""
        return self.client.run(self.aio.acquire, blocking, timeout, ephemeral)

    def contenders(self) -> list[str]:
        return self.client.run(self.aio.contenders)


class WriteLock(Lock):
    """The blocking form of `AsyncWriteLock` (kazoo's ``WriteLock``)."""

    _async_class = AsyncWriteLock


class ReadLock(Lock):
    """The blocking form of `AsyncReadLock` (kazoo's ``ReadLock``)."""

    _async_class = AsyncReadLock
