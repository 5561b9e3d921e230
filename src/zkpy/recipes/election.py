"""Leader election: `Election` (herd-free, with the paper's ready znode) and `SimpleElection`.

**Election** (the recipe guide, "Leader Election"; kazoo's ``Election``). Each candidate creates
``ELECTION/<guid>__lock__NNNNNNNNNN`` (EPHEMERAL|SEQUENTIAL) and watches only the candidate just
below it: the lowest node leads. When a node goes, only the candidate that watched it wakes; it
leads if no lower node is left, else it watches the next lower one. This is the `Lock` protocol
(`lock.AsyncLock`), so kazoo's ``Election`` and zkpy's can run side by side.

Having no lower node does not mean the new leader has done its setup, so the leader announces
it (paper §2.3's *ready* znode): after its setup it calls `announce`, which creates
``ELECTION/ready`` (ephemeral, holding its identifier). Others call `leader` to learn who leads
and has announced; a new leader deletes a ``ready`` left by its predecessor before it starts.

**SimpleElection** (seed 004's election). Every candidate reads ``LEADER`` with a watch; if it
exists it follows, else it tries ``create(LEADER, identifier, EPHEMERAL)``: whoever succeeds
leads. Every follower watches the same node, so a leader's end wakes all of them (the herd
effect the sequential protocol avoids); it is here because it is the simplest correct election.

**Failures.** ConnectionLoss is retried (a create whose reply was lost is recognised: the GUID
for `Election`, the node's ephemeral owner for `SimpleElection`). A leader is told through
``ownership``: SUSPENDED (it may have lost leadership: pause) and LOST (it has: stop). In the
asyncio form a leader function that is still running when leadership is LOST is cancelled, and
`run` raises `LockLost`. A candidate whose session expires raises SessionExpiredError.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from zkpy.client.aio import AsyncClient
from zkpy.client.retry import RetryPolicy
from zkpy.client.sync import Client
from zkpy.errors import NodeExistsError, NoNodeError

from .blocking import BlockingOwner
from .errors import CancelledError, LockLost
from .lock import AsyncLock
from .ownership import Owner, Ownership, OwnershipListener
from .support import DEFAULT_RETRY, Waiter, call_user, within

__all__ = ["AsyncElection", "AsyncSimpleElection", "Election", "SimpleElection"]

READY = "ready"


async def _run_when_elected(election: AsyncElection | AsyncSimpleElection,
                            func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Both elections' ``run``: campaign, lead, resign whatever happens; None if cancelled first."""
    if not await election.campaign():
        return None
    try:
        return await _lead(election, func, args, kwargs)
    finally:
        await asyncio.shield(asyncio.ensure_future(election.resign()))


