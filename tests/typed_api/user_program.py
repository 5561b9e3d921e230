# pyright: strict
"""A user's program over zkpy's public API, as a type checker sees it.

tests/typed_api/test_user_program.py runs ``mypy --strict`` on this file (and pyright, strict by
the comment above, where pyright is installed) and expects nothing reported; it also runs ``main`` against a zkpy server, so the
calls below are real ones. Every public class appears: the clients, their states and events,
the retry policies, the errors (one subclassed, as users do), the jute records, the wire enums
and every recipe, blocking and asyncio.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import threading
from concurrent.futures import Future

from zkpy import AsyncClient, Client, ClientState, KazooRetry, KazooState, RetryPolicy, WatchedEvent
from zkpy.client import Transaction as AsyncTransaction
from zkpy.client.sync import Transaction
from zkpy.errors import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    SessionExpiredError,
    ZookeeperError,
)
from zkpy.recipes import (
    AsyncBarrier,
    AsyncChildrenWatch,
    AsyncCoordinator,
    AsyncCounter,
    AsyncDataWatch,
    AsyncDoubleBarrier,
    AsyncElection,
    AsyncLock,
    AsyncLockingQueue,
    AsyncParticipant,
    AsyncParty,
    AsyncPriorityQueue,
    AsyncQueue,
    AsyncReadLock,
    AsyncReadyConfig,
    AsyncRendezvous,
    AsyncRevocableLock,
    AsyncRevocableReadLock,
    AsyncRevocableWriteLock,
    AsyncSemaphore,
    AsyncShallowParty,
    AsyncSimpleElection,
    AsyncWriteLock,
    Barrier,
    ChildrenWatch,
    Coordinator,
    Counter,
    DataWatch,
    DoubleBarrier,
    Election,
    Lock,
    LockingQueue,
    LockLost,
    LockTimeout,
    Outcome,
    Ownership,
    Participant,
    Party,
    PriorityQueue,
    Queue,
    ReadLock,
    ReadyConfig,
    RecipeError,
    RecipeTimeout,
    Rendezvous,
    RevocableLock,
    RevocableReadLock,
    RevocableWriteLock,
    Semaphore,
    ShallowParty,
    SimpleElection,
    WriteLock,
)
from zkpy.wire.consts import CreateMode, EventType, KeeperState, Perms, WatcherType
from zkpy.wire.proto import ACL, ClientInfo, Id, Stat


class MissingConfig(NoNodeError):
    """Users subclass zkpy's errors: they must be classes to a type checker."""


def records() -> str:
    """The jute records are dataclasses to a type checker: keyword construction, fields, replace."""
    world = Id(scheme="world", id="anyone")
    acl = ACL(perms=int(Perms.READ | Perms.WRITE), id=world)
    stat = Stat(czxid=1, mzxid=2, ctime=3, mtime=4, version=5, cversion=6, aversion=7, ephemeralOwner=0,
                dataLength=8, numChildren=9, pzxid=10)
    newer: Stat = dataclasses.replace(stat, version=stat.version + 1)
    names = [f.name for f in dataclasses.fields(Stat)]
    return f"{acl.id.scheme} {newer.version} {names[0]} {dataclasses.asdict(world)['id']}"


def describe(stat: Stat) -> str:
    return f"v{stat.version} {stat.dataLength}B owner={stat.ephemeralOwner:#x}"


def on_event(event: WatchedEvent) -> None:
    kind: EventType = event.type
    state: KeeperState = event.state
    path: str | None = event.path
    print("event", kind.name, state.name, path)


def on_data(data: bytes | None, stat: Stat | None) -> None:
    print("data", data, stat)


def on_children(names: list[str]) -> None:
    print("children", names)


def on_state(state: ClientState) -> None:
    if state in KazooState.LOST:
        print("session lost:", state.name)


