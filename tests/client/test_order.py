"""AsyncClient ordering, against zkpy and Apache ZooKeeper.

Guarantees checked:
- pipelined requests on one session complete in the order they were issued (FIFO client order),
  and each sees the effect of every earlier request of the session;
- watch events and completions are delivered in the server's order: a watch event runs before
  the completion of any request whose reply shows the state after the change.

Both tests are randomised; the seed is printed (rerun one with ZKPY_TEST_SEED=<seed>).
"""

from __future__ import annotations

import asyncio
import os
import random
import uuid
from collections.abc import Awaitable
from typing import Any

import pytest
from tests.helpers.clientwait import run

from zkpy.client.core import WatchedEvent
from zkpy.testing.servers import ServerProcess
from zkpy.wire.consts import EventType

aio = pytest.importorskip("zkpy.client.aio")
AsyncClient = aio.AsyncClient

N_KEYS = 10


def seeded() -> random.Random:
    seed = int(os.environ.get("ZKPY_TEST_SEED") or random.randrange(2**32))
    print(f"seed={seed}")
    return random.Random(seed)


def test_pipelined_operations_complete_in_issue_order(any_server: ServerProcess) -> None:
    rng = seeded()
    n_ops = 10_000

    async def scenario() -> None:
        async with AsyncClient(any_server.hosts, session_timeout=10.0) as zk:
            base = f"/order-{uuid.uuid4().hex[:10]}"
            await zk.create(base)
            keys = [f"{base}/k{k}" for k in range(N_KEYS)]
            for key in keys:
                await zk.create(key, b"init")

            completed: list[int] = []

            async def tagged(i: int, op: Awaitable[Any]) -> Any:
                result = await op
                completed.append(i)
                return result

            # What each request must see, from a model of the session's own writes.
            version = [0] * N_KEYS
            data = [b"init"] * N_KEYS
            expected: list[tuple[str, Any]] = []
            tasks = []
            for i in range(n_ops):
                kind = rng.choice(("create", "set", "get", "exists"))
                k = rng.randrange(N_KEYS)
                if kind == "create":
                    op: Awaitable[Any] = zk.create(f"{base}/c{i}", b"%d" % i)
                    expected.append((kind, f"{base}/c{i}"))
                elif kind == "set":
                    version[k] += 1
                    data[k] = b"%d" % i
                    op = zk.set(keys[k], data[k])
                    expected.append((kind, version[k]))
                elif kind == "get":
                    op = zk.get(keys[k])
                    expected.append((kind, (data[k], version[k])))
                else:
                    op = zk.exists(keys[k])
                    expected.append((kind, version[k]))
                tasks.append(asyncio.ensure_future(tagged(i, op)))  # issued, not awaited
            results = await asyncio.gather(*tasks)

            assert completed == list(range(n_ops)), "completions out of issue order"
            last_mzxid = 0
            for i, ((kind, want), got) in enumerate(zip(expected, results)):
                if kind == "create":
                    assert got == want, (i, kind)
                elif kind == "set":
                    assert got.version == want, (i, kind)
                    assert got.mzxid > last_mzxid, f"write {i} has zxid {got.mzxid:#x} <= {last_mzxid:#x}"
                    last_mzxid = got.mzxid
                elif kind == "get":
                    assert (got[0], got[1].version) == want, (i, kind)
                else:
                    assert got is not None and got.version == want, (i, kind)
            await zk.delete(base, recursive=True)

    run(scenario, deadline_s=120.0)


def test_watch_events_run_before_completions_that_show_the_change(any_server: ServerProcess) -> None:
    rng = seeded()
    n_writes = 150

    async def scenario() -> None:
        async with AsyncClient(any_server.hosts) as zk, AsyncClient(any_server.hosts) as other:
            base = f"/events-{uuid.uuid4().hex[:10]}"
            await other.create(base)
            keys = [f"{base}/w{k}" for k in range(N_KEYS)]
            index = {key: k for k, key in enumerate(keys)}
            for key in keys:
                await other.create(key, b"0")

            # One queue of what the first session observed: ("event", k) from the persistent
            # watch, ("once", k) from the one-time watches, ("read", k, version) from completions.
            log: list[tuple[Any, ...]] = []

            def on_event(event: WatchedEvent) -> None:
                assert event.type == EventType.NODE_DATA_CHANGED, event
                log.append(("event", index[event.path]))

            def on_once(event: WatchedEvent) -> None:
                assert event.type == EventType.NODE_DATA_CHANGED, event
                log.append(("once", index[event.path]))

            await zk.add_watch(base, on_event, recursive=True)
            for key in keys:
                await zk.get(key, watch=on_once)

            writer_done = asyncio.Event()
            final = [0] * N_KEYS

            async def write() -> None:
                for i in range(n_writes):
                    k = rng.randrange(N_KEYS)
                    stat = await other.set(keys[k], b"%d" % i)
                    final[k] = stat.version
                writer_done.set()

            async def read(k: int) -> None:
                _, stat = await zk.get(keys[k])
                log.append(("read", k, stat.version))

            async def read_batches() -> None:
                while not writer_done.is_set():
                    await asyncio.gather(*(read(rng.randrange(N_KEYS)) for _ in range(100)))
                await asyncio.gather(*(read(k) for k in range(N_KEYS)))  # each sees its final version

            await asyncio.gather(write(), read_batches())

            events = [0] * N_KEYS
            once = [False] * N_KEYS
            reads = 0
            interleaved = 0
            for entry in log:
                if entry[0] == "event":
                    events[entry[1]] += 1
                elif entry[0] == "once":
                    assert not once[entry[1]], f"one-time watch on w{entry[1]} fired twice"
                    once[entry[1]] = True
                else:
                    _, k, version = entry
                    reads += 1
                    assert events[k] >= version, (
                        f"read {reads} of w{k} shows version {version} before its event "
                        f"({events[k]} events seen)")
                    assert version == 0 or once[k], f"read of w{k} shows version {version} before its one-time watch fired"
                    interleaved += 0 < version < final[k]
            assert events == final, "every change fired the persistent watch exactly once"
            assert once == [v > 0 for v in final]
            assert interleaved > 0, "reads never overlapped the writes: the test checked nothing"
            await other.delete(base, recursive=True)

    run(scenario)
