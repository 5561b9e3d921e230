"""docs/recipes.md's examples run as written against Apache ZooKeeper too (every docs/ example runs
against a fresh zkpy server in tests/integration/test_docs.py).

Each ```python block runs on its own, with ``127.0.0.1:2181`` replaced by the test server under a
fresh chroot (so the examples' paths start empty and runs do not meet)."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from zkpy.testing.servers import ServerProcess

DOC = Path(__file__).resolve().parents[2] / "docs" / "recipes.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def test_the_doc_has_an_example_per_recipe() -> None:
    text = "".join(EXAMPLES)
    for name in ("Lock", "ReadLock", "WriteLock", "RevocableLock", "Semaphore", "DoubleBarrier", "PriorityQueue",
                 "LockingQueue", "Election", "Party", "ReadyConfig", "DataWatch", "Rendezvous", "Coordinator",
                 "Participant", "Counter"):
        assert name in text, f"docs/recipes.md has no example of {name}"


@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_doc_example_runs_on_apache(apache_server: ServerProcess, index: int) -> None:
    chroot = f"/docs-{uuid.uuid4().hex[:10]}"
    kz = KazooClient(apache_server.hosts)
    kz.start()
    try:
        kz.ensure_path(chroot)
        code = EXAMPLES[index].replace("127.0.0.1:2181", apache_server.hosts + chroot)
        exec(compile(code, f"docs/recipes.md example {index + 1}", "exec"), {"__name__": "__docs__"})
        kz.delete(chroot, recursive=True)
    finally:
        kz.stop()
        kz.close()
