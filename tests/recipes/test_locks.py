"""Locks, read/write locks, revocable locks and the semaphore against zkpy and Apache ZooKeeper:
exclusion, order of service, clean-up after timeouts and cancellation, ownership on session loss,
and the blocking forms. Nothing sleeps to wait: every wait has a deadline."""

from __future__ import annotations

import asyncio
import threading

import pytest
from kazoo.client import KazooClient
from tests.helpers.clientwait import eventually, run
from tests.recipes.conftest import clients, close_all, expire_session

from zkpy import Client
from zkpy.errors import SessionExpiredError
from zkpy.recipes import (
    AsyncLock,
    AsyncReadLock,
    AsyncRevocableLock,
    AsyncSemaphore,
    AsyncWriteLock,
    CancelledError,
    LockTimeout,
    Ownership,
    revoke,
)
from zkpy.testing.proxy import TcpProxy

WAIT_S = 10.0


def test_lock_excludes_and_hands_over_in_arrival_order(base: tuple[str, str]) -> None:
    hosts, root = base

    async def scenario() -> None:
        zks = await clients(hosts, 3)
        try:
            locks = [AsyncLock(zk, f"{root}/lock", f"c{i}") for i, zk in enumerate(zks)]
            assert await locks[0].acquire()
            waiting = []
            for lock in locks[1:]:  # queue up one after the other: arrival order is node order
                waiting.append(asyncio.create_task(lock.acquire()))
                await eventually(lambda lock=lock: lock.node is not None, "the contender's node")
            assert await locks[0].contenders() == ["c0", "c1", "c2"]
            assert not any(t.done() for t in waiting)
            await locks[0].release()
            assert await asyncio.wait_for(waiting[0], WAIT_S)
            assert not waiting[1].done()
            await locks[1].release()
            assert await asyncio.wait_for(waiting[1], WAIT_S)
            await locks[2].release()
            assert await zks[0].get_children(f"{root}/lock") == []
        finally:
            await close_all(zks)

    run(scenario)


def test_timeout_cancel_and_task_cancellation_leave_no_node(base: tuple[str, str]) -> None:
    hosts, root = base

    async def scenario() -> None:
        holder_zk, zk = await clients(hosts, 2)
        try:
            holder = AsyncLock(holder_zk, f"{root}/lock", "holder")
            await holder.acquire()
            lock = AsyncLock(zk, f"{root}/lock", "late")
            with pytest.raises(LockTimeout):
                await lock.acquire(timeout=0.3)
            assert await zk.get_children(f"{root}/lock") == [holder.node]
            assert await lock.acquire(blocking=False) is False
            assert await zk.get_children(f"{root}/lock") == [holder.node]

            pending = asyncio.create_task(lock.acquire())
            await eventually(lambda: lock.node is not None, "the waiting contender's node")
            lock.cancel()
            with pytest.raises(CancelledError):
                await asyncio.wait_for(pending, WAIT_S)
            assert await zk.get_children(f"{root}/lock") == [holder.node]

            pending = asyncio.create_task(lock.acquire())
            await eventually(lambda: len(lock.node or "") > 0 and not pending.done(), "a new contender's node")
            await eventually(lambda: zk.get_children(f"{root}/lock"), "two nodes")
            pending.cancel()
            with pytest.raises(asyncio.CancelledError):
                await pending
            assert await zk.get_children(f"{root}/lock") == [holder.node]

            await holder.release()
            assert await lock.acquire(timeout=WAIT_S)  # a cancelled lock object can be used again
            await lock.release()
        finally:
            await close_all([holder_zk, zk])

    run(scenario)


