"""Every Python example in docs/ runs as written, each against a fresh zkpy server.

A ```python block whose first line names a file (``# tests/test_x.py``) is part of a small pytest
project, one per page: the test writes those files and runs pytest on them with zkpy's plugin
(docs/testing.md). Every other block runs on its own with ``exec``, every ``127.0.0.1:218N`` in it
replaced by a fresh zkpy server's address: nothing exists on that server beforehand, so an example
that needs a node (a chroot, say) must create it itself. docs/recipes.md's examples also run against
Apache ZooKeeper (tests/recipes/test_docs.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from zkpy.testing.servers import ServerProcess, start_zkpy

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").glob("*.md"))
FILE_LINE = re.compile(r"# ([\w./-]+\.py)\n")


def _blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)


SNIPPETS = [(page.name, i + 1, code) for page in PAGES for i, code in enumerate(_blocks(page))
            if not FILE_LINE.match(code)]
PROJECTS = [page for page in PAGES if any(FILE_LINE.match(code) for code in _blocks(page))]


@pytest.fixture
def fresh_server() -> Iterator[ServerProcess]:
    server = start_zkpy()
    yield server
    server.cleanup()


def test_the_docs_have_examples_of_both_kinds() -> None:
    assert {name for name, _, _ in SNIPPETS} >= {"client.md", "recipes.md"}
    assert [p.name for p in PROJECTS] == ["testing.md"]


@pytest.mark.parametrize(("page", "index", "code"), SNIPPETS, ids=[f"{p}-{i}" for p, i, _ in SNIPPETS])
def test_doc_example_runs_on_a_fresh_server(fresh_server: ServerProcess, page: str, index: int, code: str) -> None:
    code = re.sub(r"127\.0\.0\.1:218\d", fresh_server.hosts, code)
    exec(compile(code, f"docs/{page} example {index}", "exec"), {"__name__": "__docs__"})


@pytest.mark.parametrize("page", PROJECTS, ids=[p.name for p in PROJECTS])
def test_doc_test_files_pass_with_the_plugin(tmp_path: Path, page: Path) -> None:
    files = {}
    for code in _blocks(page):
        named = FILE_LINE.match(code)
        if named:
            assert named.group(1) not in files, f"{page.name} names {named.group(1)} twice"
            files[named.group(1)] = code
    for name, code in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(code, encoding="utf-8")
    # the plugin named explicitly, entry points off: the same run whether or not this checkout's
    # distribution is installed with its entry point (the example project checks the entry point)
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                             "zkpy.testing.pytest_plugin", "--rootdir", str(tmp_path), "tests"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    tests = sum(code.count("\ndef test_") for code in files.values())
    assert f"{tests} passed" in result.stdout, result.stdout[-2000:]
