"""TRUNC(zxid) on a learner's data dir: afterwards recovery rebuilds exactly the txns up to
zxid; a crash at any point of the truncation recovers to a gapless prefix of the old history,
and running it again finishes the job."""

from __future__ import annotations

import random
from typing import Any

import pytest

from helpers.txn_workload import Workload, dump
from zkpy.ids import make_zxid
from zkpy.storage.disk import MemoryDisk, join
from zkpy.storage.files import DataDirs
from zkpy.storage.recovery import recover
from zkpy.storage.snapshot import snapshot_name, write_snapshot
from zkpy.storage.truncate import TruncateError, truncate_to
from zkpy.storage.txnlog import CorruptLogError, TxnLogWriter, encode_entry, log_name, scan_log
from zkpy.tree.datatree import DataTree

DIRS = DataDirs.of("/data", "/datalog")


class History:
    """A learner's data dir built from a workload: log files of the given sizes (in txns), each
    written in random batches and rolled, and whole snapshots after the given txn counts."""

    def __init__(self, seed: int, file_sizes: list[int], snapshots_after: tuple[int, ...] = (0,),
                 prealloc_bytes: int = 4096, epoch_change_after: int | None = None) -> None:
        self.rng = random.Random(seed)
        self.disk = MemoryDisk()
        workload = Workload(self.rng, DataTree())
        while len(workload.log) < sum(file_sizes):
            if len(workload.log) == epoch_change_after and workload.zxid < make_zxid(2, 0):
                workload.zxid = make_zxid(2, 0)
            workload.one()
        self.log: list[tuple[Any, Any]] = workload.log[:sum(file_sizes)]
        writer = TxnLogWriter(self.disk, DIRS.log_dir, prealloc_bytes=prealloc_bytes)
        start = 0
        for size in file_sizes:
            pos = start
            while pos < start + size:
                batch = self.log[pos:pos + self.rng.randint(1, 4)][:start + size - pos]
                writer.append(batch[0][0].zxid, b"".join(encode_entry(h, t, None) for h, t in batch))
                pos += len(batch)
            writer.roll()
            start += size
        for count in snapshots_after:
            tree = self.replayed(count)
            self.disk.makedirs(DIRS.snap_dir)
            f = self.disk.create(join(DIRS.snap_dir, snapshot_name(tree.last_processed_zxid)))
            f.write(write_snapshot(tree))
            f.sync()

    @property
    def zxids(self) -> list[int]:
        return [h.zxid for h, _ in self.log]

    def replayed(self, count: int) -> DataTree:
        tree = DataTree()
        for hdr, txn in self.log[:count]:
            tree.apply(hdr, txn)
        tree.events.clear()
        return tree

    def count_upto(self, zxid: int) -> int:
        return sum(1 for z in self.zxids if z <= zxid)

    def files(self) -> dict[str, bytes]:
        return {p: bytes(b) for p, b in self.disk.files.items()}

    def assert_recovers_to(self, zxid: int, context: str = "") -> None:
        rec = recover(self.disk, DIRS)
        count = self.count_upto(zxid)
        assert rec.tree.last_processed_zxid == (self.zxids[count - 1] if count else 0), context
        assert dump(rec.tree) == dump(self.replayed(count)), context
        assert not rec.truncated and not rec.removed, f"{context}: truncation left files for recovery to fix"


def _log(zxid: int) -> str:
    return join(DIRS.log_dir, log_name(zxid))


def _snap(zxid: int) -> str:
    return join(DIRS.snap_dir, snapshot_name(zxid))


# ---------------------------------------------------------------- where the cut falls


def test_truncating_inside_a_file_cuts_it_after_the_txn_and_removes_later_files() -> None:
    h = History(1, [10, 10, 10, 10])  # log.1, log.b, log.15, log.1f
    result = truncate_to(h.disk, DIRS, 15)
    assert result.cut is not None and result.cut[0] == _log(11)
    assert result.removed_logs == [_log(31), _log(21)], "newest first"
    assert result.removed_snapshots == [] and result.last_zxid == 15
    assert [p for _, p in DIRS.logs(h.disk)] == [_log(1), _log(11)]
    h.assert_recovers_to(15)


