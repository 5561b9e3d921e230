"""The zoo.cfg files operators write start ``zkpy server`` unchanged, with one WARN line per key
that has no effect in zkpy, and the same files start Apache ZooKeeper 3.8 (the oracle).

The fixtures in ``tests/fixtures`` are the production zoo.cfg of the 3.8 Administrator's Guide
(a three-member ensemble: here two zkpy members and one Apache member, all started from the
same file) and the file kazoo's test harness writes (one server with a TLS port: zkpy and
Apache each started from it). Only the ``${...}`` placeholders (ports, directories, stores)
are filled in.
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from zkpy.testing.servers import (
    ServerProcess,
    apache_available,
    apache_classpath,
    cleanup_ensemble,
    free_ports,
    server_mode,
    wait_ensemble_serving,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ADMIN_GUIDE_NO_EFFECT = {"tcpKeepAlive", "electionPortBindRetry", "clientPortListenBacklog",
                         "globalOutstandingLimit", "fsync.warningthresholdms"}  # admin.*, metricsProvider.*: honoured
KAZOO_NO_EFFECT = {"serverCnxnFactory", "authProvider.1"}
NO_EFFECT_LINE = re.compile(r" WARNING zkpy\.config: (?P<cfg>\S+): (?P<key>\S+) has no effect in zkpy: ")

needs_apache = pytest.mark.skipif(not apache_available(), reason="Apache ZooKeeper 3.8 (Debian) is not installed")


def fill(fixture: str, values: Mapping[str, str]) -> str:
    """The fixture with its placeholders filled in; every other byte as it is."""
    return string.Template((FIXTURES / fixture).read_text(encoding="utf-8")).substitute(values)


def spawn(kind: str, workdir: Path, cfg_text: str, client_port: int, myid: int | None = None) -> ServerProcess:
    """Start ``zkpy server zoo.cfg`` or Apache's ``QuorumPeerMain zoo.cfg`` (as kazoo's harness and
    zkServer.sh run it) on a zoo.cfg holding exactly ``cfg_text``."""
    (workdir / "data").mkdir(parents=True, exist_ok=True)
    if myid is not None:
        (workdir / "data" / "myid").write_text(f"{myid}\n", encoding="ascii")
    cfg = workdir / "zoo.cfg"
    cfg.write_text(cfg_text, encoding="utf-8")
    if kind == "zkpy":
        cmd = [sys.executable, "-m", "zkpy.cli.main", "server", str(cfg)]
    else:
        cmd = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", apache_classpath(),
               "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(cfg)]
    log_path = workdir / "server.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
    return ServerProcess(kind, client_port, proc, str(workdir), str(log_path),
                         {"myid": str(myid or 0), "root": str(workdir.parent)}, cmd)


def wait_standalone(server: ServerProcess, deadline_s: float = 60.0) -> None:
    deadline = time.monotonic() + deadline_s
    while server_mode(server) != "standalone":
        if server.proc.poll() is not None:
            raise AssertionError(f"{server.kind} exited with {server.proc.returncode}:\n{server.log()[-4000:]}")
        if time.monotonic() >= deadline:
            raise AssertionError(f"{server.kind} did not serve within {deadline_s}s:\n{server.log()[-4000:]}")
        time.sleep(0.05)


def no_effect_warnings(server: ServerProcess) -> collections.Counter[str]:
    """How many times the log says each key has no effect."""
    cfg = os.path.join(server.workdir, "zoo.cfg")
    found: collections.Counter[str] = collections.Counter()
    for line in server.log().splitlines():
        m = NO_EFFECT_LINE.search(line)
        if m and m.group("cfg") == cfg:
            found[m.group("key")] += 1
    return found


def loopback_lines(server: ServerProcess) -> list[str]:
    return [line for line in server.log().splitlines()
            if "clientPortAddress is not set" in line and "127.0.0.1" in line]


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="zkpy-zoocfg-fixtures-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@needs_apache
def test_the_admin_guide_zoo_cfg_starts_a_mixed_ensemble_unchanged(root: Path) -> None:
    """Two zkpy members and one Apache member, each from the guide's file: all serve, a write
    through a zkpy member is read through the Apache one, and each zkpy member says once per key
    that the key has no effect."""
    ports = free_ports(15)
    clients, peers, elections, admins, metrics = (ports[i:i + 3] for i in range(0, 15, 3))
    kinds = {1: "zkpy", 2: "zkpy", 3: "apache"}
    servers: list[ServerProcess] = []
    try:
        for n, kind in kinds.items():
            workdir = root / f"server{n}"
            values = {"dataDir": str(workdir / "data"), "dataLogDir": str(workdir / "txnlog"),
                      "clientPort": str(clients[n - 1]), "adminPort": str(admins[n - 1]),
                      "metricsPort": str(metrics[n - 1]),
                      **{f"peerPort{i + 1}": str(p) for i, p in enumerate(peers)},
                      **{f"electionPort{i + 1}": str(p) for i, p in enumerate(elections)}}
            servers.append(spawn(kind, workdir, fill("zoo.cfg.admin-guide", values), clients[n - 1], myid=n))
        wait_ensemble_serving(servers, 120.0)
        for server in servers[:2]:
            assert no_effect_warnings(server) == dict.fromkeys(ADMIN_GUIDE_NO_EFFECT, 1), server.log()[-4000:]
            assert len(loopback_lines(server)) == 1
        writer = KazooClient(hosts=servers[0].hosts, timeout=20)
        reader = KazooClient(hosts=servers[2].hosts, timeout=20)
        writer.start(timeout=30)
        reader.start(timeout=30)
        try:
            writer.create("/moved-from-apache", b"same file")
            reader.sync("/moved-from-apache")
            assert reader.get("/moved-from-apache")[0] == b"same file"
        finally:
            writer.stop()
            reader.stop()
    finally:
        cleanup_ensemble(servers)


def make_kazoo_stores(directory: Path) -> tuple[Path, Path]:
    """keystore.jks and truststore.jks with kazoo's password, as its harness saves them."""
    keystore, truststore, cert = directory / "keystore.jks", directory / "truststore.jks", directory / "server.crt"
    common = ["-storetype", "JKS", "-storepass", "apassword", "-noprompt"]
    subprocess.run(["keytool", "-genkeypair", "-alias", "server", "-keyalg", "RSA", "-keysize", "2048",
                    "-dname", "CN=localhost", "-ext", "SAN=dns:localhost,ip:127.0.0.1", "-validity", "2",
                    "-keypass", "apassword", "-keystore", str(keystore), *common], check=True, capture_output=True)
    subprocess.run(["keytool", "-exportcert", "-alias", "server", "-file", str(cert), "-keystore", str(keystore),
                    *common], check=True, capture_output=True)
    subprocess.run(["keytool", "-importcert", "-alias", "ca", "-file", str(cert), "-keystore", str(truststore),
                    *common], check=True, capture_output=True)
    return keystore, truststore


