"""zkpy: ZooKeeper in Python.

A coordination service that speaks Apache ZooKeeper 3.8's client protocol, so kazoo,
zkCli.sh and the Java client use it unchanged.
"""

__version__ = "0.1.0"

__all__ = ["AsyncClient", "ClientState", "WatchedEvent"]

# Client and AsyncClient are the clients with kazoo's recipe factories (zk.Lock(...)); the bare
# ones are zkpy.client.sync.Client and zkpy.client.aio.AsyncClient
_CLIENT_NAMES = {"AsyncClient": "zkpy.recipes.clients", "Client": "zkpy.recipes.clients",
                 "ClientState": "zkpy.client.core", "WatchedEvent": "zkpy.client.core",
                 "RetryPolicy": "zkpy.client.retry"}
__all__ += ["Client", "RetryPolicy"]


def __getattr__(name: str) -> object:
    """Client names load lazily, so ``import zkpy`` stays cheap (the server does not need them)."""
    module = _CLIENT_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'zkpy' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
