"""Barriers, queues and elections against zkpy and Apache ZooKeeper, asyncio and blocking forms."""

from __future__ import annotations

import asyncio
import threading

import pytest
from tests.helpers.clientwait import eventually, run
from tests.recipes.conftest import clients, close_all

from zkpy import Client
from zkpy.recipes import (
    AsyncBarrier,
    AsyncDoubleBarrier,
    AsyncElection,
    AsyncLockingQueue,
    AsyncPriorityQueue,
    AsyncQueue,
    AsyncSimpleElection,
    LockLost,
    Ownership,
    RecipeTimeout,
)

WAIT_S = 10.0


def test_barrier_holds_until_its_node_is_removed(base: tuple[str, str]) -> None:
    hosts, root = base

    async def scenario() -> None:
        a, b = await clients(hosts, 2)
        try:
            barrier = AsyncBarrier(a, f"{root}/b")
            await barrier.create()
            assert await AsyncBarrier(b, f"{root}/b").wait(timeout=0.2) is False
            waiting = asyncio.create_task(AsyncBarrier(b, f"{root}/b").wait())
            await asyncio.sleep(0)
            assert await barrier.remove()
            assert await asyncio.wait_for(waiting, WAIT_S) is True
            assert await barrier.remove() is False
        finally:
            await close_all([a, b])

    run(scenario)


def test_double_barrier_nobody_starts_before_all_entered_nor_leaves_before_all_left(
        base: tuple[str, str]) -> None:
    hosts, root = base
    n = 5

    async def scenario() -> None:
        zks = await clients(hosts, n)
        log: list[tuple[str, int]] = []
        try:
            async def member(i: int) -> None:
                barrier = AsyncDoubleBarrier(zks[i], f"{root}/db", n, f"m{i}")
                for _ in range(i):  # arrive at different times
                    await zks[i].sync("/")
                log.append(("enter", i))
                await barrier.enter(timeout=WAIT_S)
                log.append(("entered", i))
                for _ in range(n - i):
                    await zks[i].sync("/")
                log.append(("leave", i))
                await barrier.leave(timeout=WAIT_S)
                log.append(("left", i))

            await asyncio.gather(*(member(i) for i in range(n)))
            assert await zks[0].get_children(f"{root}/db") == []  # the last one out removed "ready"
        finally:
            await close_all(zks)
        kinds = [k for k, _ in log]
        last = {k: max(i for i, kk in enumerate(kinds) if kk == k) for k in ("enter", "leave")}
        first = {k: min(i for i, kk in enumerate(kinds) if kk == k) for k in ("entered", "left")}
        assert last["enter"] < first["entered"], log
        assert last["leave"] < first["left"], log

    run(scenario)


def test_double_barrier_times_out_and_cleans_up(base: tuple[str, str]) -> None:
    hosts, root = base
    with Client(hosts) as zk:
        barrier = zk.DoubleBarrier(f"{root}/db", 2, "alone")
        with pytest.raises(RecipeTimeout):
            barrier.enter(timeout=0.3)
        assert zk.get_children(f"{root}/db") == []
        assert not barrier.participating


def test_queue_is_fifo_within_a_priority_and_delivers_each_entry_once(base: tuple[str, str]) -> None:
    hosts, root = base

    async def scenario() -> None:
        producer_zk, c1, c2 = await clients(hosts, 3)
        try:
            producer = AsyncQueue(producer_zk, f"{root}/q")
            for i in range(10):
                await producer.put(f"{i}".encode())
            await producer.put_all([b"urgent-1", b"urgent-2"], priority=1)
            assert await producer.size() == 12
            consumers = [AsyncQueue(c1, f"{root}/q"), AsyncQueue(c2, f"{root}/q")]
            got: list[list[bytes]] = [[], []]

            async def consume(k: int) -> None:
                while (value := await consumers[k].get()) is not None:
                    got[k].append(value)

            await asyncio.gather(consume(0), consume(1))
            assert sorted(got[0] + got[1]) == sorted([f"{i}".encode() for i in range(10)] + [b"urgent-1", b"urgent-2"])
            for seen in got:  # each consumer saw its entries in queue order
                ranks = [(0, int(v[-1:]) - 1) if v.startswith(b"urgent") else (1, int(v)) for v in seen]
                assert ranks == sorted(ranks)
            waiting = asyncio.create_task(consumers[0].get(block=True, timeout=WAIT_S))
            await asyncio.sleep(0)
            await producer.put(b"late")
            assert await waiting == b"late"
            assert await consumers[1].get(block=True, timeout=0.2) is None
        finally:
            await close_all([producer_zk, c1, c2])

    run(scenario)


