"""Group membership: `Party` and `ShallowParty` (paper §2.4, "Group Membership"; kazoo's layout).

**Protocol.** The group is a znode ``g``; a member joins by creating an ephemeral child and
does nothing else: if it fails or ends, its session ends and the node goes. Listing ``g``'s
children lists the group; `watch` (a `watchers.AsyncChildrenWatch`) follows its changes.

* `Party`: the child is ``<guid>__party__`` with the member's identifier as its data (listing
  the members reads every node: one pipelined round trip).
* `ShallowParty`: the child is ``<guid>-<identifier>``: one getChildren lists the members, and
  the identifier must be valid in a znode name.

**Failures.** The node's name is a GUID, so a join whose reply was lost is recognised
(NodeExists is our own node). ConnectionLoss is retried. A member whose session expires is out
of the group: its node is gone, and ``participating`` tells it nothing more; watch the client's
state (LOST) to rejoin with a new client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from zkpy.client.aio import AsyncClient
from zkpy.client.retry import RetryPolicy
from zkpy.client.sync import Client
from zkpy.errors import NodeExistsError, NoNodeError

from .sequential import new_guid
from .support import DEFAULT_RETRY, call_user, read_children_data
from .watchers import AsyncChildrenWatch

__all__ = ["AsyncParty", "AsyncShallowParty", "Party", "ShallowParty"]

PARTY_NAME = "__party__"


class _AsyncPartyBase:
    def __init__(self, client: AsyncClient, path: str, identifier: str | None, node: str,
                 retry: RetryPolicy) -> None:
        self.client = client
        self.path = path.rstrip("/")
        self.identifier = identifier or ""
        self.retry = retry
        self.node = node
        self.create_path = f"{self.path}/{node}"
        self.participating = False

    async def join(self) -> None:
        """Become a member (an ephemeral node under the group)."""
        await self.retry(self.client.ensure_path, self.path)
        try:
            await self.retry(self.client.create, self.create_path, self.identifier.encode("utf-8"), ephemeral=True)
        except NodeExistsError:
            pass  # ours: an earlier try's reply was lost (the name is our GUID)
        self.participating = True

    async def leave(self) -> bool:
        """Stop being a member; False if we were not one."""
        self.participating = False
        try:
            await self.retry(self.client.delete, self.create_path)
        except NoNodeError:
            return False
        return True

    async def _children(self) -> list[str]:
        try:
            return await self.retry(self.client.get_children, self.path)
        except NoNodeError:
            return []

    async def members(self) -> list[str]:
        raise NotImplementedError

    async def size(self) -> int:
        return len(await self.members())

    async def watch(self, func: Callable[[list[str]], Any]) -> AsyncChildrenWatch:
        """Call ``func(member identifiers)`` now and whenever the group changes; `stop` the
        returned watch to end it."""
        await self.retry(self.client.ensure_path, self.path)

        async def on_children(children: list[str]) -> Any:
            return await call_user(func, await self._identify(children))

        watch = AsyncChildrenWatch(self.client, self.path, on_children, retry=self.retry)
        await watch.start()
        return watch

    async def _identify(self, children: list[str]) -> list[str]:
        raise NotImplementedError

    async def __aenter__(self) -> _AsyncPartyBase:
        await self.join()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.leave()


class AsyncParty(_AsyncPartyBase):
    """Members with their identifiers in the node data (kazoo's ``Party``)."""

    def __init__(self, client: AsyncClient, path: str, identifier: str | None = None,
                 *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        super().__init__(client, path, identifier, new_guid() + PARTY_NAME, retry)

    async def members(self) -> list[str]:
        """The members' identifiers."""
        return await self._identify(await self._children())

    async def _identify(self, children: list[str]) -> list[str]:
        names = [c for c in children if PARTY_NAME in c]
        data = await self.retry(read_children_data, self.client, self.path, names)
        return [d.decode("utf-8", "replace") for d in data.values()]


class AsyncShallowParty(_AsyncPartyBase):
    """Members with their identifiers in the node names (kazoo's ``ShallowParty``)."""

    def __init__(self, client: AsyncClient, path: str, identifier: str | None = None,
                 *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        super().__init__(client, path, identifier, f"{new_guid()}-{identifier or ''}", retry)

    async def members(self) -> list[str]:
        return await self._identify(await self._children())

    async def _identify(self, children: list[str]) -> list[str]:
        return [c.split("-", 1)[1] for c in children if "-" in c]


class Party:
    """The blocking form of `AsyncParty` (kazoo's ``Party``): ``len(party)``, ``list(party)``."""

    _async_class: type[_AsyncPartyBase] = AsyncParty

    def __init__(self, client: Client, path: str, identifier: str | None = None,
                 *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self.client = client
        self.aio = self._async_class(client.aio, path, identifier, retry=retry)  # type: ignore[call-arg]

    @property
    def participating(self) -> bool:
        return self.aio.participating

    def join(self) -> None:
        self.client.run(self.aio.join)

    def leave(self) -> bool:
        return self.client.run(self.aio.leave)

    def members(self) -> list[str]:
        return self.client.run(self.aio.members)

    def __len__(self) -> int:
        return len(self.members())

    def __iter__(self) -> Iterator[str]:
        return iter(self.members())

    def __enter__(self) -> Party:
        self.join()
        return self

    def __exit__(self, *exc: object) -> None:
        self.leave()


class ShallowParty(Party):
    """The blocking form of `AsyncShallowParty` (kazoo's ``ShallowParty``)."""

    _async_class = AsyncShallowParty
