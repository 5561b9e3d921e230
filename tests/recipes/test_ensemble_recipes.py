"""The recipes on a 3-member zkpy ensemble and a 3-member Apache ZooKeeper 3.8 ensemble, with real
processes: mutual exclusion, no herd effect, hand-over on session expiry, a holder that survives
its server's death, GUID recovery after a lost create reply, read/write order, the double
barrier, elections, two-phase commit and a crash-safe priority queue.

Processes report through one shared log file (tests/recipes/worker.py); every wait has a deadline.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from typing import Any

import pytest
from tests.conftest import require_apache
from tests.helpers.clientwait import eventually, run
from tests.recipes.conftest import clients, close_all
from tests.recipes.test_locks import read_write_lock_scenario

from zkpy.client.aio import AsyncClient
from zkpy.recipes import (
    AsyncCoordinator,
    AsyncCounter,
    AsyncElection,
    AsyncLock,
    AsyncLockingQueue,
    AsyncPriorityQueue,
    AsyncQueue,
    AsyncReadLock,
    AsyncRevocableLock,
    AsyncSemaphore,
    AsyncWriteLock,
    Outcome,
    Ownership,
)
from zkpy.recipes.sequential import sequence_of
from zkpy.testing.proxy import TcpProxy
from zkpy.testing.servers import (
    ServerProcess,
    cleanup_ensemble,
    ensemble_hosts,
    restart_ensemble_member,
    server_of_session,
    start_ensemble,
    wait_ensemble_serving,
)
from zkpy.wire.consts import OpCode

pytestmark = pytest.mark.interop

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WAIT_S = 30.0
SHORT_SESSION_S = 4.0  # for the tests that wait for a session to expire


@pytest.fixture(scope="module", params=["zkpy", "apache"])
def ensemble(request: pytest.FixtureRequest) -> Iterator[list[ServerProcess]]:
    if request.param == "apache":
        require_apache()
    servers = start_ensemble([request.param] * 3)
    yield servers
    cleanup_ensemble(servers)


@pytest.fixture
def root(ensemble: list[ServerProcess]) -> str:
    return f"/recipes-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def shared_log() -> Iterator[str]:
    fd, path = tempfile.mkstemp(prefix="recipes-", suffix=".log")
    os.close(fd)
    yield path
    for p in (path, path + ".holder"):
        if os.path.exists(p):
            os.unlink(p)


class Workers:
    """Worker processes of one test; killed at the end whatever happened."""

    def __init__(self, log: str) -> None:
        self.log = log
        self.procs: list[subprocess.Popen[bytes]] = []
        self.killed: set[int] = set()  # pids this test killed on purpose

    def start(self, role: str, hosts: str, path: str, *args: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, "-m", "tests.recipes.worker", role, "--hosts", hosts,
                                 "--path", path, "--log", self.log, *args], cwd=ROOT)
        self.procs.append(proc)
        return proc

    def wait_all(self, deadline_s: float = 120.0) -> None:
        deadline = time.monotonic() + deadline_s
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:  # say what the workers did (their log) before failing
                raise AssertionError(f"worker {' '.join(map(str, proc.args[3:]))} still running after "
                                     f"{deadline_s}s; the workers' log:\n" + "\n".join(self.lines())) from None
        assert [p.returncode for p in self.procs if not self._fine(p)] == [], self.lines()

    def _fine(self, proc: subprocess.Popen[bytes]) -> bool:
        """Still running, done, exited on purpose (3: a worker's crash), or killed by the test."""
        return proc.poll() in (None, 0, 3) or proc.pid in self.killed

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        self.killed.add(proc.pid)
        proc.kill()
        proc.wait()

    def lines(self) -> list[str]:
        with open(self.log, encoding="utf-8") as f:
            return f.read().splitlines()

    def wait_line(self, predicate: Callable[[str], bool], what: str, deadline_s: float = WAIT_S) -> list[str]:
        deadline = time.monotonic() + deadline_s
        while True:
            found = [line for line in self.lines() if predicate(line)]
            if found:
                return found
            dead = [p.returncode for p in self.procs if not self._fine(p)]
            assert not dead, f"a worker failed ({dead}) while waiting for {what}: {self.lines()}"
            assert time.monotonic() < deadline, f"timed out after {deadline_s}s waiting for {what}: {self.lines()}"
            time.sleep(0.02)

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture
def workers(shared_log: str) -> Iterator[Workers]:
    w = Workers(shared_log)
    yield w
    w.kill_all()


async def children(hosts: str, path: str) -> list[str]:
    async with AsyncClient(hosts) as zk:
        return sorted(await zk.get_children(path))


# -- locks ---------------------------------------------------------------------------------------


def test_processes_take_turns_with_the_lock(ensemble: list[ServerProcess], root: str, workers: Workers) -> None:
    processes, rounds = 4, 15
    for i in range(processes):
        workers.start("lock", ensemble_hosts(ensemble), f"{root}/lock", "--name", f"p{i}", "--rounds", str(rounds))
    workers.wait_all()
    lines = workers.lines()
    assert not [line for line in lines if line.startswith("VIOLATION")], lines
    assert len([line for line in lines if line.startswith("in ")]) == processes * rounds
    assert sorted(line for line in lines if line.startswith("done ")) == [f"done p{i}" for i in range(processes)]


def test_one_release_wakes_exactly_one_of_50_waiters(ensemble: list[ServerProcess], root: str) -> None:
    async def scenario() -> None:
        zks = await clients(ensemble_hosts(ensemble), 51)
        try:
            locks = [AsyncLock(zk, f"{root}/herd", f"c{i}") for i, zk in enumerate(zks)]
            await locks[0].acquire()
            waiting = [asyncio.create_task(lock.acquire()) for lock in locks[1:]]
            await eventually(lambda: all(lock.node is not None for lock in locks), "50 waiters queued")
            await asyncio.gather(*(zk.sync("/") for zk in zks))  # every exists-watch is set
            assert sum(lock.notifications for lock in locks) == 0
            line = sorted(range(1, len(locks)), key=lambda i: sequence_of(locks[i].node or ""))  # queue order
            await locks[0].release()
            await asyncio.wait_for(waiting[line[0] - 1], WAIT_S)
            # a sync's reply comes after every notification sent before it: all have arrived
            await asyncio.gather(*(zk.sync("/") for zk in zks))
            woken = [i for i, lock in enumerate(locks) if lock.notifications]
            assert woken == [line[0]], f"one release woke {woken}; the next in line is {line[0]}"
            assert sum(t.done() for t in waiting) == 1
            for k, i in enumerate(line):  # hand the lock down the line
                await locks[i].release()
                if k + 1 < len(line):
                    await asyncio.wait_for(waiting[line[k + 1] - 1], WAIT_S)
            assert all(lock.notifications <= 1 for lock in locks)
        finally:
            await close_all(zks)

    run(scenario, 120)


def test_holder_whose_session_expires_hands_the_lock_on(ensemble: list[ServerProcess], root: str) -> None:
    async def scenario(proxy: TcpProxy) -> None:
        holder_zk = AsyncClient(proxy.hosts, session_timeout=SHORT_SESSION_S)
        await holder_zk.start()
        waiter_zk, = await clients(ensemble_hosts(ensemble), 1)
        try:
            holder, waiter = AsyncLock(holder_zk, f"{root}/lock", "holder"), AsyncLock(waiter_zk, f"{root}/lock")
            told: list[Ownership] = []
            holder.add_listener(told.append)
            await holder.acquire()
            pending = asyncio.create_task(waiter.acquire())
            await eventually(lambda: waiter.node is not None, "the waiter queued")
            proxy.cut("blackhole")  # the holder falls silent: the ensemble expires its session
            await eventually(lambda: Ownership.SUSPENDED in told, lambda: f"the holder warned ({told})")
            assert await asyncio.wait_for(pending, WAIT_S)
            proxy.restore()
            await eventually(lambda: holder.ownership is Ownership.LOST, lambda: f"the holder told ({told})", WAIT_S)
            assert told == [Ownership.SUSPENDED, Ownership.LOST]
            await waiter.release()
        finally:
            await close_all([holder_zk, waiter_zk])

    with TcpProxy("127.0.0.1", ensemble[0].port) as proxy:
        run(lambda: scenario(proxy), 120)


def test_holder_keeps_the_lock_when_its_server_dies(ensemble: list[ServerProcess], root: str) -> None:
    hosts = ensemble_hosts(ensemble)

    async def scenario() -> None:
        holder_zk, waiter_zk = await clients(hosts, 2, session_timeout=15.0)
        victim: ServerProcess | None = None
        try:
            holder, waiter = AsyncLock(holder_zk, f"{root}/lock", "holder"), AsyncLock(waiter_zk, f"{root}/lock")
            told: list[Ownership] = []
            holder.add_listener(told.append)
            await holder.acquire()
            pending = asyncio.create_task(waiter.acquire())
            await eventually(lambda: waiter.node is not None, "the waiter queued")
            victim = await asyncio.to_thread(server_of_session, ensemble, holder_zk.session_id)
            assert victim is not None
            victim.stop(signal.SIGKILL)
            await eventually(lambda: told[-1:] == [Ownership.HELD], lambda: f"held again ({told})", WAIT_S)
            assert told == [Ownership.SUSPENDED, Ownership.HELD]
            assert not pending.done() and waiter.notifications == 0
            assert holder.node in await waiter_zk.get_children(f"{root}/lock")
            await holder.release()
            assert await asyncio.wait_for(pending, WAIT_S)
            await waiter.release()
        finally:
            await close_all([holder_zk, waiter_zk])
            if victim is not None:
                restart_ensemble_member(victim)
                await asyncio.to_thread(wait_ensemble_serving, ensemble)

    run(scenario, 180)


def test_read_write_lock_on_the_ensemble(ensemble: list[ServerProcess], root: str) -> None:
    run(lambda: read_write_lock_scenario(ensemble_hosts(ensemble), root))


# -- recovery from a lost create reply -------------------------------------------------------------

Step = Callable[[AsyncClient, str], Awaitable[Any]]


async def _lock(cls: type[AsyncLock], zk: AsyncClient, path: str) -> Any:
    lock = cls(zk, path, "me")
    assert await lock.acquire(timeout=WAIT_S)
    return lock


async def _election(zk: AsyncClient, path: str) -> Any:
    election = AsyncElection(zk, path, "me")
    assert await election.campaign()
    return election


async def _semaphore(zk: AsyncClient, path: str) -> Any:
    sem = AsyncSemaphore(zk, path, "me", max_leases=2)
    assert await sem.acquire(timeout=WAIT_S)
    return sem


async def _queue_put(zk: AsyncClient, path: str) -> Any:
    await AsyncQueue(zk, path).put(b"once")


async def _priority_put(zk: AsyncClient, path: str) -> Any:
    await AsyncPriorityQueue(zk, path).put(b"once", priority=3)


async def _locking_put_all(zk: AsyncClient, path: str) -> Any:
    await AsyncLockingQueue(zk, path).put_all([b"a", b"b"])


async def _counter(zk: AsyncClient, path: str) -> Any:
    counter = AsyncCounter(zk, path)
    await counter.add(1)
    assert await counter.add(1) == 2  # (the lost reply is the first multi's)


# recipe: (the step, the opcode whose reply is lost, how many such requests pass first, what the
# node's children must look like after). The node's parents exist before (a recipe may create them
# first, and those creates are not the ones under test).
RECOVERIES: dict[str, tuple[Step, int, int, Callable[[list[str]], bool]]] = {
    "lock": (partial(_lock, AsyncLock), OpCode.CREATE, 0, lambda c: len(c) == 1 and "__lock__" in c[0]),
    "read-lock": (partial(_lock, AsyncReadLock), OpCode.CREATE, 0, lambda c: len(c) == 1 and "__rlock__" in c[0]),
    "write-lock": (partial(_lock, AsyncWriteLock), OpCode.CREATE, 0, lambda c: len(c) == 1),
    "revocable-lock": (partial(_lock, AsyncRevocableLock), OpCode.CREATE, 0, lambda c: len(c) == 1),
    "election": (_election, OpCode.CREATE, 0, lambda c: len(c) == 1),
    # a semaphore creates its node (NodeExists: it is there), then its lock's node, then the lease
    "semaphore-lock": (_semaphore, OpCode.CREATE, 1, lambda c: len(c) == 1),
    "semaphore-lease": (_semaphore, OpCode.CREATE, 2, lambda c: len(c) == 1),
    "queue": (_queue_put, OpCode.CREATE, 0, lambda c: len(c) == 1),
    "priority-queue": (_priority_put, OpCode.CREATE, 0, lambda c: len(c) == 1 and c[0].startswith("entry-003-")),
    "locking-queue": (_locking_put_all, OpCode.MULTI, 0, lambda c: sorted(c) == ["entries", "taken"]),
    "counter": (_counter, OpCode.MULTI, 0, lambda c: len(c) == 1),  # this client's one marker
}


async def _prepare(zk: AsyncClient, recipe: str, path: str) -> None:
    await zk.ensure_path(path)
    if recipe.startswith("semaphore"):  # the semaphore node (with max_leases) and its lock's node
        sem = AsyncSemaphore(zk, path, "warm", max_leases=2)
        await sem.acquire()
        await sem.release()
    if recipe == "locking-queue":
        await AsyncLockingQueue(zk, path).put_all([])


@pytest.mark.parametrize("recipe", sorted(RECOVERIES))
def test_a_lost_create_reply_leaves_neither_an_orphan_nor_a_second_node(
        ensemble: list[ServerProcess], root: str, recipe: str) -> None:
    step, opcode, skip, shape = RECOVERIES[recipe]
    path = f"{root}/{recipe}"

    async def scenario(proxy: TcpProxy) -> None:
        zk = AsyncClient(proxy.hosts, session_timeout=15.0)
        await zk.start()
        try:
            await _prepare(zk, recipe, path)
            proxy.lose_reply({opcode}, skip)
            held = await step(zk, path)
            assert proxy.lost == 1, "the reply was not lost: the test proves nothing"
            found = await children(ensemble_hosts(ensemble), path)
            assert shape(found), f"{recipe} left {found}"
            if recipe == "locking-queue":
                assert len(await children(ensemble_hosts(ensemble), f"{path}/entries")) == 2
            if recipe.startswith("semaphore"):  # the semaphore's lock node is gone too
                assert len(await children(ensemble_hosts(ensemble), f"{path}-__lock__")) == 0
            if held is not None:
                await (held.resign() if isinstance(held, AsyncElection) else held.release())
                assert [c for c in await children(ensemble_hosts(ensemble), path) if c != "ready"] == []
        finally:
            await zk.close()

    with TcpProxy("127.0.0.1", ensemble[1].port, zk_frames=True) as proxy:
        run(lambda: scenario(proxy), 60)


def test_lost_replies_of_a_locking_queue_claim_and_consume(ensemble: list[ServerProcess], root: str) -> None:
    async def scenario(proxy: TcpProxy) -> None:
        zk = AsyncClient(proxy.hosts, session_timeout=15.0)
        await zk.start()
        try:
            queue = AsyncLockingQueue(zk, f"{root}/lq")
            await queue.put(b"only")
            proxy.lose_reply({OpCode.CREATE})  # the claim
            assert await queue.get(timeout=WAIT_S) == b"only"
            assert await children(ensemble_hosts(ensemble), f"{root}/lq/taken") == [queue.processing_element[0]]
            proxy.lose_reply({OpCode.MULTI})  # the consume
            assert await queue.consume()
            assert proxy.lost == 2
            assert await children(ensemble_hosts(ensemble), f"{root}/lq/entries") == []
            assert await children(ensemble_hosts(ensemble), f"{root}/lq/taken") == []
        finally:
            await zk.close()

    with TcpProxy("127.0.0.1", ensemble[2].port, zk_frames=True) as proxy:
        run(lambda: scenario(proxy), 60)


# -- barriers, elections, two-phase commit, queues -----------------------------------------------------


def test_double_barrier_with_50_clients(ensemble: list[ServerProcess], root: str, workers: Workers) -> None:
    processes, per_process = 5, 10
    for i in range(processes):
        workers.start("double-barrier", ensemble_hosts(ensemble), f"{root}/db", "--name", f"p{i}",
                      "--clients", str(per_process), "--total", str(processes * per_process))
    workers.wait_all()
    kinds = [line.split()[0] for line in workers.lines()]
    assert kinds.count("left") == processes * per_process
    last_enter = max(i for i, k in enumerate(kinds) if k == "enter")
    first_entered = min(i for i, k in enumerate(kinds) if k == "entered")
    last_leave = max(i for i, k in enumerate(kinds) if k == "leave")
    first_left = min(i for i, k in enumerate(kinds) if k == "left")
    assert last_enter < first_entered, "a client started before all had entered"
    assert last_leave < first_left, "a client left before all had called leave"


def test_killing_the_leader_elects_exactly_one_new_leader(
        ensemble: list[ServerProcess], root: str, workers: Workers) -> None:
    hosts, path = ensemble_hosts(ensemble), f"{root}/election"
    names = [f"c{i}" for i in range(4)]
    procs = {}
    for i, name in enumerate(names):  # one after the other: c0 leads, c1 is its successor, ...
        procs[name] = workers.start("candidate", hosts, path, "--name", name,
                                    "--session-timeout", str(SHORT_SESSION_S))
        workers.wait_line(lambda line, n=name: line == f"candidate {n}", f"{name} started")
        run(lambda i=i: eventually(lambda: _count_nodes(hosts, path, i + 1), f"{i + 1} candidates queued"))
    workers.wait_line(lambda line: line.startswith("leader c0"), "c0 leading")
    killed_at = time.monotonic()
    workers.kill(procs["c0"])
    new = workers.wait_line(lambda line: line.startswith("leader c1"), "a new leader",
                            deadline_s=SHORT_SESSION_S * 4)
    elapsed = time.monotonic() - killed_at
    time.sleep(0.5)  # let any wrongly woken candidate report itself (it must not exist)
    lines = workers.lines()
    leaders = [line.split()[1] for line in lines if line.startswith("leader ")]
    assert leaders == ["c0", "c1"], lines
    woken = {line.split()[1] for line in lines if line.startswith("woke ")}
    assert woken == {"c1"}, f"watches fired for {woken}: {lines}"
    print(f"new leader {new[0]} {elapsed:.2f}s after the old one was killed (session timeout {SHORT_SESSION_S}s)")


def _count_nodes(hosts: str, path: str, n: int) -> Awaitable[bool]:
    async def check() -> bool:
        try:
            return len([c for c in await children(hosts, path) if "__lock__" in c]) >= n
        except Exception:
            return False
    return check()


@pytest.mark.parametrize("scenario", ["all-commit", "one-aborts", "one-dies-mid-vote"])
def test_two_phase_commit_with_participant_processes(
        ensemble: list[ServerProcess], root: str, workers: Workers, scenario: str) -> None:
    hosts, path = ensemble_hosts(ensemble), f"{root}/tx"
    sites = ["s1", "s2", "s3"]

    async def coordinate() -> Outcome:
        async with AsyncClient(hosts) as zk:
            coordinator = AsyncCoordinator(zk, path)
            txid = await coordinator.begin(b"payload", sites)
            return await coordinator.outcome(txid, timeout=WAIT_S * 2)

    for site in sites:
        extra = ["--session-timeout", str(SHORT_SESSION_S)]
        if site == "s2" and scenario == "one-aborts":
            extra += ["--vote", "abort"]
        if site == "s2" and scenario == "one-dies-mid-vote":
            extra += ["--die"]
        workers.start("participant", hosts, path, "--name", site, *extra)
    decided = run(coordinate, 120)
    workers.wait_all()
    lines = workers.lines()
    outcomes = {line.split()[1]: line.split()[2] for line in lines if line.startswith("outcome ")}
    expected = Outcome.COMMITTED if scenario == "all-commit" else Outcome.ABORTED
    assert decided is expected, lines
    voters = sites if scenario != "one-dies-mid-vote" else ["s1", "s3"]
    assert outcomes == {s: expected.value for s in voters}, lines


def test_priority_queue_order_and_a_consumer_crash(ensemble: list[ServerProcess], root: str, workers: Workers) -> None:
    hosts, path = ensemble_hosts(ensemble), f"{root}/pq"
    items = [(p, f"p{p}-{i}") for i in range(4) for p in (50, 5, 500)]

    async def produce() -> None:
        async with AsyncClient(hosts) as zk:
            queue = AsyncLockingQueue(zk, path)
            for priority, value in items:
                await queue.put(value.encode(), priority)

    run(produce)
    workers.start("consumer", hosts, path, "--name", "solo")
    workers.wait_all()
    solo = [line.split()[2] for line in workers.lines() if line.startswith("consumed ")]
    assert solo == [v for _, v in sorted(items, key=lambda pv: pv[0])], "not by priority, then FIFO"

    run(produce)
    crasher = workers.start("consumer", hosts, path, "--name", "crasher", "--die",
                            "--session-timeout", str(SHORT_SESSION_S))
    took = workers.wait_line(lambda line: line.startswith("took crasher"), "the crasher's take")[0].split()[2]
    crasher.wait(WAIT_S)
    for name in ("a", "b"):
        workers.start("consumer", hosts, path, "--name", name)
    workers.wait_all(180)
    consumed = [line.split()[2] for line in workers.lines()
                if line.startswith("consumed ") and line.split()[1] in ("a", "b")]
    assert sorted(consumed) == sorted(v for _, v in items), "an entry was lost or consumed twice"
    assert took in consumed
