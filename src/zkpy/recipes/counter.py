"""`Counter`: a shared number changed by compare-and-set on the znode's version.

**Protocol.** Read the value and its version, write ``value + delta`` with that version; a
BadVersion answer means another client changed it in between: read again and retry. The value
is stored as kazoo stores it (``repr`` of an int or float, ASCII), or, with
``support_curator=True``, as Curator's SharedCount stores it (a 4-byte big-endian int).

**Exactly once across ConnectionLoss.** A write whose reply is lost may have been applied, and
rereading cannot tell it from another client's equal change, so kazoo's counter may add twice.
zkpy's write is a multi: the set, plus the create of an ephemeral marker ``counter/<guid>`` (and
the delete of this client's previous marker). After a ConnectionLoss the marker says whether
the write happened. At most one marker per client stays, and it goes with the session.
"""

from __future__ import annotations

import struct

from zkpy.client.aio import AsyncClient
from zkpy.client.retry import RetryPolicy
from zkpy.client.sync import Client
from zkpy.errors import BadVersionError, ConnectionLoss, NodeExistsError, NoNodeError, ZookeeperError

from .sequential import new_guid
from .support import DEFAULT_RETRY

__all__ = ["AsyncCounter", "Counter"]

Number = int | float
_CURATOR = struct.Struct(">i")


class _Retry(Exception):
    """The compare-and-set lost to another writer: read again."""


class AsyncCounter:
    """A shared counter (kazoo's ``Counter``): ``await counter.add(5)``."""

    def __init__(self, client: AsyncClient, path: str, default: Number = 0, support_curator: bool = False,
                 *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        if support_curator and not isinstance(default, int):
            raise TypeError("with support_curator the default must be an int")
        self.client = client
        self.path = path.rstrip("/")
        self.default = default
        self.default_type = type(default)
        self.support_curator = support_curator
        self.retry = retry
        self.pre_value: Number | None = None
        self.post_value: Number | None = None
        self._marker: str | None = None  # this client's last marker, deleted by its next write

    def _decode(self, data: bytes) -> Number:
        if not data:
            return self.default
        if self.support_curator:
            return int(_CURATOR.unpack(data)[0])
        return self.default_type(data.decode("ascii"))

    def _encode(self, value: Number) -> bytes:
        return _CURATOR.pack(value) if self.support_curator else repr(value).encode("ascii")

    async def _read(self) -> tuple[Number, int]:
        try:
            data, stat = await self.retry(self.client.get, self.path)
        except NoNodeError:
            try:
                await self.retry(self.client.create, self.path, self._encode(self.default), make_parents=True)
            except NodeExistsError:
                pass
            data, stat = await self.retry(self.client.get, self.path)
        return self._decode(data), stat.version

    async def get(self) -> Number:
        """The current value."""
        return (await self._read())[0]

    async def add(self, delta: Number) -> Number:
        """Add ``delta`` exactly once; the new value (also in ``post_value``, the old one in
        ``pre_value``). Raises TypeError for a delta of another type than the default."""
        if not isinstance(delta, self.default_type):
            raise TypeError(f"the counter holds {self.default_type.__name__}, not {type(delta).__name__}")
        while True:
            pre, version = await self._read()
            try:
                post = await self._write(pre + delta, version)
            except _Retry:
                continue
            self.pre_value, self.post_value = pre, post
            return post

    async def _write(self, value: Number, version: int) -> Number:
        marker = f"{self.path}/{new_guid()}"
        tx = self.client.transaction()
        tx.set_data(self.path, self._encode(value), version)
        tx.create(marker, b"", ephemeral=True)
        if self._marker is not None:
            tx.delete(self._marker)
        try:
            results = await tx.commit()
        except ConnectionLoss:
            if await self.retry(self.client.exists, marker) is None:
                raise _Retry() from None  # not applied: try again from a fresh read
            self._marker = marker
            return value
        errors = [r for r in results if isinstance(r, ZookeeperError) and r.code != -2]
        if any(isinstance(e, NoNodeError) for e in errors) and self._marker is not None:
            self._marker = None  # our previous marker went with an old session: try without it
            raise _Retry()
        if any(isinstance(e, BadVersionError) for e in errors):
            raise _Retry()
        if errors:
            raise errors[0]
        self._marker = marker
        return value

    async def subtract(self, delta: Number) -> Number:
        return await self.add(-delta)


class Counter:
    """The blocking form of `AsyncCounter` (kazoo's ``Counter``): ``counter += 1``,
    ``Counter.value``."""

    def __init__(self, client: Client, path: str, default: Number = 0, support_curator: bool = False,
                 *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self.client = client
        self.aio = AsyncCounter(client.aio, path, default, support_curator, retry=retry)

    @property
    def value(self) -> Number:
        return self.client.run(self.aio.get)

    @property
    def pre_value(self) -> Number | None:
        return self.aio.pre_value

    @property
    def post_value(self) -> Number | None:
        return self.aio.post_value

    def add(self, delta: Number) -> Number:
        return self.client.run(self.aio.add, delta)

    def __add__(self, delta: Number) -> Counter:
        self.add(delta)
        return self

    def __sub__(self, delta: Number) -> Counter:
        self.add(-delta)
        return self
