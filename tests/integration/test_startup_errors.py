"""Every start-up failure of `zkpy server` is one line naming its cause, a non-zero exit status,
nothing served and nothing written.

This box runs the tests as root, so a chmod'ed directory is writable (root may write there, and the
server's check is the kernel's own ``os.access`` answer). The cases use what root cannot write
either: a directory under /proc (EACCES), a read-only bind mount in a private mount namespace
(``unshare -m``: EROFS; skipped where namespaces are not allowed), a file where the directory
should be (ENOTDIR). As a non-root user, a chmod 0o555 directory is refused the same way.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from zkpy.testing.servers import free_port

BASE = [sys.executable, "-m", "zkpy.cli.main", "server", "--address", "127.0.0.1"]
UNWRITABLE = "/proc/1"  # a directory no process may create files in, root included


def run(args: list[str], cwd: Path, prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*(prefix or []), *BASE, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert result.stdout == ""
    assert lines[0].startswith("zkpy: ")
    return lines[0]


def not_listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_file_instead_of_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.write_text("not a dir\n", encoding="utf-8")
    port = free_port()
    result = run(["--port", str(port), "--data-dir", str(data)], tmp_path)
    assert result.returncode == 4
    line = one_line(result)
    assert f"dataDir {data} is not a directory" in line and "ENOTDIR" in line
    assert data.read_text(encoding="utf-8") == "not a dir\n"
    assert not_listening(port)


def test_file_instead_of_data_dir_parent(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("", encoding="utf-8")
    result = run(["--port", str(free_port()), "--data-dir", str(tmp_path / "f" / "data")], tmp_path)
    assert result.returncode == 4
    assert f"cannot be created: {tmp_path / 'f'} is not a directory" in one_line(result)


@pytest.mark.skipif(not os.path.isdir(UNWRITABLE) or os.access(UNWRITABLE, os.W_OK), reason="needs /proc")
def test_unwritable_data_dir(tmp_path: Path) -> None:
    port = free_port()
    result = run(["--port", str(port), "--data-dir", UNWRITABLE], tmp_path)
    assert result.returncode == 4
    assert one_line(result) == f"zkpy: dataDir {UNWRITABLE} is not writable: Permission denied (EACCES)"
    assert not_listening(port)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a chmod'ed directory")
def test_chmod_unwritable_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o555)
    result = run(["--port", str(free_port()), "--data-dir", str(data)], tmp_path)
    assert result.returncode == 4
    assert "is not writable: Permission denied (EACCES)" in one_line(result)


@pytest.mark.skipif(not os.path.isdir(UNWRITABLE) or os.access(UNWRITABLE, os.W_OK), reason="needs /proc")
def test_missing_data_dir_that_cannot_be_created(tmp_path: Path) -> None:
    result = run(["--port", str(free_port()), "--data-dir", f"{UNWRITABLE}/zkpy-data"], tmp_path)
    assert result.returncode == 4
    assert one_line(result) == (f"zkpy: dataDir {UNWRITABLE}/zkpy-data does not exist and cannot be created in "
                                f"{UNWRITABLE}: Permission denied (EACCES)")


def test_missing_data_dir_with_autocreate_false(tmp_path: Path) -> None:
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(f"dataDir={tmp_path}/data\nclientPort={free_port()}\nclientPortAddress=127.0.0.1\n"
                   "datadir.autocreate=false\n", encoding="utf-8")
    result = run([str(cfg)], tmp_path)
    assert result.returncode == 2
    line = one_line(result)
    assert str(cfg) in line and "datadir.autocreate=false" in line and f"{tmp_path}/data" in line
    assert not (tmp_path / "data").exists()


def _read_only_prefix(directory: Path) -> list[str]:
    """A command prefix that runs the server with ``directory`` bind-mounted read-only (its own mount
    namespace, so nothing is left mounted); skips where the box allows no mount namespace."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare")
    d = str(directory)
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind {d} {d} && mount -o remount,bind,ro {d} {d}"],
                           capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a read-only mount here: {probe.stderr.strip()}")
    return ["unshare", "-m", "sh", "-c", f'mount --bind {d} {d} && mount -o remount,bind,ro {d} {d} && exec "$@"',
            "sh"]


def test_read_only_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    prefix = _read_only_prefix(data)
    port = free_port()
    result = run(["--port", str(port), "--data-dir", str(data)], tmp_path, prefix)
    assert result.returncode == 4
    assert one_line(result) == f"zkpy: dataDir {data} is not writable: Read-only file system (EROFS)"
    assert list(data.iterdir()) == []


