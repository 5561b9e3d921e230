"""kazoo's session calls on zkpy's clients: stop/restart, resuming a session by client_id,
set_hosts, command/server_version, retry (command_retry, connection_retry), the chroot check,
reconfig. Where Apache ZooKeeper has the behaviour, kazoo and zkpy's client are compared on
zkpy and on Apache (``any_server``). Nothing sleeps: waits have deadlines."""

from __future__ import annotations

import asyncio
import random
import threading
import uuid
import warnings

import pytest
from kazoo.client import KazooClient

from zkpy import AsyncClient, Client, ClientState, KazooRetry, KazooState
from zkpy.client.core import ClientCore
from zkpy.errors import ConnectionLoss, SessionExpiredError
from zkpy.testing.servers import ServerProcess, free_port

WAIT_S = 10.0


def kazoo(server: ServerProcess, **kwargs: object) -> KazooClient:
    kz = KazooClient(hosts=server.hosts, timeout=10, **kwargs)  # type: ignore[arg-type]
    kz.start(timeout=15)
    return kz


def test_stop_closes_the_session_and_start_makes_a_new_one(zkpy_server: ServerProcess) -> None:
    path = f"/parity-{uuid.uuid4().hex[:8]}"
    seen: list[ClientState] = []
    changed = threading.Condition()

    def listener(state: ClientState) -> None:
        with changed:
            seen.append(state)
            changed.notify_all()

    with Client(zkpy_server.hosts) as zk, Client(zkpy_server.hosts) as witness:
        zk.add_listener(listener)
        zk.create(path, ephemeral=True)
        first = zk.client_id
        zk.stop()
        assert zk.state is ClientState.CLOSED and not zk.connected
        assert witness.exists(path) is None  # the session was closed, not abandoned
        zk.restart()  # stop (a no-op now) + start
        assert zk.connected and zk.client_id[0] not in (0, first[0])
        zk.create(path, ephemeral=True)
        zk.restart()
        assert witness.exists(path) is None
        with changed:
            assert changed.wait_for(lambda: len(seen) >= 4, WAIT_S), seen
        assert seen == [ClientState.CLOSED, ClientState.CONNECTED, ClientState.CLOSED, ClientState.CONNECTED]
        assert [s in KazooState.LOST for s in seen] == [True, False, True, False]


def test_a_session_resumed_by_client_id_keeps_its_ephemerals(zkpy_server: ServerProcess) -> None:
    path = f"/resume-{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        first = AsyncClient(zkpy_server.hosts, session_timeout=10.0)
        await first.start()
        await first.create(path, b"", ephemeral=True)
        client_id = first.client_id
        await first._shutdown()  # the process "dies": no closeSession, the session lives on
        second = AsyncClient(zkpy_server.hosts, client_id=client_id)
        await second.start()
        try:
            assert second.session_id == client_id[0]
            stat = await second.exists(path)
            assert stat is not None and stat.ephemeralOwner == client_id[0]
        finally:
            await second.close()  # closes the resumed session: its ephemeral goes
        async with AsyncClient(zkpy_server.hosts) as witness:
            assert await witness.exists(path) is None
        unknown = AsyncClient(zkpy_server.hosts, client_id=(client_id[0], client_id[1]))
        with pytest.raises(SessionExpiredError):
            await unknown.start()
        assert unknown.state is ClientState.EXPIRED or unknown.state is ClientState.CLOSED

    asyncio.run(scenario())


def test_kazoo_resumes_a_zkpy_session(zkpy_server: ServerProcess) -> None:
    """client_id means the same to both: kazoo takes over a session zkpy's client made."""
    path = f"/resume-kz-{uuid.uuid4().hex[:8]}"

    async def make() -> tuple[int, bytes]:
        zk = AsyncClient(zkpy_server.hosts)
        await zk.start()
        await zk.create(path, b"", ephemeral=True)
        cid = zk.client_id
        await zk._shutdown()
        return cid

    cid = asyncio.run(make())
    kz = kazoo(zkpy_server, client_id=cid)
    try:
        assert kz.client_id == cid
        assert kz.exists(path).ephemeralOwner == cid[0]
    finally:
        kz.stop()
        kz.close()


