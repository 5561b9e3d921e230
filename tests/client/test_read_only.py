"""AsyncClient and a read-only Apache ZooKeeper 3.8 server.

A three-server ensemble runs with ``-Dreadonlymode.enabled=true``; two servers are killed, so the
survivor loses quorum and, after a moment, serves read-only (``srvr`` reports ``read-only``).

Guarantees checked: a client with ``read_only=True`` gets a session on the survivor in state
``CONNECTED_READ_ONLY``; reads work and see the data written while the ensemble had quorum; a
write fails with ``NotReadOnlyCallError``. A client without ``read_only`` never gets a session
there (the server refuses it) and ``start()`` fails with ``ConnectionLoss``.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator

import pytest
from tests.conftest import require_apache
from tests.helpers.clientwait import run

from zkpy import AsyncClient, ClientState
from zkpy.errors import ConnectionLoss, NotReadOnlyCallError
from zkpy.testing.servers import ServerProcess, cleanup_ensemble, server_mode, start_apache_ensemble

pytestmark = pytest.mark.interop


def _wait_mode(server: ServerProcess, mode: str, deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while (seen := server_mode(server)) != mode:
        if time.monotonic() >= deadline:
            raise AssertionError(f"server did not become {mode} within {deadline_s}s (mode {seen})")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def read_only_survivor() -> Iterator[tuple[ServerProcess, str]]:
    """(the survivor, a path written while the ensemble had quorum) once the survivor is read-only."""
    require_apache()
    # Apache 3.8's ReadOnlyRequestProcessor refuses createSession for global sessions
    # (NOTREADONLY), so a read-only server only takes local sessions.
    servers = start_apache_ensemble(3, {"localSessionsEnabled": "true"},
                                    jvm_props={"readonlymode.enabled": "true"})
    try:
        path = f"/ro-{uuid.uuid4().hex[:10]}"

        async def write() -> None:
            async with AsyncClient(",".join(s.hosts for s in servers)) as zk:
                await zk.create(path, b"written with quorum")
                await zk.sync(path)

        run(write, 30.0)
        survivor = servers[2]
        # the survivor must have the write before the others go: it follows (or leads) them
        for s in servers[:2]:
            s.stop(signal.SIGKILL)
        _wait_mode(survivor, "read-only", 15.0)
        yield survivor, path
    finally:
        cleanup_ensemble(servers)


def test_read_only_client_connects_reads_and_cannot_write(read_only_survivor: tuple[ServerProcess, str]) -> None:
    survivor, path = read_only_survivor

    async def scenario() -> None:
        async with AsyncClient(survivor.hosts, session_timeout=10.0, read_only=True) as zk:
            assert zk.state is ClientState.CONNECTED_READ_ONLY
            assert zk.connected
            data, stat = await zk.get(path)
            assert (data, stat.version) == (b"written with quorum", 0)
            assert await zk.exists(path + "-missing") is None
            assert path.lstrip("/") in await zk.get_children("/")
            with pytest.raises(NotReadOnlyCallError):
                await zk.create(path + "-new", b"")
            with pytest.raises(NotReadOnlyCallError):
                await zk.set(path, b"changed")
            # the session survives a refused write
            assert zk.state is ClientState.CONNECTED_READ_ONLY
            assert (await zk.get(path))[0] == b"written with quorum"

    run(scenario, 30.0)


def test_client_without_read_only_is_refused_by_a_read_only_server(
        read_only_survivor: tuple[ServerProcess, str]) -> None:
    survivor, _ = read_only_survivor

    async def scenario() -> None:
        zk = AsyncClient(survivor.hosts, session_timeout=10.0)
        with pytest.raises(ConnectionLoss):
            await zk.start(timeout=3.0)
        assert zk.state is ClientState.CLOSED

    run(scenario, 30.0)
