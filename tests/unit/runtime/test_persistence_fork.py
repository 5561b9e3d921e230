"""Persistence's snapshots, in process: a forked child writes the tree as it was at the fork,
whatever the loop changes afterwards; with injected disk faults the snapshot is sliced on the
loop instead; either file loads with the tree it was taken of."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path

import pytest

from zkpy.config import ServerConfig
from zkpy.runtime.osdisk import OsDisk
from zkpy.runtime.persistence import Persistence
from zkpy.storage.disk import FaultPlan
from zkpy.storage.files import DataDirs
from zkpy.storage.snapshot import load_snapshot, snapshot_name
from zkpy.tree.acl import OPEN_ACL_UNSAFE
from zkpy.tree.datatree import DataTree

NODES = 3000


def build_tree() -> DataTree:
    tree = DataTree()
    zxid = 0
    for i in range(NODES):
        zxid += 1
        tree.create_node(f"/n{i}", b"v%d" % i, OPEN_ACL_UNSAFE, 0, i + 1, zxid, 1000 + zxid)
    tree.last_processed_zxid = zxid
    tree.sessions[0x1234] = 30000
    return tree


def as_stored(tree: DataTree) -> dict[str, tuple[object, ...]]:
    return {p: (n.data, n.czxid, n.mzxid, n.version, n.cversion, n.pzxid) for p, n in tree.nodes.items()}


def snapshot_while_changing(tmp_path: Path, disk: OsDisk) -> tuple[dict[str, tuple[object, ...]], DataTree, str]:
    """Snapshot the tree, change it right after the snapshot starts, wait for the file; the
    tree as it was at the start, the tree the file holds, and the snapshot's file name."""
    dirs = DataDirs.of(str(tmp_path / "data"))
    tree = build_tree()
    before = as_stored(tree)

    async def run() -> str:
        p = Persistence(ServerConfig(), disk, dirs)
        p.start(asyncio.get_running_loop(), lambda n: None, lambda exc: None)
        try:
            assert p.start_snapshot(tree)
            zxid = tree.last_processed_zxid
            # the loop goes on applying after Z: a new node, a changed one
            tree.create_node("/after", b"new", OPEN_ACL_UNSAFE, 0, NODES + 1, zxid + 1, 9999)
            tree.nodes["/n0"].data = b"changed after the snapshot started"
            deadline = time.monotonic() + 30
            while p.snapshot is not None:
                assert time.monotonic() < deadline, "the snapshot never finished"
                await asyncio.sleep(0.01)
            return snapshot_name(zxid)
        finally:
            p.close()

    name = asyncio.run(run())
    data = Path(dirs.snap_dir, name).read_bytes()
    assert not [f for f in os.listdir(dirs.snap_dir) if f.startswith("tmp.")]
    return before, load_snapshot(name, data).tree, name


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_writes_the_tree_as_it_was_at_the_fork(tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="zkpy.persistence")
    before, loaded, name = snapshot_while_changing(tmp_path, OsDisk())
    assert "(child " in caplog.text, caplog.text
    assert as_stored(loaded) == before, name
    assert loaded.sessions == {0x1234: 30000}


def test_with_injected_faults_the_snapshot_is_sliced_on_the_loop(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="zkpy.persistence")
    before, loaded, name = snapshot_while_changing(tmp_path, OsDisk(FaultPlan(fail_sync_after=1 << 30)))
    assert "(child " not in caplog.text and "snapshotting" in caplog.text, caplog.text
    # sliced while the tree changes: fuzzy, every node written as it is when its slice comes
    assert set(loaded.nodes) <= set(before) | {"/after"}
    assert set(before) <= set(loaded.nodes)


def test_write_back_flushes_a_range_and_leaves_the_bytes_readable(tmp_path: Path) -> None:
    """The forked writer's per-MiB flush (sync_file_range + DONTNEED where Linux has it, a
    sync elsewhere): the file reads back whole, whatever was dropped from the page cache."""
    disk = OsDisk()
    path = str(tmp_path / "f")
    f = disk.create(path)
    chunks = [bytes([i]) * (1 << 20) for i in range(1, 4)]
    synced = 0
    for chunk in chunks:
        f.write(chunk)
        f.write_back(synced, f.position)
        synced = f.position
    f.sync()
    f.close()
    assert disk.read(path) == b"".join(chunks)
