"""Barriers: `Barrier` (a node's existence) and `DoubleBarrier` (enter together, leave together).

**Barrier** (the recipe guide, "Barriers"). The barrier is up while its node exists: ``wait``
calls ``exists(b, watch)`` and returns when the node is gone, re-checking on every notification.

**Double barrier** (paper §2.4, the recipe guide, "Double Barriers"). ``b`` is the barrier node,
``x`` the number of processes, each process ``p`` has the node ``b/p`` (a GUID, so a create
whose reply was lost is recognised: NodeExists is our own node).

Enter:
  1. ``exists(b/ready, watch)`` (set *before* our node exists, so that whoever completes the
     count can only create ``ready`` after every process watches it);
  2. ``create(b/p, EPHEMERAL)``;
  3. ``L = getChildren(b)``; if fewer than ``x`` process nodes, wait for the watch;
  4. else ``create(b/ready)``, which wakes every waiting process.

Leave:
  1. ``L = getChildren(b)`` (process nodes only); if empty, done;
  2. if ``p`` is the only one, delete it and done;
  3. if ``p`` is the lowest in ``L``, wait for the highest to go;
  4. else delete ``b/p`` (if it is still there) and wait for the lowest to go;
  5. go to 1.

So a deletion wakes one process, except the last (the lowest), which wakes everybody. The
last process to leave also deletes ``ready`` (everybody has passed enter by then), so the
barrier node can be used again. ``ready`` is never deleted earlier: a process whose connection
was lost when ``ready`` came and went would never see it.

**Failures.** A process that dies (its session ends) leaves: its ephemeral node goes, so it
does not hold up the others' leave; it does count toward entering if it entered. ConnectionLoss
is retried, SUSPENDED is waited through, session expiry raises SessionExpiredError. A
``timeout`` raises `RecipeTimeout`; a failed or cancelled ``enter`` deletes the process node.
"""

from __future__ import annotations

import os
import socket

from zkpy.client.aio import AsyncClient
from zkpy.client.retry import RetryPolicy
from zkpy.client.sync import Client
from zkpy.errors import NodeExistsError, NoNodeError, ZookeeperError

from .errors import RecipeTimeout
from .sequential import new_guid
from .support import DEFAULT_RETRY, Waiter, cleanup_after, wait_gone, within

__all__ = ["AsyncBarrier", "AsyncDoubleBarrier", "Barrier", "DoubleBarrier"]

READY = "ready"