def test_priority_queue_serves_a_later_urgent_entry_first(base: tuple[str, str]) -> None:
    hosts, root = base

    async def scenario() -> None:
        producer_zk, consumer_zk = await clients(hosts, 2)
        try:
            producer = AsyncPriorityQueue(producer_zk, f"{root}/pq")
            consumer = AsyncPriorityQueue(consumer_zk, f"{root}/pq")
            for i in range(3):
                await producer.put(f"normal-{i}".encode(), priority=500)
            assert await consumer.get() == b"normal-0"  # the consumer has listed the queue
            await producer.put(b"urgent", priority=0)
            await eventually(lambda: consumer._stale, "the children notification")
            assert await consumer.get() == b"urgent"
            assert [await consumer.get(), await consumer.get(), await consumer.get()] == [b"normal-1", b"normal-2", None]
        finally:
            await close_all([producer_zk, consumer_zk])

    run(scenario)


def test_locking_queue_take_consume_release(base: tuple[str, str]) -> None:
    hosts, root = base

    async def scenario() -> None:
        a, b = await clients(hosts, 2)
        try:
            qa, qb = AsyncLockingQueue(a, f"{root}/lq"), AsyncLockingQueue(b, f"{root}/lq")
            await qa.put(b"low", priority=200)
            await qa.put(b"high", priority=10)
            assert await qa.get() == b"high"
            assert await qa.get() == b"high"  # held until consumed or released
            assert await qa.holds_lock()
            assert await qb.get(timeout=WAIT_S) == b"low"
            assert await qb.release()
            async with qb.take(timeout=WAIT_S) as value:
                assert value == b"low"
            assert await qa.consume()
            assert await qa.size() == 0
            with pytest.raises(RecipeTimeout):
                async with qb.take(timeout=0.2):
                    pass
            await qa.put(b"retry-me")
            with pytest.raises(RuntimeError):
                async with qa.take() as value:
                    raise RuntimeError("processing failed")
            assert await qb.get(timeout=WAIT_S) == b"retry-me"  # released, so another takes it
            assert await qb.consume()
        finally:
            await close_all([a, b])

    run(scenario)


def test_a_get_whose_timeout_falls_after_its_claim_leaves_no_stuck_entry(base: tuple[str, str]) -> None:
    """The timeout of ``get`` cancels it after its claim went out and before the entry was read:
    the next ``get`` takes that entry (its claim is this session's), where it used to skip it as
    another consumer's for as long as the session lived (a priority-queue test hung on it)."""
    hosts, root = base

    async def scenario() -> None:
        [a] = await clients(hosts, 1)
        try:
            queue = AsyncLockingQueue(a, f"{root}/stuck")
            await queue.put(b"only")
            real_get = a.get
            reads = []

            async def slow_get(path: str, *args: object, **kwargs: object) -> object:
                if path.startswith(queue.entries_path) and not reads:
                    reads.append(path)
                    await asyncio.sleep(WAIT_S)  # the entry's read, after the claim: past the timeout
                return await real_get(path, *args, **kwargs)  # type: ignore[arg-type]

            a.get = slow_get  # type: ignore[method-assign]
            assert await queue.get(timeout=0.3) is None
            assert reads and await a.exists(f"{queue.taken_path}/{reads[0].rsplit('/', 1)[1]}") is not None
            a.get = real_get  # type: ignore[method-assign]
            assert await queue.get(timeout=WAIT_S) == b"only"
            assert await queue.consume()
            assert await queue.size() == 0
        finally:
            await close_all([a])

    run(scenario)


