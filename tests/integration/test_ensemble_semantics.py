"""What a zkpy ensemble promises its clients, with real processes on loopback: observers,
global sessions expired by the leader, moved sessions, and the two kinds of sync."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from tests.helpers.ensemble_workload import tree_dump

from zkpy.testing.rawclient import RawClient
from zkpy.testing.servers import (
    ServerProcess,
    cleanup_ensemble,
    ensemble_leader,
    four_letter,
    server_mode,
    start_ensemble,
)
from zkpy.tree.acl import OPEN_ACL_UNSAFE
from zkpy.wire.consts import CreateMode, OpCode
from zkpy.wire.proto import CreateRequest

pytestmark = pytest.mark.timeout(180)


def connect(server: ServerProcess, timeout: float = 10.0) -> KazooClient:
    client = KazooClient(hosts=server.hosts, timeout=timeout)
    client.start(timeout=30)
    return client


@pytest.fixture
def with_observer() -> Iterator[list[ServerProcess]]:
    servers = start_ensemble(["zkpy"] * 4, {"4lw.commands.whitelist": "*"}, observers=(4,))
    yield servers
    cleanup_ensemble(servers)


def test_an_observer_serves_reads_forwards_writes_and_never_votes(with_observer: list[ServerProcess]) -> None:
    servers = with_observer
    observer = servers[3]
    assert server_mode(observer) == "observer"
    leader = ensemble_leader(servers)
    # a participant, never the observer (the highest one unless a slow start let two decide first)
    assert leader in servers[:3]
    mntr = dict(line.split("\t", 1) for line in four_letter(leader.port, "mntr").splitlines())
    assert (mntr["zk_server_state"], mntr["zk_synced_followers"], mntr["zk_synced_observers"]) == ("leader", "2", "1")
    client = connect(observer)
    try:
        client.create("/via-observer", b"o")
        client.sync("/")
        assert client.get("/via-observer")[0] == b"o"
        for s in servers[:3]:
            assert tree_dump(s.port).get("/via-observer", (None,))[0] == b"o"
        # the observer does not count: with two participants down there is no quorum, even
        # though three of four servers run
        for voter in servers[:3]:
            if voter is not leader:
                voter.stop(signal.SIGKILL)
        deadline = time.monotonic() + 30
        while server_mode(leader) == "leader":
            assert time.monotonic() < deadline, "the leader kept leading without a quorum of voters"
            time.sleep(0.1)
    finally:
        client.stop()
        client.close()


@pytest.fixture
def ensemble3() -> Iterator[list[ServerProcess]]:
    servers = start_ensemble(["zkpy"] * 3)
    yield servers
    cleanup_ensemble(servers)


def test_the_leader_expires_a_session_held_on_a_follower_everywhere(ensemble3: list[ServerProcess]) -> None:
    servers = ensemble3
    leader = ensemble_leader(servers)
    follower = next(s for s in servers if s is not leader)
    doomed = RawClient("127.0.0.1", follower.port, timeout_ms=2000)
    session = doomed.session_id
    reply = doomed.call(OpCode.CREATE, CreateRequest("/eph", b"e", list(OPEN_ACL_UNSAFE), CreateMode.EPHEMERAL))
    assert reply.header.err == 0
    watcher = connect(leader)
    try:
        assert watcher.exists("/eph").ephemeralOwner == session
        gone = []
        watcher.exists("/eph", watch=lambda ev: gone.append(ev))
        doomed.sock.close()  # the client dies without closing its session: only expiry removes /eph
        deadline = time.monotonic() + 30
        while not gone:
            assert time.monotonic() < deadline, "the ephemeral of a dead session was never removed"
            time.sleep(0.05)
        for s in servers:
            assert "/eph" not in tree_dump(s.port)
    finally:
        watcher.stop()
        watcher.close()


def test_a_session_moves_to_another_server_with_its_password(ensemble3: list[ServerProcess]) -> None:
    servers = ensemble3
    first = connect(servers[0])
    session_id, password = first.client_id
    first.create("/mine", b"m", ephemeral=True)
    # another client takes the session over on another server (as a reconnect does)
    moved = KazooClient(hosts=servers[1].hosts, client_id=(session_id, password), timeout=10.0)
    moved.start(timeout=30)
    try:
        assert moved.client_id[0] == session_id
        # a new client carries no last zxid, so server 2 may not have applied the create yet: sync
        moved.sync("/mine")
        assert moved.get("/mine")[1].ephemeralOwner == session_id
        # a wrong password is refused: kazoo then starts over with a new session
        bad = KazooClient(hosts=servers[2].hosts, client_id=(session_id, b"\x00" * 16), timeout=10.0)
        bad.start(timeout=30)
        assert bad.client_id[0] != session_id
        bad.stop()
        bad.close()
    finally:
        moved.stop()
        moved.close()
        first.stop()
        first.close()


@pytest.mark.parametrize("quorum_sync", [False, True], ids=["plain-sync", "quorum-sync"])
def test_sync_on_a_leader_cut_off_from_its_quorum(quorum_sync: bool) -> None:
    """A plain sync on a leader that lost its followers (they are paused, so it does not know yet)
    answers at once: that is ZooKeeper's sync. With zkpy.quorumSync the leader first needs a
    quorum to confirm it still leads, so the sync never answers on a deposed leader."""
    servers = start_ensemble(["zkpy"] * 3, {"zkpy.quorumSync": "true" if quorum_sync else "false"})
    try:
        leader = ensemble_leader(servers)
        client = connect(leader, timeout=30.0)
        try:
            client.sync("/")  # with its quorum, either kind answers
            for s in servers:
                if s is not leader:
                    s.proc.send_signal(signal.SIGSTOP)
            try:
                answered = True
                try:
                    client.sync_async("/").get(timeout=1.0)
                except (KazooTimeoutError, KazooException):
                    answered = False
                assert answered is not quorum_sync
            finally:
                for s in servers:
                    if s is not leader:
                        s.proc.send_signal(signal.SIGCONT)
        finally:
            client.stop()
            client.close()
    finally:
        cleanup_ensemble(servers)
