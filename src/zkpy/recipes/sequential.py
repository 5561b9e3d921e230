"""Sequential znodes for recipes: created exactly once, ordered by their sequence number.

**The GUID recovery** (the recipe guide, "Recoverable Errors and the GUID"). A create can
reach the server, succeed, and lose its reply to ConnectionLoss: the node exists but the client
does not know its name, and a second create would leave two nodes of one contender (an orphan
that holds up everybody behind it, until the session ends). So every sequential node a recipe
creates carries a fresh GUID in its name, and `OnceCreator.create` looks for a child holding
that GUID before it creates again. `OnceCreator.forget` deletes the node whatever became of the
create: the clean-up after a timeout or a cancellation that may have cut a create short.

**Order.** The server appends ten digits (the parent's cversion, printed as a signed 32-bit
number) to a sequential name; names of different shapes under one parent (``read-``, ``write-``,
kazoo's ``<guid>__lock__``, zkpy's own) are ordered by that suffix alone.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from zkpy.client.aio import AsyncClient
from zkpy.client.retry import RetryPolicy
from zkpy.errors import NoNodeError, ZookeeperError

from .support import DEFAULT_RETRY

__all__ = ["SEQUENCE_SUFFIX", "OnceCreator", "find_prefixed", "new_guid", "sequence_of", "sort_by_sequence"]

SEQUENCE_SUFFIX = r"(-[1-9]\d{9}|-\d{9}|\d{10})"
"""The server's suffix: ``%010d`` of a signed 32-bit number (so ``-000000001`` for -1, not a
dash before ten digits, which is a name's own dash: ``read-0000000001`` is 1)."""
_SEQUENCE = re.compile(SEQUENCE_SUFFIX + "$")


def new_guid() -> str:
    """32 hex digits, no dashes (kazoo's form, so kazoo's recipes read zkpy's nodes and back)."""
    return uuid.uuid4().hex


def sequence_of(name: str) -> int | None:
    """The sequence number a server appended to ``name``; None for a name without one."""
    m = _SEQUENCE.search(name)
    return int(m.group(1)) if m else None


def sort_by_sequence(names: Iterable[str]) -> list[str]:
    """The names that end in a sequence number, lowest first (the others are left out)."""
    keyed = [(seq, name) for name in names if (seq := sequence_of(name)) is not None]
    keyed.sort()
    return [name for _, name in keyed]


@dataclass
class OnceCreator:
    """Creates ``parent/<prefix>NNNNNNNNNN`` at most once, where ``prefix`` holds a GUID.

    ``name`` is the child's name once known. Use one OnceCreator per node a recipe wants; a new
    node (after release, say) needs a new one."""

    zk: AsyncClient
    parent: str
    prefix: str
    retry: RetryPolicy = DEFAULT_RETRY
    name: str | None = None
    tried: bool = False  # a create was sent: it may have succeeded unseen

    async def create(self, data: bytes = b"", *, ephemeral: bool = True) -> str:
        """The child's name, created now or found from an earlier try. Retries ConnectionLoss;
        creates the parent path when it is missing."""
        if self.name is None:
            self.name = await self.retry(self._attempt, data, ephemeral)
        return self.name

    async def _attempt(self, data: bytes, ephemeral: bool) -> str:
        if self.tried:
            found = await self.find()
            if found is not None:
                return found
        self.tried = True
        try:
            path = await self.zk.create(f"{self.parent}/{self.prefix}", data, ephemeral=ephemeral, sequence=True)
        except NoNodeError:
            self.tried = False  # the parent is missing: nothing was created
            await self.zk.ensure_path(self.parent)
            self.tried = True
            path = await self.zk.create(f"{self.parent}/{self.prefix}", data, ephemeral=ephemeral, sequence=True)
        return path.rsplit("/", 1)[1]

    async def find(self) -> str | None:
        """The child holding this creator's GUID, if there is one (one read)."""
        try:
            children = await self.zk.get_children(self.parent)
        except NoNodeError:
            return None
        return find_prefixed(children, self.prefix)

    async def forget(self) -> None:
        """Delete the node, known or not (best effort: the session's end removes an ephemeral
        anyway). After this the creator may create again."""
        try:
            name = self.name
            if name is None and self.tried:
                name = await self.retry(self.find)
            if name is not None:
                try:
                    await self.retry(self.zk.delete, f"{self.parent}/{name}")
                except NoNodeError:
                    pass
        except ZookeeperError:
            return  # the session is gone or the client closed: nothing more to do here
        self.name = None
        self.tried = False


def find_prefixed(children: Sequence[str], prefix: str) -> str | None:
    for child in children:
        if child.startswith(prefix):
            return child
    return None