@pytest.mark.parametrize(("flags", "line"), [
    (["--port", "99999"], "zkpy: --port: clientPort=99999 is out of range (0-65535)"),
    (["--port", "-1"], "zkpy: --port: clientPort=-1 must not be negative"),
    (["--tick-ms", "-5"], "zkpy: --tick-ms: tickTime=-5 must not be negative"),
    (["--tick-ms", "0"], "zkpy: --tick-ms: tickTime must be positive"),
    (["--log-level", "foo"], "zkpy: --log-level foo: unknown level (one of CRITICAL, ERROR, WARN, INFO, DEBUG)"),
    (["--log-level", "zkpy.election=loud"],
     "zkpy: --log-level zkpy.election=loud: unknown level (one of CRITICAL, ERROR, WARN, INFO, DEBUG)"),
    (["--log-format", "xml"], "zkpy: --log-format 'xml': must be text or json"),
])
def test_bad_flags_exit_2(tmp_path: Path, flags: list[str], line: str) -> None:
    data = tmp_path / "data"
    result = run(["--data-dir", str(data), *flags], tmp_path)
    assert result.returncode == 2
    assert one_line(result) == line
    assert not data.exists()


def test_zoo_cfg_port_out_of_range(tmp_path: Path) -> None:
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(f"dataDir={tmp_path}/data\nclientPort=70000\n", encoding="utf-8")
    result = run([str(cfg)], tmp_path)
    assert result.returncode == 2
    assert one_line(result) == f"zkpy: {cfg}: clientPort=70000 is out of range (0-65535)"


def test_port_in_use(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run(["--port", str(port), "--data-dir", str(data)], tmp_path)
    assert result.returncode == 1
    assert one_line(result) == f"zkpy: cannot serve the client port on 127.0.0.1:{port}: Address already in use (EADDRINUSE)"
    assert not data.exists()  # found before recovery writes the initial snapshot


def test_election_port_in_use_is_named(tmp_path: Path) -> None:
    """The election port taken, the client port free: the line names the election port (it once
    named the client port, free, with the election port's error)."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "myid").write_text("1\n", encoding="utf-8")
    client, quorum, other = free_port(), free_port(), free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        election = taken.getsockname()[1]
        cfg = tmp_path / "zoo.cfg"
        cfg.write_text(f"dataDir={data}\nclientPort={client}\nclientPortAddress=127.0.0.1\ntickTime=500\n"
                       f"initLimit=5\nsyncLimit=2\nadmin.enableServer=false\n"
                       f"server.1=127.0.0.1:{quorum}:{election}\nserver.2=127.0.0.1:{other}:{other + 1}\n",
                       encoding="utf-8")
        result = subprocess.run([sys.executable, "-m", "zkpy.cli.main", "server", str(cfg)], cwd=tmp_path,
                                capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert one_line(result) == (f"zkpy: cannot serve the election port of server.1 on 127.0.0.1:{election}: "
                                "Address already in use (EADDRINUSE)")
    assert not_listening(client)
    assert not (data / "version-2").exists()  # found before recovery writes the initial snapshot


def test_a_port_taken_after_the_checks_is_named_by_the_listener() -> None:
    from zkpy.runtime.listen_error import ListenError

    exc = ListenError("the election port of server.3", "198.18.0.3", 3888, OSError(errno.EADDRINUSE, "in use"))
    assert str(exc) == "cannot serve the election port of server.3 on 198.18.0.3:3888: Address already in use (EADDRINUSE)"
    assert isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE


def test_serving_line_names_absolute_data_dir_and_port(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen([*BASE, "--port", str(port), "--data-dir", "rel-data"], cwd=tmp_path,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # ends when the server does: no deadline needed beyond the test's
            if "serving:" in line:
                assert line.rstrip().endswith(f"serving: dataDir {tmp_path}/rel-data, client port 127.0.0.1:{port}")
                break
        else:
            pytest.fail("no serving line")
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert proc.returncode == 0


_LATER_EROFS = r'''
import subprocess, sys
from zkpy.testing.rawclient import RawClient
data, port = sys.argv[1], int(sys.argv[2])
subprocess.run(["mount", "--bind", data, data], check=True)
proc = subprocess.Popen([sys.executable, "-m", "zkpy.cli.main", "server", "--address", "127.0.0.1", "--port",
                         str(port), "--data-dir", data], stderr=subprocess.PIPE, text=True)
assert proc.stderr is not None
for line in proc.stderr:
    if "serving:" in line:
        break
subprocess.run(["mount", "-o", "remount,bind,ro", data, data], check=True)
try:
    RawClient("127.0.0.1", port).close()  # its session's txn cannot be logged
except OSError:
    pass
rest = proc.stderr.read().strip().splitlines()
print(proc.wait())
print(rest[-1] if rest else "")
'''


def test_data_dir_turning_read_only_later_names_path_and_errno(tmp_path: Path) -> None:
    """The file system goes read-only under a serving server: it stops (exit 3) naming the file and EROFS."""
    data = tmp_path / "data"
    data.mkdir()
    _read_only_prefix(data)  # skips where mount namespaces are not allowed
    result = subprocess.run(["unshare", "-m", sys.executable, "-c", _LATER_EROFS, str(data), str(free_port())],
                            capture_output=True, text=True, timeout=120)
    code, line = result.stdout.strip().splitlines()[-2:]
    assert code == "3", result.stdout + result.stderr
    assert line.startswith(f"zkpy: stopped: cannot write the txn log: {data}/version-2/log.")
    assert line.endswith(": Read-only file system (EROFS)")
