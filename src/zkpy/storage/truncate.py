"""A learner's TRUNC(zxid): drop every txn after ``zxid`` from the data dir (pure, over a Disk).

What ZooKeeper 3.8 does (Learner.syncWithLeader on TRUNC -> ZKDatabase.truncateLog ->
FileTxnSnapLog.truncateLog -> FileTxnLog.truncate): it positions a log iterator on ``zxid``,
cuts that log file right after the record it stopped on, deletes every later log file, and
reloads the database from the newest snapshot. It leaves the snapshots alone, so a snapshot
newer than ``zxid`` would be loaded again and bring back the txns the TRUNC was to drop.

zkpy keeps the same file layout and differs where 3.8 is unsafe:

* every snapshot named after ``zxid`` is removed, so recovery cannot load it;
* the cut falls right after the last record whose zxid is ``<= zxid``, whether or not a record
  with exactly ``zxid`` exists (3.8 keeps the first record at or after ``zxid``, which may be a
  later one, e.g. when ``zxid`` is below the first logged txn);
* a ``zxid`` at or past the last logged txn changes nothing (3.8 fails when no record reaches
  ``zxid``); ``TruncateResult.last_zxid`` tells the caller where the logs end;
* before touching anything it checks that the state at ``zxid`` can be rebuilt: a valid
  snapshot named at or below ``zxid`` stays, or (with none left) the logs start at zxid 1.
  Otherwise it raises ``TruncateError`` and the learner needs a full snapshot (SNAP).

Order of the changes, so that a crash at any point leaves a data dir that ``recover`` loads
to a prefix of the history as it was before the call (never txns after a gap):

1. snapshots after ``zxid``, newest first: recovery then loads an older snapshot, and the logs,
   still whole, replay to the same last txn as before;
2. log files after the one holding ``zxid``, newest first: the logs left are still a gapless
   prefix (removing an older one first, or cutting first, would leave later txns to be
   replayed after a hole);
3. the cut inside the log holding ``zxid`` (``Disk.truncate`` is durable when it returns).

After a crash the learner has reported nothing to the leader, which sends TRUNC again; the
call is idempotent and finishes the job. Once it returns, no txn after ``zxid`` is left in any
file recovery reads. The caller closes its ``TxnLogWriter`` first (the cut file must not be
appended to; the next txn starts a new log), as FileTxnSnapLog closes its log.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from zkpy.ids import make_zxid, zxid_epoch
from zkpy.storage.disk import Disk
from zkpy.storage.epochs import CURRENT_EPOCH, TMP_SUFFIX, read_epoch
from zkpy.storage.files import DataDirs
from zkpy.storage.recovery import MAX_SNAPSHOTS_TRIED, RecoveryError
from zkpy.storage.snapshot import is_valid_snapshot
from zkpy.storage.txnlog import HEADER_SIZE, CorruptLogError, LogScan, scan_log

Log = Callable[[str], None]


class TruncateError(RecoveryError):
    """The data dir cannot be truncated to the zxid without losing the state at that zxid."""


@dataclass(slots=True)
class TruncateResult:
    zxid: int
    cut: tuple[str, int] | None = None  # (log path, its new size) when records or junk were cut off
    removed_logs: list[str] = field(default_factory=list)  # in the order removed (newest first)
    removed_snapshots: list[str] = field(default_factory=list)  # in the order removed (newest first)
    last_zxid: int = -1  # the last txn left in the logs (-1: none)

    @property
    def changed(self) -> bool:
        return self.cut is not None or bool(self.removed_logs) or bool(self.removed_snapshots)


@dataclass(frozen=True, slots=True)
class _Cut:
    path: str
    offset: int  # the file's new size
    needed: bool  # False: only zeros (preallocation) follow the offset
    last_zxid: int  # of the last record kept in the file (-1: none)


def truncate_to(disk: Disk, dirs: DataDirs, zxid: int, log: Log = lambda _m: None) -> TruncateResult:
    """Remove every txn after ``zxid`` from the logs and every snapshot named after it, in the
    crash-safe order of the module doc.

    Raises TruncateError if no state at ``zxid`` would be left to recover (nothing is changed
    then), CorruptLogError if the log holding ``zxid`` is damaged before or at ``zxid``."""
    snapshots = dirs.snapshots(disk)  # newest first
    logs = dirs.logs(disk)  # oldest first
    kept_logs = [(z, p) for z, p in logs if z <= zxid]
    later_logs = [(z, p) for z, p in logs if z > zxid]
    later_snaps = [(z, p) for z, p in snapshots if z > zxid]
    _check_recoverable(disk, [(z, p) for z, p in snapshots if z <= zxid], kept_logs, zxid)
    cut = _find_cut(disk, kept_logs[-1][1], zxid) if kept_logs else None

    last_zxid = cut.last_zxid if cut is not None else -1
    if last_zxid < 0:
        last_zxid = _last_zxid_of(disk, kept_logs[:-1])

    result = TruncateResult(zxid, last_zxid=last_zxid)
    for _, path in later_snaps:
        log(f"truncating to 0x{zxid:x}: removing snapshot {path}")
        disk.remove(path)
        result.removed_snapshots.append(path)
    for _, path in reversed(later_logs):
        log(f"truncating to 0x{zxid:x}: removing log {path}")
        disk.remove(path)
        result.removed_logs.append(path)
    if cut is None or not cut.needed:
        return result
    if cut.offset == 0:  # no complete header: the file holds no txn
        log(f"truncating to 0x{zxid:x}: removing log {cut.path} (no complete header)")
        disk.remove(cut.path)
        result.removed_logs.append(cut.path)
    else:
        log(f"truncating to 0x{zxid:x}: cutting {cut.path} at offset {cut.offset}")
        disk.truncate(cut.path, cut.offset)
        result.cut = (cut.path, cut.offset)
    return result


def _check_recoverable(disk: Disk, snapshots: list[tuple[int, str]], logs: list[tuple[int, str]],
                       zxid: int) -> None:
    """Raise TruncateError unless ``recover`` could rebuild the state at ``zxid`` from what stays."""
    for _, path in snapshots[:MAX_SNAPSHOTS_TRIED]:
        if is_valid_snapshot(path.rsplit("/", 1)[-1], disk.read(path)):
            return
    if snapshots or (logs and logs[0][0] > 1):
        where = f"the oldest log starts at 0x{logs[0][0]:x}" if logs else "no log starts at or below it"
        raise TruncateError(f"cannot truncate to zxid 0x{zxid:x}: no valid snapshot at or below it and "
                            f"{where}; the learner needs a full snapshot")


def _find_cut(disk: Disk, path: str, zxid: int) -> _Cut:
    """Where to cut ``path`` (whose name is at or below ``zxid``) to keep exactly the txns <= zxid.

    Damage after the cut goes with the rest of the file; damage before it is CorruptLogError."""
    data = disk.read(path)
    try:
        scan = scan_log(path, data, after_zxid=zxid)
    except CorruptLogError as exc:
        prefix = scan_log(path, data[:exc.offset], after_zxid=zxid)
        if prefix.entries or prefix.last_zxid >= zxid:  # the damage lies wholly after zxid's record
            return _cut_of(prefix, data, needed=True)
        raise
    return _cut_of(scan, data, needed=False)


def _cut_of(scan: LogScan, data: bytes, needed: bool) -> _Cut:
    if not scan.header_ok:  # shorter than a header or not a log: it holds no txn
        return _Cut(scan.path, 0, True, -1)
    if scan.entries:
        first_after = scan.entries[0]
        last = _zxid_before(scan, data, first_after.offset)
        return _Cut(scan.path, first_after.offset, True, last)
    offset = scan.good_end
    needed = needed or scan.torn  # not torn: only zeros (preallocation) follow
    return _Cut(scan.path, offset, needed, scan.last_zxid)


def _zxid_before(scan: LogScan, data: bytes, offset: int) -> int:
    """The zxid of the last record before ``offset`` in the file (-1 if ``offset`` is the first)."""
    if offset <= HEADER_SIZE:
        return -1
    return scan_log(scan.path, data[:offset], after_zxid=1 << 63).last_zxid


def _last_zxid_of(disk: Disk, logs: list[tuple[int, str]]) -> int:
    """The last zxid of the newest of ``logs`` holding a txn (-1 if none)."""
    for _, path in reversed(logs):
        scan = scan_log(path, disk.read(path), after_zxid=1 << 63)
        if scan.last_zxid >= 0:
            return scan.last_zxid
    return -1


def drop_unadopted_epoch(disk: Disk, dirs: DataDirs, last_zxid: int, log: Log = lambda _m: None) -> int | None:
    """Cut off logged txns of an epoch this server never adopted; the epoch dropped, or None.

    A learner logs the leader's history before it writes currentEpoch and acks NEWLEADER (so
    that the ack means "on disk"); a term that ends in between leaves txns of an epoch newer than
    currentEpoch. None of them was acknowledged (proposal acks follow the NEWLEADER ack), so
    dropping them loses nothing, and the next leader sends them again. ZooKeeper refuses to start
    instead. A ``currentEpoch.tmp`` at least that new means the epoch was adopted (load_epochs)."""
    current = read_epoch(disk, dirs.snap_dir, CURRENT_EPOCH)
    pending = read_epoch(disk, dirs.snap_dir, CURRENT_EPOCH + TMP_SUFFIX)
    epoch = zxid_epoch(last_zxid)
    if current is None or current >= epoch or (pending is not None and pending >= epoch):
        return None
    keep = make_zxid(current + 1, 0) - 1
    log(f"the log holds txns up to 0x{last_zxid:x} of epoch {epoch}, newer than the current epoch {current} "
        f"(a synchronisation ended before its NEWLEADER ack): dropping the txns after 0x{keep:x}")
    truncate_to(disk, dirs, keep, log)
    return epoch
