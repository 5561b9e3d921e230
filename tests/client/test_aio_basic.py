"""AsyncClient's API against a real server: zkpy and Apache ZooKeeper 3.8 (``any_server``)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from zkpy import AsyncClient, ClientState, WatchedEvent
from zkpy.errors import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    NoWatcherError,
    RuntimeInconsistency,
)
from zkpy.testing.servers import ServerProcess
from zkpy.wire.consts import EventType, Perms, WatcherType
from zkpy.wire.proto import ACL, Id

_ids = itertools.count()


def run(server: ServerProcess, body: Callable[[AsyncClient, str], Awaitable[None]], chroot: str = "") -> None:
    """Run ``body(zk, base)`` with a fresh base node, on a fresh event loop, with a deadline."""
    base = f"/t{next(_ids)}-{server.kind}"

    async def main() -> None:
        async with AsyncClient(server.hosts + chroot, session_timeout=10.0) as zk:
            if not chroot:
                await zk.create(base)
            await asyncio.wait_for(body(zk, base if not chroot else ""), 30)

    asyncio.run(main())


def test_create_get_set_delete_exists(any_server: ServerProcess) -> None:
    async def body(zk: AsyncClient, base: str) -> None:
        assert zk.state is ClientState.CONNECTED and zk.session_id != 0
        assert await zk.create(f"{base}/a", b"v1") == f"{base}/a"
        data, stat = await zk.get(f"{base}/a")
        assert (data, stat.version, stat.dataLength) == (b"v1", 0, 2)
        stat2 = await zk.set(f"{base}/a", b"v2", version=0)
        assert stat2.version == 1
        with pytest.raises(BadVersionError):
            await zk.set_data(f"{base}/a", b"v3", version=0)
        with pytest.raises(NodeExistsError):
            await zk.create(f"{base}/a")
        with pytest.raises(NoNodeError):
            await zk.get_data(f"{base}/missing")
        assert (await zk.exists(f"{base}/a")).version == 1  # type: ignore[union-attr]
        assert await zk.exists(f"{base}/missing") is None
        path, st = await zk.create(f"{base}/b", b"x", include_stat=True)  # type: ignore[misc]
        assert path == f"{base}/b" and st.dataLength == 1
        assert sorted(await zk.get_children(base)) == ["a", "b"]  # type: ignore[arg-type]
        names, pstat = await zk.get_children(base, include_stat=True)  # type: ignore[misc]
        assert pstat.numChildren == 2
        await zk.create(f"{base}/a/c")
        with pytest.raises(NotEmptyError):
            await zk.delete(f"{base}/a")
        await zk.delete(f"{base}/a", recursive=True)
        await zk.delete(f"{base}/b", version=0)
        assert await zk.get_children(base) == []
        assert zk.last_zxid > 0
        assert await zk.sync(base) == base

    run(any_server, body)


def test_make_parents_ensure_path_and_counts(any_server: ServerProcess) -> None:
    async def body(zk: AsyncClient, base: str) -> None:
        await zk.create(f"{base}/x/y/z", b"d", make_parents=True)
        await zk.ensure_path(f"{base}/x/y/w/v")
        await zk.ensure_path(f"{base}/x/y/w/v")
        assert await zk.get_all_children_number(f"{base}/x") == 4

    run(any_server, body)


def test_ephemeral_and_sequential(any_server: ServerProcess) -> None:
    async def body(zk: AsyncClient, base: str) -> None:
        p1 = await zk.create(f"{base}/s-", sequence=True)
        p2 = await zk.create(f"{base}/s-", sequence=True, ephemeral=True)
        assert p1 == f"{base}/s-0000000000" and p2 == f"{base}/s-0000000001"
        stat = await zk.exists(p2)
        assert stat is not None and stat.ephemeralOwner == zk.session_id
        assert p2 in await zk.get_ephemerals(base)
        async with AsyncClient(zk.hosts) as other:
            await other.create(f"{base}/gone", ephemeral=True)
        assert await zk.exists(f"{base}/gone") is None  # closing the session removed it

    run(any_server, body)


def test_container_and_ttl_nodes(any_server: ServerProcess) -> None:
    async def body(zk: AsyncClient, base: str) -> None:
        path, stat = await zk.create(f"{base}/c", container=True, include_stat=True)  # type: ignore[misc]
        # servers hide the container/TTL markers of ephemeralOwner from clients (DataNode.copyStat)
        assert path == f"{base}/c" and stat.ephemeralOwner == 0
        assert await zk.create(f"{base}/ttl", b"t", ttl_ms=60000) == f"{base}/ttl"
        assert (await zk.exists(f"{base}/ttl")).ephemeralOwner == 0  # type: ignore[union-attr]
        seq = await zk.create(f"{base}/ttls-", ttl_ms=60000, sequence=True)
        assert seq == f"{base}/ttls-0000000002"
        with pytest.raises(ValueError):
            await zk.create(f"{base}/bad", ephemeral=True, ttl_ms=10)

    run(any_server, body)


def test_acl_and_auth(any_server: ServerProcess) -> None:
    async def body(zk: AsyncClient, base: str) -> None:
        await zk.add_auth("digest", b"user:secret")
        assert any(ci.authScheme == "digest" for ci in await zk.whoami())
        acl = [ACL(int(Perms.ALL), Id("auth", ""))]
        await zk.create(f"{base}/private", b"s", acl)
        got, stat = await zk.get_acl(f"{base}/private")
        assert got[0].id.scheme == "digest" and got[0].perms == Perms.ALL
        stat2 = await zk.set_acl(f"{base}/private", [ACL(int(Perms.READ), Id("world", "anyone"))], stat.aversion)
        assert stat2.aversion == 1

    run(any_server, body)


def test_transaction_and_multi_read(any_server: ServerProcess) -> None:
    async def body(zk: AsyncClient, base: str) -> None:
        tx = zk.transaction()
        tx.create(f"{base}/m", b"1")
        tx.set_data(f"{base}/m", b"2")
        tx.check(f"{base}/m", 1)
        tx.delete(f"{base}/m")
        results = await tx.commit()
        assert results[0] == f"{base}/m" and results[1].version == 1 and results[2:] == [True, True]
        tx = zk.transaction()
        tx.create(f"{base}/n")
        tx.check(f"{base}/missing", 0)
        failed = await tx.commit()
        assert isinstance(failed[0], RuntimeInconsistency) and isinstance(failed[1], NoNodeError)
        assert await zk.exists(f"{base}/n") is None
        await zk.create(f"{base}/r", b"data")
        got = await zk.multi_read([("get", f"{base}/r"), ("children", base), ("get", f"{base}/nope")])
        assert got[0][0] == b"data" and got[1] == ["r"] and isinstance(got[2], NoNodeError)

    run(any_server, body)


def test_watch_callbacks_run_before_later_completions(any_server: ServerProcess) -> None:
    async def body(zk: AsyncClient, base: str) -> None:
        order: list[Any] = []
        await zk.create(f"{base}/w", b"0")
        await zk.get(f"{base}/w", watch=lambda e: order.append(("data", e.type, e.path)))
        await zk.get_children(base, watch=lambda e: order.append(("child", e.type, e.path)))
        await zk.exists(f"{base}/new", watch=lambda e: order.append(("exists", e.type, e.path)))

        async def step(name: str, coro: Awaitable[Any]) -> None:
            await coro
            order.append(name)

        # pipelined: both sent before any reply is read. Watch callbacks run inline as their
        # notification is processed; an awaiting coroutine resumes later, so the guarantee checked
        # is: every watch event runs before the completion of a request whose reply shows the change.
        await asyncio.gather(step("set", zk.set(f"{base}/w", b"1")), step("create", zk.create(f"{base}/new")))
        data_ev = ("data", EventType.NODE_DATA_CHANGED, f"{base}/w")
        exists_ev = ("exists", EventType.NODE_CREATED, f"{base}/new")
        child_ev = ("child", EventType.NODE_CHILDREN_CHANGED, base)
        assert sorted(order, key=str) == sorted([data_ev, "set", exists_ev, child_ev, "create"], key=str)
        assert order.index(data_ev) < order.index("set") < order.index("create")
        assert order.index(exists_ev) < order.index("create") and order.index(child_ev) < order.index("create")
        assert order.index(exists_ev) < order.index(child_ev)  # the server's order for one txn
        order.clear()
        await zk.set(f"{base}/w", b"2")  # one-time watches do not fire again
        assert order == []

    run(any_server, body)


def test_persistent_watches_and_removal(any_server: ServerProcess) -> None:
    async def body(zk: AsyncClient, base: str) -> None:
        events: list[WatchedEvent] = []
        await zk.add_watch(base, events.append, recursive=True)
        await zk.create(f"{base}/a")
        await zk.create(f"{base}/a/b")
        await zk.set(f"{base}/a/b", b"x")
        assert [(e.type, e.path) for e in events] == [
            (EventType.NODE_CREATED, f"{base}/a"),
            (EventType.NODE_CREATED, f"{base}/a/b"),
            (EventType.NODE_DATA_CHANGED, f"{base}/a/b"),
        ]
        await zk.check_watches(base, WatcherType.ANY)
        await zk.remove_watches(base)
        assert events[-1].type == EventType.PERSISTENT_WATCH_REMOVED
        with pytest.raises(NoWatcherError):
            await zk.remove_watches(base)
        n = len(events)
        await zk.set(f"{base}/a", b"y")
        assert len(events) == n

    run(any_server, body)


def test_watch_iterator(any_server: ServerProcess) -> None:
    async def body(zk: AsyncClient, base: str) -> None:
        seen: list[tuple[EventType, str | None]] = []

        async def consume() -> None:
            async for event in zk.watch(base):
                seen.append((event.type, event.path))
                if len(seen) == 2:
                    break

        task = asyncio.create_task(consume())
        while not zk._core.has_watch(base, WatcherType.ANY):
            await asyncio.sleep(0.01)
        await zk.create(f"{base}/x")
        await zk.set(base, b"z")
        await task
        assert seen == [(EventType.NODE_CHILDREN_CHANGED, base), (EventType.NODE_DATA_CHANGED, base)]

    run(any_server, body)


def test_chroot(any_server: ServerProcess) -> None:
    root = f"/chroot{next(_ids)}"

    async def setup() -> None:
        async with AsyncClient(any_server.hosts) as zk:
            await zk.create(root)

    asyncio.run(setup())

    async def body(zk: AsyncClient, _: str) -> None:
        events: list[WatchedEvent] = []
        assert await zk.create("/a", b"x") == "/a"
        await zk.exists("/b", watch=events.append)
        assert await zk.create("/s-", sequence=True) == "/s-0000000001"
        await zk.create("/b")
        assert events[0].path == "/b"
        assert sorted(await zk.get_children("/")) == ["a", "b", "s-0000000001"]  # type: ignore[arg-type]
        results = await (tx := zk.transaction(), tx.create("/t"), tx.commit())[2]
        assert results == ["/t"]
        assert await zk.sync("/") == "/"

    run(any_server, body, chroot=root)

    async def check() -> None:
        async with AsyncClient(any_server.hosts) as zk:
            assert await zk.exists(f"{root}/a") is not None

    asyncio.run(check())


def test_listeners_see_connected_then_closed(any_server: ServerProcess) -> None:
    async def main() -> None:
        zk = AsyncClient(any_server.hosts)
        states: list[ClientState] = []
        zk.add_listener(states.append)
        await zk.start()
        await zk.close()
        assert states == [ClientState.CONNECTED, ClientState.CLOSED]
        assert zk.state is ClientState.CLOSED

    asyncio.run(main())