async def _lead(election: AsyncElection | AsyncSimpleElection,
                func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run the leader function; cancel it and raise LockLost if leadership is lost meanwhile."""
    task = asyncio.ensure_future(call_user(lambda: func(*args, **kwargs)))

    def on_change(state: Ownership) -> None:
        if state is Ownership.LOST and not task.done():
            task.cancel()

    election.add_listener(on_change)
    try:
        if election.ownership is Ownership.LOST:
            task.cancel()
        try:
            return await task
        except asyncio.CancelledError:
            if election.ownership is Ownership.LOST and not _cancelling():
                raise LockLost("leadership lost while the leader function ran") from None
            raise
    finally:
        election.remove_listener(on_change)


def _cancelling() -> bool:
    """True when the current task itself is being cancelled (not just the leader function)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class AsyncElection:
    """Herd-free leader election (kazoo's ``Election``): ``await election.run(lead)``."""

    def __init__(self, client: AsyncClient, path: str, identifier: str | None = None,
                 *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self.client = client
        self.path = path.rstrip("/")
        self.identifier = identifier or ""
        self.retry = retry
        self.lock = AsyncLock(client, self.path, identifier, retry=retry)
        self.ready_path = f"{self.path}/{READY}"
        self._waiter = Waiter(client)

    @property
    def ownership(self) -> Ownership:
        return self.lock.ownership

    @property
    def is_leader(self) -> bool:
        return self.lock.is_acquired and self.lock.ownership is Ownership.HELD

    def add_listener(self, listener: OwnershipListener) -> None:
        """``listener(Ownership)`` on each change of leadership while leading."""
        self.lock.add_listener(listener)

    def remove_listener(self, listener: OwnershipListener) -> None:
        self.lock.remove_listener(listener)

    async def campaign(self) -> bool:
        """Wait until elected: True, or False if `cancel` was called first. Raises
        SessionExpiredError or ConnectionClosedError if the session ends first."""
        try:
            await self.lock.acquire()
        except CancelledError:
            return False
        await self._delete_ready()  # a predecessor's announcement is not ours
        return True

    async def resign(self) -> None:
        """Give up leadership (and its announcement)."""
        if self.lock.ownership is Ownership.HELD:
            await self._delete_ready()
        await self.lock.release()

    async def run(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Wait to be elected, then call ``func(*args, **kwargs)`` (awaited if async) and give up
        leadership when it returns; its result. Returns None if `cancel` was called before the
        election was won. Raises `LockLost` if leadership is lost while ``func`` runs (``func``
        is cancelled), SessionExpiredError or ConnectionClosedError."""
        if not callable(func):
            raise ValueError("leader function is not callable")
        return await _run_when_elected(self, func, args, kwargs)

    async def _delete_ready(self) -> None:
        try:
            await self.retry(self.client.delete, self.ready_path)
        except NoNodeError:
            pass

    async def announce(self) -> None:
        """Say that this leader's setup is done: create the ready znode (ephemeral). Only the
        leader may announce; raises `LockLost` otherwise."""
        if not self.is_leader:
            raise LockLost("only the leader announces")
        try:
            await self.retry(self.client.create, self.ready_path, self.identifier.encode("utf-8"), ephemeral=True)
        except NodeExistsError:
            stat = await self.retry(self.client.exists, self.ready_path)
            if stat is None or stat.ephemeralOwner != self.client.session_id:
                raise

    async def leader(self, wait: bool = True, timeout: float | None = None) -> str | None:
        """The identifier of the leader that has announced its setup; with ``wait``, wait for one
        (`RecipeTimeout` after ``timeout``), else None when none has."""
        return await within(timeout, f"election {self.path}", self._announced(wait))

    async def _announced(self, wait: bool) -> str | None:
        while True:
            self._waiter.arm()
            try:
                data, _ = await self.retry(self.client.get, self.ready_path, self._waiter.fire)
                return data.decode("utf-8", "replace")
            except NoNodeError:
                if not wait:
                    return None
                if await self.retry(self.client.exists, self.ready_path, self._waiter.fire) is not None:
                    continue
            await self._waiter.wait()

    def cancel(self) -> None:
        """Stop contending (a running leader function is not interrupted: kazoo's rule)."""
        self.lock.cancel()

    async def contenders(self) -> list[str]:
        """The candidates' identifiers, the leader first."""
        return await self.lock.contenders()


class AsyncSimpleElection(Owner):
    """Seed 004's election: one ephemeral leader node that every follower watches."""

    def __init__(self, client: AsyncClient, path: str, identifier: str | None = None,
                 *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        super().__init__()
        self.client = client
        self.path = path.rstrip("/")
        self.identifier = identifier or ""
        self.retry = retry
        self._waiter = Waiter(client)

    def cancel(self) -> None:
        self._waiter.cancel()

    async def leader(self) -> str | None:
        """The current leader's identifier, or None."""
        try:
            data, _ = await self.retry(self.client.get, self.path)
        except NoNodeError:
            return None
        return data.decode("utf-8", "replace")

    async def campaign(self) -> bool:
        """Follow until this candidate leads: True; False if `cancel` was called first."""
        try:
            await self._elect()
        except CancelledError:
            self._waiter.cancelled = False
            return False
        await self._start_holding(self.client, self.path)
        return True

    async def run(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Follow until this candidate becomes leader, then call ``func`` and step down when it
        returns; None if cancelled first. Raises `LockLost` as `AsyncElection.run` does."""
        return await _run_when_elected(self, func, args, kwargs)

    async def _elect(self) -> None:
        await self.retry(self.client.ensure_path, self.path.rsplit("/", 1)[0] or "/")
        while True:
            self._waiter.check()
            self._waiter.arm()
            if await self.retry(self.client.exists, self.path, self._waiter.fire) is not None:
                await self._waiter.wait()  # follow until the leader's node goes
                continue
            try:
                await self.retry(self.client.create, self.path, self.identifier.encode("utf-8"), ephemeral=True)
                return
            except NodeExistsError:
                stat = await self.retry(self.client.exists, self.path)
                if stat is not None and stat.ephemeralOwner == self.client.session_id:
                    return  # our create's reply was lost

    async def resign(self) -> None:
        """Step down: delete the leader node (if it is still ours)."""
        held = self._holding is not None and self._holding.state is not Ownership.LOST
        self._stop_holding()
        if held:
            try:
                await self.retry(self.client.delete, self.path)
            except NoNodeError:
                pass


class Election(BlockingOwner[AsyncElection]):
    """The blocking form of `AsyncElection` (kazoo's ``Election``): ``Election.run(func)``
    calls ``func`` in the calling thread once elected."""

    def __init__(self, client: Client, path: str, identifier: str | None = None,
                 *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        super().__init__(client, AsyncElection(client.aio, path, identifier, retry=retry))

    @property
    def is_leader(self) -> bool:
        return self.aio.is_leader

    def run(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Block until elected, call ``func(*args, **kwargs)`` here, step down when it returns;
        None if `cancel` was called first. ``func`` is not interrupted when leadership is lost:
        it should watch ``ownership`` (or a listener) and return."""
        if not callable(func):
            raise ValueError("leader function is not callable")
        return _run_here_when_elected(self, func, args, kwargs)

    def announce(self) -> None:
        self.client.run(self.aio.announce)

    def leader(self, wait: bool = True, timeout: float | None = None) -> str | None:
        return self.client.run(self.aio.leader, wait, timeout)

    def contenders(self) -> list[str]:
        return self.client.run(self.aio.contenders)


class SimpleElection(BlockingOwner[AsyncSimpleElection]):
    """The blocking form of `AsyncSimpleElection`; ``run(func)`` calls ``func`` here."""

    def __init__(self, client: Client, path: str, identifier: str | None = None,
                 *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        super().__init__(client, AsyncSimpleElection(client.aio, path, identifier, retry=retry))

    def leader(self) -> str | None:
        return self.client.run(self.aio.leader)

    def run(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Block until leader, call ``func`` here, step down when it returns (None if cancelled)."""
        return _run_here_when_elected(self, func, args, kwargs)


def _run_here_when_elected(election: Election | SimpleElection, func: Callable[..., Any],
                           args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Both blocking elections' ``run``: ``func`` runs on the caller's thread, not the loop."""
    if not election.client.run(election.aio.campaign):
        return None
    try:
        return func(*args, **kwargs)
    finally:
        election.client.run(election.aio.resign)
