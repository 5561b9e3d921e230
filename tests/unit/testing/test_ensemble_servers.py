"""start_apache_ensemble: three Apache ZooKeeper 3.8 servers that form a quorum, survive the
loss of one, and let a kazoo session move between them."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState
from tests.conftest import require_apache

from zkpy.testing.servers import (
    ServerProcess,
    cleanup_ensemble,
    ensemble_hosts,
    ensemble_leader,
    server_mode,
    server_of_session,
    start_apache_ensemble,
    wait_ensemble_serving,
)

DEADLINE = 20.0

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def ensemble() -> Iterator[list[ServerProcess]]:
    require_apache()
    servers = start_apache_ensemble(3)
    yield servers
    cleanup_ensemble(servers)


def test_three_servers_one_leader(ensemble: list[ServerProcess]) -> None:
    modes = sorted(server_mode(s) or "?" for s in ensemble)
    assert modes == ["follower", "follower", "leader"]
    assert len({s.port for s in ensemble}) == 3
    assert [s.extra["myid"] for s in ensemble] == ["1", "2", "3"]
    assert ensemble_leader(ensemble) in ensemble
    assert ensemble_hosts(ensemble).count(",") == 2


def test_kazoo_session_moves_when_its_server_is_killed(ensemble: list[ServerProcess]) -> None:
    zk = KazooClient(hosts=ensemble_hosts(ensemble), timeout=8.0,
                     connection_retry={"max_tries": -1, "delay": 0.05, "max_delay": 0.5})
    zk.start(timeout=DEADLINE)
    reconnected = threading.Event()
    states: list[KazooState] = []

    def listener(state: KazooState) -> None:
        states.append(state)
        if state == KazooState.CONNECTED:
            reconnected.set()

    zk.add_listener(listener)
    try:
        session_id = zk.client_id[0]
        path = zk.create("/ensemble-kazoo-", b"", ephemeral=True, sequence=True)
        deadline = time.monotonic() + DEADLINE
        while (victim := server_of_session(ensemble, session_id)) is None:
            assert time.monotonic() < deadline, "no server lists the session in cons"
            time.sleep(0.05)
        survivors = [s for s in ensemble if s is not victim]
        victim.stop(signal.SIGKILL)
        assert reconnected.wait(DEADLINE), f"kazoo did not reconnect: {states}"
        assert zk.client_id[0] == session_id
        assert zk.exists(path) is not None
        assert server_of_session(survivors, session_id) is not None
        checker = KazooClient(hosts=ensemble_hosts(survivors), timeout=8.0)
        checker.start(timeout=DEADLINE)
        try:
            stat = checker.exists(path)
            assert stat is not None and stat.ephemeralOwner == session_id
        finally:
            checker.stop()
            checker.close()
        assert KazooState.LOST not in states
    finally:
        zk.stop()
        zk.close()
    wait_ensemble_serving(ensemble)  # the two survivors still form a quorum
