"""``zkpy server --from-env`` as a container runs it, on loopback: from the official image's
variables alone a standalone server and a 3-member ensemble serve; the JVM flags' properties zkpy
knows are applied and the others named in a WARN; SIGTERM ends it with status 0. (The files it
writes are tests/unit/cli/test_container.py's; the image itself, tests/container/.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from zkpy.testing.servers import ServerProcess, four_letter, free_ports, server_mode

ZKPY = [sys.executable, "-m", "zkpy.cli.main", "server", "--from-env"]


def spawn(tmp_path: Path, name: str, port: int, env: dict[str, str]) -> ServerProcess:
    root = tmp_path / name
    full = {**os.environ, "ZOO_CONF_DIR": str(root / "conf"), "ZOO_DATA_DIR": str(root / "data"),
            "ZOO_DATA_LOG_DIR": str(root / "datalog"), "ZOO_ADMINSERVER_ENABLED": "false", **env}
    root.mkdir()
    log = root / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(ZKPY, env=full, stdout=out, stderr=subprocess.STDOUT, cwd=root)
    return ServerProcess("zkpy", port, proc, str(root), str(log))


def wait_mode(server: ServerProcess, modes: tuple[str, ...], deadline_s: float = 60) -> str:
    deadline = time.monotonic() + deadline_s
    while (mode := server_mode(server)) not in modes:
        assert server.proc.poll() is None and time.monotonic() < deadline, (mode, server.log()[-3000:])
        time.sleep(0.05)
    return mode


def stop(server: ServerProcess) -> int:
    if server.proc.poll() is None:
        server.proc.send_signal(signal.SIGTERM)
    return server.proc.wait(30)


def test_a_standalone_server_from_the_variables_alone(tmp_path: Path) -> None:
    client, quorum, election = free_ports(3)
    server = spawn(tmp_path, "one", client, {
        "ZOO_SERVERS": f"server.1=127.0.0.1:{quorum}:{election};127.0.0.1:{client}",
        "ZOO_TICK_TIME": "500",
        "JVMFLAGS": "-Xmx256m -Dzookeeper.fooBar=1",
        "SERVER_JVMFLAGS": "-Dzookeeper.4lw.commands.whitelist=conf,srvr",
    })
    try:
        assert wait_mode(server, ("standalone",)) == "standalone"
        conf = four_letter(client, "conf")  # allowed by the flag alone: the image's zoo.cfg names no list
        assert "tickTime=500" in conf
        assert (tmp_path / "one" / "conf" / "zoo.cfg").read_text().startswith("dataDir=")
        assert (tmp_path / "one" / "data" / "myid").read_text() == "1\n"
    finally:
        assert stop(server) == 0, server.log()[-3000:]
    text = server.log()
    assert "wrote " + str(tmp_path / "one" / "conf" / "zoo.cfg") in text
    assert "-Dzookeeper.fooBar has no effect in zkpy" in text, text[-3000:]


def test_a_three_member_ensemble_from_the_variables_alone(tmp_path: Path) -> None:
    ports = free_ports(9)
    servers = " ".join(f"server.{i}=127.0.0.1:{ports[3 * i - 2]}:{ports[3 * i - 1]};127.0.0.1:{ports[3 * i - 3]}"
                       for i in (1, 2, 3))
    members = [spawn(tmp_path, f"zk{i}", ports[3 * i - 3], {
        "ZOO_MY_ID": str(i), "ZOO_SERVERS": servers, "ZOO_TICK_TIME": "200", "ZOO_STANDALONE_ENABLED": "false"})
        for i in (1, 2, 3)]
    try:
        modes = sorted(wait_mode(m, ("leader", "follower")) for m in members)
        assert modes == ["follower", "follower", "leader"]
    finally:
        for m in members:
            assert stop(m) == 0, m.log()[-3000:]
