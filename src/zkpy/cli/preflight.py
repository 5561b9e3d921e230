"""Start-up checks that run before anything is read, written or bound: each problem is one line.

* the data dirs: a file where a directory should be, a directory the server cannot write (EACCES,
  or EROFS on a read-only file system), a missing one whose nearest existing ancestor is not
  writable (ZooKeeper creates a missing dataDir unless ``datadir.autocreate=false``, which the
  zoo.cfg reader already refuses). Writability is ``os.access`` (the kernel's own answer for this
  process, so root passes on a chmod'ed dir, as root can write there, and fails on a read-only
  mount or under /proc); nothing is created to find out;
* command-line flags: the same range checks as their zoo.cfg keys (the zoo.cfg reader checks them);
* the client port: bound and released at once, so "address in use" is reported before recovery
  writes an initial snapshot.
"""

from __future__ import annotations

import errno
import os
import socket

from zkpy.cli.zoocfg import ConfigError, config_from_properties
from zkpy.runtime.osdisk import describe_error

__all__ = ["data_dir_problem", "describe_error", "flag_problem", "port_problem"]

# flag name -> (its option on the command line, its zoo.cfg key)
FLAG_KEYS = {
    "client_port": ("--port", "clientPort"),
    "tick_ms": ("--tick-ms", "tickTime"),
    "server_workers": ("--server-workers", "serverWorkers"),
}


def _errno_text(code: int) -> str:
    return f"{os.strerror(code)} ({errno.errorcode.get(code, str(code))})"


def flag_problem(flags: dict[str, object]) -> str | None:
    """The first flag whose value its zoo.cfg key would refuse, as one line."""
    for name, (option, key) in FLAG_KEYS.items():
        value = flags.get(name)
        if value is None:
            continue
        try:
            config_from_properties({"dataDir": "/", key: str(value)}, option, loopback_note=False)
        except ConfigError as exc:
            return str(exc)
    return None


def _unwritable(path: str) -> int | None:
    """The errno writing into the existing directory ``path`` would meet, or None."""
    if os.access(path, os.W_OK | os.X_OK):
        return None
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return errno.EROFS
    except OSError:
        pass
    return errno.EACCES


def data_dir_problem(key: str, path: str) -> str | None:
    """What keeps the server from using ``path`` as its ``key`` (dataDir, dataLogDir), as one line."""
    full = os.path.abspath(path)
    if os.path.exists(full):
        if not os.path.isdir(full):
            return f"{key} {full} is not a directory (ENOTDIR)"
        code = _unwritable(full)
        if code is not None:
            return f"{key} {full} is not writable: {_errno_text(code)}"
        version_dir = os.path.join(full, "version-2")
        if os.path.isdir(version_dir):
            code = _unwritable(version_dir)
            if code is not None:
                return f"{key} {full}: {version_dir} is not writable: {_errno_text(code)}"
        return None
    ancestor = os.path.dirname(full)
    while not os.path.exists(ancestor) and ancestor != os.path.dirname(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        return f"{key} {full} cannot be created: {ancestor} is not a directory (ENOTDIR)"
    code = _unwritable(ancestor)
    if code is not None:
        return f"{key} {full} does not exist and cannot be created in {ancestor}: {_errno_text(code)}"
    return None


def port_problem(host: str, port: int, what: str = "the client port") -> str | None:
    """Bind ``host:port`` as the listener would (SO_REUSEADDR) and let go: the one-line problem
    naming ``what`` port it is, or None."""
    if port == 0:
        return None
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"cannot serve {what} on {host}:{port}: {exc.strerror or exc}"
    for family, kind, proto, _, address in infos:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
        except OSError as exc:
            return f"cannot serve {what} on {host}:{port}: {_errno_text(exc.errno) if exc.errno else exc}"
        finally:
            sock.close()
    return None
