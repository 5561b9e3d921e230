"""zkpy's public API is typed for its users: ``mypy --strict`` (and pyright, strict, where it is
installed) report nothing on user_program.py, a program that uses every public class, and the
program runs against a zkpy server (so what it declares is what the API returns)."""

from __future__ import annotations

import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import zkpy
from zkpy.testing.servers import ServerProcess

PROGRAM = Path(__file__).with_name("user_program.py")


def checker_env() -> dict[str, str]:
    """The environment of a checker run: the zkpy under test first on the path (the checkers
    find packages through the interpreter's sys.path, PYTHONPATH included)."""
    env = dict(os.environ)
    src = str(Path(zkpy.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([src, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def test_mypy_strict_reports_nothing(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
         "--config-file", os.devnull, str(PROGRAM)],
        capture_output=True, text=True, env=checker_env(), cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout


def test_pyright_strict_reports_nothing(tmp_path: Path) -> None:
    """pyright is not a test dependency (its PyPI package fetches node code on first use);
    the test runs where it is installed and working."""
    pyright = shutil.which("pyright")
    if pyright is None:
        pytest.skip("pyright is not installed")
    try:  # its first run may fetch its node package, which an offline machine cannot
        probe = subprocess.run([pyright, "--version"], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.skip("pyright does not start here in time")
    if probe.returncode != 0:
        pytest.skip(f"pyright does not start here: {probe.stderr.strip()[:200]}")
    result = subprocess.run([pyright, str(PROGRAM)], capture_output=True, text=True,
                            env=checker_env(), cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 errors" in result.stdout


def test_the_checkers_see_zkpy_itself(tmp_path: Path) -> None:
    """A wrong annotation is reported: the checkers resolve zkpy's real types (not Any)."""
    wrong = tmp_path / "wrong.py"
    wrong.write_text("from zkpy import Client\nfrom zkpy.wire.proto import Id\n\n"
                     "not_an_int: int = Client().get('/')\nId(schema='world', id='anyone')\n")
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
         "--config-file", os.devnull, str(wrong)],
        capture_output=True, text=True, env=checker_env(), cwd=tmp_path, timeout=300)
    assert result.returncode == 1, result.stdout
    assert 'has type "tuple[bytes, Stat]"' in result.stdout, result.stdout
    assert 'Unexpected keyword argument "schema" for "Id"' in result.stdout, result.stdout


def test_every_lazy_name_is_declared_for_type_checkers() -> None:
    source = Path(zkpy.__file__).read_text()
    block = source[source.index("if TYPE_CHECKING:"):source.index("def __getattr__")]
    for name in zkpy.__all__:
        assert f" {name}" in block, f"{name} is not imported under TYPE_CHECKING in zkpy/__init__.py"
        assert getattr(zkpy, name).__name__ == name


def test_the_program_runs(zkpy_server: ServerProcess) -> None:
    main = runpy.run_path(str(PROGRAM))["main"]
    out = main(zkpy_server.hosts, "/typed-program")
    assert "['RolledBackError', 'BadVersionError']" in out
    assert out[-2:] == ["retry or ignore", "world 6 czxid anyone"]
