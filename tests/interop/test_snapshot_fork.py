"""Snapshots a forked child writes while writes go on (issue 15).

A zkpy server with a few thousand znodes takes snapshots (a small snapCount) while several
sessions keep writes in flight, so every snapshot is forked off in the middle of the load. Its
log must show the forked writer was used; every snapshot file it left is read by zkpy's loader
and by Apache's SnapshotFormatter; after a SIGKILL no snapshot child outlives the server; and
zkpy's recovery, a restarted zkpy and Apache ZooKeeper 3.8 started on copies of the data dir all
reach the tree the server served before the kill.
"""

from __future__ import annotations

import random
import re
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from kazoo.exceptions import NodeExistsError, NoNodeError
from tests.interop.test_storage_interop import (
    SETTINGS,
    Dump,
    assert_apache_loaded_cleanly,
    assert_apache_rebuilt_our_tree,
    assert_same_tree,
    check_snapshot_with_formatter,
    copy_data,
    dump_tree,
    files,
    kazoo,
    zkpy_recovery,
)

from zkpy.testing.servers import ServerProcess, start_apache, start_zkpy

pytestmark = pytest.mark.interop

ZKPY_SETTINGS = {**SETTINGS, "snapCount": "600", "preAllocSize": "64"}
BASE_NODES = 4000
WRITES_PER_WRITER = 1500
WRITERS = 4
CHILD = re.compile(r"snapshotting 0x[0-9a-f]+ to \S+ \(child (\d+)\)")


@pytest.fixture(autouse=True, scope="module")
def _apache_installed() -> None:
    from tests.conftest import require_apache

    require_apache()


def build_tree(server: ServerProcess) -> None:
    zk = kazoo(server)
    try:
        zk.create("/base")
        for start in range(0, BASE_NODES, 500):
            t = zk.transaction()
            for i in range(start, start + 500):
                t.create(f"/base/n{i}", b"x" * 40)
            assert all(r is True or isinstance(r, str) for r in t.commit())
    finally:
        zk.stop()
        zk.close()


def writer(server: ServerProcess, seed: int, index: int) -> None:
    """setData, create and delete with 32 requests in flight at a time."""
    rng = random.Random(seed * 100 + index)
    zk = kazoo(server)
    try:
        for _ in range(WRITES_PER_WRITER // 32):
            pending = []
            for _ in range(32):
                roll, n = rng.random(), rng.randrange(BASE_NODES)
                if roll < 0.7:
                    pending.append(zk.set_async(f"/base/n{n}", rng.randbytes(rng.randrange(60))))
                elif roll < 0.85:
                    pending.append(zk.create_async(f"/base/n{n}/c{index}", b"c"))
                else:
                    pending.append(zk.delete_async(f"/base/n{n}/c{index}"))
            for p in pending:
                try:
                    p.get(timeout=30)
                except (NodeExistsError, NoNodeError):
                    pass
    finally:
        zk.stop()
        zk.close()


def gone(pid: int) -> bool:
    """No such process, or a zombie (dead, waiting for whoever adopted it to reap it)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    state = next((line.split()[1] for line in status.splitlines() if line.startswith("State:")), "Z")
    return state in ("Z", "X")


def test_snapshots_forked_under_writes_load_in_zkpy_and_apache(tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    server = start_zkpy(ZKPY_SETTINGS)
    try:
        build_tree(server)
        with ThreadPoolExecutor(WRITERS) as pool:
            for f in [pool.submit(writer, server, seed, i) for i in range(WRITERS)]:
                f.result()
        dump = dump_tree(server)
        children = [int(pid) for pid in CHILD.findall(server.log())]
        assert server.stop(signal.SIGKILL) == -signal.SIGKILL
        check_written(server, children, dump, tmp_path)
    finally:
        server.cleanup()


def check_written(server: ServerProcess, children: list[int], dump: Dump, tmp_path: Path) -> None:
    log = server.log()
    assert len(children) >= 3, f"snapshots by a forked child:\n{log[-4000:]}"
    assert log.count(" written: ") >= 2, log[-4000:]
    assert "ERROR" not in log and "Traceback" not in log, log[-4000:]
    deadline = time.monotonic() + 10
    while not all(gone(pid) for pid in children):
        assert time.monotonic() < deadline, f"snapshot children outlived the server: {children}"
        time.sleep(0.05)

    snapshots = files(server.workdir, "snapshot")
    assert len(snapshots) >= 3, snapshots
    with ThreadPoolExecutor(2) as pool:
        for check in [pool.submit(check_snapshot_with_formatter, p) for p in snapshots[-3:]]:
            check.result()

    ours = zkpy_recovery(server.workdir, tmp_path / "recovered")
    assert ours.txns_replayed > 0, "txns logged after the last snapshot"
    again = start_zkpy(ZKPY_SETTINGS, workdir=copy_data(server.workdir, tmp_path / "zkpy"))
    try:
        assert_same_tree(dump, dump_tree(again))
    finally:
        again.cleanup()
    apache = start_apache(SETTINGS, workdir=copy_data(server.workdir, tmp_path / "apache"))
    try:
        assert_same_tree(dump, dump_tree(apache))
        assert_apache_loaded_cleanly(apache)
        assert_apache_rebuilt_our_tree(apache, ours)
    finally:
        apache.cleanup()
