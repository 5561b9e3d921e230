"""`Semaphore`: a lease with at most ``max_leases`` holders at a time (kazoo's layout and names).

**Protocol.** The semaphore is a znode ``s`` holding ``max_leases``; each lease is an ephemeral
child ``s/<guid>`` whose data is the holder's identifier. To take a lease a contender

1. takes the `Lock` ``s-__lock__`` (so contenders queue in order, without herd effect);
2. lists ``s``'s children *with* a watch (only the lock holder watches the pool);
3. if fewer than ``max_leases`` leases exist, creates its own and is done;
4. else waits for the watch (a lease released) and goes to 2;
5. releases the lock either way.

Releasing deletes the lease node. Every contender must agree on ``max_leases``: the first one
stores it in ``s`` and a contender with another value gets ValueError.

**Failures.** The lease's name is a GUID, so a create whose reply was lost is recognised by its
name (NodeExists is our own lease). ConnectionLoss is retried; SUSPENDED/LOST reach the holder
through ``ownership``; ``timeout``, ``cancel()`` and cancellation delete whatever was created
(lease and lock node), as in `lock`.
"""

from __future__ import annotations

import asyncio

from zkpy.client.aio import AsyncClient
from zkpy.client.retry import RetryPolicy
from zkpy.client.sync import Client
from zkpy.errors import NodeExistsError, NoNodeError, ZookeeperError

from .blocking import BlockingHold
from .lock import AsyncLock
from .ownership import Owner
from .sequential import new_guid
from .support import DEFAULT_RETRY, Waiter, acquire_once, read_children_data

__all__ = ["AsyncSemaphore", "Semaphore"]


class AsyncSemaphore(Owner):
    """At most ``max_leases`` holders at once (kazoo's ``Semaphore``); ``async with sem:``."""

    def __init__(self, client: AsyncClient, path: str, identifier: str | None = None, max_leases: int = 1,
                 *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        if max_leases < 1:
            raise ValueError("max_leases must be at least 1")
        super().__init__()
        self.client = client
        self.path = path.rstrip("/")
        self.data = (identifier or "").encode("utf-8")
        self.max_leases = max_leases
        self.retry = retry
        self.lease_path = f"{self.path}/{new_guid()}"
        self.lock_path = f"{self.path}-__lock__"
        self._waiter = Waiter(client)
        self._local = asyncio.Lock()
        self._checked = False
        self._lock: AsyncLock | None = None
        self.is_acquired = False

    def cancel(self) -> None:
        self._waiter.cancel()
        if self._lock is not None:
            self._lock.cancel()

    async def _check_max_leases(self) -> None:
        """The first contender stores ``max_leases``; the others must agree with it."""
        try:
            await self.retry(self.client.create, self.path, str(self.max_leases).encode(), make_parents=True)
        except NodeExistsError:
            data, _ = await self.retry(self.client.get, self.path)
            try:
                stored = int(data.decode("utf-8"))
            except ValueError:
                stored = None  # the node's data is used for something else: kazoo accepts it too
            if stored is not None and stored != self.max_leases:
                raise ValueError(f"inconsistent max_leases: {stored} stored in {self.path}, "
                                 f"this contender has {self.max_leases}") from None
        self._checked = True

    async def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """A lease; True once held (``blocking=False``: True or False at once). Raises
        `LockTimeout`, `CancelledError`, ValueError (max_leases disagrees), the session's error."""
        return await acquire_once(self._local, self._waiter, f"semaphore {self.path}", blocking=blocking,
                                  timeout=timeout, contend=lambda: self._contend(blocking),
                                  abandon=self._abandon)

    async def _contend(self, blocking: bool) -> bool:
        if not self._checked:
            await self._check_max_leases()
        self._lock = AsyncLock(self.client, self.lock_path, self.data.decode("utf-8"), retry=self.retry)
        if self._waiter.cancelled:
            self._lock.cancel()
        if not await self._lock.acquire(blocking):
            return False
        try:
            while True:
                self._waiter.check()
                self._waiter.arm()
                leases = await self.retry(self.client.get_children, self.path, self._waiter.fire)
                if self._lease_name() in leases or (len(leases) < self.max_leases and await self._create_lease()):
                    self.is_acquired = True
                    await self._start_holding(self.client, self.lease_path)
                    return True
                if not blocking:
                    return False
                await self._waiter.wait()
        finally:
            await self._lock.release()

    def _lease_name(self) -> str:
        return self.lease_path.rsplit("/", 1)[1]

    async def _create_lease(self) -> bool:
        try:
            await self.retry(self.client.create, self.lease_path, self.data, ephemeral=True)
        except NodeExistsError:
            pass  # ours: an earlier try's reply was lost (the name is our GUID)
        return True

    async def _abandon(self) -> None:
        self._stop_holding()
        self.is_acquired = False
        try:
            await self.retry(self.client.delete, self.lease_path)
        except (NoNodeError, ZookeeperError):
            pass
        self._local.release()

    async def release(self) -> bool:
        """Give the lease back; False if none was held."""
        if not self.is_acquired:
            return False
        await self._abandon()
        return True

    async def lease_holders(self) -> list[str]:
        """The identifiers of the current lease holders (unordered)."""
        try:
            children = await self.retry(self.client.get_children, self.path)
        except NoNodeError:
            return []
        data = await self.retry(read_children_data, self.client, self.path, children)
        return [d.decode("utf-8", "replace") for d in data.values()]

    async def __aenter__(self) -> AsyncSemaphore:
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()


class Semaphore(BlockingHold[AsyncSemaphore]):
    """The blocking form of `AsyncSemaphore` (kazoo's ``Semaphore``)."""

    def __init__(self, client: Client, path: str, identifier: str | None = None, max_leases: int = 1,
                 *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        super().__init__(client, AsyncSemaphore(client.aio, path, identifier, max_leases, retry=retry))

    def lease_holders(self) -> list[str]:
        return self.client.run(self.aio.lease_holders)
