"""Starting, restarting and inspecting the two servers for the durability benchmarks.

Wraps ``zkpy.testing.servers``: a server is a real process on 127.0.0.1 with its own data dir,
and a restart reuses the data dir and port of an earlier process. ``heap`` overrides Apache
ZooKeeper's ``-Xmx512m`` through ``_JAVA_OPTIONS``, which the JVM reads after its command line
(a tree of a million znodes needs more than 512 MiB).
"""

from __future__ import annotations

import compileall
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import zkpy
from zkpy.testing.servers import ServerProcess, start_apache, start_zkpy

from .workload import Target

NAMES = {"zkpy": "zkpy", "apache": "ZooKeeper"}


@contextmanager
def _java_options(options: str | None) -> Iterator[None]:
    if not options:
        yield
        return
    old = os.environ.get("_JAVA_OPTIONS")
    os.environ["_JAVA_OPTIONS"] = options
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("_JAVA_OPTIONS", None)
        else:
            os.environ["_JAVA_OPTIONS"] = old


def compile_zkpy() -> None:
    """Write zkpy's bytecode where it is missing or stale, as installing a wheel does. A checkout
    installed with ``pip install -e`` and run under PYTHONDONTWRITEBYTECODE (this VM sets it)
    otherwise compiles every module of zkpy at every server start: 0.3 s of each start timed
    against Apache's that an installed server never spends."""
    compileall.compile_dir(os.path.dirname(zkpy.__file__), quiet=1)


def start(kind: str, settings: Mapping[str, str | None] | None = None, *, like: ServerProcess | None = None,
          heap: str | None = None, ready_s: float = 900.0) -> ServerProcess:
    """Start ``kind`` ("zkpy" or "apache"); with ``like``, on that server's data dir and port."""
    workdir = like.workdir if like is not None else None
    port = like.port if like is not None else None
    if kind == "zkpy":
        compile_zkpy()
        return start_zkpy(settings, ready_s, workdir=workdir, port=port)
    with _java_options(f"-Xmx{heap}" if heap else None):
        return start_apache(settings, ready_s, workdir=workdir, port=port)


def target(server: ServerProcess) -> Target:
    return Target("127.0.0.1", server.port, server.proc.pid)


def rss_mb(pid: int) -> float | None:
    """The process's resident memory (VmRSS), in MiB."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def dir_mb(path: str) -> float:
    """Bytes allocated under ``path`` (``du``: preallocated log space that was never written is
    not counted), in MiB."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total / (1 << 20)


def newest_snapshot_mb(server: ServerProcess) -> float | None:
    snap_dir = os.path.join(server.workdir, "data", "version-2")
    try:
        names = [n for n in os.listdir(snap_dir) if n.startswith("snapshot.")]
    except OSError:
        return None
    if not names:
        return None
    newest = max(names, key=lambda n: int(n.split(".")[1], 16))
    return os.path.getsize(os.path.join(snap_dir, newest)) / (1 << 20)


def log_size(server: ServerProcess) -> int:
    try:
        return os.path.getsize(server.log_path)
    except OSError:
        return 0


def wait_for_log(server: ServerProcess, needle: str, since: int, timeout_s: float) -> str:
    """Wait until the server's log, from byte ``since`` on, has a line containing ``needle``."""
    deadline = time.monotonic() + timeout_s
    while True:
        with open(server.log_path, "rb") as f:
            f.seek(since)
            text = f.read().decode("utf-8", "replace")
        for line in text.splitlines():
            if needle in line:
                return line
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.kind} exited with {server.proc.returncode} while waiting for {needle!r}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{server.kind}: no {needle!r} in its log after {timeout_s:g}s")
        time.sleep(0.05)
