"""zkpy's ZooKeeper client: ``AsyncClient`` (asyncio) over the pure session logic in ``core``."""

from .aio import AsyncClient, Transaction
from .core import ClientState, WatchedEvent

__all__ = ["AsyncClient", "ClientState", "Transaction", "WatchedEvent"]
