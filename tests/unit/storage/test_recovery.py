"""Recovery over a simulated disk: after any crash, the files replay to a prefix of the history
that contains every synced txn (guarantees 6 and 7), with snapshots, rolls and purges in between.

The simulation follows the server's rules: txns are appended in batches and synced; only synced
txns are applied to the tree snapshots are taken from; the log rolls and a fuzzy snapshot starts
every so often and is written in slices while more txns arrive; a crash loses what was not synced
(or keeps a torn piece of it). The seed is in every assertion message.
"""

from __future__ import annotations

import random

import pytest

from helpers.txn_workload import Workload, apart_at_every_size, dump, full_digest, summed_apart
from helpers.txn_workload import hdr as header
from zkpy.storage.disk import MemoryDisk, join
from zkpy.storage.files import DataDirs, logs_after, purge, purge_candidates
from zkpy.storage.recovery import RecoveryError, recover
from zkpy.storage.snapshot import SnapshotWriter, snapshot_name, write_snapshot
from zkpy.storage.txnlog import TxnLogWriter, encode_entry
from zkpy.tree.acl import OPEN_ACL_UNSAFE
from zkpy.tree.datatree import DataTree
from zkpy.wire.consts import OpCode
from zkpy.wire.txn import CreateTxn

DIRS = DataDirs.of("/data", "/datalog")


def _replayed(log: list, count: int) -> DataTree:
    tree = DataTree()
    for hdr, txn in log[:count]:
        tree.apply(hdr, txn)
    tree.events.clear()
    return tree


class SimulatedServer:
    """The server's persistence rules over a MemoryDisk, driven by a seed."""

    def __init__(self, rng: random.Random, disk: MemoryDisk) -> None:
        self.rng = rng
        self.disk = disk
        self.workload = Workload(rng, DataTree())  # the txns as prep makes them
        self.applied = DataTree()  # what the server has applied: synced txns only
        self.logged = 0  # txns handed to the log writer
        self.synced = 0  # txns covered by a sync
        self.writer = TxnLogWriter(disk, DIRS.log_dir, prealloc_bytes=rng.choice([0, 256, 4096]))
        self.snapshot: SnapshotWriter | None = None
        self.snapshot_file = None
        self.snapshots = 0
        for d in (DIRS.snap_dir, DIRS.log_dir):
            disk.makedirs(d)
        self._write_whole(join(DIRS.snap_dir, snapshot_name(0)), write_snapshot(DataTree()))

    def _write_whole(self, path: str, data: bytes) -> None:
        f = self.disk.create(path + ".tmp")
        f.write(data)
        f.sync()
        self.disk.rename(path + ".tmp", path)

    def step(self) -> None:
        rng = self.rng
        self.workload.one()
        log = self.workload.log
        if len(log) > self.logged and rng.random() < 0.5:
            batch = log[self.logged:]
            self.writer.append(batch[0][0].zxid, b"".join(encode_entry(h, t, None) for h, t in batch))
            self.logged = len(log)
            if rng.random() < 0.6:
                self.sync()
            if rng.random() < 0.08:
                self.writer.roll()
                self._synced_up_to(self.logged)
                self.start_snapshot()
        if self.snapshot is not None:
            self.snapshot_slice()
        if rng.random() < 0.03:
            purge(self.disk, DIRS, 3)

    def sync(self) -> None:
        self.writer.sync()
        self._synced_up_to(self.logged)

    def _synced_up_to(self, n: int) -> None:
        for hdr, txn in self.workload.log[self.synced:n]:
            self.applied.apply(hdr, txn)
        self.applied.events.clear()
        self.synced = n

    def start_snapshot(self) -> None:
        if self.snapshot is not None:
            return
        self.snapshot = SnapshotWriter(self.applied)
        self.snapshot_file = self.disk.create(join(DIRS.snap_dir, "tmp." + snapshot_name(self.snapshot.zxid)))
        self.snapshot_file.write(self.snapshot.step(0))

    def snapshot_slice(self) -> None:
        assert self.snapshot is not None and self.snapshot_file is not None
        self.snapshot_file.write(self.snapshot.step(self.rng.randint(1, 20)))
        if self.snapshot.done:
            self.snapshot_file.write(self.snapshot.finish())
            self.snapshot_file.sync()
            self.disk.rename(self.snapshot_file.path, join(DIRS.snap_dir, snapshot_name(self.snapshot.zxid)))
            self.snapshot = None
            self.snapshots += 1