def blocking(hosts: str, root: str) -> list[str]:
    out: list[str] = []
    acl = [ACL(int(Perms.ALL), Id("world", "anyone"))]
    retry = RetryPolicy(max_tries=3, delay=0.01)
    with Client(hosts, session_timeout=10.0, default_acl=acl, command_retry=retry) as zk:
        zk.add_listener(on_state)
        created: str = zk.create(root, b"", makepath=True)
        path, stat = zk.create(f"{root}/a", b"1", include_stat=True)
        out += [created, path, describe(stat)]
        data, stat = zk.get(path, watch=on_event)
        names: list[str] = zk.get_children(root)
        names, parent = zk.get_children(root, include_data=True)
        out.append(f"{data!r} {names} {parent.numChildren}")
        maybe: Stat | None = zk.exists(f"{root}/none")
        acls, _ = zk.get_acls(path)
        zk.set_acls(path, acls)
        zk.set(path, b"2", version=stat.version)
        try:
            zk.set(path, b"3", version=0)
        except BadVersionError as exc:
            out.append(type(exc).__name__)
        try:
            zk.get(f"{root}/none")
        except NoNodeError:
            out.append("no node")
        tx: Transaction = zk.transaction()
        tx.create(f"{root}/b", b"x").check(path, 99)
        results = tx.commit()
        out.append(str([type(r).__name__ for r in results if isinstance(r, (RolledBackError, ZookeeperError))]))
        future: Future[Stat | None] = zk.exists_async(path)
        out.append(describe(future.result() or stat))
        value: bytes = zk.retry(zk.get, path)[0]
        out.append(value.decode())
        out.append(str(KazooRetry(max_tries=2)(zk.exists, path) is not None) + str(maybe))
        me: list[ClientInfo] = zk.whoami()
        version: tuple[int, ...] = zk.server_version()
        out.append(f"{me[0].authScheme} {zk.command(b'ruok')} {version[0]}")
        session: tuple[int, bytes] = zk.client_id
        out.append(str(session[0] != 0 and zk.state is ClientState.CONNECTED))
        zk.add_watch(root, on_event, recursive=True)
        zk.remove_watches(root, WatcherType.ANY)

        lock: Lock = zk.Lock(f"{root}/lock", "me")
        with lock:
            out.append(str(lock.contenders()))
        read_lock, write_lock = ReadLock(zk, f"{root}/rw"), WriteLock(zk, f"{root}/rw")
        semaphore = Semaphore(zk, f"{root}/sem", max_leases=2)
        revocables = (RevocableLock(zk, f"{root}/rv"), RevocableReadLock(zk, f"{root}/rrv"),
                      RevocableWriteLock(zk, f"{root}/rwv"))
        counter = Counter(zk, f"{root}/counter")
        counter += 5
        out.append(str(counter.value))
        party, shallow = Party(zk, f"{root}/party", "p1"), ShallowParty(zk, f"{root}/shallow", "s1")
        party.join()
        out.append(str(len(party)))
        party.leave()
        queue, priority = Queue(zk, f"{root}/q"), PriorityQueue(zk, f"{root}/pq")
        queue.put(b"job")
        job: bytes | None = queue.get()
        locking = LockingQueue(zk, f"{root}/lq")
        barrier, double = Barrier(zk, f"{root}/barrier"), DoubleBarrier(zk, f"{root}/double", 2)
        barrier.create()
        out.append(str(barrier.remove()))
        election, simple = Election(zk, f"{root}/election", "me"), SimpleElection(zk, f"{root}/simple", "me")
        config, rendezvous = ReadyConfig(zk, f"{root}/config"), Rendezvous(zk, f"{root}/rendezvous")
        coordinator, participant = Coordinator(zk, f"{root}/2pc"), Participant(zk, f"{root}/2pc", "site")
        seen = threading.Event()

        def data_seen(data: bytes | None, stat: Stat | None) -> None:
            seen.set()

        watch = DataWatch(zk, path, data_seen)
        children = ChildrenWatch(zk, root, on_children)
        out.append(str(seen.wait(10.0)))
        outcome: Outcome = Outcome.COMMITTED
        ownership: Ownership = Ownership.HELD
        del read_lock, write_lock, semaphore, revocables, shallow, priority, locking, double, election
        del simple, config, rendezvous, coordinator, participant, watch, children, job, outcome, ownership
        zk.delete(root, recursive=True)
    return out


async def asynchronous(hosts: str, root: str) -> list[str]:
    out: list[str] = []
    async with AsyncClient(hosts) as zk:
        await zk.create(root, b"", make_parents=True)
        path, stat = await zk.create(f"{root}/a", b"1", ephemeral=True, include_stat=True)
        out.append(describe(stat))
        tx: AsyncTransaction = zk.transaction()
        tx.create(f"{root}/b", b"", None, False, False)
        out.append(str(await tx.commit()))
        lock = AsyncLock(zk, f"{root}/lock", "me")
        async with lock:
            out.append(str(await lock.contenders()))
        counter = AsyncCounter(zk, f"{root}/counter")
        out.append(str(await counter.add(2)))
        recipes = (
            AsyncBarrier(zk, f"{root}/b1"), AsyncDoubleBarrier(zk, f"{root}/b2", 2),
            AsyncElection(zk, f"{root}/e1"), AsyncSimpleElection(zk, f"{root}/e2"),
            AsyncReadLock(zk, f"{root}/l1"), AsyncWriteLock(zk, f"{root}/l2"),
            AsyncRevocableLock(zk, f"{root}/l3"), AsyncRevocableReadLock(zk, f"{root}/l4"),
            AsyncRevocableWriteLock(zk, f"{root}/l5"), AsyncSemaphore(zk, f"{root}/s"),
            AsyncParty(zk, f"{root}/p1"), AsyncShallowParty(zk, f"{root}/p2"),
            AsyncQueue(zk, f"{root}/q1"), AsyncPriorityQueue(zk, f"{root}/q2"),
            AsyncLockingQueue(zk, f"{root}/q3"), AsyncReadyConfig(zk, f"{root}/c"),
            AsyncRendezvous(zk, f"{root}/r"), AsyncCoordinator(zk, f"{root}/t"),
            AsyncParticipant(zk, f"{root}/t", "site"),
        )
        out.append(str(len(recipes)))
        data_watch = AsyncDataWatch(zk, path, on_data)
        children_watch = AsyncChildrenWatch(zk, root, on_children)
        del data_watch, children_watch
        await zk.delete(root, recursive=True)
        out.append(str(CreateMode.EPHEMERAL_SEQUENTIAL.value))
    return out


def errors_users_catch(exc: BaseException) -> str:
    if isinstance(exc, (LockTimeout, LockLost, RecipeTimeout)):
        return "recipe: " + type(exc).__name__
    if isinstance(exc, RecipeError):
        return "recipe"
    if isinstance(exc, (ConnectionClosedError, SessionExpiredError)):
        return "gone"
    if isinstance(exc, (ConnectionLoss, NodeExistsError, MissingConfig)):
        return "retry or ignore"
    return "other"


def main(hosts: str, root: str) -> list[str]:
    return blocking(hosts, root) + asyncio.run(asynchronous(hosts, root + "-aio")) + [
        errors_users_catch(MissingConfig()), records()]


if __name__ == "__main__":
    print("\n".join(main(sys.argv[1], sys.argv[2])))
