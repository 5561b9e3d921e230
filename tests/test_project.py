"""Project hygiene that CI enforces: lint, layering, and the README's two commands."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```sh\n(.+?)\n```", text)


VENV_STEP = "python -m venv .venv && . .venv/bin/activate"


def test_readme_opens_with_the_venv_step_then_the_two_commands() -> None:
    commands = _readme_commands()
    assert len(commands) >= 3
    assert commands[0] == VENV_STEP
    assert "zkpy server" in commands[1]
    assert "pytest" in commands[2]
    first_block = (ROOT / "README.md").read_text(encoding="utf-8").split("```")[1]
    assert VENV_STEP in first_block


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert _readme_commands()[2] in ci


def test_the_readme_and_docs_link_only_files_in_the_repository() -> None:
    """A clone has what the README and docs/ link, and nothing they name lies outside it."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "examples").rglob("*.md"))]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "../shared" not in text, f"{page.name} names a file outside the repository"
        for target in re.findall(r"\]\(([^)#\s]+)", text):
            if re.match(r"[a-z]+://|mailto:", target):
                continue
            path = (page.parent / target).resolve()
            assert path.is_relative_to(ROOT) and path.exists(), f"{page.relative_to(ROOT)} links a missing {target}"


def test_the_api_reference_is_up_to_date() -> None:
    """docs/api.md is generated from the docstrings (docs/apidoc.py, standard library only)."""
    result = subprocess.run([sys.executable, "docs/apidoc.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_is_clean() -> None:
    ruff = shutil.which("ruff")
    cmd = [ruff] if ruff else [sys.executable, "-m", "ruff"]
    result = subprocess.run([*cmd, "check", "src", "tests", "bench", "examples", "docs"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_import_layers_hold() -> None:
    lint = shutil.which("lint-imports")
    assert lint, "import-linter is part of the test extras"
    result = subprocess.run([lint], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_import_cycle_in_the_package() -> None:
    """Modules import one way, type hints included: a cycle hides which module is built on which.
    A module's strongly connected component is what it imports that also imports it."""
    graph = grimp.build_graph("zkpy", include_external_packages=False, exclude_type_checking_imports=False,
                              cache_dir=None)
    components = {frozenset({m} | (graph.find_upstream_modules(m) & graph.find_downstream_modules(m)))
                  for m in graph.modules}
    cycles = sorted(sorted(c) for c in components if len(c) > 1)
    assert not cycles, "import cycles: " + "; ".join(", ".join(c) for c in cycles)


def test_mypy_is_clean() -> None:
    """The package ships py.typed: what it promises is checked (``[tool.mypy]``: strict)."""
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