def test_truncating_at_the_last_txn_of_a_file_keeps_it_whole() -> None:
    h = History(2, [10, 10, 10])
    before = h.disk.read(_log(11))
    result = truncate_to(h.disk, DIRS, 20)
    assert result.cut is None, "only preallocated zeros follow txn 20"
    assert result.removed_logs == [_log(21)] and result.last_zxid == 20
    assert h.disk.read(_log(11)) == before
    h.assert_recovers_to(20)


def test_truncating_at_the_first_txn_of_a_file_keeps_only_that_txn_of_it() -> None:
    h = History(3, [10, 10, 10])
    result = truncate_to(h.disk, DIRS, 21)
    assert result.cut is not None and result.cut[0] == _log(21) and result.removed_logs == []
    assert result.last_zxid == 21
    h.assert_recovers_to(21)


def test_truncating_to_the_last_txn_changes_nothing() -> None:
    h = History(4, [10, 10, 10], snapshots_after=(0, 12))
    before = h.files()
    result = truncate_to(h.disk, DIRS, 30)
    assert not result.changed and result.last_zxid == 30
    assert h.files() == before
    h.assert_recovers_to(30)
    assert not truncate_to(h.disk, DIRS, 31).changed, "past the last txn there is nothing to cut"


def test_truncating_below_the_first_log_removes_every_log() -> None:
    h = History(5, [10, 10, 10], snapshots_after=(0, 12, 25))
    result = truncate_to(h.disk, DIRS, 0)
    assert result.removed_logs == [_log(21), _log(11), _log(1)]
    assert result.removed_snapshots == [_snap(25), _snap(12)] and result.last_zxid == -1
    assert DIRS.logs(h.disk) == [] and [z for z, _ in DIRS.snapshots(h.disk)] == [0]
    h.assert_recovers_to(0)


def test_snapshots_after_the_zxid_are_removed_and_older_ones_kept() -> None:
    h = History(6, [10, 10, 10, 10], snapshots_after=(0, 12, 20, 25, 38))
    result = truncate_to(h.disk, DIRS, 20)
    assert result.removed_snapshots == [_snap(38), _snap(25)], "newest first; snapshot.14 (at zxid 20) stays"
    assert [z for z, _ in DIRS.snapshots(h.disk)] == [20, 12, 0]
    rec = recover(h.disk, DIRS)
    assert rec.snapshot_zxid == 20
    h.assert_recovers_to(20)
    h.disk.remove(_snap(20))
    h.assert_recovers_to(20)  # from snapshot.c and the cut log


def test_a_zxid_between_two_epochs_cuts_after_the_last_txn_below_it() -> None:
    h = History(7, [10, 10], epoch_change_after=14)  # 1..14, then 0x200000001..
    assert h.zxids[14] == make_zxid(2, 1)
    result = truncate_to(h.disk, DIRS, make_zxid(1, 0x7FFF))  # no txn has this zxid
    assert result.last_zxid == 14 and result.cut is not None and result.cut[0] == _log(11)
    h.assert_recovers_to(14)


def test_truncating_twice_is_the_same_as_once() -> None:
    h = History(8, [10, 10, 10], snapshots_after=(0, 25))
    truncate_to(h.disk, DIRS, 17)
    after = h.files()
    assert not truncate_to(h.disk, DIRS, 17).changed
    assert h.files() == after


@pytest.mark.parametrize("seed", range(30))
def test_recovery_after_any_truncation_rebuilds_exactly_the_txns_up_to_it(seed: int) -> None:
    rng = random.Random(seed)
    sizes = [rng.randint(1, 12) for _ in range(rng.randint(1, 6))]
    total = sum(sizes)
    snaps = tuple(sorted({0} | {rng.randint(1, total) for _ in range(rng.randint(0, 3))}))
    h = History(seed, sizes, snaps, prealloc_bytes=rng.choice([0, 256, 4096]))
    zxid = rng.choice([0, total, rng.randint(0, total), rng.randint(0, total)])
    context = f"seed {seed}: files {sizes}, snapshots after {snaps}, truncate to {zxid}"
    result = truncate_to(h.disk, DIRS, zxid)
    assert result.last_zxid == (zxid if zxid else -1), context
    assert all(z <= zxid for z, _ in DIRS.snapshots(h.disk)), context
    h.assert_recovers_to(zxid, context)


# ---------------------------------------------------------------- refusals and damage


