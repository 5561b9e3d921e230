"""A snapshot's digest summed in a forked child while the tree is built: the same sum as the
load's own, from a child that really was forked; a child that fails answers None (the load then
sums it itself) and is reaped."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from zkpy.runtime import snapfork
from zkpy.runtime.snapfork import digest_in_child
from zkpy.storage.snapshot import load_snapshot, node_records_digest, snapshot_name, write_snapshot
from zkpy.tree.acl import OPEN_ACL_UNSAFE
from zkpy.tree.datatree import DataTree

pytestmark = pytest.mark.skipif(not snapfork.fork_available(), reason="needs os.fork")


def snapshot_bytes(nodes: int) -> bytes:
    tree = DataTree()
    for i in range(nodes):
        tree.create_node(f"/n{i}", b"v" * (i % 300), OPEN_ACL_UNSAFE, 0, i + 1, i + 1, 1000 + i)
    tree.last_processed_zxid = nodes
    return write_snapshot(tree)


def node_records_start(data: bytes) -> int:
    found: list[int] = []

    def apart(_data: bytes, start: int) -> Callable[[], int | None]:
        found.append(start)
        return lambda: None

    load_snapshot(snapshot_name(1), data, digest_apart=apart)
    return found[0]


@pytest.fixture
def forks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pids of the children ``snapfork`` forks during the test (every size forks)."""
    pids: list[int] = []
    real_fork = os.fork

    def fork() -> int:
        pid = real_fork()
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(snapfork, "DIGEST_IN_CHILD_FROM", 0)
    monkeypatch.setattr(snapfork.os, "fork", fork)
    return pids


def _reaped(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def test_the_child_sums_what_the_load_sums(forks: list[int]) -> None:
    data = snapshot_bytes(2000)
    here = load_snapshot(snapshot_name(1), data).tree
    loaded = load_snapshot(snapshot_name(1), data, digest_apart=digest_in_child).tree
    assert len(forks) == 1 and _reaped(forks[0])
    assert loaded.digest == here.digest != 0


def test_a_child_that_fails_answers_none_and_is_reaped(forks: list[int]) -> None:
    data = snapshot_bytes(50)
    start = node_records_start(data)
    broken = data[:start] + b"\xff\xff\xff\xf0" + data[start + 4:]  # a negative path length
    with pytest.raises(ValueError):
        node_records_digest(broken, start)
    assert digest_in_child(broken, start)() is None
    assert len(forks) == 1 and _reaped(forks[0])


def test_a_small_snapshot_is_summed_without_a_child(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapfork.os, "fork", lambda: pytest.fail("forked for a small snapshot"))
    data = snapshot_bytes(100)
    start = node_records_start(data)
    assert digest_in_child(data, start)() == node_records_digest(data, start)
