"""kazoo drives the whole API against zkpy and, identically, against Apache ZooKeeper 3.8."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadArgumentsError,
    BadVersionError,
    NoAuthError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from kazoo.protocol.states import EventType, KazooState
from kazoo.recipe.barrier import Barrier, DoubleBarrier
from kazoo.recipe.counter import Counter
from kazoo.recipe.election import Election
from kazoo.recipe.lock import Lock, ReadLock, WriteLock
from kazoo.recipe.party import Party
from kazoo.recipe.queue import LockingQueue, Queue
from kazoo.security import make_digest_acl

from zkpy.testing.servers import ServerProcess

DEADLINE = 10.0


@pytest.fixture(params=["zkpy", "zkpy_workers", "apache"])
def any_server(request: pytest.FixtureRequest) -> ServerProcess:
    """zkpy with one serving process and with two workers (serverWorkers=2), and Apache ZooKeeper."""
    if request.param == "apache":
        from tests.conftest import require_apache

        require_apache()
    return request.getfixturevalue(f"{request.param}_server")  # type: ignore[no-any-return]


@pytest.fixture
def zk(any_server: ServerProcess) -> Iterator[KazooClient]:
    client = KazooClient(hosts=any_server.hosts, timeout=10)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def root(zk: KazooClient) -> Iterator[str]:
    path = f"/kz-{uuid.uuid4().hex[:12]}"
    zk.create(path)
    yield path
    zk.delete(path, recursive=True)


def new_client(server: ServerProcess, **kwargs: object) -> KazooClient:
    client = KazooClient(hosts=server.hosts, timeout=10, **kwargs)  # type: ignore[arg-type]
    client.start(timeout=15)
    return client


def test_create_get_set_delete_with_versions(zk: KazooClient, root: str) -> None:
    path = zk.create(f"{root}/a", b"one")
    assert path == f"{root}/a"
    data, stat = zk.get(path)
    assert data == b"one" and stat.version == 0 and stat.dataLength == 3 and stat.numChildren == 0
    assert stat.czxid == stat.mzxid == stat.pzxid
    stat2 = zk.set(path, b"two", version=0)
    assert stat2.version == 1 and stat2.mzxid > stat.mzxid and stat2.czxid == stat.czxid
    with pytest.raises(BadVersionError):
        zk.set(path, b"three", version=0)
    with pytest.raises(BadVersionError):
        zk.delete(path, version=5)
    with pytest.raises(NodeExistsError):
        zk.create(path)
    with pytest.raises(NoNodeError):
        zk.create(f"{root}/missing/child")
    zk.delete(path, version=1)
    assert zk.exists(path) is None
    with pytest.raises(NoNodeError):
        zk.get(path)


def test_parent_stat_tracks_children(zk: KazooClient, root: str) -> None:
    before = zk.exists(root)
    zk.create(f"{root}/c1")
    zk.create(f"{root}/c2")
    mid = zk.exists(root)
    assert mid.cversion == before.cversion + 2 and mid.numChildren == 2
    zk.delete(f"{root}/c1")
    after = zk.exists(root)
    assert after.numChildren == 1 and after.pzxid > mid.pzxid
    # clients see cversion count creations and deletions
    assert after.cversion == mid.cversion + 1
    with pytest.raises(NotEmptyError):
        zk.delete(root)


def test_sequential_names_come_from_parent_cversion(zk: KazooClient, root: str) -> None:
    zk.create(f"{root}/x")
    a = zk.create(f"{root}/s-", sequence=True)
    b = zk.create(f"{root}/s-", sequence=True, ephemeral=True)
    assert a == f"{root}/s-0000000001"
    assert b == f"{root}/s-0000000002"
    zk.delete(a)
    c = zk.create(f"{root}/s-", sequence=True)
    assert c == f"{root}/s-0000000003"  # a suffix is never reused


def test_ephemerals_and_their_rules(any_server: ServerProcess, zk: KazooClient, root: str) -> None:
    other = new_client(any_server)
    try:
        eph = other.create(f"{root}/e", b"x", ephemeral=True)
        stat = zk.exists(eph)
        assert stat.ephemeralOwner == other.client_id[0]
        with pytest.raises(NoChildrenForEphemeralsError):
            other.create(f"{eph}/child")
        assert other.get_ephemerals() if hasattr(other, "get_ephemerals") else True
    finally:
        other.stop()
        other.close()
    assert zk.exists(f"{root}/e") is None


def test_makepath_ensure_path_and_get_children_include_data(zk: KazooClient, root: str) -> None:
    zk.create(f"{root}/deep/er/node", b"v", makepath=True)
    zk.ensure_path(f"{root}/deep/er/node")
    zk.ensure_path(f"{root}/other/path")
    assert sorted(zk.get_children(root)) == ["deep", "other"]
    children, stat = zk.get_children(f"{root}/deep/er", include_data=True)
    assert children == ["node"] and stat.numChildren == 1


def test_create_include_data(zk: KazooClient, root: str) -> None:
    path, stat = zk.create(f"{root}/c2", b"abc", include_data=True)
    assert path == f"{root}/c2" and stat.dataLength == 3 and stat.version == 0


def test_transactions(zk: KazooClient, root: str) -> None:
    t = zk.transaction()
    t.create(f"{root}/t1", b"1")
    t.create(f"{root}/t2", b"2")
    t.set_data(f"{root}/t1", b"11")
    t.check(f"{root}/t1", 1)
    t.delete(f"{root}/t2")
    results = t.commit()
    assert results[:2] == [f"{root}/t1", f"{root}/t2"]
    assert zk.get(f"{root}/t1")[0] == b"11" and zk.exists(f"{root}/t2") is None
    t = zk.transaction()
    t.create(f"{root}/t3")
    t.check(f"{root}/t1", 99)
    t.create(f"{root}/t4")
    failed = t.commit()
    assert [type(r).__name__ for r in failed] == ["RolledBackError", "BadVersionError", "RuntimeInconsistency"]
    assert zk.exists(f"{root}/t3") is None


def test_acls_and_auth(any_server: ServerProcess, zk: KazooClient, root: str) -> None:
    acl = make_digest_acl("alice", "secret", all=True)
    zk.create(f"{root}/locked", b"s", acl=[acl])
    with pytest.raises(NoAuthError):
        zk.get(f"{root}/locked")
    with pytest.raises(NoAuthError):
        zk.get_acls(f"{root}/locked")  # getACL needs READ or ADMIN
    alice = new_client(any_server, auth_data=[("digest", "alice:secret")])
    try:
        acls, stat = alice.get_acls(f"{root}/locked")
        assert acls[0].id.scheme == "digest" and stat.aversion == 0
        assert alice.get(f"{root}/locked")[0] == b"s"
        alice.set_acls(f"{root}/locked", [make_digest_acl("alice", "secret", read=True, admin=True)])
        assert alice.get_acls(f"{root}/locked")[1].aversion == 1
        with pytest.raises(NoAuthError):
            alice.set(f"{root}/locked", b"no write any more")
    finally:
        alice.stop()
        alice.close()
    zk.add_auth("digest", "bob:pw")
    from kazoo.security import ACL, Id, Permissions

    zk.create(f"{root}/bobs", acl=[ACL(Permissions.ALL, Id("auth", ""))])
    assert zk.get_acls(f"{root}/bobs")[0][0].id.id.startswith("bob:")
    zk.add_auth("digest", "alice:secret")  # so the fixture can clean up


def test_watches_fire_once_in_order(any_server: ServerProcess, zk: KazooClient, root: str) -> None:
    events: list[tuple[str, str]] = []
    done = threading.Event()

    def record(event: object) -> None:
        events.append((event.type, event.path))  # type: ignore[attr-defined]
        if len(events) >= 3:
            done.set()

    zk.exists(f"{root}/w", watch=record)
    zk.get_children(root, watch=record)
    writer = new_client(any_server)
    try:
        writer.create(f"{root}/w", b"1")
        zk.get(f"{root}/w", watch=record)
        writer.set(f"{root}/w", b"2")
        writer.set(f"{root}/w", b"3")  # the data watch is one-time: no second event
        assert done.wait(DEADLINE)
        zk.sync(root)
    finally:
        writer.stop()
        writer.close()
    assert sorted(events[:2]) == sorted([(EventType.CREATED, f"{root}/w"), (EventType.CHILD, root)])
    assert events[2:] == [(EventType.CHANGED, f"{root}/w")]


def test_data_and_children_watch_recipes(zk: KazooClient, root: str) -> None:
    values: list[bytes | None] = []
    kids: list[list[str]] = []
    changed = threading.Event()
    zk.create(f"{root}/dw", b"a")

    @zk.DataWatch(f"{root}/dw")
    def on_data(data: bytes | None, stat: object) -> None:
        values.append(data)
        if data == b"b":
            changed.set()

    @zk.ChildrenWatch(root)
    def on_children(children: list[str]) -> None:
        kids.append(sorted(children))

    zk.set(f"{root}/dw", b"b")
    assert changed.wait(DEADLINE)
    assert values[:2] == [b"a", b"b"]
    assert kids[0] == ["dw"]


def test_recipes_lock_election_counter_queue_barrier_party(any_server: ServerProcess, zk: KazooClient, root: str) -> None:
    lock = Lock(zk, f"{root}/lock", "me")
    with lock:
        assert lock.is_acquired
        assert len(lock.contenders()) == 1
    rl, wl = ReadLock(zk, f"{root}/rw"), WriteLock(zk, f"{root}/rw")
    with rl:
        pass
    with wl:
        pass
    counter = Counter(zk, f"{root}/counter")
    counter += 5
    counter -= 2
    assert counter.value == 3
    q = Queue(zk, f"{root}/q")
    q.put(b"one")
    q.put(b"two", priority=10)  # lower numbers come first
    assert q.get() == b"two" and q.get() == b"one" and q.get() is None
    lq = LockingQueue(zk, f"{root}/lq")
    lq.put(b"job")
    assert lq.get(timeout=DEADLINE) == b"job" and lq.consume()
    party = Party(zk, f"{root}/party", "p1")
    party.join()
    assert list(party) == ["p1"]
    party.leave()
    barrier = Barrier(zk, f"{root}/barrier")
    barrier.create()
    assert not barrier.wait(0.05)
    barrier.remove()
    assert barrier.wait(DEADLINE)
    DoubleBarrier(zk, f"{root}/db", 1).enter()
    won = threading.Event()
    election = Election(zk, f"{root}/election", "me")
    t = threading.Thread(target=election.run, args=(won.set,), daemon=True)
    t.start()
    assert won.wait(DEADLINE)
    t.join(DEADLINE)


def test_async_api_and_pipelining(zk: KazooClient, root: str) -> None:
    results = [zk.create_async(f"{root}/n{i:04d}", str(i).encode()) for i in range(200)]
    assert [r.get(timeout=DEADLINE) for r in results] == [f"{root}/n{i:04d}" for i in range(200)]
    gets = [zk.get_async(f"{root}/n{i:04d}") for i in range(200)]
    assert [g.get(timeout=DEADLINE)[0] for g in gets] == [str(i).encode() for i in range(200)]
    assert zk.get_children_async(root).get(timeout=DEADLINE).__len__() == 200


def test_session_states_and_server_commands(any_server: ServerProcess) -> None:
    states: list[str] = []
    client = KazooClient(hosts=any_server.hosts, timeout=10)
    client.add_listener(states.append)
    client.start(timeout=15)
    assert client.state == KazooState.CONNECTED
    assert client.command(b"ruok") == "imok"
    version = client.server_version()
    assert version[:2] == (3, 8)
    client.stop()
    assert states[-1] == KazooState.LOST
    client.close()


def test_path_rules(zk: KazooClient, root: str) -> None:
    assert zk.create(f"{root}/trailing/") == f"{root}/trailing"  # kazoo normalises the path
    with pytest.raises(NoNodeError):
        zk.create(f"{root}/double//slash")
    with pytest.raises(BadArgumentsError):
        zk.create(f"{root}/nul\x00char")
    with pytest.raises(BadArgumentsError):
        zk.create(f"{root}/astral-\U0001F600")  # a surrogate pair in Java's UTF-16
    assert zk.create(f"{root}/bmp-\ud7ff") == f"{root}/bmp-\ud7ff"
