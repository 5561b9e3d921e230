"""Start-up checks of `zkpy server`: each problem one line, and nothing created to find out."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

import pytest

from zkpy.cli.preflight import data_dir_problem, describe_error, flag_problem, port_problem


def test_usable_and_creatable_data_dirs(tmp_path: Path) -> None:
    assert data_dir_problem("dataDir", str(tmp_path)) is None
    assert data_dir_problem("dataDir", str(tmp_path / "a" / "b")) is None
    assert not (tmp_path / "a").exists()


def test_file_where_the_dir_should_be(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("", encoding="utf-8")
    assert data_dir_problem("dataLogDir", str(tmp_path / "f")) == f"dataLogDir {tmp_path / 'f'} is not a directory (ENOTDIR)"
    assert "is not a directory (ENOTDIR)" in (data_dir_problem("dataDir", str(tmp_path / "f" / "x" / "y")) or "")


@pytest.mark.skipif(os.access("/proc/1", os.W_OK), reason="needs /proc")
def test_unwritable_even_for_root() -> None:
    assert data_dir_problem("dataDir", "/proc/1") == "dataDir /proc/1 is not writable: Permission denied (EACCES)"


def test_relative_paths_are_reported_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f").write_text("", encoding="utf-8")
    assert data_dir_problem("dataDir", "f") == f"dataDir {tmp_path}/f is not a directory (ENOTDIR)"


@pytest.mark.parametrize(("flags", "problem"), [
    ({"client_port": 65536}, "--port: clientPort=65536 is out of range (0-65535)"),
    ({"client_port": -2}, "--port: clientPort=-2 must not be negative"),
    ({"tick_ms": -5}, "--tick-ms: tickTime=-5 must not be negative"),
    ({"tick_ms": 0}, "--tick-ms: tickTime must be positive"),
    ({"client_port": 2181, "tick_ms": 2000, "data_dir": "x"}, None),
])
def test_flags_get_their_zoo_cfg_keys_checks(flags: dict[str, object], problem: str | None) -> None:
    assert flag_problem(flags) == problem


def test_port_in_use() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert port_problem("127.0.0.1", port) == (f"cannot serve the client port on 127.0.0.1:{port}: "
                                                   "Address already in use (EADDRINUSE)")
        assert port_problem("127.0.0.1", port, "the election port of server.2").startswith(
            f"cannot serve the election port of server.2 on 127.0.0.1:{port}: ")
    assert port_problem("127.0.0.1", port) is None
    assert port_problem("127.0.0.1", 0) is None


def test_describe_error_is_never_empty() -> None:
    assert describe_error(OSError(errno.EROFS, "x", "/d/log.1")) == "/d/log.1: Read-only file system (EROFS)"
    assert describe_error(OSError()) == "OSError"
    assert describe_error(RuntimeError()) == "RuntimeError"
    assert describe_error(ValueError("bad")) == "bad"
