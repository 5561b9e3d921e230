"""zkpy: ZooKeeper in Python.

A coordination service that speaks Apache ZooKeeper 3.8's client protocol, so kazoo,
zkCli.sh and the Java client use it unchanged.

The client names (``Client``, ``AsyncClient``, ...) load lazily, so ``import zkpy`` stays cheap
for the server, which does not need them; type checkers see them as plain imports (the
``TYPE_CHECKING`` block), so ``from zkpy import Client`` is typed.
"""

from typing import TYPE_CHECKING

__version__ = "0.1.0"

# Client and AsyncClient are the clients with kazoo's recipe factories (zk.Lock(...)); the bare
# ones are zkpy.client.sync.Client and zkpy.client.aio.AsyncClient
_CLIENT_NAMES = {"AsyncClient": "zkpy.recipes.clients", "Client": "zkpy.recipes.clients",
                 "ClientState": "zkpy.client.core", "KazooState": "zkpy.client.core",
                 "WatchedEvent": "zkpy.client.core", "RetryPolicy": "zkpy.client.retry",
                 "KazooRetry": "zkpy.client.retry"}
__all__ = ["AsyncClient", "Client", "ClientState", "KazooRetry", "KazooState", "RetryPolicy", "WatchedEvent"]

if TYPE_CHECKING:
    from zkpy.client.core import ClientState, KazooState, WatchedEvent
    from zkpy.client.retry import KazooRetry, RetryPolicy
    from zkpy.recipes.clients import AsyncClient, Client


def __getattr__(name: str) -> object:
    """Load a client name on first use (see the module doc)."""
    module = _CLIENT_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'zkpy' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_CLIENT_NAMES])