def test_no_state_at_the_zxid_to_rebuild_refuses_and_changes_nothing() -> None:
    h = History(9, [10, 10, 10], snapshots_after=(20,))
    h.disk.remove(_log(1))  # purged: the history now starts at snapshot.14
    before = h.files()
    with pytest.raises(TruncateError, match="no valid snapshot at or below it and the oldest log starts at 0xb"):
        truncate_to(h.disk, DIRS, 15)
    assert h.files() == before
    truncate_to(h.disk, DIRS, 22)
    h.assert_recovers_to(22)


def test_full_logs_without_any_snapshot_are_enough() -> None:
    h = History(10, [10, 10], snapshots_after=())
    truncate_to(h.disk, DIRS, 13)
    h.assert_recovers_to(13)


def _record_offsets(h: History, path: str) -> list[int]:
    return [e.offset for e in scan_log(path, h.disk.read(path)).entries]


def test_damage_after_the_cut_goes_with_the_rest_of_the_file() -> None:
    h = History(11, [20])
    offsets = _record_offsets(h, _log(1))
    buf = h.disk.files[_log(1)]
    buf[offsets[12] + 5] ^= 0xFF  # txn 13's record is damaged, later ones are intact
    with pytest.raises(CorruptLogError):
        recover(h.disk, DIRS)
    result = truncate_to(h.disk, DIRS, 10)
    assert result.cut == (_log(1), offsets[10])
    h.assert_recovers_to(10)


def test_damage_at_or_before_the_zxid_refuses() -> None:
    h = History(12, [20])
    offsets = _record_offsets(h, _log(1))
    h.disk.files[_log(1)][offsets[5] + 5] ^= 0xFF  # txn 6
    before = h.files()
    with pytest.raises(CorruptLogError):
        truncate_to(h.disk, DIRS, 10)
    assert h.files() == before


def test_a_torn_tail_after_the_last_txn_is_cut_off() -> None:
    h = History(13, [10, 10], prealloc_bytes=0)
    f = h.disk.append(_log(11))
    f.write(b"\x00\x00\x00\x00\x12\x34garbage")
    result = truncate_to(h.disk, DIRS, 20)
    assert result.cut is not None and result.cut[0] == _log(11)
    h.assert_recovers_to(20)


# ---------------------------------------------------------------- crashes midway


def _last_logged(disk: MemoryDisk) -> int:
    return max((scan_log(p, disk.read(p)).last_zxid for _, p in DIRS.logs(disk)), default=0)


class PowerLoss(BaseException):
    pass


class PowerCutDisk(MemoryDisk):
    """Loses power just before its n-th remove or truncate."""

    def __init__(self, source: MemoryDisk, nth: int) -> None:
        super().__init__()
        self.files = source.files
        self.durable = source.durable
        self.left = nth

    def _step(self) -> None:
        self.left -= 1
        if self.left == 0:
            raise PowerLoss

    def remove(self, path: str) -> None:
        self._step()
        super().remove(path)

    def truncate(self, path: str, size: int) -> None:
        self._step()
        super().truncate(path, size)


@pytest.mark.parametrize("seed", range(6))
def test_a_crash_at_any_step_recovers_a_gapless_prefix_and_a_retry_finishes(seed: int) -> None:
    rng = random.Random(seed)
    sizes = [rng.randint(3, 10) for _ in range(5)]
    total = sum(sizes)
    snaps = (0, sizes[0], total - 1)
    zxid = rng.randint(1, sizes[0] + sizes[1])
    planned = truncate_to(History(seed, sizes, snaps).disk, DIRS, zxid)
    steps = len(planned.removed_snapshots) + len(planned.removed_logs) + (planned.cut is not None) + 1
    assert steps >= 3, "the scenario removes files and cuts one"
    for nth in range(1, steps + 1):
        h = History(seed, sizes, snaps)
        context = f"seed {seed}: files {sizes}, truncate to {zxid}, power lost before change {nth}"
        disk = PowerCutDisk(h.disk, nth)
        try:
            truncate_to(disk, DIRS, zxid)
        except PowerLoss:
            pass
        h.disk.crash()
        rec = recover(h.disk, DIRS)
        last = rec.tree.last_processed_zxid
        assert last >= zxid, context
        assert last == _last_logged(h.disk), f"{context}: the recovered tree is ahead of the logs"
        assert dump(rec.tree) == dump(h.replayed(h.count_upto(last))), f"{context}: not a prefix of the history"
        truncate_to(h.disk, DIRS, zxid)
        h.assert_recovers_to(zxid, context)
