"""The epoch files: ZooKeeper 3.8's exact bytes, atomic replacement across crashes, and the
startup rules of QuorumPeer.loadDataBase."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from zkpy.ids import make_zxid
from zkpy.storage.disk import DiskFault, FaultPlan, MemoryDisk, join
from zkpy.storage.epochs import (
    ACCEPTED_EPOCH,
    CURRENT_EPOCH,
    TMP_SUFFIX,
    EpochError,
    Epochs,
    encode_epoch,
    load_epochs,
    parse_epoch,
    read_epoch,
    write_epoch,
)
from zkpy.storage.files import DataDirs
from zkpy.storage.recovery import RecoveryError

SNAP = DataDirs.of("/data").snap_dir
CURRENT = join(SNAP, CURRENT_EPOCH)
ACCEPTED = join(SNAP, ACCEPTED_EPOCH)
CURRENT_TMP = CURRENT + TMP_SUFFIX


class PowerLoss(BaseException):
    """The process stops at a chosen point: no cleanup code runs."""


class PowerCutDisk(MemoryDisk):
    """A MemoryDisk that loses power just before the n-th sync or rename."""

    def __init__(self, before: str, nth: int = 1) -> None:
        super().__init__()
        self.before = before
        self.left = nth

    def _maybe_cut(self, op: str) -> None:
        if op == self.before:
            self.left -= 1
            if self.left == 0:
                raise PowerLoss(op)

    def create(self, path: str):  # type: ignore[no-untyped-def]
        f = super().create(path)
        sync = f.sync

        def cut_then_sync() -> None:
            self._maybe_cut("sync")
            sync()

        f.sync = cut_then_sync  # type: ignore[method-assign]
        return f

    def rename(self, src: str, dst: str) -> None:
        self._maybe_cut("rename")
        super().rename(src, dst)


def _lines() -> tuple[list[str], Callable[[str], None]]:
    lines: list[str] = []
    return lines, lines.append


# ---------------------------------------------------------------- the file format


def test_the_file_holds_decimal_digits_without_a_newline() -> None:
    disk = MemoryDisk()
    write_epoch(disk, SNAP, CURRENT_EPOCH, 12)
    assert disk.read(CURRENT) == b"12"
    assert not disk.exists(CURRENT_TMP), "the tmp file is renamed over the target"
    assert encode_epoch(-1) == b"-1" and encode_epoch((1 << 63) - 1) == b"9223372036854775807"
    with pytest.raises(ValueError):
        encode_epoch(1 << 63)


@pytest.mark.parametrize(("data", "value"), [
    (b"7", 7), (b"7\n", 7), (b"7\r\n", 7), (b"7\rjunk", 7), (b"+7", 7), (b"-1", -1), (b"0", 0),
    (b"9223372036854775807", (1 << 63) - 1), (b"-9223372036854775808", -(1 << 63)),
])
def test_reading_takes_the_first_line_as_a_java_long(data: bytes, value: int) -> None:
    assert parse_epoch(CURRENT, data) == value


@pytest.mark.parametrize("data", [b"", b"\n7", b" 7", b"7 ", b"0x7", b"seven", b"-", b"9223372036854775808"])
def test_anything_else_is_an_error_naming_the_file_and_its_content(data: bytes) -> None:
    with pytest.raises(EpochError, match="currentEpoch") as info:
        parse_epoch(CURRENT, data)
    assert info.value.path == CURRENT
    assert isinstance(info.value, RecoveryError)


def test_a_missing_file_reads_as_none_and_a_write_replaces_the_old_value() -> None:
    disk = MemoryDisk()
    assert read_epoch(disk, SNAP, ACCEPTED_EPOCH) is None
    write_epoch(disk, SNAP, ACCEPTED_EPOCH, 3)
    write_epoch(disk, SNAP, ACCEPTED_EPOCH, 4)
    assert read_epoch(disk, SNAP, ACCEPTED_EPOCH) == 4
    disk.crash()
    assert read_epoch(disk, SNAP, ACCEPTED_EPOCH) == 4, "a returned write is durable"


# ---------------------------------------------------------------- crashes during a write


@pytest.mark.parametrize("before", ["sync", "rename"])
def test_a_crash_during_a_write_leaves_the_old_value(before: str) -> None:
    disk = PowerCutDisk(before, nth=2)
    write_epoch(disk, SNAP, CURRENT_EPOCH, 3)
    with pytest.raises(PowerLoss):
        write_epoch(disk, SNAP, CURRENT_EPOCH, 4)
    disk.crash()
    assert read_epoch(disk, SNAP, CURRENT_EPOCH) == 3
    expected_tmp = b"" if before == "sync" else b"4"  # created (durable, empty), or synced
    assert disk.read(CURRENT_TMP) == expected_tmp
    write_epoch(disk, SNAP, CURRENT_EPOCH, 5)
    assert read_epoch(disk, SNAP, CURRENT_EPOCH) == 5 and not disk.exists(CURRENT_TMP)


def test_a_failed_sync_removes_the_tmp_file_and_keeps_the_old_value() -> None:
    disk = MemoryDisk(FaultPlan(fail_sync_after=2))
    write_epoch(disk, SNAP, CURRENT_EPOCH, 3)
    with pytest.raises(DiskFault):
        write_epoch(disk, SNAP, CURRENT_EPOCH, 4)
    assert read_epoch(disk, SNAP, CURRENT_EPOCH) == 3 and not disk.exists(CURRENT_TMP)


# ---------------------------------------------------------------- loading at startup


def test_missing_files_are_created_with_the_epoch_of_the_last_zxid() -> None:
    disk = MemoryDisk()
    lines, log = _lines()
    assert load_epochs(disk, SNAP, make_zxid(3, 7), log) == Epochs(3, 3)
    assert disk.read(CURRENT) == b"3" and disk.read(ACCEPTED) == b"3"
    assert any("currentEpoch not found" in line for line in lines)
    assert any("acceptedEpoch not found" in line for line in lines)
    assert load_epochs(MemoryDisk(), SNAP, 0) == Epochs(0, 0), "a fresh data dir starts at epoch 0"


def test_existing_files_are_read_as_they_are() -> None:
    disk = MemoryDisk()
    write_epoch(disk, SNAP, CURRENT_EPOCH, 4)
    write_epoch(disk, SNAP, ACCEPTED_EPOCH, 5)
    lines, log = _lines()
    assert load_epochs(disk, SNAP, make_zxid(4, 1), log) == Epochs(4, 5)
    assert lines == []


def test_a_current_epoch_older_than_the_last_zxid_is_refused() -> None:
    disk = MemoryDisk()
    write_epoch(disk, SNAP, CURRENT_EPOCH, 2)
    write_epoch(disk, SNAP, ACCEPTED_EPOCH, 3)
    with pytest.raises(EpochError, match=r"currentEpoch: the current epoch, 2 .* older than the epoch 3 "
                                         r"of the last zxid 0x300000001") as info:
        load_epochs(disk, SNAP, make_zxid(3, 1))
    assert info.value.path == CURRENT


def test_a_crash_after_the_tmp_sync_of_set_current_epoch_is_completed_from_the_tmp() -> None:
    """ZOOKEEPER-1653's case: the new epoch reached the tmp file (and the data) but not its name."""
    disk = PowerCutDisk("rename", nth=3)  # currentEpoch, acceptedEpoch, then the crashed write
    write_epoch(disk, SNAP, CURRENT_EPOCH, 2)
    write_epoch(disk, SNAP, ACCEPTED_EPOCH, 3)
    with pytest.raises(PowerLoss):
        write_epoch(disk, SNAP, CURRENT_EPOCH, 3)
    disk.crash()
    lines, log = _lines()
    assert load_epochs(disk, SNAP, make_zxid(3, 1), log) == Epochs(3, 3)
    assert disk.read(CURRENT) == b"3" and not disk.exists(CURRENT_TMP)
    assert any("currentEpoch.tmp found" in line for line in lines)


