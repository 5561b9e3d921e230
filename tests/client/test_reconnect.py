"""AsyncClient across connection loss, through a TcpProxy, against zkpy and Apache ZooKeeper.

Guarantees checked:
- a cut shorter than the session timeout keeps the session, its ephemerals and its watches; the
  restored one-time watches fire for changes made while the client was away, the restored
  persistent watches for changes after the reconnect (what the servers do);
- a cut longer than the session timeout ends in EXPIRED, reported exactly once, and the
  ephemerals are gone;
- the client never accepts a session from a server that is behind the last zxid it has seen.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from tests.helpers.clientwait import StateLog, eventually, run, wait_event

from zkpy.client.core import ClientState, WatchedEvent
from zkpy.errors import SessionExpiredError
from zkpy.testing.proxy import TcpProxy
from zkpy.testing.servers import ServerProcess, server_zxid, start_apache, start_zkpy
from zkpy.wire.consts import EventType

aio = pytest.importorskip("zkpy.client.aio")
AsyncClient = aio.AsyncClient


@pytest.fixture
def proxy(any_server: ServerProcess) -> Iterator[TcpProxy]:
    with TcpProxy("127.0.0.1", any_server.port) as p:
        yield p


def unique(prefix: str) -> str:
    return f"/{prefix}-{uuid.uuid4().hex[:10]}"


async def connected(hosts: str, session_timeout: float = 10.0) -> Any:
    zk = AsyncClient(hosts, session_timeout=session_timeout)
    await zk.start(timeout=15.0)
    return zk


@pytest.mark.parametrize("mode", ["reset", "blackhole"])
def test_short_cut_keeps_session_ephemerals_and_watches(any_server: ServerProcess, proxy: TcpProxy,
                                                         mode: str, caplog: pytest.LogCaptureFixture) -> None:
    # reset: the client sees the loss at once. blackhole: it must notice by its read timeout
    # (2/3 of 12 s) and still get back before the server's 12 s are up, so nothing slow happens
    # between SUSPENDED and restore(): the changes are made as soon as the link is cut (under
    # load, two writes there once used up the margin and the session expired; with 8 s, a loaded
    # machine once left Apache's session less than the reconnect took).
    caplog.set_level(logging.DEBUG, logger="zkpy")
    session_timeout = 10.0 if mode == "reset" else 12.0

    async def scenario() -> None:
        other = await connected(any_server.hosts)
        zk = await connected(proxy.hosts, session_timeout)
        states = StateLog()
        try:
            base = unique("reconnect")
            await other.create(f"{base}/data", b"0", make_parents=True)
            await other.create(f"{base}/persistent", b"0")
            eph, eph_stat = await zk.create(f"{base}/eph", b"", ephemeral=True, include_stat=True)
            session_id = eph_stat.ephemeralOwner
            assert session_id != 0

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
            await zk.add_watch(f"{base}/persistent", on_persistent)
            zk.add_listener(states)

            proxy.cut(mode)  # type: ignore[arg-type]
            await other.set(f"{base}/data", b"1")  # a blackholed client never hears of these
            await other.set(f"{base}/persistent", b"1")
            await states.wait_for(ClientState.SUSPENDED)
            proxy.restore()
            await states.wait_for(ClientState.CONNECTED)

            await wait_event(once_fired, "the one-time data watch to fire after reconnect")
            assert [(e.type, e.path) for e in once] == [(EventType.NODE_DATA_CHANGED, f"{base}/data")]
            assert states.states == [ClientState.SUSPENDED, ClientState.CONNECTED]

            stat = await other.exists(eph)
            assert stat is not None and stat.ephemeralOwner == session_id
            _, new_stat = await zk.create(f"{base}/eph2", b"", ephemeral=True, include_stat=True)
            assert new_stat.ephemeralOwner == session_id, "the client got a new session"
            assert zk.session_id == session_id

            # The persistent watch is restored (setWatches2). Apache ZooKeeper does not replay
            # changes made while the client was away to persistent watches (DataTree.setWatches
            # only re-adds them), so only changes after the reconnect must fire it.
            persistent.clear()
            persistent_fired.clear()
            await other.set(f"{base}/persistent", b"2")
            await other.set(f"{base}/data", b"2")
            await wait_event(persistent_fired, "the restored persistent watch to fire")
            await zk.sync(f"{base}/data")
            assert [(e.type, e.path) for e in persistent] == [(EventType.NODE_DATA_CHANGED, f"{base}/persistent")]
            assert len(once) == 1, "the one-time watch fired twice"
        finally:
            await zk.close()
            await other.close()

    run(scenario)


def test_cut_longer_than_session_timeout_expires_once(any_server: ServerProcess, proxy: TcpProxy) -> None:
    async def scenario() -> None:
        other = await connected(any_server.hosts)
        zk = await connected(proxy.hosts, session_timeout=4.0)
        states = StateLog()
        try:
            base = unique("expire")
            await other.create(base)
            eph = await zk.create(f"{base}/eph", b"", ephemeral=True)
            zk.add_listener(states)

            proxy.cut("reset")
            await states.wait_for(ClientState.SUSPENDED)

            async def ephemeral_gone() -> bool:
                return await other.exists(eph) is None

            await eventually(ephemeral_gone, "the server to expire the session", deadline_s=20.0)
            proxy.restore()
            await states.wait_for(ClientState.EXPIRED, deadline_s=20.0)
            assert zk.state == ClientState.EXPIRED
            with pytest.raises(SessionExpiredError):
                await zk.exists("/")
            # the client does not reconnect after EXPIRED, so no second report can follow
            accepted = proxy.accepted
            await other.sync("/")
            assert proxy.accepted == accepted
            assert states.states == [ClientState.SUSPENDED, ClientState.EXPIRED]
            assert await other.exists(eph) is None
        finally:
            await zk.close()
            await other.close()
        assert states.count(ClientState.EXPIRED) == 1

    run(scenario)


def test_never_connects_to_a_server_behind_its_last_zxid(any_server: ServerProcess, proxy: TcpProxy) -> None:
    # A is the shared server (ahead after our writes); B is fresh, its zxid near zero.
    behind = start_zkpy() if any_server.kind == "zkpy" else start_apache()

    async def scenario() -> None:
        zk = await connected(proxy.hosts, session_timeout=10.0)
        other = await connected(any_server.hosts)
        states = StateLog()
        try:
            base = unique("zxid")
            eph, eph_stat = await zk.create(f"{base}-eph", b"", ephemeral=True, include_stat=True)
            await zk.create(base)
            await asyncio.gather(*(zk.create(f"{base}/n{i}") for i in range(200)))
            seen = zk.last_zxid
            behind_zxid = server_zxid(behind)
            assert behind_zxid is not None and behind_zxid < seen, (behind_zxid, seen)
            zk.add_listener(states)

            proxy.retarget("127.0.0.1", behind.port)
            attempts = proxy.forwarded
            proxy.cut("reset")
            proxy.restore()
            await states.wait_for(ClientState.SUSPENDED)
            # let the client try B a few times: each is refused, and it never gets a session there
            await eventually(lambda: proxy.forwarded >= attempts + 3, "three attempts on the server behind",
                             deadline_s=6.0)
            assert zk.state == ClientState.SUSPENDED
            assert states.states == [ClientState.SUSPENDED]
            assert server_zxid(behind) == behind_zxid
            assert "refusing session request" in behind.log().lower()

            proxy.retarget("127.0.0.1", any_server.port)
            await states.wait_for(ClientState.CONNECTED)
            assert zk.last_zxid >= seen
            _, stat = await zk.create(f"{base}-eph2", b"", ephemeral=True, include_stat=True)
            assert stat.ephemeralOwner == eph_stat.ephemeralOwner
            assert (await other.exists(eph)) is not None
        finally:
            await zk.close()
            await other.close()

    try:
        run(scenario)
    finally:
        behind.cleanup()