@needs_apache
@pytest.mark.skipif(shutil.which("keytool") is None, reason="keytool (the JDK's) makes the JKS stores")
def test_the_kazoo_harness_zoo_cfg_starts_zkpy_and_apache_unchanged(root: Path) -> None:
    keystore, truststore = make_kazoo_stores(root)
    servers: list[ServerProcess] = []
    try:
        for kind in ("zkpy", "apache"):
            client, secure, admin = free_ports(3)
            workdir = root / kind
            values = {"dataDir": str(workdir / "data"), "clientPort": str(client),
                      "secureClientPort": str(secure), "adminPort": str(admin),
                      "keyStore": str(keystore), "trustStore": str(truststore)}
            servers.append(spawn(kind, workdir, fill("zoo.cfg.kazoo", values), client))
        for server in servers:
            wait_standalone(server)
        zkpy = servers[0]
        assert no_effect_warnings(zkpy) == dict.fromkeys(KAZOO_NO_EFFECT, 1), zkpy.log()[-4000:]
        assert len(loopback_lines(zkpy)) == 1
        for server in servers:
            client = KazooClient(hosts=server.hosts, timeout=20)
            client.start(timeout=30)
            try:
                client.create("/kazoo-harness", b"x")
                assert client.get("/kazoo-harness")[0] == b"x"
            finally:
                client.stop()
    finally:
        for server in servers:
            server.cleanup()


def test_a_refused_key_in_a_fixture_exits_2_naming_key_and_file(root: Path) -> None:
    """The same file with a safety key zkpy cannot honour does not start: one line, exit 2."""
    client, admin, metric = free_ports(3)
    text = fill("zoo.cfg.admin-guide", {"dataDir": str(root / "data"), "dataLogDir": str(root / "log"),
                                        "clientPort": str(client), "adminPort": str(admin),
                                        "metricsPort": str(metric),
                                        **{f"peerPort{i}": str(20000 + i) for i in (1, 2, 3)},
                                        **{f"electionPort{i}": str(21000 + i) for i in (1, 2, 3)}})
    cfg = root / "zoo.cfg"
    cfg.write_text(text + "skipACL=yes\n", encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "zkpy.cli.main", "server", str(cfg)], cwd=root,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("zkpy: ")]
    assert len(errors) == 1 and "skipACL" in errors[0] and str(cfg) in errors[0], result.stderr


@pytest.mark.parametrize(("args", "lines"), [((), 1), (("--address", "127.0.0.1"), 0)])
def test_without_a_client_address_one_line_says_zkpy_listens_on_loopback(root: Path, args: tuple[str, ...],
                                                                         lines: int) -> None:
    """``zkpy server`` with flags only: one line names clientPortAddress, unless --address is given."""
    (port,) = free_ports(1)
    log_path = root / "server.log"
    cmd = [sys.executable, "-m", "zkpy.cli.main", "server", "--port", str(port), "--data-dir", str(root / "data"),
           *args]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    server = ServerProcess("zkpy", port, proc, str(root), str(log_path))
    try:
        wait_standalone(server)
        found = [line for line in server.log().splitlines() if "clientPortAddress" in line]
        assert len(found) == lines, server.log()[-4000:]
        assert all("127.0.0.1" in line and "remote clients" in line for line in found)
    finally:
        server.stop()
