"""Group membership, the ready-znode configuration, rendezvous, counters, data and children
watches, and two-phase commit against zkpy and Apache ZooKeeper."""

from __future__ import annotations

import asyncio
import threading

import pytest
from tests.helpers.clientwait import eventually, run
from tests.recipes.conftest import clients, close_all

from zkpy import Client
from zkpy.errors import NoNodeError
from zkpy.recipes import (
    AsyncChildrenWatch,
    AsyncCoordinator,
    AsyncCounter,
    AsyncDataWatch,
    AsyncParticipant,
    AsyncParty,
    AsyncReadyConfig,
    AsyncRendezvous,
    AsyncShallowParty,
    Outcome,
    RecipeTimeout,
)
from zkpy.recipes.config import READY

WAIT_S = 10.0


def test_party_members_come_and_go_with_their_sessions(base: tuple[str, str]) -> None:
    hosts, root = base

    async def scenario() -> None:
        a, b, watcher_zk = await clients(hosts, 3)
        try:
            views: list[list[str]] = []
            watch = await AsyncParty(watcher_zk, f"{root}/party").watch(lambda members: views.append(sorted(members)))
            await AsyncParty(a, f"{root}/party", "alpha").join()
            beta = AsyncParty(b, f"{root}/party", "beta")
            await beta.join()
            await beta.join()  # joining twice is one membership
            assert sorted(await beta.members()) == ["alpha", "beta"]
            await eventually(lambda: views[-1:] == [["alpha", "beta"]], lambda: f"the watch's view ({views})")
            await a.close()  # alpha's session ends: it leaves the group by itself
            await eventually(lambda: views[-1:] == [["beta"]], lambda: f"alpha gone ({views})")
            assert await beta.leave() and not await beta.leave()
            await eventually(lambda: views[-1:] == [[]], lambda: f"empty group ({views})")
            await watch.stop()
            shallow = AsyncShallowParty(b, f"{root}/shallow", "node-1")
            async with shallow:
                assert await shallow.members() == ["node-1"]
            assert await shallow.size() == 0
        finally:
            await close_all([a, b, watcher_zk])

    run(scenario)


def test_ready_config_readers_never_see_a_half_written_configuration(base: tuple[str, str]) -> None:
    hosts, root = base
    keys = [f"k{i:03d}" for i in range(200)]

    async def scenario() -> None:
        writer_zk, reader_zk = await clients(hosts, 2)
        try:
            writer = AsyncReadyConfig(writer_zk, f"{root}/cfg")
            reader = AsyncReadyConfig(reader_zk, f"{root}/cfg")
            with pytest.raises(RecipeTimeout):
                await reader.read(timeout=0.2)  # nothing published: not ready
            await writer.publish({k: b"v0" for k in keys})
            assert await reader.read(timeout=WAIT_S) == {k: b"v0" for k in keys}
            seen: list[set[bytes]] = []

            async def follow() -> None:
                async for config in reader.updates():
                    seen.append(set(config.values()))
                    if config[keys[0]] == b"v5":
                        return

            follower = asyncio.create_task(follow())
            for version in range(1, 6):
                await writer.publish({k: f"v{version}".encode() for k in keys})
            await asyncio.wait_for(follower, WAIT_S)
            assert all(len(values) == 1 for values in seen), "a reader saw a mix of two configurations"
            # a writer that dies half-way: ready is gone, readers wait instead of reading a mix
            await writer_zk.delete(f"{root}/cfg/{READY}")
            await writer_zk.set(f"{root}/cfg/{keys[0]}", b"half")
            with pytest.raises(RecipeTimeout):
                await reader.read(timeout=0.2)
            await writer.publish({"extra": b"new"}, remove=(keys[-1],))
            config = await reader.read(timeout=WAIT_S)
            assert config["extra"] == b"new" and keys[-1] not in config
        finally:
            await close_all([writer_zk, reader_zk])

    run(scenario)


def test_rendezvous_workers_wait_for_the_master_and_see_the_end(base: tuple[str, str]) -> None:
    hosts, root = base

    async def scenario() -> None:
        client_zk, master_zk, worker_zk = await clients(hosts, 3)
        try:
            await AsyncRendezvous(client_zk, f"{root}/zr").create()
            worker = AsyncRendezvous(worker_zk, f"{root}/zr")
            waiting = asyncio.create_task(worker.wait(timeout=WAIT_S))
            gone = asyncio.create_task(worker.wait_gone(timeout=WAIT_S))
            await asyncio.sleep(0)
            assert not waiting.done()
            await AsyncRendezvous(master_zk, f"{root}/zr").publish(b"10.0.0.7:9000")
            assert await waiting == b"10.0.0.7:9000"
            assert not gone.done()
            await client_zk.close()  # the client ends: the ephemeral rendezvous goes
            await gone
            with pytest.raises(NoNodeError):
                await worker.wait(timeout=WAIT_S)
        finally:
            await close_all([client_zk, master_zk, worker_zk])

    run(scenario)


