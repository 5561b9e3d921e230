"""``zkpy ensemble status --hosts`` reads a real Apache ZooKeeper 3.8 ensemble: one leader and two
followers with their sids, zxids and node counts; members killed with SIGKILL are reported down,
and without a quorum the command exits 1."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from tests.conftest import require_apache

from zkpy.testing.servers import (
    ServerProcess,
    cleanup_ensemble,
    ensemble_hosts,
    server_zxid,
    start_apache_ensemble,
)

pytestmark = pytest.mark.interop


@pytest.fixture
def ensemble() -> Iterator[list[ServerProcess]]:
    require_apache()
    servers = start_apache_ensemble(3)
    yield servers
    cleanup_ensemble(servers)


def status(hosts: str) -> tuple[int, dict[str, list[str]], str]:
    """(exit status, the row of each address, the quorum line)."""
    result = subprocess.run([sys.executable, "-m", "zkpy.cli.main", "ensemble", "status", "--hosts", hosts],
                            capture_output=True, text=True, timeout=60)
    lines = result.stdout.splitlines()
    assert lines and lines[0].split() == ["sid", "address", "role", "zxid", "epoch", "sessions", "conns", "znodes"], result
    rows = {cells[1]: cells for cells in (line.split() for line in lines[1:-1])}
    return result.returncode, rows, lines[-1]


def write_and_wait_applied(servers: list[ServerProcess], deadline_s: float = 20.0) -> int:
    """Create a znode and wait until every member has applied it; its zxid."""
    zk = KazooClient(hosts=ensemble_hosts(servers), timeout=8.0)
    zk.start(timeout=deadline_s)
    try:
        _, stat = zk.create("/status-probe", b"", include_data=True)
    finally:
        zk.stop()
        zk.close()
    deadline = time.monotonic() + deadline_s
    while not all((server_zxid(s) or 0) >= stat.czxid for s in servers):
        assert time.monotonic() < deadline, "a member did not apply the write"
        time.sleep(0.05)
    return int(stat.czxid)


def test_status_of_a_serving_apache_ensemble(ensemble: list[ServerProcess]) -> None:
    written = write_and_wait_applied(ensemble)
    code, rows, verdict = status(ensemble_hosts(ensemble))
    assert code == 0, rows
    assert verdict == "quorum: 3 of 3 voting servers serving (a quorum is 2)"
    assert sorted(rows[s.hosts][2] for s in ensemble) == ["follower", "follower", "leader"]
    for s in ensemble:
        sid, _, _, zxid, epoch, sessions, conns, znodes = rows[s.hosts]
        assert sid == s.extra["myid"]
        assert int(zxid, 16) >= written and int(zxid, 16) >> 32 == int(epoch) == written >> 32 >= 1
        assert int(conns) >= 1 and int(znodes) >= 5  # "/", "/zookeeper" and its children, "/status-probe"
        assert sessions == "-" or int(sessions) >= 0  # mntr only where the 4lw whitelist allows it


def test_status_reports_killed_members_down_and_no_quorum(ensemble: list[ServerProcess]) -> None:
    victims, survivor = ensemble[:2], ensemble[2]
    for s in victims:
        s.stop(signal.SIGKILL)
    code, rows, verdict = status(ensemble_hosts(ensemble))
    assert code == 1, rows
    assert verdict.startswith("no quorum: ")
    for s in victims:
        assert rows[s.hosts][2:] == ["down", "-", "-", "-", "-", "-"]
        assert rows[s.hosts][0] == "-"  # a member that does not answer cannot say its sid
    assert rows[survivor.hosts][2] in ("follower", "leader", "not")  # "not serving" once it notices