@pytest.mark.parametrize("seed", range(40))
def test_a_crash_recovers_a_prefix_holding_every_synced_txn(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    apart_at_every_size(monkeypatch)
    rng = random.Random(seed)
    disk = MemoryDisk()
    server = SimulatedServer(rng, disk)
    for _ in range(rng.randint(50, 600)):
        server.step()
    disk.crash(keep_unsynced=rng.choice([0, 0, rng.randint(1, 300)]))
    rec = recover(disk, DIRS)
    log = server.workload.log
    zxids = [h.zxid for h, _ in log]
    last = rec.tree.last_processed_zxid
    count = zxids.index(last) + 1 if last else 0
    assert count >= server.synced, f"seed {seed}: recovered {count} txns, {server.synced} were synced"
    assert count <= server.logged, f"seed {seed}: recovered txns that were never logged"
    assert dump(rec.tree) == dump(_replayed(log, count)), f"seed {seed}: recovered tree differs from the replay"
    assert not rec.digest_mismatches, f"seed {seed}"
    again = recover(disk, DIRS, digest_apart=summed_apart)  # recovery leaves the files clean
    assert not again.truncated and dump(again.tree) == dump(rec.tree), f"seed {seed}"
    assert again.tree.digest == rec.tree.digest and not again.digest_mismatches, f"seed {seed}: digest summed apart"
    assert again.tree.digest == full_digest(again.tree), f"seed {seed}"
    lost = recover(disk, DIRS, digest_apart=lambda _work: lambda: None)  # every sum made apart lost
    assert lost.tree.digest == rec.tree.digest and not lost.digest_mismatches, f"seed {seed}: a lost sum"


def test_no_snapshot_but_logs_from_zxid_1_replay_from_an_empty_tree() -> None:
    rng = random.Random(1)
    disk = MemoryDisk()
    server = SimulatedServer(rng, disk)
    for _ in range(100):
        server.step()
    server.sync()
    disk.remove(join(DIRS.snap_dir, snapshot_name(0)))
    for _, path in DIRS.snapshots(disk):
        disk.remove(path)
    rec = recover(disk, DIRS)
    assert rec.snapshot_zxid is None and dump(rec.tree) == dump(_replayed(server.workload.log, server.synced))


def test_no_valid_snapshot_and_a_partial_history_refuses() -> None:
    disk = MemoryDisk()
    rng = random.Random(2)
    server = SimulatedServer(rng, disk)
    while server.snapshots < 4:
        server.step()
    server.sync()
    purge(disk, DIRS, 3)
    for _, path in DIRS.snapshots(disk):
        disk.create(path)  # every snapshot emptied
    with pytest.raises(RecoveryError, match="no valid snapshot"):
        recover(disk, DIRS)


def test_a_gap_between_the_snapshot_and_the_logs_refuses() -> None:
    disk = MemoryDisk()
    server = SimulatedServer(random.Random(3), disk)
    while server.snapshots < 2:
        server.step()
    server.sync()
    newest = DIRS.snapshots(disk)[0][0]
    for zxid, path in DIRS.logs(disk):
        if zxid <= newest:
            disk.remove(path)
    first_log = DIRS.logs(disk)[0][0]
    if first_log > newest + 1:
        with pytest.raises(RecoveryError, match="missing"):
            recover(disk, DIRS)


def test_logs_after_takes_the_log_that_starts_before_the_snapshot() -> None:
    logs = [(1, "log.1"), (0x10, "log.10"), (0x20, "log.20")]
    assert logs_after(logs, 0x15) == logs[1:]
    assert logs_after(logs, 0x10) == logs[1:]
    assert logs_after(logs, 0) == logs


def test_purge_keeps_the_newest_snapshots_and_the_logs_they_need() -> None:
    snaps = [(0x30, "s30"), (0x20, "s20"), (0x18, "s18"), (0x10, "s10"), (0x5, "s5")]
    logs = [(1, "l1"), (0x12, "l12"), (0x19, "l19"), (0x25, "l25")]
    doomed = purge_candidates(snaps[:3], snaps, logs, 3)
    assert sorted(doomed) == ["l1", "s10", "s5"], "l12 holds the txns after snapshot 0x18"
    with pytest.raises(ValueError):
        purge_candidates(snaps, snaps, logs, 2)


def test_a_missing_log_in_the_middle_refuses_instead_of_skipping_txns() -> None:
    rng = random.Random(4)
    disk = MemoryDisk()
    workload = Workload(rng, DataTree())
    disk.makedirs(DIRS.snap_dir)
    f = disk.create(join(DIRS.snap_dir, snapshot_name(0)))
    f.write(write_snapshot(DataTree()))
    f.sync()
    writer = TxnLogWriter(disk, DIRS.log_dir, prealloc_bytes=0)
    for _ in range(3):
        start = len(workload.log)
        while len(workload.log) < start + 10:
            workload.one()
        batch = workload.log[start:]
        writer.append(batch[0][0].zxid, b"".join(encode_entry(h, t, None) for h, t in batch))
        writer.roll()
    logs = DIRS.logs(disk)
    assert len(logs) == 3
    assert dump(recover(disk, DIRS).tree) == dump(_replayed(workload.log, len(workload.log)))
    disk.remove(logs[1][1])
    with pytest.raises(RecoveryError, match="are missing"):
        recover(disk, DIRS)


def test_a_create_that_fails_in_a_replay_summed_apart_leaves_the_digest_as_it_was(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain create the replay cannot apply (a missing parent, a node that exists) was summed
    apart all the same: its share comes out again."""
    apart_at_every_size(monkeypatch)
    disk = MemoryDisk()
    for d in (DIRS.snap_dir, DIRS.log_dir):
        disk.makedirs(d)
    snapshot = disk.create(join(DIRS.snap_dir, snapshot_name(0)))
    snapshot.write(write_snapshot(DataTree()))
    snapshot.sync()
    txns = [(header(1, OpCode.CREATE), CreateTxn("/x", b"x", list(OPEN_ACL_UNSAFE), False, 1)),
            (header(2, OpCode.CREATE), CreateTxn("/y/z", b"z", list(OPEN_ACL_UNSAFE), False, 1)),
            (header(3, OpCode.CREATE), CreateTxn("/x", b"again", list(OPEN_ACL_UNSAFE), False, 2)),
            (header(4, OpCode.CREATE), CreateTxn("/x/w", None, list(OPEN_ACL_UNSAFE), False, 1))]
    writer = TxnLogWriter(disk, DIRS.log_dir)
    writer.append(1, b"".join(encode_entry(h, t, None) for h, t in txns))
    writer.sync()
    rec = recover(disk, DIRS, digest_apart=summed_apart)
    assert sorted(rec.tree.nodes) == ["/", "/x", "/x/w", "/zookeeper", "/zookeeper/config", "/zookeeper/quota"]
    assert rec.tree.digest == full_digest(rec.tree) == recover(disk, DIRS).tree.digest
