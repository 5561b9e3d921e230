"""Client (blocking) against zkpy and Apache ZooKeeper: the AsyncClient API as blocking calls,
every callback on one dispatch thread in the order the AsyncClient produced them, and a close
that joins its threads. Nothing sleeps: tests wait on events with deadlines."""

from __future__ import annotations

import concurrent.futures
import threading
import uuid
from collections.abc import Iterator

import pytest

pytest.importorskip("zkpy.client.aio")

from zkpy import Client, ClientState, RetryPolicy, WatchedEvent  # noqa: E402
from zkpy.errors import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError  # noqa: E402
from zkpy.testing.servers import ServerProcess  # noqa: E402
from zkpy.wire.consts import EventType  # noqa: E402

WAIT_S = 10.0


@pytest.fixture
def base(any_server: ServerProcess) -> Iterator[tuple[str, str]]:
    """(hosts, a fresh base path) on the server; the subtree is removed afterwards."""
    path = f"/sync-{uuid.uuid4().hex[:10]}"
    yield any_server.hosts, path
    with Client(any_server.hosts) as zk:
        zk.delete(path, recursive=True)


def wait(event: threading.Event, what: str) -> None:
    assert event.wait(WAIT_S), f"timed out waiting for {what}"


def test_basic_operations_block_and_return_values(base: tuple[str, str]) -> None:
    hosts, root = base
    with Client(hosts) as zk:
        assert zk.state is ClientState.CONNECTED
        assert zk.session_id != 0
        assert zk.create(root, b"top") == root
        path, stat = zk.create(f"{root}/a/b", b"v1", make_parents=True, include_stat=True)
        assert path == f"{root}/a/b" and stat.version == 0
        assert zk.get(f"{root}/a/b")[0] == b"v1"
        stat = zk.set(f"{root}/a/b", b"v2", version=0)
        assert stat.version == 1
        with pytest.raises(BadVersionError):
            zk.set(f"{root}/a/b", b"v3", version=0)
        with pytest.raises(NodeExistsError):
            zk.create(root)
        with pytest.raises(NoNodeError):
            zk.get(f"{root}/missing")
        assert zk.exists(f"{root}/missing") is None
        assert zk.exists(root) is not None
        assert zk.get_children(root) == ["a"]
        children, stat = zk.get_children(root, include_stat=True)
        assert children == ["a"] and stat.numChildren == 1
        zk.ensure_path(f"{root}/x/y/z")
        assert zk.get_all_children_number(root) == 5
        seq = zk.create(f"{root}/q-", sequence=True, ephemeral=True)
        assert seq.startswith(f"{root}/q-") and len(seq) == len(f"{root}/q-") + 10
        assert seq in zk.get_ephemerals(root)
        acl, _ = zk.get_acl(root)
        assert acl and acl[0].id.scheme == "world"
        assert zk.sync(root) == root
        results = zk.multi_read([("get", f"{root}/a/b"), ("children", f"{root}/x"), ("get", f"{root}/nope")])
        assert results[0][0] == b"v2" and results[1] == ["y"] and isinstance(results[2], NoNodeError)
        assert zk.last_zxid > 0
        with pytest.raises(NotEmptyError):
            zk.delete(f"{root}/x")
        zk.delete(f"{root}/x", recursive=True)
        assert zk.exists(f"{root}/x") is None


def test_transaction_commit_blocks_and_reports_each_op(base: tuple[str, str]) -> None:
    hosts, root = base
    with Client(hosts) as zk:
        zk.create(root)
        tx = zk.transaction()
        tx.create(f"{root}/t1", b"1").set_data(f"{root}/t1", b"2").check(f"{root}/t1", 1)
        results = tx.commit()
        assert results[0] == f"{root}/t1" and results[1].version == 1 and results[2] is True
        assert zk.get(f"{root}/t1")[0] == b"2"
        failed = zk.transaction().create(f"{root}/t2").delete(f"{root}/missing").commit()
        assert isinstance(failed[1], NoNodeError)
        assert zk.exists(f"{root}/t2") is None
        future = zk.transaction().delete(f"{root}/t1").commit_async()
        assert future.result(WAIT_S) == [True]
        with zk.transaction() as tx:
            tx.create(f"{root}/t3")
        assert zk.exists(f"{root}/t3") is not None


