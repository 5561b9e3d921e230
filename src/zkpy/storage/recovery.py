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
from functools import partial
from typing import Any

from zkpy.ids import MASK64, zxid_epoch
from zkpy.storage.disk import Disk
from zkpy.storage.files import DataDirs, logs_after
from zkpy.storage.snapshot import (
    PROGRESS_EVERY,
    SUM_APART_FROM,
    DigestApart,
    SnapshotError,
    is_valid_snapshot,
    load_snapshot,
)
from zkpy.storage.txnlog import CorruptLogError, LogScan, count_records, decode_payload, scan_log
from zkpy.tree.datatree import DataTree, TxnFailed
from zkpy.wire.txn import TxnHeader

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


def recover(disk: Disk, dirs: DataDirs, log: Log = lambda _m: None, progress: Progress | None = None,
            digest_apart: DigestApart | None = None) -> Recovered:
    """``digest_apart``: how the tree digest may be summed elsewhere while the tree is built (a
    snapshot's nodes, `load_snapshot`; the nodes the log's plain creates make, `_replay`)."""
    try:
        return _recover(disk, dirs, log, progress, digest_apart)
    finally:
        if progress is not None:
            progress("done", 0, 0)


def _recover(disk: Disk, dirs: DataDirs, log: Log, progress: Progress | None,
             digest_apart: DigestApart | None) -> Recovered:
    snaps = dirs.snapshots(disk)
    logs = dirs.logs(disk)
    result = _load_newest_snapshot(disk, snaps, log, progress, digest_apart)
    if result is None:
        if snaps or (logs and logs[0][0] > 1):
            raise RecoveryError(
                f"no valid snapshot in {dirs.snap_dir} (tried {min(len(snaps), MAX_SNAPSHOTS_TRIED)}) and the logs "
                f"in {dirs.log_dir} do not start at zxid 1: refusing to start with a partial history")
        result = Recovered(DataTree(), None, None)
        needed = logs
    else:
        needed = logs_after(logs, result.snapshot_zxid or 0)
    _replay(disk, result, needed, log, progress, digest_apart)
    return result


def _load_newest_snapshot(disk: Disk, snaps: list[tuple[int, str]], log: Log,
                          progress: Progress | None, digest_apart: DigestApart | None) -> Recovered | None:
    for zxid, path in snaps[:MAX_SNAPSHOTS_TRIED]:
        data = disk.read(path)
        name = path.rsplit("/", 1)[-1]
        if not is_valid_snapshot(name, data):
            log(f"skipping invalid snapshot {path} ({len(data)} bytes)")
            continue
        try:
            loaded = load_snapshot(name, data, None if progress is None
                                   else lambda done, total: progress("snapshot", done, total), digest_apart)
        except SnapshotError as exc:
            log(f"skipping snapshot {path}: {exc}")
            continue
        log(f"loaded snapshot {path}: zxid 0x{zxid:x}, {loaded.tree.node_count()} znodes, "
            f"{len(loaded.tree.sessions)} sessions")
        return Recovered(loaded.tree, zxid, path, loaded.digest)
    return None


def _created_shares(logs: list[tuple[int, str]], datas: list[bytes], after_zxid: int) -> int:
    """The digest shares of the nodes the plain creates after ``after_zxid`` in these logs make, as
    the replay reads them (``scan_log``'s ``FastCreate``s): what another process sums for it."""
    total = 0
    share = DataTree.created_share

    def add(_offset: int, head: tuple[int, int, int, int, int], txn: Any, _payload: memoryview) -> None:
        nonlocal total
        if type(txn) is tuple:
            total += share(txn[0], txn[1], head[2], head[3], head[0] if txn[3] else 0)

    for (_, path), data in zip(logs, datas, strict=True):
        scan_log(path, data, after_zxid=after_zxid, sink=add)
    return total & MASK64