def test_a_crash_before_the_tmp_sync_leaves_an_empty_tmp_that_cannot_vouch_for_the_epoch() -> None:
    disk = PowerCutDisk("sync", nth=3)
    write_epoch(disk, SNAP, CURRENT_EPOCH, 2)
    write_epoch(disk, SNAP, ACCEPTED_EPOCH, 3)
    with pytest.raises(PowerLoss):
        write_epoch(disk, SNAP, CURRENT_EPOCH, 3)
    disk.crash()
    assert load_epochs(disk, SNAP, make_zxid(2, 9)) == Epochs(2, 3), "the tmp is ignored when not needed"
    with pytest.raises(EpochError, match="currentEpoch.tmp: found an empty file") as info:
        load_epochs(disk, SNAP, make_zxid(3, 1))
    assert info.value.path == CURRENT_TMP


def test_a_tmp_that_is_still_older_than_the_last_zxid_is_refused() -> None:
    disk = MemoryDisk()
    write_epoch(disk, SNAP, CURRENT_EPOCH, 2)
    write_epoch(disk, SNAP, ACCEPTED_EPOCH, 4)
    disk.create(CURRENT_TMP).write(b"3")
    with pytest.raises(EpochError, match="both older than the epoch 4"):
        load_epochs(disk, SNAP, make_zxid(4, 1))


def test_an_accepted_epoch_below_the_current_one_is_refused() -> None:
    disk = MemoryDisk()
    write_epoch(disk, SNAP, CURRENT_EPOCH, 5)
    write_epoch(disk, SNAP, ACCEPTED_EPOCH, 4)
    with pytest.raises(EpochError, match=r"acceptedEpoch: the accepted epoch, 4 .* less than the current "
                                         r"epoch, 5") as info:
        load_epochs(disk, SNAP, make_zxid(5, 1))
    assert info.value.path == ACCEPTED


def test_a_missing_accepted_epoch_defaults_to_the_zxid_epoch_even_below_the_current_one() -> None:
    """As 3.8: the default is the last zxid's epoch, which a newer current epoch then refuses."""
    disk = MemoryDisk()
    write_epoch(disk, SNAP, CURRENT_EPOCH, 5)
    with pytest.raises(EpochError, match="accepted epoch, 3"):
        load_epochs(disk, SNAP, make_zxid(3, 1))
    assert disk.read(ACCEPTED) == b"3"


def test_an_unreadable_file_is_refused_at_load() -> None:
    disk = MemoryDisk()
    disk.create(CURRENT).write(b"garbage")
    with pytest.raises(EpochError, match="currentEpoch: found 'garbage'"):
        load_epochs(disk, SNAP, 0)
