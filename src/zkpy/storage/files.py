"""Where the files live and which of them recovery and purge need (FileTxnSnapLog's rules, pure).

``dataDir/version-2/snapshot.<zxid>`` and ``dataLogDir/version-2/log.<zxid>``; the zxid in a log's
name is its first txn's. A snapshot at Z needs the newest log starting at or before Z and every
later log (a log that starts earlier may hold txns after Z).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from zkpy.storage.disk import Disk, join
from zkpy.storage.snapshot import SNAP_PREFIX, is_valid_snapshot
from zkpy.storage.txnlog import LOG_PREFIX, zxid_from_name

VERSION_DIR = "version-2"


@dataclass(frozen=True, slots=True)
class DataDirs:
    """The two version-2 directories of a server (they may be the same)."""

    snap_dir: str
    log_dir: str

    @classmethod
    def of(cls, data_dir: str, data_log_dir: str | None = None) -> DataDirs:
        return cls(join(data_dir, VERSION_DIR), join(data_log_dir or data_dir, VERSION_DIR))

    def snapshots(self, disk: Disk) -> list[tuple[int, str]]:
        """(zxid, path) of every snapshot file, newest first."""
        return sorted(_named(disk, self.snap_dir, SNAP_PREFIX), reverse=True)

    def logs(self, disk: Disk) -> list[tuple[int, str]]:
        """(first zxid, path) of every log file, oldest first."""
        return sorted(_named(disk, self.log_dir, LOG_PREFIX))


def _named(disk: Disk, directory: str, prefix: str) -> list[tuple[int, str]]:
    out = []
    for name in disk.listdir(directory):
        zxid = zxid_from_name(name, prefix)
        if zxid is not None:
            out.append((zxid, join(directory, name)))
    return out


def logs_after(logs: list[tuple[int, str]], snap_zxid: int) -> list[tuple[int, str]]:
    """The logs a snapshot at ``snap_zxid`` needs (FileTxnLog.getLogFiles)."""
    start = max((z for z, _ in logs if z <= snap_zxid), default=0)
    return [(z, p) for z, p in logs if z >= start]


def purge_candidates(valid_snapshots: list[tuple[int, str]], all_snapshots: list[tuple[int, str]],
                     logs: list[tuple[int, str]], retain: int) -> list[str]:
    """Files PurgeTxnLog would delete keeping the ``retain`` newest valid snapshots (newest
    first): every file named below the oldest kept snapshot, except the log it still needs."""
    if retain < 3:
        raise ValueError("snapRetainCount must be at least 3")
    kept = valid_snapshots[:retain]
    if not kept:
        return []
    least = kept[-1][0]
    needed = {p for _, p in logs_after(logs, least)}
    return [p for z, p in logs if z < least and p not in needed] + [p for z, p in all_snapshots if z < least]


def purge(disk: Disk, dirs: DataDirs, retain: int, log: Callable[[str], None] = lambda _m: None) -> list[str]:
    """Delete what PurgeTxnLog would, keeping the ``retain`` newest valid snapshots; returns the paths."""
    snapshots = dirs.snapshots(disk)
    valid: list[tuple[int, str]] = []
    for zxid, path in snapshots:
        if len(valid) == retain:
            break
        if is_valid_snapshot(path.rsplit("/", 1)[-1], disk.read(path)):
            valid.append((zxid, path))
    doomed = purge_candidates(valid, snapshots, dirs.logs(disk), retain)
    for path in doomed:
        log(f"removing file: {path}")
        disk.remove(path)
    return doomed
