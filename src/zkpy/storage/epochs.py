"""The ``currentEpoch`` and ``acceptedEpoch`` files of ZooKeeper 3.8 (pure, over a Disk).

Both live in the snap dir's ``version-2`` folder (``DataDirs.snap_dir``) next to the snapshots.
``acceptedEpoch`` is the newest epoch this server has promised to follow (Zab's NEWEPOCH /
ACKEPOCH step); ``currentEpoch`` the newest one whose NEWLEADER it acknowledged. Zab relies on
``accepted >= current`` and on ``current`` not being older than the epoch of the last txn on disk.

Byte grammar (QuorumPeer.writeLongToFile)::

    file := decimal   -- Long.toString(value): an optional '-' and ASCII digits, no newline

Reading (QuorumPeer.readLongFromFile) takes the first line (up to ``\\n``, ``\\r`` or ``\\r\\n``)
and parses it as a signed 64-bit decimal with an optional ``+`` or ``-``; anything else, an
empty file included, is an error naming the file and what it holds.

Writing is atomic as AtomicFileWritingIdiom does it: ``<name>.tmp`` is created, written, synced
and renamed over ``<name>``; if writing or syncing fails the tmp file is removed. A crash
before the rename leaves ``<name>`` as it was and possibly a ``<name>.tmp`` (empty or partial if
the crash came before its sync, complete after it); the next write replaces it.

Loading at startup (QuorumPeer.loadDataBase, after the data tree is recovered), with ``E`` the
epoch of the last zxid the tree holds:

1. no ``currentEpoch``: it is written as ``E`` (a log line says so);
2. ``currentEpoch < E``: if ``currentEpoch.tmp`` exists its value becomes the current epoch
   (written to ``currentEpoch``; a crash came between the tmp's sync and its rename), otherwise
   ``EpochError``;
3. no ``acceptedEpoch``: it is written as ``E``;
4. ``acceptedEpoch < currentEpoch``: ``EpochError``.

One deviation, stricter than 3.8: in rule 2 a tmp whose value is still older than ``E`` is an
``EpochError`` (3.8 takes it anyway and starts with a current epoch older than its log).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from zkpy.ids import zxid_epoch
from zkpy.storage.disk import Disk, join
from zkpy.storage.recovery import RecoveryError

CURRENT_EPOCH = "currentEpoch"
ACCEPTED_EPOCH = "acceptedEpoch"
TMP_SUFFIX = ".tmp"  # AtomicFileOutputStream.TMP_EXTENSION

_LONG = re.compile(rb"[+-]?[0-9]+")
_MIN_LONG, _MAX_LONG = -(1 << 63), (1 << 63) - 1

Log = Callable[[str], None]


class EpochError(RecoveryError):
    """An epoch file is unreadable or disagrees with the data: the server must not start."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


@dataclass(frozen=True, slots=True)
class Epochs:
    current: int
    accepted: int


def encode_epoch(value: int) -> bytes:
    """The exact bytes ZooKeeper writes for ``value``: decimal, no newline."""
    if not _MIN_LONG <= value <= _MAX_LONG:
        raise ValueError(f"epoch {value} does not fit in a signed 64-bit long")
    return str(value).encode("ascii")


def parse_epoch(path: str, data: bytes) -> int:
    """The value of an epoch file whose bytes are ``data`` (readLongFromFile's rules)."""
    line = re.split(rb"\r\n|\r|\n", data, maxsplit=1)[0]
    if _LONG.fullmatch(line):
        value = int(line)
        if _MIN_LONG <= value <= _MAX_LONG:
            return value
    shown = repr(line.decode("utf-8", "replace")) if data else "an empty file"
    raise EpochError(path, f"found {shown}, not an epoch")


def read_epoch(disk: Disk, snap_dir: str, name: str) -> int | None:
    """The epoch in ``snap_dir/name``, or None if the file does not exist."""
    path = join(snap_dir, name)
    if not disk.exists(path):
        return None
    return parse_epoch(path, disk.read(path))


def write_epoch(disk: Disk, snap_dir: str, name: str, value: int) -> None:
    """Replace ``snap_dir/name`` with ``value`` atomically: write ``name.tmp``, sync, rename."""
    data = encode_epoch(value)
    path = join(snap_dir, name)
    tmp = path + TMP_SUFFIX
    disk.makedirs(snap_dir)
    f = disk.create(tmp)
    try:
        f.write(data)
        f.sync()
        f.close()
    except Exception:
        f.close()
        disk.remove(tmp)
        raise
    disk.rename(tmp, path)


def load_epochs(disk: Disk, snap_dir: str, last_zxid: int, log: Log = lambda _m: None) -> Epochs:
    """The epochs at startup, given the last zxid recovery reached; see the module doc's rules.

    Raises EpochError naming the file and the values that disagree."""
    epoch_of_zxid = zxid_epoch(last_zxid)
    current = read_epoch(disk, snap_dir, CURRENT_EPOCH)
    if current is None:
        current = epoch_of_zxid
        log(f"{join(snap_dir, CURRENT_EPOCH)} not found: creating it with the epoch of the last zxid "
            f"0x{last_zxid:x}, {current} (expected only on a new or upgraded data dir)")
        write_epoch(disk, snap_dir, CURRENT_EPOCH, current)
    if current < epoch_of_zxid:
        path = join(snap_dir, CURRENT_EPOCH)
        pending = read_epoch(disk, snap_dir, CURRENT_EPOCH + TMP_SUFFIX)
        if pending is None:
            raise EpochError(path, f"the current epoch, {current} (0x{current:x}), is older than the epoch "
                                   f"{epoch_of_zxid} of the last zxid 0x{last_zxid:x}")
        if pending < epoch_of_zxid:
            raise EpochError(path + TMP_SUFFIX,
                             f"the current epoch, {current}, and the pending one in the tmp file, {pending}, "
                             f"are both older than the epoch {epoch_of_zxid} of the last zxid 0x{last_zxid:x}")
        log(f"{path + TMP_SUFFIX} found: setting the current epoch to {pending} (was {current})")
        write_epoch(disk, snap_dir, CURRENT_EPOCH, pending)
        current = pending
    accepted = read_epoch(disk, snap_dir, ACCEPTED_EPOCH)
    if accepted is None:
        accepted = epoch_of_zxid
        log(f"{join(snap_dir, ACCEPTED_EPOCH)} not found: creating it with the epoch of the last zxid "
            f"0x{last_zxid:x}, {accepted} (expected only on a new or upgraded data dir)")
        write_epoch(disk, snap_dir, ACCEPTED_EPOCH, accepted)
    if accepted < current:
        raise EpochError(join(snap_dir, ACCEPTED_EPOCH),
                         f"the accepted epoch, {accepted} (0x{accepted:x}), is less than the current epoch, "
                         f"{current} (0x{current:x}) in {join(snap_dir, CURRENT_EPOCH)}")
    return Epochs(current, accepted)
