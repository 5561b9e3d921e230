"""Mixed ensembles: zkpy and Apache ZooKeeper 3.8 servers in one ensemble, speaking 3.8's
election and Zab protocols to each other, with the leader on each kind in turn.

Writes made through every server are visible on all; killing the leader elects one of the other
kind with nothing acknowledged lost, and the killed server comes back in sync (by DIFF or SNAP).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import pytest
from kazoo.exceptions import NodeExistsError
from tests.helpers.ensemble_workload import (
    Writer,
    check_acknowledged,
    patient_client,
    tree_dump,
    wait_same_trees,
)

from zkpy.testing.servers import (
    ServerProcess,
    apache_available,
    cleanup_ensemble,
    ensemble_hosts,
    ensemble_leader,
    restart_ensemble_member,
    server_mode,
    start_ensemble,
    wait_ensemble_serving,
)

pytestmark = [pytest.mark.skipif(not apache_available(), reason="Apache ZooKeeper 3.8 is not installed"),
              pytest.mark.timeout(240)]


@pytest.fixture(params=[("zkpy", "zkpy", "apache"), ("apache", "apache", "zkpy")],
                ids=["2zkpy+1apache", "1zkpy+2apache"])
def mixed(request: pytest.FixtureRequest) -> Iterator[list[ServerProcess]]:
    servers = start_ensemble(list(request.param))
    yield servers
    cleanup_ensemble(servers)


def write_through_each(servers: list[ServerProcess], tag: str) -> dict[str, bytes]:
    """One node created through each running server; each is then read back from every server."""
    written = {}
    for s in servers:
        if s.proc.poll() is not None:
            continue
        client = patient_client(s.hosts)
        try:
            path = f"/{tag}-via-{s.kind}-{s.extra['myid']}"
            try:
                client.retry(client.create, path, path.encode())
            except NodeExistsError:
                pass  # an attempt whose answer was lost went through; the reads below check it
            written[path] = path.encode()
        finally:
            client.stop()
            client.close()
    for s in servers:
        if s.proc.poll() is None:
            tree = tree_dump(s.port)
            for path, value in written.items():
                assert tree.get(path, (None,))[0] == value, f"{path} not visible on server {s.extra['myid']} ({s.kind})"
    return written


def wait_leader(servers: list[ServerProcess], not_this: ServerProcess | None = None) -> ServerProcess:
    deadline = time.monotonic() + 60
    while True:
        for s in servers:
            if s is not not_this and s.proc.poll() is None and server_mode(s) == "leader":
                return s
        assert time.monotonic() < deadline, "no leader elected"
        time.sleep(0.05)


def test_mixed_ensemble_replicates_and_survives_the_leader(mixed: list[ServerProcess]) -> None:
    """Kill the leader until each kind has led (the first leader depends on which servers came up
    first; the next one on sids and zxids), checking replication under every leader."""
    servers = mixed
    writers = [Writer(f"w{i}", ensemble_hosts(servers)) for i in range(2)]
    for w in writers:
        w.start_session()
        w.start()
    leader = ensemble_leader(servers)
    led = {leader.kind}
    write_through_each(servers, f"term0-{leader.kind}")
    for term in range(1, 5):
        for w in writers:
            w.wait_for_writes(20)
        leader.stop(signal.SIGKILL)
        new = wait_leader(servers, not_this=leader)
        led.add(new.kind)
        for w in writers:
            w.wait_for_writes(20)
        write_through_each(servers, f"term{term}-{new.kind}")
        restart_ensemble_member(leader)
        wait_ensemble_serving(servers)
        assert server_mode(leader) == "follower"
        leader = new
        if led == {"zkpy", "apache"}:
            break
    assert led == {"zkpy", "apache"}, f"only {led} led"
    for w in writers:
        w.wait_for_writes(10)
        w.stop()
    tree = wait_same_trees(servers)
    check_acknowledged(writers, tree)
    for w in writers:
        w.client.stop()
        w.client.close()
