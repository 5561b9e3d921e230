"""`zkpy server start|status|stop|restart` with a pid file in dataDir (as zkServer.sh); the log file
(rotation, JSON lines) is in tests/unit/cli/test_logsetup.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from zkpy.cli.service import PID_FILE, alive
from zkpy.testing.servers import four_letter, free_port

ZKPY = [sys.executable, "-m", "zkpy.cli.main", "server"]


def zkpy(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ZKPY, *args], cwd=cwd, capture_output=True, text=True, timeout=90)


def wait_gone(pid: int, deadline_s: float = 30) -> None:
    deadline = time.monotonic() + deadline_s
    while alive(pid):
        assert time.monotonic() < deadline, f"process {pid} still running"
        time.sleep(0.05)


@pytest.fixture
def zoo_cfg(tmp_path: Path) -> Path:
    cfg = tmp_path / "conf" / "zoo.cfg"
    cfg.parent.mkdir()
    cfg.write_text(f"dataDir={tmp_path}/data\nclientPort={free_port()}\nclientPortAddress=127.0.0.1\n"
                   "tickTime=500\nadmin.enableServer=false\n", encoding="utf-8")
    return cfg


def test_start_status_stop_round_trip(tmp_path: Path, zoo_cfg: Path) -> None:
    pid_file = tmp_path / "data" / PID_FILE
    port = int(next(ln for ln in zoo_cfg.read_text().splitlines() if ln.startswith("clientPort=")).split("=")[1])
    assert zkpy(["status", str(zoo_cfg)], tmp_path).returncode == 1
    started = zkpy(["start", "conf/zoo.cfg", "--log-dir", "logs"], tmp_path)  # relative paths: the daemon runs elsewhere
    assert started.returncode == 0, started.stderr
    assert "STARTED" in started.stdout
    pid = int(pid_file.read_text().strip())
    try:
        assert alive(pid)
        assert four_letter(port, "srvr").startswith("Zookeeper version")
        status = zkpy(["status", str(zoo_cfg)], tmp_path)
        assert (status.returncode, status.stdout.strip()) == (0, "Mode: standalone")
        again = zkpy(["start", str(zoo_cfg)], tmp_path)
        assert again.returncode == 1 and f"already running as process {pid}" in again.stderr
        restarted = zkpy(["restart", str(zoo_cfg), "--log-dir", "logs"], tmp_path)
        assert restarted.returncode == 0, restarted.stderr
        wait_gone(pid)
        new_pid = int(pid_file.read_text().strip())
        assert new_pid != pid and alive(new_pid)
        pid = new_pid
        stopped = zkpy(["stop", str(zoo_cfg)], tmp_path)
        assert stopped.returncode == 0 and f"STOPPED process {pid}" in stopped.stdout
        assert not alive(pid) and not pid_file.exists()
    finally:
        if alive(pid):
            os.kill(pid, 15)
            wait_gone(pid)
    log = (tmp_path / "logs" / "zkpy-server.log").read_text(encoding="utf-8")
    assert "serving: dataDir" in log and "server shut down" in log
    status = zkpy(["status", str(zoo_cfg)], tmp_path)
    assert status.returncode == 1 and "not running" in status.stderr
    assert zkpy(["stop", str(zoo_cfg)], tmp_path).returncode == 1


def test_start_failure_is_reported_and_leaves_no_pid_file(tmp_path: Path, zoo_cfg: Path) -> None:
    cfg = zoo_cfg.read_text(encoding="utf-8") + "snapCount=0\n"
    zoo_cfg.write_text(cfg, encoding="utf-8")
    result = zkpy(["start", str(zoo_cfg)], tmp_path)
    assert result.returncode == 2 and "snapCount must be positive" in result.stderr
    assert not (tmp_path / "data").exists()


def test_plain_server_with_zoo_cfg_still_runs_in_foreground(tmp_path: Path, zoo_cfg: Path) -> None:
    proc = subprocess.Popen([*ZKPY, str(zoo_cfg)], cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        assert any("serving:" in line for line in proc.stderr)  # ... stops reading at the serving line
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert not (tmp_path / "data" / PID_FILE).exists()


def test_status_asks_the_port_of_a_server_started_in_the_foreground(tmp_path: Path, zoo_cfg: Path) -> None:
    """As ``zkServer.sh status``: a server run in the foreground (a terminal, systemd, a container)
    writes no pid file, and is running all the same."""
    proc = subprocess.Popen([*ZKPY, str(zoo_cfg)], cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        assert any("serving:" in line for line in proc.stderr)
        assert not (tmp_path / "data" / PID_FILE).exists()
        status = zkpy(["status", str(zoo_cfg)], tmp_path)
        assert (status.returncode, status.stdout.strip()) == (0, "Mode: standalone"), status.stderr
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    status = zkpy(["status", str(zoo_cfg)], tmp_path)
    assert status.returncode == 1 and "not running" in status.stderr and "does not answer" in status.stderr


def test_debug_shows_the_request_path_and_session_decisions() -> None:
    from zkpy.testing.rawclient import RawClient
    from zkpy.testing.servers import start_zkpy

    server = start_zkpy(args=["--log-level", "DEBUG", "--log-level", "asyncio=INFO"])
    try:
        client = RawClient("127.0.0.1", server.port)
        client.close()
        assert server.stop() == 0
        log = server.log()
    finally:
        server.cleanup()
    assert "DEBUG zkpy.server: connection" in log
    assert f"session 0x{client.session_id:x}, timeout" in log and "negotiated" in log
    assert " closed" in log


def test_a_config_warning_is_printed_once_by_start_and_not_by_status_or_stop(tmp_path: Path) -> None:
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(f"dataDir={tmp_path}/data\nclientPort={free_port()}\ntickTime=500\nadmin.enableServer=false\n",
                   encoding="utf-8")  # no clientPortAddress: the loopback WARN
    note = "clientPortAddress is not set"
    started = zkpy(["start", str(cfg)], tmp_path)
    pid = int((tmp_path / "data" / PID_FILE).read_text().strip())
    try:
        assert started.returncode == 0, started.stderr
        assert started.stderr.count(note) == 1, started.stderr
        status = zkpy(["status", str(cfg)], tmp_path)
        assert status.returncode == 0 and note not in status.stderr, status.stderr
        stopped = zkpy(["stop", str(cfg)], tmp_path)
        assert stopped.returncode == 0 and note not in stopped.stderr, stopped.stderr
    finally:
        if alive(pid):
            os.kill(pid, 15)
            wait_gone(pid)


def test_under_systemd_the_server_says_ready_once_it_listens(tmp_path: Path, zoo_cfg: Path) -> None:
    """Type=notify: READY=1 and the serving line reach $NOTIFY_SOCKET once the client port listens;
    `status` then answers from the port (a unit's server has no pid file)."""
    import socket

    path = tmp_path / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        sock.settimeout(30)
        proc = subprocess.Popen([*ZKPY, str(zoo_cfg)], cwd=tmp_path, stderr=subprocess.DEVNULL,
                                env={**os.environ, "NOTIFY_SOCKET": str(path)})
        try:
            message = sock.recv(4096).decode()
            lines = message.splitlines()
            assert lines[0] == "READY=1" and lines[1].startswith("STATUS=serving: dataDir "), message
            status = zkpy(["status", str(zoo_cfg)], tmp_path)
            assert (status.returncode, status.stdout.strip()) == (0, "Mode: standalone")
        finally:
            proc.terminate()
            assert proc.wait(30) == 0


def test_the_shipped_unit_runs_the_server_in_the_foreground_as_type_notify() -> None:
    import configparser
    import shlex

    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(Path(__file__).resolve().parents[2] / "deploy" / "systemd" / "zkpy.service")
    service = unit["Service"]
    assert service["Type"] == "notify" and service["NotifyAccess"] == "main"
    command = shlex.split(service["ExecStart"])
    assert command[0].endswith("/zkpy") and command[1] == "server" and command[2] not in ("start", "stop")
    assert set(service["RestartPreventExitStatus"].split()) == {"1", "2", "4"}