async def read_write_lock_scenario(hosts: str, root: str) -> None:
    """Readers share, writers are alone, everyone is served in arrival order (node order)."""
    kinds = ["r", "r", "w", "r", "w", "r"]
    # releasing the holders one at a time, lowest first; who must get the lock after each release
    script = [(0, None), (1, 2), (2, 3), (3, 4), (4, 5), (5, None)]
    zks = await clients(hosts, len(kinds))
    events: list[tuple[str, int]] = []
    try:
        locks = [(AsyncReadLock if k == "r" else AsyncWriteLock)(zk, f"{root}/rw", f"{k}{i}")
                 for i, (k, zk) in enumerate(zip(kinds, zks))]
        tasks = []
        for i, lock in enumerate(locks):
            async def take(i: int = i, lock: AsyncLock = lock) -> None:
                await lock.acquire()
                events.append(("acquired", i))
            tasks.append(asyncio.create_task(take()))
            await eventually(lambda lock=lock: lock.node is not None, "the contender's node")
        await eventually(lambda: {("acquired", 0), ("acquired", 1)} <= set(events), "both first readers in")
        for released, next_holder in script:
            events.append(("released", released))
            await locks[released].release()
            if next_holder is not None:
                await eventually(lambda n=next_holder: ("acquired", n) in events,
                                 lambda n=next_holder: f"contender {n} served (events {events})")
        await asyncio.gather(*tasks)
    finally:
        await close_all(zks)
    holders: set[int] = set()
    for what, i in events:
        if what == "released":
            holders.discard(i)
            continue
        if kinds[i] == "w":
            assert not holders, f"writer {i} got the lock while {holders} held it: {events}"
        else:
            assert not any(kinds[h] == "w" for h in holders), f"reader {i} got in beside a writer: {events}"
        holders.add(i)
    # the two first readers share the lock at once: which of them is told first is a race (seen on
    # Apache ZooKeeper); everyone after them is served in node order
    acquired = [i for what, i in events if what == "acquired"]
    assert sorted(acquired[:2]) == [0, 1] and acquired[2:] == list(range(2, len(kinds))), events


def test_read_write_lock_readers_share_and_everyone_is_served_in_arrival_order(base: tuple[str, str]) -> None:
    hosts, root = base
    run(lambda: read_write_lock_scenario(hosts, root))


def test_holder_is_told_when_its_session_expires_and_the_waiter_gets_the_lock(base: tuple[str, str], proxied: TcpProxy) -> None:
    hosts, root = base

    async def scenario(proxy: TcpProxy) -> None:
        holder_zk, = await clients(proxy.hosts, 1)
        waiter_zk, = await clients(hosts, 1)
        try:
            holder = AsyncLock(holder_zk, f"{root}/lock", "holder")
            seen: list[Ownership] = []
            holder.add_listener(seen.append)
            await holder.acquire()
            assert holder.ownership is Ownership.HELD
            waiter = AsyncLock(waiter_zk, f"{root}/lock", "waiter")
            pending = asyncio.create_task(waiter.acquire())
            await eventually(lambda: waiter.node is not None, "the waiter's node")
            await asyncio.to_thread(expire_session, proxy, hosts, holder_zk)
            assert await asyncio.wait_for(pending, WAIT_S)
            await eventually(lambda: holder.ownership is Ownership.LOST, lambda: f"LOST (seen {seen})")
            assert seen[-1] is Ownership.LOST
            assert await holder.release()  # nothing left to delete, but a clean release
            await waiter.release()
        finally:
            await close_all([holder_zk, waiter_zk])

    run(lambda: scenario(proxied))


def test_a_waiter_whose_session_expires_raises(base: tuple[str, str], proxied: TcpProxy) -> None:
    hosts, root = base

    async def scenario(proxy: TcpProxy) -> None:
        holder_zk, = await clients(hosts, 1)
        waiter_zk, = await clients(proxy.hosts, 1)
        try:
            holder = AsyncLock(holder_zk, f"{root}/lock")
            await holder.acquire()
            waiter = AsyncLock(waiter_zk, f"{root}/lock")
            pending = asyncio.create_task(waiter.acquire())
            await eventually(lambda: waiter.node is not None, "the waiter's node")
            await asyncio.to_thread(expire_session, proxy, hosts, waiter_zk)
            with pytest.raises(SessionExpiredError):
                await asyncio.wait_for(pending, WAIT_S)
            assert await holder_zk.get_children(f"{root}/lock") == [holder.node]
            await holder.release()
        finally:
            await close_all([holder_zk, waiter_zk])

    run(lambda: scenario(proxied))