def test_missing_chroot_warns_or_is_created(zkpy_server: ServerProcess) -> None:
    chroot = f"/chroot-{uuid.uuid4().hex[:8]}/app"
    with pytest.warns(UserWarning, match="chroot .* does not exist"):
        zk = Client(zkpy_server.hosts + chroot)
        zk.start()
    zk.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with Client(zkpy_server.hosts + chroot, create_chroot=True) as zk:
            assert zk.create("/config", b"v1") == "/config"
        with Client(zkpy_server.hosts + chroot) as zk:  # exists now: no warning
            assert zk.get("/config")[0] == b"v1"
    with Client(zkpy_server.hosts) as root:
        assert root.get(chroot + "/config")[0] == b"v1"
        root.delete(chroot.rsplit("/", 1)[0], recursive=True)


def test_set_hosts_takes_effect_at_the_next_connection() -> None:
    core = ClientCore("a:1,b:2/app", rng=random.Random(7))
    assert core.next_host() in (("a", 1), ("b", 2))
    core.set_hosts("c:3,d:4,e:5/app", None)  # None: the order given
    assert [core.next_host() for _ in range(4)] == [("c", 3), ("d", 4), ("e", 5), ("c", 3)]
    core.set_hosts("f:6,g:7/app", random.Random(1))
    assert {core.next_host(), core.next_host()} == {("f", 6), ("g", 7)}
    with pytest.raises(ValueError, match="chroot"):
        core.set_hosts("c:3", None)


def test_set_hosts_keeps_the_connection_and_refuses_another_chroot(zkpy_server: ServerProcess) -> None:
    dead = f"127.0.0.1:{free_port()}"
    with Client(zkpy_server.hosts) as zk:
        session = zk.session_id
        zk.set_hosts(f"{dead},{zkpy_server.hosts}")
        assert zk.hosts == f"{dead},{zkpy_server.hosts}"
        assert zk.connected and zk.session_id == session and zk.exists("/") is not None
        with pytest.raises(ValueError, match="chroot"):
            zk.set_hosts(zkpy_server.hosts + "/other")


def test_command_and_server_version_agree_with_kazoo(any_server: ServerProcess) -> None:
    kz = kazoo(any_server)
    try:
        with Client(any_server.hosts) as zk:
            assert zk.command(b"ruok") == kz.command(b"ruok") == "imok"
            version = zk.server_version()
            assert version == kz.server_version()
            assert version[:2] == (3, 8)
            assert "zookeeper.version=" in zk.command(b"envi")
    finally:
        kz.stop()
        kz.close()


def test_command_needs_a_connection(zkpy_server: ServerProcess) -> None:
    zk = Client(zkpy_server.hosts)
    with pytest.raises(ConnectionLoss):
        zk.command(b"ruok")
    zk.close()


def test_reconfig_fails_as_kazoos_does(any_server: ServerProcess) -> None:
    """Standalone servers refuse reconfig; both clients report the same error class."""
    kz = kazoo(any_server)
    try:
        with pytest.raises(Exception) as kazoo_error:
            kz.reconfig(joining=None, leaving="2", new_members=None)
        with Client(any_server.hosts) as zk, pytest.raises(Exception) as zkpy_error:
            zk.reconfig(None, "2", None)
        assert type(zkpy_error.value).__name__ == type(kazoo_error.value).__name__
    finally:
        kz.stop()
        kz.close()


def test_retry_uses_command_retry(zkpy_server: ServerProcess) -> None:
    calls: list[int] = []

    def always_lost() -> None:
        calls.append(1)
        raise ConnectionLoss()

    with Client(zkpy_server.hosts, command_retry={"max_tries": 2, "delay": 0.001}) as zk:
        with pytest.raises(ConnectionLoss):
            zk.retry(always_lost)
        assert len(calls) == 2
        assert zk.retry(zk.get, "/")[1].numChildren >= 1
    calls.clear()
    with pytest.raises(ConnectionLoss):
        KazooRetry(max_tries=3, delay=0.001)(always_lost)
    assert len(calls) == 3


def test_connection_retry_bounds_the_rounds_of_attempts() -> None:
    zk = Client(f"127.0.0.1:{free_port()}", connect_timeout=0.5,
                connection_retry={"max_tries": 2, "delay": 0.01})
    try:
        with pytest.raises(ConnectionLoss):
            zk.start(timeout=WAIT_S)  # gives up after two rounds, long before the timeout
        assert zk.state is ClientState.CLOSED
    finally:
        zk.close()


def test_start_async_sets_its_event(zkpy_server: ServerProcess) -> None:
    zk = Client(zkpy_server.hosts)
    try:
        assert zk.start_async().wait(WAIT_S)
        assert zk.connected
    finally:
        zk.close()