def test_counter_adds_exactly_once_under_contention(base: tuple[str, str]) -> None:
    hosts, root = base

    async def scenario() -> None:
        zks = await clients(hosts, 4)
        try:
            counters = [AsyncCounter(zk, f"{root}/count") for zk in zks]
            await asyncio.gather(*(c.add(1) for c in counters for _ in range(10)))
            assert await counters[0].get() == 40
            assert await counters[1].subtract(5) == 35 and counters[1].pre_value == 40
            with pytest.raises(TypeError):
                await counters[0].add(1.5)
            floats = AsyncCounter(zks[0], f"{root}/f", default=0.5)
            assert await floats.add(0.25) == 0.75
            curator = AsyncCounter(zks[0], f"{root}/c", support_curator=True)
            await curator.add(7)
            data, _ = await zks[0].get(f"{root}/c")
            assert data == (7).to_bytes(4, "big")
        finally:
            await close_all(zks)

    run(scenario)
    with Client(hosts) as zk:
        counter = zk.Counter(f"{root}/count")
        counter += 5
        assert counter.value == 40 and counter.post_value == 40


def test_data_and_children_watches_follow_changes_and_stop(base: tuple[str, str]) -> None:
    hosts, root = base

    async def scenario() -> None:
        zk, = await clients(hosts, 1)
        try:
            data_seen: list[tuple[bytes | None, int | None]] = []
            children_seen: list[list[str]] = []

            def on_data(data: bytes | None, stat: object, event: object) -> bool:
                data_seen.append((data, getattr(stat, "version", None)))
                return data != b"stop"

            dw = AsyncDataWatch(zk, f"{root}/node", on_data)
            await dw.start()
            assert data_seen == [(None, None)]  # first call: the node does not exist
            await zk.create(f"{root}/node", b"1", make_parents=True)
            await eventually(lambda: data_seen[-1] == (b"1", 0), lambda: f"creation seen ({data_seen})")

            async def on_children(children: list[str]) -> None:
                children_seen.append(sorted(children))

            cw = AsyncChildrenWatch(zk, f"{root}/node", on_children)
            await cw.start()
            await zk.create(f"{root}/node/a")
            await eventually(lambda: children_seen[-1] == ["a"], lambda: f"child seen ({children_seen})")
            await zk.set(f"{root}/node", b"stop")
            await eventually(lambda: dw.stopped, "the data watch stopped by its function")
            await zk.set(f"{root}/node", b"after")
            await zk.delete(f"{root}/node", recursive=True)
            await eventually(lambda: cw.stopped, "the children watch stopped by the deletion")
            assert data_seen[-1] == (b"stop", 1)
        finally:
            await close_all([zk])

    run(scenario)

    with Client(hosts) as zk:
        calls: list[tuple[list[str], bool]] = []
        called = threading.Event()

        @zk.ChildrenWatch(root)
        def members(children: list[str]) -> None:
            calls.append((sorted(children), threading.current_thread() is zk.dispatch_thread))
            called.set()

        assert calls and all(on_dispatch for _, on_dispatch in calls)


def test_two_phase_commit_all_commit_or_all_abort(base: tuple[str, str]) -> None:
    hosts, root = base
    sites = ["s1", "s2", "s3"]

    async def round_(votes: dict[str, bool], die: str | None = None) -> tuple[Outcome, dict[str, Outcome]]:
        coordinator_zk, *site_zks = await clients(hosts, 1 + len(sites))
        try:
            coordinator = AsyncCoordinator(coordinator_zk, f"{root}/tx")
            txid = await coordinator.begin(b"move 10 from A to B", sites)
            outcomes: dict[str, Outcome] = {}

            async def site(name: str, zk: object) -> None:
                participant = AsyncParticipant(zk, f"{root}/tx", name)  # type: ignore[arg-type]
                tx = await participant.next(timeout=WAIT_S)
                assert tx.txid == txid and tx.payload == b"move 10 from A to B"
                if name == die:
                    await zk.close()  # type: ignore[attr-defined]  # dies after joining, before voting
                    return
                await participant.vote(txid, votes[name])
                outcomes[name] = await participant.outcome(txid, timeout=WAIT_S)

            decided = asyncio.create_task(coordinator.outcome(txid, timeout=WAIT_S))
            await asyncio.gather(*(site(n, z) for n, z in zip(sites, site_zks)))
            result = await decided
            await coordinator.forget(txid)
            return result, outcomes
        finally:
            await close_all([coordinator_zk, *site_zks])

    async def scenario() -> None:
        result, outcomes = await round_({s: True for s in sites})
        assert result is Outcome.COMMITTED and set(outcomes.values()) == {Outcome.COMMITTED}
        result, outcomes = await round_({"s1": True, "s2": False, "s3": True})
        assert result is Outcome.ABORTED and set(outcomes.values()) == {Outcome.ABORTED}
        result, outcomes = await round_({s: True for s in sites}, die="s2")
        assert result is Outcome.ABORTED and set(outcomes.values()) == {Outcome.ABORTED} and len(outcomes) == 2

    run(scenario)
