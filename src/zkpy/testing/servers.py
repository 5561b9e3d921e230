"""Start real servers for tests: zkpy (``python -m zkpy server``) and Apache ZooKeeper 3.8.

Both run as subprocesses on 127.0.0.1 with a fresh data dir and a free port, and are
ready when ``srvr`` reports a serving server. Apache ZooKeeper comes from Debian's package
(``/usr/share/java/zookeeper.jar``); ``apache_available()`` says whether it is there.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

ZK_JAR = "/usr/share/java/zookeeper.jar"
ZK_CONF_DIR = "/etc/zookeeper/conf"


def apache_available() -> bool:
    return os.path.exists(ZK_JAR) and shutil.which("java") is not None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def four_letter(port: int, word: str, timeout: float = 5.0) -> str:
    """Send a four-letter word and return the whole answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(word.encode("ascii"))
        chunks = []
        while True:
            try:
                data = s.recv(65536)
            except ConnectionResetError:
                break
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


@dataclass
class ServerProcess:
    """A running server subprocess; ``hosts`` is its connect string."""

    kind: str
    port: int
    proc: subprocess.Popen[bytes]
    workdir: str
    log_path: str
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        return self.proc.returncode

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _wait_ready(server: ServerProcess, deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.kind} server exited with {server.proc.returncode}:\n{server.log()[-4000:]}")
        try:
            if four_letter(server.port, "srvr", timeout=1.0).startswith("Zookeeper version"):
                return
        except OSError:
            pass
        time.sleep(0.05)
    server.cleanup()
    raise RuntimeError(f"{server.kind} server did not answer ruok within {deadline_s}s:\n{server.log()[-4000:]}")


def _write_cfg(workdir: str, port: int, settings: Mapping[str, str | None]) -> str:
    """zoo.cfg with the test defaults and ``settings`` on top; a value of ``None`` removes a
    default key (e.g. ``{"4lw.commands.whitelist": None}`` for the server's own default)."""
    cfg = {
        "tickTime": "2000",
        "dataDir": os.path.join(workdir, "data"),
        "clientPort": str(port),
        "clientPortAddress": "127.0.0.1",
        "maxClientCnxns": "0",
        "4lw.commands.whitelist": "*",
    }
    for key, value in settings.items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    path = os.path.join(workdir, "zoo.cfg")
    with open(path, "w", encoding="utf-8") as f:
        for k, v in cfg.items():
            f.write(f"{k}={v}\n")
    return path


def start_zkpy(settings: Mapping[str, str | None] | None = None, ready_s: float = 20.0, *,
               workdir: str | None = None, port: int | None = None, args: Sequence[str] = (),
               wait: bool = True) -> ServerProcess:
    """A zkpy server from a zoo.cfg with ``settings`` on top of test defaults.

    Pass ``workdir`` and ``port`` of an earlier server to restart it on the same data dir;
    ``args`` go to ``zkpy server`` (e.g. ``--fault lose-unsynced``); the log is appended to."""
    settings = dict(settings or {})
    settings.setdefault("extendedTypesEnabled", "true")
    workdir = workdir or tempfile.mkdtemp(prefix="zkpy-test-")
    port = port or free_port()
    cfg = _write_cfg(workdir, port, settings)
    log_path = os.path.join(workdir, "server.log")
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "zkpy.cli.main", "server", cfg, *args],
                                stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
    server = ServerProcess("zkpy", port, proc, workdir, log_path)
    if wait:
        _wait_ready(server, ready_s)
    return server


def start_apache(settings: Mapping[str, str | None] | None = None, ready_s: float = 60.0,
                 jvm_props: dict[str, str] | None = None, *, workdir: str | None = None,
                 port: int | None = None) -> ServerProcess:
    """An Apache ZooKeeper 3.8 standalone server (Debian's package), TTL nodes enabled.

    ``jvm_props`` become ``-Dkey=value`` system properties. ``jute.maxbuffer`` in ``settings``
    is passed as the system property too: ZooKeeper reads it from there, not from zoo.cfg.
    """
    settings = dict(settings or {})
    props = dict(jvm_props or {})
    if "jute.maxbuffer" in settings:
        props.setdefault("jute.maxbuffer", settings["jute.maxbuffer"] or "")
    extended = settings.pop("extendedTypesEnabled", "true")
    settings.setdefault("admin.enableServer", "false")
    workdir = workdir or tempfile.mkdtemp(prefix="zk-apache-test-")
    port = port or free_port()
    cfg = _write_cfg(workdir, port, settings)
    log_path = os.path.join(workdir, "server.log")
    cmd = ["java", "-Xmx512m", f"-Dzookeeper.extendedTypesEnabled={extended}", "-Dzookeeper.admin.enableServer=false",
           *(f"-D{k}={v}" for k, v in props.items()), "-cp", f"{ZK_CONF_DIR}:{ZK_JAR}", "org.apache.zookeeper.server.ZooKeeperServerMain", cfg]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
    server = ServerProcess("apache", port, proc, workdir, log_path)
    _wait_ready(server, ready_s)
    return server
