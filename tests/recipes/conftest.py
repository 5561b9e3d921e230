"""Recipe tests: a fresh base path on a server (zkpy and Apache ZooKeeper), and helpers."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from zkpy.client.aio import AsyncClient
from zkpy.testing.proxy import TcpProxy
from zkpy.testing.servers import ServerProcess


@pytest.fixture
def base(any_server: ServerProcess) -> Iterator[tuple[str, str]]:
    """(hosts, a fresh base path) on zkpy and on Apache ZooKeeper; the subtree goes afterwards."""
    path = f"/recipes-{uuid.uuid4().hex[:10]}"
    yield any_server.hosts, path
    kz = KazooClient(any_server.hosts)
    kz.start()
    try:
        kz.delete(path, recursive=True)
    finally:
        kz.stop()
        kz.close()


@pytest.fixture
def proxied(any_server: ServerProcess) -> Iterator[TcpProxy]:
    """A TCP proxy in front of the server (``zk_frames``: it can lose a chosen reply)."""
    with TcpProxy("127.0.0.1", any_server.port, zk_frames=True) as proxy:
        yield proxy


def expire_session(proxy: TcpProxy, hosts: str, client: AsyncClient) -> None:
    """End the session of ``client`` (connected through ``proxy``) from outside, at once: the
    proxy keeps the client away while another connection takes the session over and closes it;
    the client's next connection learns that its session has expired."""
    proxy.cut("reset")
    try:
        kz = KazooClient(hosts, client_id=client.client_id)
        kz.start()
        kz.stop()
        kz.close()
    finally:
        proxy.restore()


async def clients(hosts: str, n: int, session_timeout: float = 10.0) -> list[AsyncClient]:
    """``n`` started AsyncClients (each its own session)."""
    out = [AsyncClient(hosts, session_timeout=session_timeout) for _ in range(n)]
    await asyncio.gather(*(c.start() for c in out))
    return out


async def close_all(zks: list[AsyncClient]) -> None:
    await asyncio.gather(*(c.close() for c in zks), return_exceptions=True)