def test_with_block_starts_and_closes(base: tuple[str, str]) -> None:
    hosts, root = base
    with Client(hosts) as zk:
        zk.create(root)
        zk.create(f"{root}/eph", ephemeral=True)
        threads = (zk.loop_thread, zk.dispatch_thread)
        assert all(t.is_alive() for t in threads)
    assert zk.state is ClientState.CLOSED
    assert not any(t.is_alive() for t in threads)
    with Client(hosts) as other:
        assert other.exists(f"{root}/eph") is None, "closing the session removes its ephemerals"


def test_close_is_idempotent_and_joins_threads(any_server: ServerProcess) -> None:
    zk = Client(any_server.hosts)
    zk.start()
    loop_thread, dispatch_thread = zk.loop_thread, zk.dispatch_thread
    zk.close()
    assert not loop_thread.is_alive() and not dispatch_thread.is_alive()
    zk.close()
    zk.close()
    assert zk.closed and zk.state is ClientState.CLOSED


def test_close_without_start_joins_threads(any_server: ServerProcess) -> None:
    zk = Client(any_server.hosts)
    zk.close()
    assert not zk.loop_thread.is_alive() and not zk.dispatch_thread.is_alive()


def test_a_watch_callback_may_call_the_client_synchronously(base: tuple[str, str]) -> None:
    hosts, root = base
    with Client(hosts) as zk:
        zk.create(root, b"v0")
        seen: list[tuple[WatchedEvent, bytes, str]] = []
        done = threading.Event()

        def on_change(event: WatchedEvent) -> None:
            data, _ = zk.get(root)  # blocks the dispatch thread only; the loop keeps running
            children = zk.get_children(root)
            seen.append((event, data, threading.current_thread().name + f"/{len(children)}"))
            done.set()

        zk.get(root, watch=on_change)
        zk.set(root, b"v1")
        wait(done, "the watch callback")
        event, data, thread = seen[0]
        assert event.type is EventType.NODE_DATA_CHANGED and event.path == root
        assert data == b"v1"
        assert thread == zk.dispatch_thread.name + "/0"


def test_a_listener_may_close_the_client(any_server: ServerProcess) -> None:
    zk = Client(any_server.hosts)
    states: list[tuple[ClientState, str]] = []
    closed = threading.Event()

    def listener(state: ClientState) -> None:
        states.append((state, threading.current_thread().name))
        if state is ClientState.CONNECTED:
            zk.close()  # from the dispatch thread: must not deadlock on joining itself
            closed.set()

    zk.add_listener(listener)
    zk.start()
    wait(closed, "close() from the listener")
    zk.dispatch_thread.join(WAIT_S)
    assert not zk.dispatch_thread.is_alive() and not zk.loop_thread.is_alive()
    assert [s for s, _ in states] == [ClientState.CONNECTED, ClientState.CLOSED]
    assert {name for _, name in states} == {zk.dispatch_thread.name}


def test_async_completions_and_watch_callbacks_run_in_order_on_one_thread(base: tuple[str, str]) -> None:
    """The server sends a watch event before the reply of the write that caused it; the
    dispatch thread runs watch callbacks and future callbacks in exactly that order."""
    hosts, root = base
    log: list[tuple[str, str]] = []
    finished = threading.Event()
    rounds = 20

    with Client(hosts) as zk:
        zk.create(root, b"0")
        states: list[tuple[ClientState, str]] = []
        zk.add_listener(lambda s: states.append((s, threading.current_thread().name)))

        def record(label: str) -> None:
            log.append((label, threading.current_thread().name))

        def watcher(event: WatchedEvent) -> None:
            record(f"watch:{event.type.name}")

        futures: list[concurrent.futures.Future[object]] = []
        for i in range(rounds):
            f1 = zk.get_async(root, watch=watcher)
            f1.add_done_callback(lambda f, i=i: record(f"get:{i}"))
            f2 = zk.set_async(root, str(i).encode())
            f2.add_done_callback(lambda f, i=i: record(f"set:{i}"))
            f3 = zk.exists_async(root)
            f3.add_done_callback(lambda f, i=i: record(f"exists:{i}"))
            futures += [f1, f2, f3]  # type: ignore[list-item]
        last = zk.sync_async(root)
        last.add_done_callback(lambda f: (record("sync"), finished.set()))
        wait(finished, "the last completion")
        for f in futures:
            assert f.result(WAIT_S) is not None

        expected: list[str] = []
        for i in range(rounds):
            expected += [f"get:{i}", "watch:NODE_DATA_CHANGED", f"set:{i}", f"exists:{i}"]
        expected.append("sync")
        assert [label for label, _ in log] == expected
        assert {name for _, name in log} == {zk.dispatch_thread.name}
        assert zk.dispatch_thread.name != zk.loop_thread.name
        zk.delete(root)
    assert [s for s, _ in states] == [ClientState.CLOSED]
    assert {name for _, name in states} == {zk.dispatch_thread.name}


