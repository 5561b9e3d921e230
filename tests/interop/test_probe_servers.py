"""``zkpy probe live|ready`` against real servers, zkpy and Apache ZooKeeper alike: the documented
exit status for a server serving, a member without a quorum, and no server at all; and the
AdminServer's ``/live`` and ``/ready`` for httpGet probes."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from tests.conftest import require_apache

from zkpy.testing.servers import (
    ServerProcess,
    cleanup_ensemble,
    free_port,
    free_ports,
    start_apache,
    start_ensemble,
    start_zkpy,
)

PROBE = [sys.executable, "-m", "zkpy.cli.main", "probe"]


def probe(kind: str, port: int, host: str = "127.0.0.1") -> tuple[int, str]:
    result = subprocess.run([*PROBE, kind, "--host", host, "--port", str(port), "--timeout", "2"],
                            capture_output=True, text=True, timeout=30)
    return result.returncode, (result.stdout + result.stderr).strip()


def test_no_server_is_neither_live_nor_ready() -> None:
    port = free_port()
    assert probe("live", port) == (3, f"127.0.0.1:{port}: no answer")
    assert probe("ready", port) == (3, f"127.0.0.1:{port}: no answer")


@pytest.mark.parametrize("kind", ["zkpy", "apache"])
def test_a_standalone_server_is_live_and_ready(kind: str) -> None:
    if kind == "apache":
        require_apache()
    server: ServerProcess = (start_zkpy if kind == "zkpy" else start_apache)({"4lw.commands.whitelist": None})
    try:
        assert probe("live", server.port) == (0, f"127.0.0.1:{server.port}: live")
        assert probe("ready", server.port) == (0, f"127.0.0.1:{server.port}: ready: standalone")
    finally:
        server.cleanup()


@pytest.mark.parametrize("kind", ["zkpy", "apache"])
def test_a_member_that_lost_its_quorum_is_live_and_not_ready(kind: str) -> None:
    if kind == "apache":
        require_apache()
    servers = start_ensemble([kind] * 3)
    try:
        codes = {probe("ready", s.port)[0] for s in servers}
        assert codes == {0}
        servers[1].stop()
        servers[2].stop()
        port = servers[0].port
        assert probe("live", port)[0] == 0
        deadline_codes = []
        for _ in range(100):  # it notices the lost quorum within syncLimit; the probe says so
            code, line = probe("ready", port)
            deadline_codes.append(code)
            if code == 1:
                break
        assert deadline_codes[-1] == 1, deadline_codes
        assert line == f"127.0.0.1:{port}: not ready: not serving (starting, or no quorum)"
    finally:
        cleanup_ensemble(servers)


def http_status(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_admin_server_answers_httpget_probes() -> None:
    """zkpy only (ZooKeeper 3.8's AdminServer has no such path): /live is 200 while the server
    answers, /ready 200 while it serves and 503 once its quorum is gone."""
    ports = free_ports(3)
    servers = start_ensemble(["zkpy"] * 3, member_settings={
        i + 1: {"admin.enableServer": "true", "admin.serverPort": str(p)} for i, p in enumerate(ports)})
    try:
        admin = ports[0]
        assert http_status(admin, "/live") == (200, "live\n")
        status, text = http_status(admin, "/ready")
        assert status == 200 and text in ("ready: leader\n", "ready: follower\n"), text
        servers[1].stop()
        servers[2].stop()
        deadline = time.monotonic() + 30
        while (answer := http_status(admin, "/ready"))[0] == 200:
            assert time.monotonic() < deadline, answer
            time.sleep(0.1)
        assert answer == (503, "not ready: not serving (starting, or no quorum)\n")
        assert http_status(admin, "/live") == (200, "live\n")
    finally:
        cleanup_ensemble(servers)
