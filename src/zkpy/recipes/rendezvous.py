"""`Rendezvous`: processes started by a scheduler find each other through one znode (paper §2.4).

**Protocol.** A client that starts a master and workers through a scheduler cannot tell the
workers the master's address in advance. It creates a rendezvous znode ``zr`` (`create`,
ephemeral by default) and passes its path to every process. The master, once it knows its
address, writes it into ``zr`` (`publish`). A worker reads ``zr`` with a watch and, while it is
still empty, waits for the notification of the write (`wait`). Because ``zr`` is ephemeral, it
goes when the client's session ends: master and workers watch for that (`wait_gone`) and clean
themselves up.

**Failures.** ConnectionLoss is retried; SUSPENDED is waited through; a worker that waits on a
rendezvous whose creator is gone gets NoNodeError; session expiry raises SessionExpiredError.
"""

from __future__ import annotations

from zkpy.client.aio import AsyncClient
from zkpy.client.retry import RetryPolicy
from zkpy.client.sync import Client
from zkpy.errors import NodeExistsError, NoNodeError

from .support import DEFAULT_RETRY, Waiter, wait_gone, within

__all__ = ["AsyncRendezvous", "Rendezvous"]


class AsyncRendezvous:
    """The rendezvous znode at ``path``: created by the client, filled by the master, read by
    the workers."""

    def __init__(self, client: AsyncClient, path: str, *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self.client = client
        self.path = path.rstrip("/")
        self.retry = retry
        self._waiter = Waiter(client)

    async def create(self, ephemeral: bool = True) -> None:
        """The client's side: create the empty rendezvous znode (ephemeral: it ends with the
        client's session, which tells master and workers to stop)."""
        try:
            await self.retry(self.client.create, self.path, b"", ephemeral=ephemeral, make_parents=True)
        except NodeExistsError:
            stat = await self.retry(self.client.exists, self.path)
            if stat is None or (ephemeral and stat.ephemeralOwner != self.client.session_id):
                raise

    async def publish(self, info: bytes) -> None:
        """The master's side: fill in its address (any non-empty bytes). NoNodeError if the
        rendezvous is gone."""
        if not info:
            raise ValueError("the rendezvous information must not be empty")
        await self.retry(self.client.set, self.path, info)

    async def wait(self, timeout: float | None = None) -> bytes:
        """A worker's side: the master's information, waiting until it is filled in. Raises
        NoNodeError if the rendezvous is gone, `RecipeTimeout` after ``timeout``."""
        return await within(timeout, f"rendezvous {self.path}", self._wait_filled())

    async def _wait_filled(self) -> bytes:
        while True:
            self._waiter.arm()
            data, _ = await self.retry(self.client.get, self.path, self._waiter.fire)
            if data:
                return data
            await self._waiter.wait()

    async def wait_gone(self, timeout: float | None = None) -> None:
        """Until the rendezvous znode is deleted (its creator ended): time to clean up."""
        await within(timeout, f"rendezvous {self.path}", wait_gone(self.client, self.path, self._waiter, self.retry))

    async def close(self) -> None:
        """The client's side: end the rendezvous (delete the znode)."""
        try:
            await self.retry(self.client.delete, self.path)
        except NoNodeError:
            pass


class Rendezvous:
    """The blocking form of `AsyncRendezvous`."""

    def __init__(self, client: Client, path: str, *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self.client = client
        self.aio = AsyncRendezvous(client.aio, path, retry=retry)

    def create(self, ephemeral: bool = True) -> None:
        self.client.run(self.aio.create, ephemeral)

    def publish(self, info: bytes) -> None:
        self.client.run(self.aio.publish, info)

    def wait(self, timeout: float | None = None) -> bytes:
        return self.client.run(self.aio.wait, timeout)

    def wait_gone(self, timeout: float | None = None) -> None:
        self.client.run(self.aio.wait_gone, timeout)

    def close(self) -> None:
        self.client.run(self.aio.close)
