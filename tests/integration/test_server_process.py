"""`zkpy server` as an operator runs it: config errors, signals, connection limits."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from zkpy.testing.rawclient import RawClient
from zkpy.testing.servers import start_zkpy
from zkpy.wire.consts import OpCode
from zkpy.wire.proto import ACL, CreateRequest, ExistsRequest, Id

OPEN = [ACL(31, Id("world", "anyone"))]


def run_server(args: list[str], cwd: Path, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zkpy.cli.main", "server", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(("line", "key"), [
    ("tickTime=fast", "tickTime"),
    ("clientPort=-3", "clientPort"),
    ("maxSessionTimeout=1000", "minSessionTimeout"),
    ("4lw.commands.whitelist=ruok,rmrf", "4lw.commands.whitelist"),
    ("extendedTypesEnabled=maybe", "extendedTypesEnabled"),
    ("skipACL=yes", "skipACL"),
    ("group.1=1:2:3", "group.1"),
    ("forceSync=maybe", "forceSync"),
    ("snapCount=0", "snapCount"),
    ("preAllocSize=big", "preAllocSize"),
    ("autopurge.purgeInterval=-1", "autopurge.purgeInterval"),
    ("electionAlg=1", "electionAlg"),
    ("server.2=127.0.0.1:2888:x", "server.2"),
])
def test_bad_config_exits_2_naming_key_and_file(tmp_path: Path, line: str, key: str) -> None:
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(f"dataDir={tmp_path}/data\nclientPort=0\n{line}\n", encoding="utf-8")
    result = run_server([str(cfg)], tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert key in lines[0] and str(cfg) in lines[0]


def test_missing_config_file_exits_2(tmp_path: Path) -> None:
    result = run_server([str(tmp_path / "nope.cfg")], tmp_path)
    assert result.returncode == 2 and "nope.cfg" in result.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_shut_down_cleanly(sig: int) -> None:
    server = start_zkpy()
    try:
        client = RawClient("127.0.0.1", server.port)
        assert server.stop(sig) == 0
        assert client.closed_by_server()
        assert "server shut down" in server.log()
    finally:
        server.cleanup()


def test_max_client_cnxns_per_ip() -> None:
    server = start_zkpy({"maxClientCnxns": "3"})
    try:
        clients = [RawClient("127.0.0.1", server.port) for _ in range(3)]
        with pytest.raises((ConnectionError, OSError)):
            RawClient("127.0.0.1", server.port, deadline_s=5)
        assert "Too many connections from 127.0.0.1 - max is 3" in server.log()
        clients[0].close()
        clients[0].sock.close()
        # a slot frees up once a connection goes away
        for _ in range(50):
            try:
                RawClient("127.0.0.1", server.port, deadline_s=5).close()
                break
            except (ConnectionError, OSError):
                continue
        else:
            pytest.fail("no connection accepted after one was closed")
    finally:
        server.cleanup()


def test_listens_on_loopback_by_default(tmp_path: Path) -> None:
    from zkpy.config import ServerConfig

    assert ServerConfig().client_port_address == "127.0.0.1"
    server = start_zkpy()
    try:
        out = subprocess.run(["ss", "-ltnH", f"sport = :{server.port}"], capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip():
            assert "127.0.0.1:" in out.stdout
        with socket.create_connection(("127.0.0.1", server.port), timeout=5):
            pass
    finally:
        server.cleanup()


def test_force_sync_no_still_keeps_writes_across_a_clean_restart() -> None:
    settings = {"forceSync": "no"}
    server = start_zkpy(settings)
    try:
        client = RawClient("127.0.0.1", server.port)
        assert client.call(OpCode.CREATE, CreateRequest("/kept", b"v", OPEN, 0)).header.err == 0
        client.close()
        assert server.stop() == 0
        server = start_zkpy(settings, workdir=server.workdir, port=server.port)
        client = RawClient("127.0.0.1", server.port)
        assert client.call(OpCode.EXISTS, ExistsRequest("/kept", False)).header.err == 0
        client.close()
    finally:
        server.cleanup()


def test_an_ensemble_zoo_cfg_without_sync_limit_exits_2_naming_the_key(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "myid").write_text("2\n", encoding="ascii")
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(f"dataDir={data}\nclientPort=0\ninitLimit=10\n"
                   "server.1=127.0.0.1:12888:13888\nserver.2=127.0.0.1:22888:23888\n"
                   "server.3=127.0.0.1:32888:33888:observer\n", encoding="utf-8")
    result = run_server([str(cfg)], tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines == [f"zkpy: {cfg}: syncLimit is not set; an ensemble needs it"], result.stderr


def test_an_ensemble_zoo_cfg_without_myid_names_the_missing_file(tmp_path: Path) -> None:
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(f"dataDir={tmp_path}/data\nclientPort=0\ninitLimit=10\nsyncLimit=5\n"
                   "server.1=127.0.0.1:12888:13888\nserver.2=127.0.0.1:22888:23888\n", encoding="utf-8")
    result = run_server([str(cfg)], tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(cfg) in lines[0], result.stderr
    assert "myid file is missing" in lines[0] and str(tmp_path / "data" / "myid") in lines[0]


def test_one_server_line_with_standalone_enabled_serves_standalone() -> None:
    from zkpy.testing.servers import free_port, server_mode

    line = f"127.0.0.1:{free_port()}:{free_port()}"
    server = start_zkpy({"server.1": line, "standaloneEnabled": "true", "initLimit": "10", "syncLimit": "5"})
    try:
        assert server_mode(server) == "standalone"
        client = RawClient("127.0.0.1", server.port)
        assert client.call(OpCode.CREATE, CreateRequest("/solo", b"", OPEN, 0)).header.err == 0
        client.close()
    finally:
        server.cleanup()
