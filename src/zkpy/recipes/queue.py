"""Distributed queues: `Queue`, `PriorityQueue` and the crash-safe `LockingQueue`.

**Entries** (the recipe guide, "Queues" and "Priority Queues"). A producer creates a persistent
sequential child ``entry-PPP-<guid>-NNNNNNNNNN`` of the queue node: ``PPP`` is the priority
(000-999, lower first, as UNIX nice values), ``NNNNNNNNNN`` the server's sequence number, which
gives FIFO order within a priority, and the GUID lets a producer whose reply was lost find its
entry instead of adding a second one. Consumers take entries by (priority, sequence number).
kazoo's entries (``entry-PPP-NNNNNNNNNN``, no GUID) are read too, and kazoo reads zkpy's
(by priority; within one priority kazoo orders by name, so zkpy's GUIDs make that random).

* `Queue`: the guide's consumer. It lists the children once and works through that list,
  lowest first, before it lists again; an empty list is waited on with a children watch.
  Taking an entry deletes it, so an entry is delivered at most once, but a consumer that dies
  after the delete loses it (and a delete whose reply is lost counts as another consumer's take).
* `PriorityQueue`: the guide's two changes: priority in the name (as above) and an up-to-date
  list: the children are listed with a watch, and a notification invalidates the list, so an
  urgent entry put later overtakes older ones.
* `LockingQueue` (kazoo's name and layout: ``q/entries`` and ``q/taken``): a priority queue
  whose consumer *takes* an entry (an ephemeral claim ``q/taken/<entry>``), processes it, then
  *consumes* it (one multi deletes the entry and the claim) or releases it. A consumer that dies
  before consuming loses its claim with its session and the entry goes to another consumer, so
  every entry is consumed exactly once. A claim whose create reply was lost is recognised as
  ours by its ephemeral owner; a consume whose reply was lost is recognised by both nodes being
  gone while the session lives.

**Failures.** ConnectionLoss is retried; SUSPENDED is waited through; session expiry raises
SessionExpiredError (a `LockingQueue` consumer's claim is gone with it: the entry goes back).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager

from zkpy.client.aio import AsyncClient
from zkpy.client.core import WatchedEvent
from zkpy.client.retry import RetryPolicy
from zkpy.client.sync import Client
from zkpy.errors import NodeExistsError, NoNodeError, ZookeeperError

from .errors import RecipeTimeout
from .sequential import SEQUENCE_SUFFIX, OnceCreator, find_prefixed, new_guid
from .support import DEFAULT_RETRY, Waiter, within

__all__ = ["AsyncLockingQueue", "AsyncPriorityQueue", "AsyncQueue", "LockingQueue", "PriorityQueue", "Queue",
           "entry_order"]

_ENTRY = re.compile(rf"^entry-(\d{{3}})-(?:[0-9a-f]{{32}}-)?{SEQUENCE_SUFFIX}$")


def entry_order(names: Sequence[str]) -> list[str]:
    """Queue entries in the order consumers take them: priority, then sequence number."""
    keyed = []
    for name in names:
        m = _ENTRY.match(name)
        if m:
            keyed.append((int(m.group(1)), int(m.group(2)), name))
    keyed.sort()
    return [name for _, _, name in keyed]


def _check_put(value: bytes, priority: int) -> None:
    if not isinstance(value, bytes):
        raise TypeError("value must be bytes")
    if not isinstance(priority, int) or not 0 <= priority <= 999:
        raise ValueError("priority must be an int from 0 to 999")


class _Producer:
    """What every queue's producers do: put entries into ``entries_path``, each exactly once."""

    def __init__(self, client: AsyncClient, entries_path: str, retry: RetryPolicy) -> None:
        self.client = client
        self.entries_path = entries_path
        self.retry = retry

    async def put(self, value: bytes, priority: int = 100) -> str:
        """Add one entry; its name."""
        _check_put(value, priority)
        creator = OnceCreator(self.client, self.entries_path, f"entry-{priority:03d}-{new_guid()}-", self.retry)
        return await creator.create(value, ephemeral=False)

    async def put_all(self, values: Sequence[bytes], priority: int = 100) -> None:
        """Add several entries atomically (one multi), in order; all or none, once."""
        for value in values:
            _check_put(value, priority)
        if not values:
            return
        guid = new_guid()
        await self.retry(self.client.ensure_path, self.entries_path)
        await self.retry(self._put_all_once, list(values), priority, guid, [False])

    async def _put_all_once(self, values: list[bytes], priority: int, guid: str, tried: list[bool]) -> None:
        if tried[0] and find_prefixed(await self.client.get_children(self.entries_path),
                                      f"entry-{priority:03d}-{guid}-"):
            return  # the multi was applied, its reply lost (a multi is all or nothing)
        tried[0] = True
        tx = self.client.transaction()
        for value in values:
            tx.create(f"{self.entries_path}/entry-{priority:03d}-{guid}-", value, sequence=True)
        results = await tx.commit()
        for r in results:
            if isinstance(r, ZookeeperError):
                raise r

    async def size(self) -> int:
        """The number of entries (taken ones included)."""
        stat = await self.retry(self.client.exists, self.entries_path)
        return stat.numChildren if stat is not None else 0


