"""Telling a holder whether it still holds what its znode stands for (a lock, a lease, leadership).

A holder's node is ephemeral: it lives exactly as long as the session (DESIGN §2.5), unless
someone deletes it (a revoker past its deadline, an operator). So ownership follows the session
and the node, as kazoo users read the client's states:

========================  ===========  =============================================================
what happened              `Ownership`  what the holder should assume
========================  ===========  =============================================================
holding, connected         HELD         it holds it
connection lost            SUSPENDED    it *may* have lost it: stop acting on it until HELD again
reconnected, node there    HELD         the session survived the move: it still holds it
node deleted               LOST         it lost it (revoked by force, or deleted by hand)
session expired / closed   LOST         it lost it
released                   RELEASED     it gave it up
========================  ===========  =============================================================

After a reconnect the tracker reads its node before it says HELD again (the read is answered
after the server has replayed the watches it missed, so a deletion while away is seen first).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from enum import Enum
from typing import Any

from zkpy.client.aio import AsyncClient
from zkpy.client.core import ClientState, WatchedEvent
from zkpy.errors import NoNodeError, ZookeeperError
from zkpy.wire.consts import EventType

from .support import fire_and_forget

__all__ = ["Holding", "Owner", "Ownership"]

log = logging.getLogger(__name__)


class Ownership(Enum):
    HELD = "HELD"
    SUSPENDED = "SUSPENDED"
    LOST = "LOST"
    RELEASED = "RELEASED"


OwnershipListener = Callable[[Ownership], Any]
DataHook = Callable[[bytes], Any]


class Holding:
    """Tracks one held node: ``state`` and a call of each listener on every change.

    ``on_data`` (optional) gets the node's data whenever it changes: the revocable lock reads
    its "unlock" request there. Start it on the client's loop; `stop` when released."""

    def __init__(self, zk: AsyncClient, path: str, listeners: list[OwnershipListener],
                 on_data: DataHook | None = None) -> None:
        self.zk = zk
        self.path = path
        self.state = Ownership.HELD
        self._listeners = listeners  # the recipe's list, shared: listeners added later are told too
        self._on_data = on_data
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Watch the node (the watch also fires on a data change) and the session; the data it
        holds now goes to ``on_data`` too (a revocation may have come while it waited)."""
        self.zk.add_listener(self._on_session)
        try:
            data, _ = await self.zk.get(self.path, self._on_node)
        except ZookeeperError:
            self._set(Ownership.LOST)
            return
        if self._on_data is not None:
            fire_and_forget(self._on_data, data)

    def stop(self, final: Ownership = Ownership.RELEASED) -> None:
        """The holder is done with the node; nothing is reported after ``final``."""
        try:
            self.zk.remove_listener(self._on_session)
        except ValueError:
            pass
        for task in self._tasks:
            task.cancel()
        self._set(final)

    @property
    def over(self) -> bool:
        return self.state in (Ownership.LOST, Ownership.RELEASED)

    def _set(self, state: Ownership) -> None:
        if self.over or state is self.state:
            return
        self.state = state
        if self.over:
            try:
                self.zk.remove_listener(self._on_session)
            except ValueError:
                pass
        for listener in list(self._listeners):
            try:
                fire_and_forget(listener, state)
            except Exception:
                log.exception("ownership listener %r failed", listener)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_session(self, state: ClientState) -> None:
        if self.over:
            return
        if state.is_terminal:
            self._set(Ownership.LOST)
        elif state is ClientState.SUSPENDED:
            self._set(Ownership.SUSPENDED)
        elif state.is_connected and self.state is Ownership.SUSPENDED:
            self._spawn(self._confirm())

    async def _confirm(self) -> None:
        """Back from SUSPENDED: HELD if the node is still there, else LOST."""
        try:
            stat = await self.zk.exists(self.path, self._on_node)
        except ZookeeperError:
            return  # lost the connection again (SUSPENDED stays) or the session (LOST follows)
        if self.over or self.state is not Ownership.SUSPENDED:
            return
        self._set(Ownership.HELD if stat is not None else Ownership.LOST)

    def _on_node(self, event: WatchedEvent) -> None:
        if self.over:
            return
        if event.type == EventType.NODE_DELETED:
            self._set(Ownership.LOST)
        elif event.type == EventType.NODE_DATA_CHANGED:
            self._spawn(self._read_data())
        # a NONE event is the session's end, reported through _on_session

    async def _read_data(self) -> None:
        try:
            data, _ = await self.zk.get(self.path, self._on_node)
        except NoNodeError:
            self._set(Ownership.LOST)
            return
        except ZookeeperError:
            return
        if self._on_data is not None and not self.over:
            fire_and_forget(self._on_data, data)


class Owner:
    """The holder's view that every recipe holding a node gives: ``ownership`` and listeners
    (kept by the recipe; its `Holding`, while it holds, reports to them)."""

    def __init__(self) -> None:
        self._holding: Holding | None = None
        self._listeners: list[OwnershipListener] = []

    @property
    def ownership(self) -> Ownership:
        """HELD, SUSPENDED (may be lost), LOST, or RELEASED (also before the first hold)."""
        return self._holding.state if self._holding is not None else Ownership.RELEASED

    def add_listener(self, listener: OwnershipListener) -> None:
        """Call ``listener(Ownership)`` on each change of ``ownership`` while held (plain or
        async; on the client's loop)."""
        self._listeners.append(listener)

    def remove_listener(self, listener: OwnershipListener) -> None:
        self._listeners.remove(listener)

    async def _start_holding(self, zk: AsyncClient, path: str, on_data: DataHook | None = None) -> None:
        self._holding = Holding(zk, path, self._listeners, on_data)
        await self._holding.start()

    def _stop_holding(self, final: Ownership = Ownership.RELEASED) -> None:
        holding, self._holding = self._holding, None
        if holding is not None:
            holding.stop(final)
