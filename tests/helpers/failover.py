"""Fail-over under load, for ensembles of any mix of zkpy and Apache ZooKeeper members: writes made
through every member are visible on all; killing the leader elects another with nothing
acknowledged lost; the killed member comes back as a follower, in sync (by DIFF or SNAP)."""

from __future__ import annotations

import signal
import time

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
    ensemble_hosts,
    ensemble_leader,
    restart_ensemble_member,
    server_mode,
    wait_ensemble_serving,
)


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


def replicate_and_fail_over(servers: list[ServerProcess], max_failovers: int = 4) -> set[str]:
    """Two writers load the ensemble while its leader is killed (and restarted as a follower) at least
    once and until every kind of member present has led, checking replication under every leader and,
    at the end, that every member holds the same tree with every acknowledged write. The kinds that led."""
    kinds = {s.kind for s in servers}
    writers = [Writer(f"w{i}", ensemble_hosts(servers)) for i in range(2)]
    for w in writers:
        w.start_session()
        w.start()
    leader = ensemble_leader(servers)
    led = {leader.kind}
    write_through_each(servers, f"term0-{leader.kind}")
    for term in range(1, max_failovers + 1):
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
        if led == kinds:
            break
    for w in writers:
        w.wait_for_writes(10)
        w.stop()
    tree = wait_same_trees(servers)
    check_acknowledged(writers, tree)
    for w in writers:
        w.client.stop()
        w.client.close()
    return led
