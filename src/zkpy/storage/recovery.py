"""Recovery: the newest valid snapshot, then every logged txn after it (pure, over a Disk).

Rules, in the order they apply:
1. Snapshots are tried newest first (at most 100, as ZooKeeper does); an invalid one (empty,
   truncated, bad checksum) is skipped with a log line.
2. With no valid snapshot, zkpy replays from an empty tree only if the logs hold the whole
   history (the oldest log starts at zxid 1 or lower); otherwise it refuses to start. A data dir
   with no files at all is a fresh start.
3. The logs the snapshot needs are scanned in order; txns at or below the snapshot's zxid are
   skipped, the rest applied (``DataTree.apply`` is idempotent over the fuzzy snapshot). zxids
   must increase, and within an epoch they must follow each other: a missing log file (or any
   gap) refuses to start instead of skipping txns.
4. A torn tail (a partial or garbage record after which nothing valid follows) in the last log
   that holds txns is truncated with a log line; logs after it that hold no txn (empty or
   header-only, e.g. created just before a crash) are removed. A bad record followed by valid
   data anywhere is ``CorruptLogError``: the server refuses to start, naming file and offset.
5. The digest a snapshot recorded is compared once replay reaches its zxid; a mismatch is
   logged and counted (ZooKeeper does the same), never silently ignored.

Progress: ``recover``'s optional ``progress(phase, done, total)`` is told how far it got, for a
shell to draw (this module draws nothing): phase "snapshot" counts bytes of the snapshot parsed,
"replay" txns applied; both at most every ``PROGRESS_EVERY`` nodes or txns and once at the end
of the phase; "done" (0, 0) always comes last, also when recovery fails.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from zkpy.ids import zxid_epoch
from zkpy.storage.disk import Disk
from zkpy.storage.files import DataDirs, logs_after
from zkpy.storage.snapshot import PROGRESS_EVERY, SnapshotError, is_valid_snapshot, load_snapshot
from zkpy.storage.txnlog import CorruptLogError, scan_log
from zkpy.tree.datatree import DataTree

Log = Callable[[str], None]
Progress = Callable[[str, int, int], None]  # (phase, done, total): see the module doc
MAX_SNAPSHOTS_TRIED = 100
REPLAYED_TAIL = 500  # ZKDatabase.commitLogCount


class RecoveryError(Exception):
    """The data dir cannot be recovered without an operator: the message says what and where."""


@dataclass(slots=True)
class Recovered:
    tree: DataTree
    snapshot_zxid: int | None  # None: no snapshot was loaded (fresh start or full replay)
    snapshot_path: str | None
    snapshot_digest: tuple[int, int] | None = None  # (zxid, digest) the snapshot recorded
    txns_replayed: int = 0
    truncated: list[str] = field(default_factory=list)  # "path@offset" of each torn tail cut off
    removed: list[str] = field(default_factory=list)  # empty trailing logs removed
    digest_mismatches: list[int] = field(default_factory=list)  # zxids where a recorded digest disagreed
    # the last txns replayed (header, txn), oldest first: a new leader's committed log
    replayed_tail: deque[tuple[Any, Any]] = field(default_factory=lambda: deque(maxlen=REPLAYED_TAIL))

    @property
    def fresh(self) -> bool:
        """Nothing was on disk: the caller writes the first snapshot (snapshot.0), as ZooKeeper does."""
        return self.snapshot_zxid is None and self.txns_replayed == 0 and not self.truncated


def recover(disk: Disk, dirs: DataDirs, log: Log = lambda _m: None, progress: Progress | None = None) -> Recovered:
    try:
        return _recover(disk, dirs, log, progress)
    finally:
        if progress is not None:
            progress("done", 0, 0)


def _recover(disk: Disk, dirs: DataDirs, log: Log, progress: Progress | None) -> Recovered:
    snaps = dirs.snapshots(disk)
    logs = dirs.logs(disk)
    result = _load_newest_snapshot(disk, snaps, log, progress)
    if result is None:
        if snaps or (logs and logs[0][0] > 1):
            raise RecoveryError(
                f"no valid snapshot in {dirs.snap_dir} (tried {min(len(snaps), MAX_SNAPSHOTS_TRIED)}) and the logs "
                f"in {dirs.log_dir} do not start at zxid 1: refusing to start with a partial history")
        result = Recovered(DataTree(), None, None)
        needed = logs
    else:
        needed = logs_after(logs, result.snapshot_zxid or 0)
    _replay(disk, result, needed, log, progress)
    return result


def _load_newest_snapshot(disk: Disk, snaps: list[tuple[int, str]], log: Log,
                          progress: Progress | None) -> Recovered | None:
    for zxid, path in snaps[:MAX_SNAPSHOTS_TRIED]:
        data = disk.read(path)
        name = path.rsplit("/", 1)[-1]
        if not is_valid_snapshot(name, data):
            log(f"skipping invalid snapshot {path} ({len(data)} bytes)")
            continue
        try:
            loaded = load_snapshot(name, data, None if progress is None
                                   else lambda done, total: progress("snapshot", done, total))
        except SnapshotError as exc:
            log(f"skipping snapshot {path}: {exc}")
            continue
        log(f"loaded snapshot {path}: zxid 0x{zxid:x}, {loaded.tree.node_count()} znodes, "
            f"{len(loaded.tree.sessions)} sessions")
        return Recovered(loaded.tree, zxid, path, loaded.digest)
    return None


def _replay(disk: Disk, result: Recovered, logs: list[tuple[int, str]], log: Log,
            progress: Progress | None) -> None:
    tree = result.tree
    start = tree.last_processed_zxid
    scans = []
    for _, path in logs:
        scans.append(scan_log(path, disk.read(path), after_zxid=start))
    last_with_txns = max((i for i, s in enumerate(scans) if s.entries), default=-1)
    for i, scan in enumerate(scans):
        later_has_txns = i < last_with_txns
        if not scan.header_ok:
            if later_has_txns:
                raise CorruptLogError(scan.path, 0, "missing or bad file header before later logs")
            disk.remove(scan.path)
            result.removed.append(scan.path)
            log(f"removed log {scan.path}: no complete header (created just before a crash)")
            continue
        if scan.torn:
            if later_has_txns:
                raise CorruptLogError(scan.path, scan.good_end, "unreadable record before later logs")
            disk.truncate(scan.path, scan.good_end)
            result.truncated.append(f"{scan.path}@{scan.good_end}")
            log(f"truncated torn tail of {scan.path} at offset {scan.good_end}")
    digest = result.snapshot_digest
    if digest is not None and digest[0] <= start:
        _compare_digest(result, tree, digest, log)
        digest = None
    last = start
    total = sum(len(scan.entries) for scan in scans) if progress is not None else 0
    for scan in scans:
        for entry in scan.entries:
            zxid = entry.hdr.zxid
            if zxid <= start:
                continue
            if zxid <= last:
                raise CorruptLogError(scan.path, entry.offset, f"zxid 0x{zxid:x} does not follow 0x{last:x}")
            if zxid > last + 1 and zxid_epoch(zxid) == zxid_epoch(last):
                # within an epoch every zxid is logged: a gap means a missing or cut log file
                raise RecoveryError(f"{scan.path}: txns 0x{last + 1:x}..0x{zxid - 1:x} are missing before "
                                    f"offset {entry.offset}: refusing to start with a partial history")
            tree.apply(entry.hdr, entry.txn)
            tree.events.clear()
            result.replayed_tail.append((entry.hdr, entry.txn))
            last = zxid
            result.txns_replayed += 1
            if progress is not None and not result.txns_replayed % PROGRESS_EVERY:
                progress("replay", result.txns_replayed, total)
            if digest is not None and zxid == digest[0]:
                _compare_digest(result, tree, digest, log)
                digest = None
    if progress is not None and total:
        progress("replay", result.txns_replayed, total)
    if result.txns_replayed:
        log(f"replayed {result.txns_replayed} txns up to zxid 0x{last:x}")


def _compare_digest(result: Recovered, tree: DataTree, digest: tuple[int, int], log: Log) -> None:
    zxid, expected = digest
    if tree.digest != expected:
        result.digest_mismatches.append(zxid)
        log(f"digest mismatch at zxid 0x{zxid:x}: snapshot {result.snapshot_path} recorded 0x{expected:x}, "
            f"the loaded tree has 0x{tree.digest:x}")
