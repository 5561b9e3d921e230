"""``zkpy ensemble`` as an operator runs it: it prints a connect string that kazoo can use, every
member serves what was written through it, ``status`` sees the roles, SIGTERM stops every child,
and a second run on the same directory serves the same data on the same ports."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

DEADLINE = 90.0


class Supervisor:
    """A ``zkpy ensemble`` process: its first stdout line, its stderr, the pids it records."""

    def __init__(self, directory: Path, *args: str) -> None:
        self.directory = directory
        self.stderr_path = directory.parent / f"{directory.name}.stderr"
        self.stderr = open(self.stderr_path, "ab")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen([sys.executable, "-m", "zkpy.cli.main", "ensemble", "--dir", str(directory),
                                      "--ready-timeout", "60", *args],
                                     stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put("")

    def connect_string(self) -> str:
        try:
            line = self.lines.get(timeout=DEADLINE)
        except queue.Empty:
            line = ""
        assert line.strip(), f"no connect string (exit {self.proc.poll()}):\n{self.stderr_path.read_text()[-4000:]}"
        return line.strip()

    def pids(self) -> list[int]:
        doc = json.loads((self.directory / "ensemble.json").read_text())
        return [m["pid"] for m in doc["members"] if m["pid"] is not None]

    def stop(self) -> int:
        recorded = self.pids()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(DEADLINE)
        for pid in recorded:  # the members run in sessions of their own: never leave one behind
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        self.stderr.close()
        return code


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def status(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zkpy.cli.main", "ensemble", "status", "--dir", str(directory)],
                          capture_output=True, text=True, timeout=60)


def roles(result: subprocess.CompletedProcess[str]) -> list[str]:
    return sorted(line.split()[2] for line in result.stdout.splitlines()[1:-1])


def kazoo(hosts: str) -> KazooClient:
    zk = KazooClient(hosts=hosts, timeout=10.0)
    zk.start(timeout=30.0)
    return zk


@pytest.fixture
def directory(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "ens"


def test_one_server_ensemble_serves_stops_and_comes_back_with_its_data(directory: Path) -> None:
    first = Supervisor(directory, "--size", "1", "--tick-ms", "200")
    try:
        hosts = first.connect_string()
        assert hosts.startswith("127.0.0.1:") and "," not in hosts
        zk = kazoo(hosts)
        try:
            zk.create("/kept", b"across runs")
        finally:
            zk.stop()
            zk.close()
        result = status(directory)
        assert result.returncode == 0, result.stdout + result.stderr
        assert roles(result) == ["standalone"]
        pids = first.pids()
        assert len(pids) == 1 and alive(pids[0])
    finally:
        code = first.stop()
    assert code == 0, first.stderr_path.read_text()
    assert not alive(pids[0])
    assert first.pids() == []
    assert status(directory).returncode == 1

    again = Supervisor(directory)  # no --size: the recorded ensemble
    try:
        assert again.connect_string() == hosts
        zk = kazoo(hosts)
        try:
            assert zk.get("/kept")[0] == b"across runs"
        finally:
            zk.stop()
            zk.close()
    finally:
        assert again.stop() == 0
    log = (directory / "server1" / "server.log").read_text()
    assert log.count("--- zkpy ensemble: starting server.1") == 2


def test_three_server_ensemble_replicates_and_stops_on_sigterm(directory: Path) -> None:
    supervisor = Supervisor(directory, "--size", "3", "--tick-ms", "200")
    pids: list[int] = []
    try:
        hosts = supervisor.connect_string()
        members = hosts.split(",")
        assert len(members) == 3 and all(m.startswith("127.0.0.1:") for m in members)
        pids = supervisor.pids()
        assert len(pids) == 3 and all(alive(p) for p in pids)
        zk = kazoo(hosts)
        try:
            zk.create("/through-the-ensemble", b"replicated")
        finally:
            zk.stop()
            zk.close()
        for member in members:
            zk = kazoo(member)
            try:
                zk.sync("/through-the-ensemble")
                assert zk.get("/through-the-ensemble")[0] == b"replicated", member
            finally:
                zk.stop()
                zk.close()
        result = status(directory)
        assert result.returncode == 0, result.stdout + result.stderr
        assert roles(result) == ["follower", "follower", "leader"]
    finally:
        code = supervisor.stop()
    assert code == 0, supervisor.stderr_path.read_text()
    assert pids and not any(alive(p) for p in pids)
