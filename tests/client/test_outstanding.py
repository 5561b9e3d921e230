"""AsyncClient's bound on outstanding requests (``max_outstanding``), against zkpy and Apache 3.8.

Guarantee checked: with ``max_outstanding=5``, 100 concurrent gets all complete, in the order
they were issued, and the core never has more than 5 requests pending; callers beyond the
bound wait for a slot instead of queueing without limit.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from tests.helpers.clientwait import run

from zkpy import AsyncClient
from zkpy.testing.servers import ServerProcess


def test_max_outstanding_bounds_requests_in_flight_and_keeps_order(any_server: ServerProcess) -> None:
    async def scenario() -> None:
        async with AsyncClient(any_server.hosts, max_outstanding=5) as zk:
            base = f"/outstanding-{uuid.uuid4().hex[:10]}"
            await zk.create(base)
            for i in range(10):
                await zk.create(f"{base}/n{i}", str(i).encode())
            peak = 0
            completed: list[int] = []

            def observe() -> None:
                nonlocal peak
                peak = max(peak, zk._core.pending_count)

            async def one(i: int) -> bytes:
                observe()
                data, _ = await zk.get(f"{base}/n{i % 10}")
                observe()
                completed.append(i)
                return data

            tasks = [asyncio.ensure_future(one(i)) for i in range(100)]
            await asyncio.sleep(0)  # every task has started and is either in flight or waiting
            observe()
            assert zk._core.pending_count == 5 and len(zk._slot_waiters) == 95
            results = await asyncio.gather(*tasks)
            assert results == [str(i % 10).encode() for i in range(100)]
            assert completed == list(range(100))
            assert peak == 5
            assert zk._outstanding == 0 and not zk._slot_waiters
            await zk.delete(base, recursive=True)

    run(scenario, 60.0)


def test_a_cancelled_waiter_gives_up_its_place_without_leaking_a_slot(any_server: ServerProcess) -> None:
    async def scenario() -> None:
        async with AsyncClient(any_server.hosts, max_outstanding=1) as zk:
            first = asyncio.ensure_future(zk.exists("/"))
            second = asyncio.ensure_future(zk.exists("/"))
            third = asyncio.ensure_future(zk.exists("/"))
            await asyncio.sleep(0)
            assert len(zk._slot_waiters) == 2
            second.cancel()
            assert (await first) is not None and (await third) is not None
            with pytest.raises(asyncio.CancelledError):
                await second
            assert zk._outstanding == 0 and not zk._slot_waiters
            assert await zk.exists("/") is not None

    run(scenario, 30.0)


def test_max_outstanding_must_be_positive() -> None:
    with pytest.raises(ValueError):
        AsyncClient("127.0.0.1:2181", max_outstanding=0)