def test_async_future_errors_and_late_callbacks_stay_on_the_dispatch_thread(base: tuple[str, str]) -> None:
    hosts, root = base
    with Client(hosts) as zk:
        future = zk.get_async(f"{root}/missing")
        with pytest.raises(NoNodeError):
            future.result(WAIT_S)
        ran = threading.Event()
        names: list[str] = []
        future.add_done_callback(lambda f: (names.append(threading.current_thread().name), ran.set()))
        wait(ran, "a callback added after completion")
        assert names == [zk.dispatch_thread.name]


def test_waiting_on_an_async_future_inside_a_callback_is_refused(base: tuple[str, str]) -> None:
    hosts, root = base
    with Client(hosts) as zk:
        zk.create(root)
        outcome: list[BaseException | object] = []
        done = threading.Event()

        def watcher(event: WatchedEvent) -> None:
            try:
                outcome.append(zk.get_async(root).result(WAIT_S))
            except RuntimeError as exc:
                outcome.append(exc)
            done.set()

        zk.exists(root, watch=watcher)
        zk.set(root, b"x")
        wait(done, "the watch callback")
        assert isinstance(outcome[0], RuntimeError)


def test_remove_watches_matches_the_wrapped_callback(base: tuple[str, str]) -> None:
    hosts, root = base
    with Client(hosts) as zk:
        zk.create(root)
        events: list[EventType] = []
        removed = threading.Event()

        def watcher(event: WatchedEvent) -> None:
            events.append(event.type)
            if event.type is EventType.PERSISTENT_WATCH_REMOVED:
                removed.set()

        zk.add_watch(root, watcher)
        zk.remove_watches(root, callback=watcher)
        wait(removed, "the removal event")
        assert events == [EventType.PERSISTENT_WATCH_REMOVED]


def test_watch_iterator_yields_persistent_watch_events(base: tuple[str, str]) -> None:
    hosts, root = base
    with Client(hosts) as zk:
        zk.create(root)
        events = zk.watch(root, recursive=True)
        zk.create(f"{root}/c")
        zk.set(f"{root}/c", b"1")
        first, second = next(events), next(events)
        assert (first.type, first.path) == (EventType.NODE_CREATED, f"{root}/c")
        assert (second.type, second.path) == (EventType.NODE_DATA_CHANGED, f"{root}/c")
        zk.remove_watches(root)  # removing the watch ends the iteration
        assert list(events) == []


def test_calls_after_close_fail_with_connection_closed(any_server: ServerProcess) -> None:
    """A ConnectionLoss (handlers of that still catch it) that no retry policy retries."""
    from zkpy.errors import ConnectionClosedError, ConnectionLoss

    zk = Client(any_server.hosts)
    zk.start()
    zk.close()
    with pytest.raises(ConnectionClosedError):
        zk.get("/")
    with pytest.raises(ConnectionLoss):
        zk.get_async("/")
    calls = []

    def get_root() -> object:
        calls.append(1)
        return zk.get("/")

    with pytest.raises(ConnectionClosedError):
        RetryPolicy(max_tries=5, delay=0).run_sync(get_root)
    assert len(calls) == 1, "a closed client is not retried"


def test_retry_policy_runs_blocking_calls(base: tuple[str, str]) -> None:
    hosts, root = base
    with Client(hosts) as zk:
        policy = RetryPolicy(max_tries=3)
        assert policy.run_sync(zk.create, root, b"r") == root
        with pytest.raises(NodeExistsError):
            policy.run_sync(zk.create, root)


def test_start_fails_with_connection_loss_when_no_server_answers() -> None:
    from zkpy.errors import ConnectionLoss
    from zkpy.testing.servers import free_port

    zk = Client(f"127.0.0.1:{free_port()}", connect_timeout=0.2)
    with pytest.raises(ConnectionLoss):
        zk.start(timeout=0.5)
    zk.close()
    assert not zk.loop_thread.is_alive() and not zk.dispatch_thread.is_alive()
