"""Digest sums made in a forked child while the tree is loaded (``snapfork.sum_in_child``): the
child sums the tree as it was at the fork, whatever the parent does next; a snapshot's load and a
replay end with the digest they would have summed alone; a child that fails answers None and is
reaped."""

from __future__ import annotations

import os
import random

import pytest

from helpers.txn_workload import Workload, apart_at_every_size, full_digest
from zkpy.runtime import snapfork
from zkpy.runtime.snapfork import sum_in_child
from zkpy.storage.disk import MemoryDisk, join
from zkpy.storage.files import DataDirs
from zkpy.storage.recovery import recover
from zkpy.storage.snapshot import load_snapshot, snapshot_name, write_snapshot
from zkpy.storage.txnlog import TxnLogWriter, encode_entry
from zkpy.tree.datatree import DataTree

pytestmark = pytest.mark.skipif(not snapfork.fork_available(), reason="needs os.fork")


@pytest.fixture
def forks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pids of the children ``snapfork`` forks during the test; sums apart at every size."""
    pids: list[int] = []
    real_fork = os.fork

    def fork() -> int:
        pid = real_fork()
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(snapfork.os, "fork", fork)
    apart_at_every_size(monkeypatch)
    return pids


def _reaped(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def test_the_child_sums_the_state_at_the_fork(forks: list[int]) -> None:
    state = [41]
    waiting = sum_in_child(lambda: state[0] + 1)
    state[0] = 99  # the parent's change after the fork does not reach the child
    assert waiting() == 42
    assert len(forks) == 1 and _reaped(forks[0])


def test_a_child_that_fails_answers_none_and_is_reaped(forks: list[int]) -> None:
    def fail() -> int:
        raise ValueError("unreadable")

    assert sum_in_child(fail)() is None
    assert len(forks) == 1 and _reaped(forks[0])


def test_a_snapshot_loads_with_its_digest_summed_in_a_child(forks: list[int]) -> None:
    tree = DataTree()
    for i in range(2000):
        tree.create_node(f"/n{i}", b"v" * (i % 300), (), 0, i + 1, i + 1, 1000 + i)
    tree.last_processed_zxid = 2000
    data = write_snapshot(tree)
    loaded = load_snapshot(snapshot_name(2000), data, digest_apart=sum_in_child).tree
    assert len(forks) == 1 and all(_reaped(pid) for pid in forks)
    assert loaded.digest == tree.digest == full_digest(tree)


def test_a_replay_ends_with_the_digest_whatever_the_children_summed(forks: list[int]) -> None:
    seed = 5
    print(f"seed {seed}")
    rng = random.Random(seed)
    work = Workload(rng, DataTree())
    work.run(600)
    disk = MemoryDisk()
    dirs = DataDirs.of("/data")
    disk.makedirs(dirs.snap_dir)
    snapshot = disk.create(join(dirs.snap_dir, snapshot_name(0)))
    snapshot.write(write_snapshot(DataTree()))
    snapshot.sync()
    writer = TxnLogWriter(disk, dirs.log_dir)
    writer.append(work.log[0][0].zxid, b"".join(encode_entry(h, t, None) for h, t in work.log))
    writer.sync()
    alone = recover(disk, dirs)
    apart = recover(disk, dirs, digest_apart=sum_in_child)
    assert apart.txns_replayed >= 500 and len(forks) == 2  # snapshot.0's load, then the replay
    assert all(_reaped(pid) for pid in forks)
    assert apart.tree.digest == alone.tree.digest == work.tree.digest == full_digest(work.tree)
    assert not apart.digest_mismatches
