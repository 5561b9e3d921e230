"""``zkpy server start|stop|status|restart``: the server as a daemon with a pid file, as ``zkServer.sh``.

* ``start`` runs the same ``zkpy server`` command in a new session (``setsid``: no controlling
  terminal, its own process group), stdin from /dev/null, stdout and stderr appended to
  ``zkpy-server.out`` in the log dir (``--log-dir``; the data dir without one: zkServer.sh's
  ``zookeeper.out``), writes its pid to ``dataDir/zookeeper_server.pid`` (zkServer.sh's name and
  place), and waits until the client port answers (or the server exits: then its last line is
  printed and the pid file removed);
* ``status`` asks the client port, as ``zkServer.sh status`` does (a server started in the
  foreground has no pid file), and exits 0 with the ``Mode:`` line of ``srvr``, 1 when nothing
  serves there;
* ``stop`` sends SIGTERM to the pid in the pid file and waits for the process to end, then removes
  the pid file; ``restart`` is stop (when running), then start.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence

from zkpy.config import ServerConfig

PID_FILE = "zookeeper_server.pid"  # zkServer.sh's ZOOPIDFILE in dataDir
OUT_FILE = "zkpy-server.out"
WAIT_S = 30.0
_POLL_S = 0.05


class ServiceError(Exception):
    """A service action failed; the message is one line, the exit status 1."""


def pid_path(config: ServerConfig) -> str:
    return os.path.join(os.path.abspath(config.data_dir), PID_FILE)


def read_pid(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie, reparented and not yet reaped, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _client_host(config: ServerConfig) -> str:
    host = config.client_port_address
    return {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)


def srvr(config: ServerConfig, timeout: float = 2.0) -> str | None:
    """The server's ``srvr`` answer, "" when it is reachable but does not answer it, None when unreachable."""
    try:
        with socket.create_connection((_client_host(config), config.client_port), timeout=timeout) as sock:
            sock.sendall(b"srvr")
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
    except OSError:
        return None
    return b"".join(chunks).decode("utf-8", "replace")


def mode_of(answer: str) -> str | None:
    for line in answer.splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    return None


def status(config: ServerConfig) -> tuple[int, str]:
    """(exit status, the line to print). The client port decides, as for ``zkServer.sh status``: a
    server started in the foreground (a terminal, systemd, a container) has no pid file; the pid
    file only says more when the port does not answer."""
    path = pid_path(config)
    pid = read_pid(path)
    running = pid is not None and alive(pid)
    where = f"{_client_host(config)}:{config.client_port}"
    answer = srvr(config)
    if answer is None:
        if running:
            return 1, f"zkpy: process {pid} (pid file {path}) is running but {where} does not answer"
        return 1, f"zkpy: not running ({where} does not answer)"
    mode = mode_of(answer)
    if mode is None:
        if "not currently serving" in answer:
            return 1, f"zkpy: running but not serving requests on {where} (no quorum?)"
        return 0, f"zkpy: running on {where} (srvr is not in 4lw.commands.whitelist)"
    return 0, f"Mode: {mode}"


def start(config: ServerConfig, argv: Sequence[str], log_dir: str | None, wait_s: float = WAIT_S) -> str:
    """Start ``zkpy server ARGV`` as a daemon; the line to print, or ServiceError."""
    path = pid_path(config)
    pid = read_pid(path)
    if pid is not None and alive(pid):
        raise ServiceError(f"already running as process {pid} ({path})")
    data_dir = os.path.abspath(config.data_dir)
    out_path = os.path.join(os.path.abspath(log_dir) if log_dir else data_dir, OUT_FILE)
    try:
        os.makedirs(data_dir, exist_ok=True)
        os.makedirs(os.path.dirname(out_path), exist_ok=True)
        out = open(out_path, "ab")  # noqa: SIM115 (handed to the child)
    except OSError as exc:
        raise ServiceError(f"{exc.filename}: {exc.strerror} ({errno.errorcode.get(exc.errno or 0, '?')})") from None
    with out:
        proc = subprocess.Popen([sys.executable, "-m", "zkpy.cli.main", "server", *argv], stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
    try:
        with open(path + ".tmp", "w", encoding="ascii") as f:
            f.write(f"{proc.pid}\n")
        os.replace(path + ".tmp", path)
    except OSError as exc:
        proc.terminate()
        proc.wait()
        raise ServiceError(f"cannot write pid file {path}: {exc.strerror}") from None
    deadline = time.monotonic() + wait_s
    while True:
        code = proc.poll()
        if code is not None:
            _remove(path)
            raise ServiceError(f"the server exited with status {code} at start: {_last_line(out_path)} "
                               f"(see {out_path})")
        if srvr(config, timeout=0.5) is not None:
            return f"zkpy: STARTED as process {proc.pid} (pid file {path}, output {out_path})"
        if time.monotonic() > deadline:
            return (f"zkpy: started as process {proc.pid} (pid file {path}), but {_client_host(config)}:"
                    f"{config.client_port} did not answer within {wait_s:g}s: see {out_path}")
        time.sleep(_POLL_S)


def stop(config: ServerConfig, wait_s: float = WAIT_S) -> str:
    path = pid_path(config)
    pid = read_pid(path)
    if pid is None:
        raise ServiceError(f"no zkpy server to stop (no pid file {path})")
    if not alive(pid):
        _remove(path)
        return f"zkpy: process {pid} from {path} was not running; pid file removed"
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while alive(pid):
        if time.monotonic() > deadline:
            raise ServiceError(f"process {pid} did not stop within {wait_s:g}s of SIGTERM")
        time.sleep(_POLL_S)
    _remove(path)
    return f"zkpy: STOPPED process {pid}"


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def _last_line(path: str) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 4096))
            lines = [ln for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return "(no output)"
    return lines[-1] if lines else "(no output)"
