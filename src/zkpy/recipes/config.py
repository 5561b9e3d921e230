"""Configuration spread over several znodes, changed atomically for readers: the paper's *ready* znode.

**Protocol** (paper §2.3). The configuration lives in the children of a znode ``c``, one child
per key; ``c/ready`` exists while the configuration is complete.

* The writer (`publish`): delete ``ready``, write every key, create ``ready``. The deletion and
  the writes are *pipelined*: all are sent at once, and FIFO client order applies them in the
  order sent, so 5,000 keys take one round trip, not 5,000. ``ready`` is created once every
  write has succeeded (a second round trip), so a failed write never ends in a ``ready``.
* A reader (`read`): ``exists(ready, watch)``; if it is absent, wait for the watch. Then read
  every key (pipelined too). If the watch on ``ready`` fired before the last reply came, a
  writer began a change while we read: start again. A notification reaches the client before
  any reply that shows state after the change (DESIGN §2.3), so a read that ends with no
  notification saw one complete configuration, never a mix.

If the writer dies before it creates ``ready``, readers keep waiting (or time out) instead of
using a half-written configuration: the paper's second requirement.

`updates` yields every complete configuration from now on (the next one is read when ``ready``
comes back after a change).

**Failures.** ConnectionLoss makes a publish start again from the top (every step is
idempotent); reads are retried; SUSPENDED is waited through; session expiry raises
SessionExpiredError.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping

from zkpy.client.aio import AsyncClient
from zkpy.client.retry import RetryPolicy
from zkpy.client.sync import Client
from zkpy.errors import NodeExistsError, NoNodeError, ZookeeperError

from .support import DEFAULT_RETRY, Waiter, read_children_data, within

__all__ = ["READY", "AsyncReadyConfig", "ReadyConfig"]

READY = "ready"


class AsyncReadyConfig:
    """A multi-znode configuration under ``path`` guarded by ``path/ready``."""

    def __init__(self, client: AsyncClient, path: str, *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self.client = client
        self.path = path.rstrip("/")
        self.ready_path = f"{self.path}/{READY}"
        self.retry = retry
        self._waiter = Waiter(client)

    async def publish(self, values: Mapping[str, bytes], remove: tuple[str, ...] = ()) -> None:
        """Replace the keys in ``values`` (and delete those in ``remove``) as one change."""
        for key in (*values, *remove):
            if not key or "/" in key or key == READY:
                raise ValueError(f"not a configuration key: {key!r}")
        await self.retry(self.client.ensure_path, self.path)
        await self.retry(self._publish_once, values, remove)

    async def _publish_once(self, values: Mapping[str, bytes], remove: tuple[str, ...]) -> None:
        # 1. pipelined: ready goes first (FIFO order), then every key
        steps = [self._quietly(self.client.delete(self.ready_path), NoNodeError)]
        steps += [self._put(key, value) for key, value in values.items()]
        steps += [self._quietly(self.client.delete(f"{self.path}/{key}"), NoNodeError) for key in remove]
        results = await asyncio.gather(*steps, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        # 2. only once every key is written: ready again
        await self._quietly(self.client.create(self.ready_path), NodeExistsError)

    async def _put(self, key: str, value: bytes) -> None:
        try:
            await self.client.set(f"{self.path}/{key}", value)
        except NoNodeError:
            try:
                await self.client.create(f"{self.path}/{key}", value)
            except NodeExistsError:  # created by an earlier attempt whose reply was lost
                await self.client.set(f"{self.path}/{key}", value)

    @staticmethod
    async def _quietly(step: object, ignored: type[ZookeeperError]) -> None:
        try:
            await step  # type: ignore[misc]
        except ignored:
            pass

    async def read(self, timeout: float | None = None) -> dict[str, bytes]:
        """One complete configuration (waiting for ``ready``); `RecipeTimeout` after ``timeout``."""
        return await within(timeout, f"configuration {self.path}", self._read())

    async def _read(self) -> dict[str, bytes]:
        while True:
            self._waiter.arm()
            if await self.retry(self.client.exists, self.ready_path, self._waiter.fire) is None:
                await self._waiter.wait()
                continue
            config = await self.retry(self._read_keys)
            if self._waiter.fired:
                continue  # a change began while we read
            return config

    async def _read_keys(self) -> dict[str, bytes]:
        keys = [k for k in await self.client.get_children(self.path) if k != READY]
        return await read_children_data(self.client, self.path, keys)  # a key gone: the watch fired

    async def updates(self) -> AsyncIterator[dict[str, bytes]]:
        """Every complete configuration, the current one first."""
        while True:
            config = await self._read()
            yield config
            if not self._waiter.fired:
                await self._waiter.wait()  # until ready goes (a change begins)


class ReadyConfig:
    """The blocking form of `AsyncReadyConfig`."""

    def __init__(self, client: Client, path: str, *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self.client = client
        self.aio = AsyncReadyConfig(client.aio, path, retry=retry)

    def publish(self, values: Mapping[str, bytes], remove: tuple[str, ...] = ()) -> None:
        self.client.run(self.aio.publish, values, remove)

    def read(self, timeout: float | None = None) -> dict[str, bytes]:
        return self.client.run(self.aio.read, timeout)