def test_revocation_asks_the_holder_and_force_deletes_after_the_deadline(base: tuple[str, str]) -> None:
    hosts, root = base

    async def scenario() -> None:
        holder_zk, other_zk = await clients(hosts, 2)
        try:
            asked = asyncio.Event()
            polite = AsyncRevocableLock(holder_zk, f"{root}/consent", "polite", on_revoke=asked.set)
            await polite.acquire()
            assert await revoke(other_zk, f"{root}/consent") == [polite.node]
            await asyncio.wait_for(asked.wait(), WAIT_S)
            assert polite.revoke_requested and polite.ownership is Ownership.HELD  # consent: still its own
            await polite.release()

            stubborn = AsyncRevocableLock(holder_zk, f"{root}/force", "stubborn")
            await stubborn.acquire()
            node = stubborn.node
            assert await revoke(other_zk, f"{root}/force", force_after=0.2) == [node]
            assert await other_zk.get_children(f"{root}/force") == []
            await eventually(lambda: stubborn.ownership is Ownership.LOST, "the holder told it lost the lock")
            assert stubborn.revoke_requested
            await stubborn.release()
        finally:
            await close_all([holder_zk, other_zk])

    run(scenario)


def test_semaphore_admits_at_most_max_leases(base: tuple[str, str]) -> None:
    hosts, root = base

    async def scenario() -> None:
        zks = await clients(hosts, 3)
        try:
            sems = [AsyncSemaphore(zk, f"{root}/sem", f"s{i}", max_leases=2) for i, zk in enumerate(zks)]
            assert await sems[0].acquire() and await sems[1].acquire()
            assert await sems[2].acquire(blocking=False) is False
            third = asyncio.create_task(sems[2].acquire())
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(asyncio.shield(third), 0.3)
            assert sorted(await sems[0].lease_holders()) == ["s0", "s1"]
            await sems[0].release()
            assert await asyncio.wait_for(third, WAIT_S)
            assert sorted(await sems[0].lease_holders()) == ["s1", "s2"]
            with pytest.raises(ValueError, match="max_leases"):
                await AsyncSemaphore(zks[0], f"{root}/sem", max_leases=3).acquire()
            await sems[1].release()
            await sems[2].release()
            assert await sems[0].lease_holders() == []
        finally:
            await close_all(zks)

    run(scenario)


def test_blocking_lock_with_block_cancel_from_another_thread_and_listeners(base: tuple[str, str]) -> None:
    hosts, root = base
    with Client(hosts) as a, Client(hosts) as b:
        lock_a = a.Lock(f"{root}/lock", "a")
        lock_b = b.Lock(f"{root}/lock", "b")
        states: list[tuple[Ownership, bool]] = []
        done = threading.Event()

        def listener(state: Ownership) -> None:
            states.append((state, threading.current_thread() is a.dispatch_thread))
            done.set()

        lock_a.add_listener(listener)
        with lock_a:
            assert lock_a.is_acquired and lock_a.ownership is Ownership.HELD
            assert lock_b.acquire(blocking=False) is False
            result: list[object] = []
            t = threading.Thread(target=lambda: result.append(_catch(lock_b.acquire)))
            t.start()
            deadline = threading.Event()
            while lock_b.node is None and not deadline.wait(0.01):
                pass
            lock_b.cancel()
            t.join(WAIT_S)
            assert isinstance(result[0], CancelledError)
            assert lock_a.contenders() == ["a"]
        assert done.wait(WAIT_S)
        assert states == [(Ownership.RELEASED, True)]
        with lock_b:
            assert b.get_children(f"{root}/lock") == [lock_b.node]


def test_zkpy_and_kazoo_locks_on_one_path_exclude_each_other(base: tuple[str, str]) -> None:
    """kazoo's node names, so a fleet can move from kazoo one process at a time."""
    hosts, root = base
    kz = KazooClient(hosts)
    kz.start()
    try:
        with Client(hosts) as zk:
            kazoo_lock = kz.Lock(f"{root}/mixed", "kazoo")
            zkpy_lock = zk.Lock(f"{root}/mixed", "zkpy")
            assert kazoo_lock.acquire(timeout=WAIT_S)
            assert zkpy_lock.acquire(blocking=False) is False
            with pytest.raises(LockTimeout):
                zkpy_lock.acquire(timeout=0.2)
            assert kazoo_lock.contenders() == ["kazoo"]
            kazoo_lock.release()
            assert zkpy_lock.acquire(timeout=WAIT_S)
            assert kazoo_lock.acquire(blocking=False) is False
            assert kazoo_lock.contenders() == ["zkpy"]
            zkpy_lock.release()
            assert kazoo_lock.acquire(timeout=WAIT_S)
            kazoo_lock.release()
    finally:
        kz.stop()
        kz.close()


def _catch(fn: object) -> object:
    try:
        return fn()  # type: ignore[operator]
    except Exception as exc:
        return exc
