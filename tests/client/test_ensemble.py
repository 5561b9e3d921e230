"""AsyncClient against a three-server Apache ZooKeeper 3.8 ensemble.

Guarantee checked: when the server a client is connected to dies (kill -9), the client moves to
another server of its connect string with the same session: its ephemerals stay, and its watches
(one-time and persistent) still fire.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import Iterator

import pytest
from tests.conftest import require_apache
from tests.helpers.clientwait import StateLog, eventually, run, wait_event

from zkpy.client.core import ClientState, WatchedEvent
from zkpy.testing.servers import (
    ServerProcess,
    cleanup_ensemble,
    ensemble_hosts,
    ensemble_leader,
    server_of_session,
    start_apache_ensemble,
)
from zkpy.wire.consts import EventType

aio = pytest.importorskip("zkpy.client.aio")
AsyncClient = aio.AsyncClient

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def ensemble() -> Iterator[list[ServerProcess]]:
    require_apache()
    servers = start_apache_ensemble(3)
    yield servers
    cleanup_ensemble(servers)


def test_session_moves_to_another_server_when_its_server_is_killed(ensemble: list[ServerProcess]) -> None:
    async def scenario() -> None:
        zk = AsyncClient(ensemble_hosts(ensemble), session_timeout=8.0)
        await zk.start()
        states = StateLog()
        other = None
        try:
            base = f"/ensemble-{uuid.uuid4().hex[:10]}"
            await zk.create(f"{base}/data", b"0", make_parents=True)
            eph, eph_stat = await zk.create(f"{base}/eph", b"", ephemeral=True, include_stat=True)
            session_id = eph_stat.ephemeralOwner
            assert session_id == zk.session_id

            once: list[WatchedEvent] = []
            once_fired = asyncio.Event()
            persistent: list[WatchedEvent] = []
            persistent_fired = asyncio.Event()

            def on_once(event: WatchedEvent) -> None:
                once.append(event)
                once_fired.set()

            def on_persistent(event: WatchedEvent) -> None:
                persistent.append(event)
                persistent_fired.set()

            await zk.get(f"{base}/data", watch=on_once)
            await zk.add_watch(base, on_persistent, recursive=True)
            zk.add_listener(states)

            victim: ServerProcess | None = None

            def find_victim() -> bool:
                nonlocal victim
                victim = server_of_session(ensemble, session_id)
                return victim is not None

            await eventually(find_victim, "a server listing the session in cons")
            assert victim is not None
            survivors = [s for s in ensemble if s is not victim]
            print(f"killing server {victim.extra['myid']} (leader: {ensemble_leader(ensemble) is victim})")
            other = AsyncClient(ensemble_hosts(survivors))
            await other.start()

            victim.stop(signal.SIGKILL)
            await states.wait_for(ClientState.SUSPENDED)
            await other.set(f"{base}/data", b"1")  # during the move, or just after it
            await states.wait_for(ClientState.CONNECTED, deadline_s=20.0)
            assert states.states == [ClientState.SUSPENDED, ClientState.CONNECTED]
            assert zk.session_id == session_id
            assert server_of_session(survivors, session_id) is not None

            await wait_event(once_fired, "the one-time watch to fire on the new server")
            await wait_event(persistent_fired, "the persistent watch to fire on the new server")
            assert [(e.type, e.path) for e in once] == [(EventType.NODE_DATA_CHANGED, f"{base}/data")]
            assert (persistent[0].type, persistent[0].path) == (EventType.NODE_DATA_CHANGED, f"{base}/data")

            stat = await other.exists(eph)
            assert stat is not None and stat.ephemeralOwner == session_id
            _, new_stat = await zk.create(f"{base}/eph2", b"", ephemeral=True, include_stat=True)
            assert new_stat.ephemeralOwner == session_id
            persistent_fired.clear()
            await other.set(f"{base}/data", b"2")
            await wait_event(persistent_fired, "the persistent watch to keep firing")
        finally:
            await zk.close()
            if other is not None:
                await other.close()

    run(scenario)