class AsyncQueue:
    """The guide's queue (kazoo's ``Queue``): entries are deleted as they are taken."""

    refresh_on_change = False  # PriorityQueue: a children notification invalidates the list

    def __init__(self, client: AsyncClient, path: str, *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self.client = client
        self.path = path.rstrip("/")
        self.retry = retry
        self._producer = _Producer(client, self.path, retry)
        self._waiter = Waiter(client)
        self._children: list[str] = []
        self._stale = True

    async def put(self, value: bytes, priority: int = 100) -> str:
        """Add ``value`` (``priority`` 0-999, lower first); the entry's name."""
        return await self._producer.put(value, priority)

    async def put_all(self, values: Sequence[bytes], priority: int = 100) -> None:
        await self._producer.put_all(values, priority)

    async def size(self) -> int:
        return await self._producer.size()

    def _on_change(self, event: WatchedEvent) -> None:
        self._stale = True
        self._waiter.fire(event)

    async def get(self, block: bool = False, timeout: float | None = None) -> bytes | None:
        """Take the next entry: its value, or None when the queue is empty (``block``: wait for
        an entry, at most ``timeout`` seconds, then None)."""
        try:
            return await within(timeout, f"queue {self.path}", self._get(block))
        except RecipeTimeout:
            return None

    async def _get(self, block: bool) -> bytes | None:
        while True:
            self._waiter.check()
            if self.refresh_on_change and self._stale:
                self._children = []
            if not self._children:
                await self._list()
            while self._children and not (self.refresh_on_change and self._stale):
                value = await self._take(self._children.pop(0))
                if value is not None:
                    return value
            if self._children or self._stale:
                continue  # the list is out of date: list again
            if not block:
                return None
            await self._waiter.wait()

    async def _list(self) -> None:
        """List the entries with a watch (which wakes a blocked get, and with ``refresh_on_change``
        invalidates the list)."""
        self._waiter.arm()
        self._stale = False
        try:
            names = await self.retry(self.client.get_children, self.path, self._on_change)
        except NoNodeError:
            await self.retry(self.client.ensure_path, self.path)
            names = await self.retry(self.client.get_children, self.path, self._on_change)
        self._children = entry_order(names)

    async def _take(self, name: str) -> bytes | None:
        path = f"{self.path}/{name}"
        try:
            data, stat = await self.retry(self.client.get, path)
            await self.retry(self.client.delete, path, stat.version)
        except NoNodeError:
            return None  # another consumer took it
        return data


class AsyncPriorityQueue(AsyncQueue):
    """The guide's priority queue: like `AsyncQueue`, with an always up-to-date entry list."""

    refresh_on_change = True


class AsyncLockingQueue:
    """A priority queue with take / consume / release (kazoo's ``LockingQueue``): an entry
    leaves the queue only when its consumer says it is done with it."""

    def __init__(self, client: AsyncClient, path: str, *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self.client = client
        self.path = path.rstrip("/")
        self.retry = retry
        self.entries_path = f"{self.path}/entries"
        self.taken_path = f"{self.path}/taken"
        self.id = new_guid().encode()
        self._producer = _Producer(client, self.entries_path, retry)
        self._waiter = Waiter(client)
        self.processing_element: tuple[str, bytes] | None = None
        self._claiming: str | None = None  # an entry whose claim went out and was not settled (see _claim)
        self._ensured = False

    async def put(self, value: bytes, priority: int = 100) -> str:
        await self._ensure()
        return await self._producer.put(value, priority)

    async def put_all(self, values: Sequence[bytes], priority: int = 100) -> None:
        await self._ensure()
        await self._producer.put_all(values, priority)

    async def size(self) -> int:
        """Entries in the queue, taken ones included."""
        return await self._producer.size()

    async def _ensure(self) -> None:
        if not self._ensured:
            await self.retry(self.client.ensure_path, self.entries_path)
            await self.retry(self.client.ensure_path, self.taken_path)
            self._ensured = True

    async def get(self, timeout: float | None = None) -> bytes | None:
        """Take the first available entry and hold it: its value (the same one again while it is
        held); None after ``timeout`` seconds without one."""
        if self.processing_element is not None:
            return self.processing_element[1]
        await self._ensure()
        try:
            self.processing_element = await within(timeout, f"queue {self.path}", self._take_next())
        except RecipeTimeout:
            return None
        return self.processing_element[1]

    async def _take_next(self) -> tuple[str, bytes]:
        resumed = await self._resume_claim()
        if resumed is not None:
            return resumed
        while True:
            self._waiter.check()
            self._waiter.arm()
            entries = await self.retry(self.client.get_children, self.entries_path, self._waiter.fire)
            taken = set(await self.retry(self.client.get_children, self.taken_path, self._waiter.fire))
            for name in entry_order(entries):
                if name in taken:
                    continue
                value = await self._claim(name)
                if value is not None:
                    return name, value
            await self._waiter.wait()

    async def _claim(self, name: str) -> bytes | None:
        """Claim ``name`` for this consumer and read it; None if another consumer has it.
        ``_claiming`` names it until settled: a ``get`` whose timeout cancels it after the claim
        went out leaves the claim, owned by this session, which every later listing would skip
        as another consumer's (the entry stuck until the session ends); the next get resumes it."""
        claim = f"{self.taken_path}/{name}"
        self._claiming = name
        try:
            await self.retry(self.client.create, claim, self.id, ephemeral=True)
        except NodeExistsError:
            if not await self._owns(claim):
                self._claiming = None
                return None  # (if ours, an earlier try's reply was lost)
        try:
            data, _ = await self.retry(self.client.get, f"{self.entries_path}/{name}")
        except NoNodeError:
            await self._unclaim(claim)  # consumed between our listing and our claim
            self._claiming = None
            return None
        self._claiming = None
        return data

    async def _resume_claim(self) -> tuple[str, bytes] | None:
        """The entry a cancelled ``_claim`` left claimed, if the claim is still ours."""
        name = self._claiming
        if name is None:
            return None
        if not await self._owns(f"{self.taken_path}/{name}"):
            self._claiming = None
            return None
        data = await self._claim(name)
        return None if data is None else (name, data)

    async def _owns(self, claim: str) -> bool:
        try:
            stat = await self.retry(self.client.exists, claim)
        except NoNodeError:
            return False
        return stat is not None and stat.ephemeralOwner == self.client.session_id

    async def _unclaim(self, claim: str) -> None:
        try:
            await self.retry(self.client.delete, claim)
        except NoNodeError:
            pass

    async def holds_lock(self) -> bool:
        """True while this consumer's claim on its entry stands."""
        if self.processing_element is None:
            return False
        return await self._owns(f"{self.taken_path}/{self.processing_element[0]}")

    async def consume(self) -> bool:
        """The held entry is done with: delete it and its claim at once. False if nothing is held
        or the claim is gone (the session ended: another consumer may take the entry)."""
        if self.processing_element is None:
            return False
        name = self.processing_element[0]
        tried = [False]
        done = await self.retry(self._consume_once, name, tried)
        self.processing_element = None
        return done

    async def _consume_once(self, name: str, tried: list[bool]) -> bool:
        entry, claim = f"{self.entries_path}/{name}", f"{self.taken_path}/{name}"
        if tried[0]:
            gone = await asyncio.gather(self.client.exists(entry), self.client.exists(claim))
            if all(stat is None for stat in gone):
                return True  # our multi was applied; its reply was lost
        elif not await self._owns(claim):
            return False
        tried[0] = True
        tx = self.client.transaction()
        tx.delete(claim)
        tx.delete(entry)
        results = await tx.commit()
        return not any(isinstance(r, ZookeeperError) for r in results)

    async def release(self) -> bool:
        """Give the held entry back to the queue. False if nothing was held."""
        if self.processing_element is None:
            return False
        name, self.processing_element = self.processing_element[0], None
        if not await self._owns(f"{self.taken_path}/{name}"):
            return False
        await self._unclaim(f"{self.taken_path}/{name}")
        return True

    @asynccontextmanager
    async def take(self, timeout: float | None = None) -> AsyncIterator[bytes]:
        """``async with queue.take() as value:`` consumes the entry if the block ends normally,
        releases it if it raises. Raises `RecipeTimeout` when nothing comes within ``timeout``."""
        value = await self.get(timeout)
        if value is None:
            raise RecipeTimeout(f"queue {self.path}: no entry within {timeout}s")
        try:
            yield value
        except BaseException:
            await asyncio.shield(asyncio.ensure_future(self.release()))
            raise
        await self.consume()


class Queue:
    """The blocking form of `AsyncQueue` (kazoo's ``Queue``)."""

    _async_class: type[AsyncQueue] = AsyncQueue

    def __init__(self, client: Client, path: str, *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self.client = client
        self.aio = self._async_class(client.aio, path, retry=retry)

    def put(self, value: bytes, priority: int = 100) -> str:
        return self.client.run(self.aio.put, value, priority)

    def put_all(self, values: Sequence[bytes], priority: int = 100) -> None:
        self.client.run(self.aio.put_all, values, priority)

    def get(self, block: bool = False, timeout: float | None = None) -> bytes | None:
        return self.client.run(self.aio.get, block, timeout)

    def __len__(self) -> int:
        return self.client.run(self.aio.size)


class PriorityQueue(Queue):
    """The blocking form of `AsyncPriorityQueue`."""

    _async_class = AsyncPriorityQueue


class LockingQueue:
    """The blocking form of `AsyncLockingQueue` (kazoo's ``LockingQueue``)."""

    def __init__(self, client: Client, path: str, *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self.client = client
        self.aio = AsyncLockingQueue(client.aio, path, retry=retry)

    def put(self, value: bytes, priority: int = 100) -> str:
        return self.client.run(self.aio.put, value, priority)

    def put_all(self, values: Sequence[bytes], priority: int = 100) -> None:
        self.client.run(self.aio.put_all, values, priority)

    def get(self, timeout: float | None = None) -> bytes | None:
        return self.client.run(self.aio.get, timeout)

    def holds_lock(self) -> bool:
        return self.client.run(self.aio.holds_lock)

    def consume(self) -> bool:
        return self.client.run(self.aio.consume)

    def release(self) -> bool:
        return self.client.run(self.aio.release)

    def __len__(self) -> int:
        return self.client.run(self.aio.size)

    @contextmanager
    def take(self, timeout: float | None = None) -> Iterator[bytes]:
        """``with queue.take() as value:``: consumed if the block ends normally, else released."""
        value = self.get(timeout)
        if value is None:
            raise RecipeTimeout(f"queue {self.aio.path}: no entry within {timeout}s")
        try:
            yield value
        except BaseException:
            self.release()
            raise
        self.consume()