class AsyncBarrier:
    """A barrier that is up while its node exists (kazoo's ``Barrier``)."""

    def __init__(self, client: AsyncClient, path: str, *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self.client = client
        self.path = path.rstrip("/")
        self.retry = retry
        self._waiter = Waiter(client)

    async def create(self) -> None:
        """Put the barrier up (create its node and any missing parent)."""
        await self.retry(self.client.ensure_path, self.path)

    async def remove(self) -> bool:
        """Take the barrier down; False if it was not up."""
        try:
            await self.retry(self.client.delete, self.path)
        except NoNodeError:
            return False
        return True

    async def wait(self, timeout: float | None = None) -> bool:
        """Until the barrier is down: True; False after ``timeout`` seconds (kazoo's answer)."""
        try:
            await within(timeout, f"barrier {self.path}", wait_gone(self.client, self.path, self._waiter, self.retry))
        except RecipeTimeout:
            return False
        return True


class AsyncDoubleBarrier:
    """``num_clients`` processes enter together and leave together (kazoo's ``DoubleBarrier``);
    ``async with barrier:`` enters and leaves."""

    def __init__(self, client: AsyncClient, path: str, num_clients: int, identifier: str | None = None,
                 *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        if num_clients < 1:
            raise ValueError("num_clients must be at least 1")
        self.client = client
        self.path = path.rstrip("/")
        self.num_clients = num_clients
        self.identifier = identifier or f"{socket.getfqdn()}-{os.getpid()}"
        self.retry = retry
        self.node_name = new_guid()
        self.create_path = f"{self.path}/{self.node_name}"
        self.participating = False
        self._waiter = Waiter(client)

    async def enter(self, timeout: float | None = None) -> None:
        """Register and wait until ``num_clients`` processes have. Raises `RecipeTimeout`,
        SessionExpiredError, ConnectionClosedError; on any failure our node is deleted."""
        await within(timeout, f"entering {self.path}", cleanup_after(self._enter(), self._forget))
        self.participating = True

    async def _enter(self) -> None:
        await self.retry(self.client.ensure_path, self.path)
        ready = f"{self.path}/{READY}"
        self._waiter.arm()
        if await self.retry(self.client.exists, ready, self._waiter.fire) is not None:
            await self._create_own()  # the barrier is already open; we still count for leaving
            return
        await self._create_own()
        while True:
            children = await self.retry(self.client.get_children, self.path)
            if len(_processes(children)) >= self.num_clients:
                try:
                    await self.retry(self.client.create, ready)
                except NodeExistsError:
                    pass
                return
            await self._waiter.wait()
            self._waiter.arm()
            if await self.retry(self.client.exists, ready, self._waiter.fire) is not None:
                return

    async def _create_own(self) -> None:
        try:
            await self.retry(self.client.create, self.create_path, self.identifier.encode("utf-8"), ephemeral=True)
        except NodeExistsError:
            pass  # ours: an earlier try's reply was lost (the name is our GUID)

    async def _forget(self) -> None:
        try:
            await self.retry(self.client.delete, self.create_path)
        except (NoNodeError, ZookeeperError):
            pass

    async def leave(self, timeout: float | None = None) -> None:
        """Unregister and wait until every process has. Raises `RecipeTimeout`,
        SessionExpiredError, ConnectionClosedError."""
        await within(timeout, f"leaving {self.path}", self._leave())
        self.participating = False

    async def _leave(self) -> None:
        while True:
            children = await self.retry(self.client.get_children, self.path)
            processes = sorted(_processes(children))
            if not processes:
                return
            if processes == [self.node_name]:
                await self._delete_quietly(f"{self.path}/{READY}")  # everybody has passed enter
                await self._delete_quietly(self.create_path)
                return
            if processes[0] == self.node_name:
                watched = processes[-1]
            else:
                await self._delete_quietly(self.create_path)
                watched = processes[0]
            self._waiter.arm()
            if await self.retry(self.client.exists, f"{self.path}/{watched}", self._waiter.fire) is None:
                continue
            await self._waiter.wait()

    async def _delete_quietly(self, path: str) -> None:
        try:
            await self.retry(self.client.delete, path)
        except NoNodeError:
            pass

    async def __aenter__(self) -> AsyncDoubleBarrier:
        await self.enter()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.leave()


def _processes(children: list[str]) -> list[str]:
    return [c for c in children if c != READY]


class Barrier:
    """The blocking form of `AsyncBarrier` (kazoo's ``Barrier``)."""

    def __init__(self, client: Client, path: str, *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self.client = client
        self.aio = AsyncBarrier(client.aio, path, retry=retry)

    def create(self) -> None:
        self.client.run(self.aio.create)

    def remove(self) -> bool:
        return self.client.run(self.aio.remove)

    def wait(self, timeout: float | None = None) -> bool:
        return self.client.run(self.aio.wait, timeout)


class DoubleBarrier:
    """The blocking form of `AsyncDoubleBarrier` (kazoo's ``DoubleBarrier``); ``with barrier:``."""

    def __init__(self, client: Client, path: str, num_clients: int, identifier: str | None = None,
                 *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self.client = client
        self.aio = AsyncDoubleBarrier(client.aio, path, num_clients, identifier, retry=retry)

    @property
    def participating(self) -> bool:
        return self.aio.participating

    def enter(self, timeout: float | None = None) -> None:
        self.client.run(self.aio.enter, timeout)

    def leave(self, timeout: float | None = None) -> None:
        self.client.run(self.aio.leave, timeout)

    def __enter__(self) -> DoubleBarrier:
        self.enter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.leave()
