"""``python -m zkpy`` is the ``zkpy`` command: the same group, commands, help and version."""

from __future__ import annotations

import subprocess
import sys


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60)


def test_python_dash_m_zkpy_is_the_zkpy_command() -> None:
    module, entry = _run("-m", "zkpy", "--help"), _run("-m", "zkpy.cli.main", "--help")
    assert module.returncode == 0, module.stderr
    assert module.stdout.startswith("Usage: zkpy ")
    assert module.stdout.split("\n", 1)[1] == entry.stdout.split("\n", 1)[1]
    assert "server" in module.stdout
    version = _run("-m", "zkpy", "--version")
    assert version.returncode == 0 and version.stdout.startswith("zkpy, version "), version
    lines = version.stdout.splitlines()
    assert lines[1].startswith("event loop: uvloop ") and lines[2].startswith("python: "), lines  # uvloop: a dependency


def test_python_dash_m_zkpy_runs_a_subcommand_and_reports_bad_usage() -> None:
    bad = _run("-m", "zkpy", "no-such-command")
    assert bad.returncode == 2 and "No such command" in bad.stderr
    assert _run("-m", "zkpy", "server", "--help").stdout.startswith("Usage: zkpy server")
