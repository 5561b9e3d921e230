"""zkpy's ZooKeeper client: ``AsyncClient`` (asyncio) over the pure session logic in ``core``."""

from .aio import AsyncClient, Transaction
from .core import ClientState, KazooState, WatchedEvent
from .retry import KazooRetry, RetryPolicy

__all__ = ["AsyncClient", "ClientState", "KazooRetry", "KazooState", "RetryPolicy", "Transaction", "WatchedEvent"]
