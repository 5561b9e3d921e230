"""Drift fails a check: each dispatch over an effect or an output type is one ``match`` that ends in
``assert_never``, so mypy proves that every driver handles every case.

Each test adds a type to one of the unions (the term cores' effects, the pipeline's outputs, the
member core's effects, the pipeline's outputs for Zab, the Zab cores' actions) in a copy of the code (``src`` and the transcript
drivers, which mypy checks too: pyproject's ``[tool.mypy] files``) and runs mypy on the copy: it
must fail, in every driver of that union. Then the real tree, unchanged, must pass.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SURPRISE = '''class Surprise:
    """A case no driver knows."""


'''

# (the module holding the union, the union's name, the drivers that must each fail)
UNIONS = [
    ("src/zkpy/member/effects.py", "Effect", [
        "src/zkpy/runtime/term.py", "src/zkpy/testing/sim/terms.py", "tests/transcripts/members.py",
        "tests/transcripts/peers.py"]),
    ("src/zkpy/server/outputs.py", "ServerOutput", [
        "src/zkpy/member/term.py", "src/zkpy/member/workers.py", "src/zkpy/member/peer.py",
        "src/zkpy/runtime/server.py", "tests/transcripts/pipeline.py"]),
    ("src/zkpy/member/peer.py", "PeerEffect", [
        "src/zkpy/runtime/peer.py", "src/zkpy/testing/sim/node.py", "tests/transcripts/peers.py"]),
    ("src/zkpy/member/term.py", "ZabOutput", ["src/zkpy/member/leading.py", "src/zkpy/member/learning.py"]),
    ("src/zkpy/quorum/leader.py", "Action", ["src/zkpy/member/leading.py"]),
    ("src/zkpy/quorum/learner.py", "Action", ["src/zkpy/member/learning.py"]),
]


def _copy(tmp: Path) -> Path:
    tree = tmp / "tree"
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copytree(ROOT / "tests" / "transcripts", tree / "tests" / "transcripts",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def _mypy(tree: Path) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tree / ".mypy_cache")], cwd=tree,
                          capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize(("module", "union", "drivers"), UNIONS, ids=[f"{u[0].rsplit('/', 1)[1]}:{u[1]}" for u in UNIONS])
def test_a_case_no_driver_handles_fails_mypy_in_every_driver(tmp_path: Path, module: str, union: str,
                                                            drivers: list[str]) -> None:
    tree = _copy(tmp_path)
    path = tree / module
    text = path.read_text()
    pattern = re.compile(rf"^{union} = ", re.M)
    assert pattern.search(text), f"{module} defines no {union} union"
    path.write_text(pattern.sub(f"{SURPRISE}{union} = Surprise | ", text))
    rc, out = _mypy(tree)
    assert rc != 0, f"mypy passed with a {union} case nobody handles:\n{out}"
    for driver in drivers:
        assert re.search(rf"^{re.escape(driver)}:\d+: error: .*assert_never", out, re.M), (
            f"{driver} did not fail on the new {union} case:\n{out}")


def test_the_tree_as_it_is_passes_mypy(tmp_path: Path) -> None:
    rc, out = _mypy(_copy(tmp_path))
    assert rc == 0, out