def _replay(disk: Disk, result: Recovered, logs: list[tuple[int, str]], log: Log,
            progress: Progress | None, digest_apart: DigestApart | None = None) -> None:
    """Scan the logs in order, applying each txn as it is read (no list of decoded entries: a
    log of a million txns would hold a million records at once). A damaged log is classified
    as it is met, but a fault only counts once a later log turns out to hold txns; files are
    truncated or removed only after every log was read and applied. With ``digest_apart`` (and
    logs worth it) the shares of the nodes plain creates make after the snapshot's digest point
    are summed by it (``_created_shares``) while the tree is built; a failed create takes its
    share out again, and a lost sum has the whole tree hashed afresh."""
    tree = result.tree
    start = tree.last_processed_zxid
    digest = result.snapshot_digest
    if digest is not None and digest[0] <= start:
        _compare_digest(result, tree, digest, log)
        digest = None
    datas = [disk.read(path) for _, path in logs]
    total = 0
    if progress is not None:  # a first pass that only counts (the sizes are not known before)
        total = sum(count_records(data, start) for data in datas)
    tail: deque[memoryview] = deque(maxlen=REPLAYED_TAIL)
    pending: tuple[str, int, str] | None = None  # (path, offset, what) of a fault, if txns follow it
    last = start
    replayed = 0
    create_node = tree.create_node
    apply = tree.apply
    path = ""
    created_share = tree.created_share
    add_counted = tree.add_counted
    apart_after = max(start, digest[0]) if digest is not None else start  # creates hashed here up to the compare
    apart: Callable[[], int | None] | None = None
    if digest_apart is not None and sum(len(data) for data in datas) >= SUM_APART_FROM:
        apart = digest_apart(partial(_created_shares, logs, datas, apart_after))

    def sink(offset: int, head: tuple[int, int, int, int, int], txn: Any, payload: memoryview) -> None:
        nonlocal last, replayed, digest, pending
        if pending is not None:
            raise CorruptLogError(pending[0], pending[1], pending[2])
        zxid = head[2]
        if zxid <= last:
            raise CorruptLogError(path, offset, f"zxid 0x{zxid:x} does not follow 0x{last:x}")
        if zxid > last + 1 and zxid_epoch(zxid) == zxid_epoch(last):
            # within an epoch every zxid is logged: a gap means a missing or cut log file
            raise RecoveryError(f"{path}: txns 0x{last + 1:x}..0x{zxid - 1:x} are missing before "
                                f"offset {offset}: refusing to start with a partial history")
        if type(txn) is tuple:  # a plain create (txnlog.FastCreate): DataTree.apply's create, no result
            counted_apart = apart is not None and zxid > apart_after
            try:
                create_node(txn[0], txn[1], txn[2], head[0] if txn[3] else 0, txn[4], zxid, head[3], False,
                            counted_apart)
            except TxnFailed:
                if counted_apart:  # summed apart all the same
                    add_counted(-created_share(txn[0], txn[1], zxid, head[3], head[0] if txn[3] else 0))
        else:
            apply(TxnHeader(*head), txn, None, False)  # no reply: no Stat
        tail.append(payload)
        last = zxid
        replayed += 1
        if progress is not None and not replayed % PROGRESS_EVERY:
            progress("replay", replayed, total)
        if digest is not None and zxid == digest[0]:
            tree.settle_digests()
            _compare_digest(result, tree, digest, log)
            digest = None
            tree.defer_parent_digests()

    cuts: list[LogScan] = []
    removes: list[str] = []
    tree.defer_parent_digests()
    try:
        for (_, path), data in zip(logs, datas, strict=True):
            scan = scan_log(path, data, after_zxid=start, sink=sink)
            if not scan.header_ok:
                pending = (scan.path, 0, "missing or bad file header before later logs")
                removes.append(scan.path)
            elif scan.torn:
                pending = (scan.path, scan.good_end, "unreadable record before later logs")
                cuts.append(scan)
    finally:
        tree.settle_digests()
        if apart is not None:  # (also after a failure: the other process is reaped)
            share = apart()
            if share is None:
                tree.recount_digest()
            else:
                add_counted(share)
    del datas
    tree.events.clear()
    if last > tree.last_processed_zxid:
        tree.last_processed_zxid = last
    result.txns_replayed = replayed
    result.replayed_tail.extend(decode_payload(bytes(p)) for p in tail)
    tail.clear()
    for scan in cuts:
        disk.truncate(scan.path, scan.good_end)
        result.truncated.append(f"{scan.path}@{scan.good_end}")
        log(f"truncated torn tail of {scan.path} at offset {scan.good_end}")
    for removed in removes:
        disk.remove(removed)
        result.removed.append(removed)
        log(f"removed log {removed}: no complete header (created just before a crash)")
    if progress is not None and total:
        progress("replay", replayed, total)
    if replayed:
        log(f"replayed {replayed} txns up to zxid 0x{last:x}")


def _compare_digest(result: Recovered, tree: DataTree, digest: tuple[int, int], log: Log) -> None:
    zxid, expected = digest
    if tree.digest != expected:
        result.digest_mismatches.append(zxid)
        log(f"digest mismatch at zxid 0x{zxid:x}: snapshot {result.snapshot_path} recorded 0x{expected:x}, "
            f"the loaded tree has 0x{tree.digest:x}")
