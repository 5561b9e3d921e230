"""The example project (examples/jobqueue) passes its own tests in a fresh virtual environment
where zkpy comes from the wheel built from this checkout: the wheel installs and runs, the
``zkpy`` command and ``python -m zkpy`` work from it, and its pytest plugin loads by its entry
point alone (the example's tests use its fixtures without naming the plugin anywhere).

Costs (2 cores): building the wheel (setuptools in pip's isolated build environment, 3-8 s), the
venv (3 s), installing the wheel with its dependencies, kazoo and pytest from PyPI (10-30 s: pip's
cache makes the second run cheap), and the example's tests (two 3-member ensembles, about 25 s).
The checkout and the example are copied first: the build leaves nothing in the working tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "jobqueue"
_NETWORK = ("Could not find a version", "Failed to establish a new connection", "Temporary failure in name",
            "No matching distribution", "ConnectionError", "Network is unreachable")


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment less what would let the venv see this checkout or its plugins."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")
           and not k.startswith("PYTEST_DISABLE")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env.update(extra)
    return env


def _run(cmd: list[str], cwd: Path, timeout: float, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=_clean_env(**env), capture_output=True, text=True, timeout=timeout)


def _pip(cmd: list[str], cwd: Path) -> None:
    result = _run(cmd, cwd, 300)
    if result.returncode != 0:
        out = result.stdout[-3000:] + result.stderr[-3000:]
        if any(n in out for n in _NETWORK) and not os.environ.get("CI"):
            pytest.skip(f"PyPI is out of reach: {out[-300:]}")
        pytest.fail(f"{' '.join(cmd[:4])} ... failed:\n{out}")


def test_the_example_project_passes_from_the_built_wheel_in_a_fresh_venv(tmp_path: Path) -> None:
    start = time.monotonic()
    steps: list[str] = []

    def step(name: str) -> None:  # what each step cost, shown with -s or on failure
        steps.append(f"{name} {time.monotonic() - start:.1f}s")
        print("test_examples:", ", ".join(steps))

    source = tmp_path / "zkpy"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    dist = tmp_path / "dist"
    _pip([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)], tmp_path)
    wheels = sorted(dist.glob("zkpy_server-*.whl"))
    assert len(wheels) == 1, list(dist.iterdir())
    step("wheel")

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=_clean_env(), timeout=120)
    python = venv / "bin" / "python"
    _pip([str(python), "-m", "pip", "install", "-q", "--no-compile", str(wheels[0]), "kazoo>=2.10", "pytest>=8.0"],
         tmp_path)
    step("venv+install")

    where = _run([str(python), "-c", "import zkpy; print(zkpy.__file__)"], tmp_path, 60)
    assert where.stdout.strip().startswith(str(venv)), where.stdout + where.stderr  # the wheel's, not this checkout's
    for cmd in ([str(venv / "bin" / "zkpy"), "--version"], [str(python), "-m", "zkpy", "--version"]):
        version = _run(cmd, tmp_path, 60)
        assert version.returncode == 0 and version.stdout.startswith("zkpy, version"), version

    example = tmp_path / "jobqueue"
    shutil.copytree(EXAMPLE, example, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    result = _run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA"], example, 300)
    step("example tests")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-6000:]
    for variant in ("[kazoo]", "[zkpy]"):
        assert any(line.startswith("PASSED") and variant in line for line in out.splitlines()), out[-3000:]
    assert "test_failover.py" in out