def test_election_one_leader_announces_and_the_next_takes_over(base: tuple[str, str]) -> None:
    hosts, root = base

    async def scenario() -> None:
        zks = await clients(hosts, 3)
        try:
            elections = [AsyncElection(zk, f"{root}/e", f"cand{i}") for i, zk in enumerate(zks)]
            assert await elections[0].leader(wait=False) is None
            leading: list[int] = []
            stop = [asyncio.Event() for _ in zks]

            async def lead(i: int) -> str:
                leading.append(i)
                await elections[i].announce()
                await stop[i].wait()
                return f"done-{i}"

            tasks = []
            for i, e in enumerate(elections):
                tasks.append(asyncio.create_task(e.run(lead, i)))
                await eventually(lambda e=e: e.lock.node is not None, "the candidate's node")
            assert await elections[2].leader(timeout=WAIT_S) == "cand0"
            assert leading == [0] and await elections[1].contenders() == ["cand0", "cand1", "cand2"]
            stop[0].set()
            assert await tasks[0] == "done-0"
            await eventually(lambda: leading == [0, 1], "the next candidate leading")
            assert await elections[2].leader(timeout=WAIT_S) == "cand1"
            elections[2].cancel()
            assert await asyncio.wait_for(tasks[2], WAIT_S) is None
            stop[1].set()
            await tasks[1]
            assert await zks[0].get_children(f"{root}/e") == []
        finally:
            await close_all(zks)

    run(scenario)


def test_leader_function_is_cancelled_when_leadership_is_lost(base: tuple[str, str]) -> None:
    hosts, root = base

    async def scenario() -> None:
        zk, other = await clients(hosts, 2)
        try:
            election = AsyncElection(zk, f"{root}/e", "leader")
            started = asyncio.Event()

            async def lead() -> None:
                started.set()
                await asyncio.Event().wait()

            task = asyncio.create_task(election.run(lead))
            await asyncio.wait_for(started.wait(), WAIT_S)
            await other.delete(f"{root}/e/{election.lock.node}")  # an operator breaks the lock
            with pytest.raises(LockLost):
                await asyncio.wait_for(task, WAIT_S)
            assert election.ownership is Ownership.RELEASED
        finally:
            await close_all([zk, other])

    run(scenario)


def test_simple_election_and_its_blocking_form(base: tuple[str, str]) -> None:
    hosts, root = base

    async def scenario() -> None:
        a, b = await clients(hosts, 2)
        try:
            first, second = AsyncSimpleElection(a, f"{root}/leader", "a"), AsyncSimpleElection(b, f"{root}/leader", "b")
            release = asyncio.Event()

            async def lead(name: str) -> str:
                await release.wait()
                return name

            t1 = asyncio.create_task(first.run(lead, "a"))
            await eventually(lambda: first.ownership is Ownership.HELD, "a leading")
            t2 = asyncio.create_task(second.run(lead, "b"))
            assert await second.leader() == "a"
            release.set()
            assert await t1 == "a"
            assert await asyncio.wait_for(t2, WAIT_S) == "b"
        finally:
            await close_all([a, b])

    run(scenario)
    with Client(hosts) as zk:
        election = zk.Election(f"{root}/blocking", "me")
        seen = []
        assert election.run(lambda x: seen.append((x, election.is_leader, threading.current_thread().name)) or x, 7) == 7
        assert seen == [(7, True, threading.current_thread().name)]  # called here, while leading
        assert not election.is_leader
