"""The real Disk: files under the data directories, fsync, and the injected faults of a FaultPlan.

Durability rules kept here: ``AppendFile.sync`` is ``fdatasync`` (``fsync`` where there is
none) and returns only when the bytes are on stable storage; creating, renaming, removing and
truncating a file also sync its directory, so the change survives power loss.

With ``FaultPlan.lose_unsynced`` a file keeps what it is given in memory and writes it out only
inside ``sync``: a SIGKILL then loses exactly what power loss would.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from typing import Any

from zkpy.storage.disk import FaultCounter, FaultPlan

_fdatasync = getattr(os, "fdatasync", os.fsync)


def sync_directory(path: str) -> None:
    fd = os.open(path or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class OsFile:
    """An AppendFile on a file descriptor (positional writes, so preallocation never moves it)."""

    def __init__(self, path: str, fd: int, position: int, faults: FaultCounter, force_sync: bool) -> None:
        self.path = path
        self._fd = fd
        self._pos = position
        self._faults = faults
        self._force_sync = force_sync
        self._pending: list[tuple[int, bytes]] = []  # lose_unsynced: writes held until sync

    @property
    def position(self) -> int:
        return self._pos

    def fileno(self) -> int:
        """The descriptor, for the fsync helper (``runtime.fsync_helper``) to sync."""
        return self._fd

    def write(self, data: bytes) -> None:
        self._faults.before_write(len(data))
        if self._faults.plan.lose_unsynced:
            self._pending.append((self._pos, data))
        else:
            _pwrite_all(self._fd, data, self._pos)
        self._pos += len(data)

    def preallocate(self, size: int) -> None:
        current = os.fstat(self._fd).st_size
        if size <= current:
            return
        self._faults.before_write(size - current)
        _pwrite_all(self._fd, b"\0", size - 1)  # a sparse extension, as ZooKeeper's FilePadding does

    def sync(self) -> None:
        self._faults.before_sync()
        for offset, data in self._pending:
            _pwrite_all(self._fd, data, offset)
        self._pending.clear()
        if self._force_sync:
            _fdatasync(self._fd)

    def write_back(self, start: int, end: int) -> None:
        """Start writing bytes ``start..end`` to the disk and wait for them, without a journal
        commit (Linux ``sync_file_range``), then drop them from the page cache: a later fdatasync
        of this file, or of another file on the same ext4 journal, finds little left to flush.
        Not a durability point (metadata is not synced); ``sync`` is. Where there is no
        sync_file_range this is ``sync``."""
        if self._pending or not self._force_sync:
            return
        if _sync_file_range is None:
            self.sync()
            return
        if _sync_file_range(self._fd, start, end - start, _SFR_WAIT_WRITE_WAIT) != 0:
            self.sync()
            return
        try:
            os.posix_fadvise(self._fd, start, end - start, os.POSIX_FADV_DONTNEED)
        except (OSError, AttributeError):
            pass

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


_SFR_WAIT_WRITE_WAIT = 1 | 2 | 4  # SYNC_FILE_RANGE_WAIT_BEFORE | _WRITE | _WAIT_AFTER


def _libc_sync_file_range() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    fn.restype = ctypes.c_int
    return fn


_sync_file_range = _libc_sync_file_range()


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


class OsDisk:
    """The operating system's files. ``force_sync=False`` is zoo.cfg's forceSync=no: syncs are skipped."""

    def __init__(self, faults: FaultPlan | None = None, force_sync: bool = True) -> None:
        self.faults = FaultCounter(faults or FaultPlan())
        self.force_sync = force_sync

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except FileNotFoundError:
            return []

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def size(self, path: str) -> int:
        return os.path.getsize(path)

    def read(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def create(self, path: str) -> OsFile:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._sync_dir_of(path)
        return OsFile(path, fd, 0, self.faults, self.force_sync)

    def append(self, path: str) -> OsFile:
        fd = os.open(path, os.O_WRONLY)
        return OsFile(path, fd, os.fstat(fd).st_size, self.faults, self.force_sync)

    def truncate(self, path: str, size: int) -> None:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        finally:
            os.close(fd)

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)
        self._sync_dir_of(dst)

    def remove(self, path: str) -> None:
        try:
            os.remove(path)
        except FileNotFoundError:
            return
        self._sync_dir_of(path)

    def _sync_dir_of(self, path: str) -> None:
        if self.force_sync:
            sync_directory(os.path.dirname(path))


def write_text_atomically(path: str, text: str) -> None:
    """``path`` holds ``text`` whole, or what it held before: written to ``path.tmp``, fsynced, renamed
    over it (a config file, a myid: a reader never sees half of one)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def describe_error(exc: BaseException) -> str:
    """``path: strerror (ENAME)`` for an OSError (never an empty string), ``str(exc)`` or its type otherwise."""
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        if exc.errno:
            return f"{where}{os.strerror(exc.errno)} ({errno.errorcode.get(exc.errno, str(exc.errno))})"
        return where + (str(exc) or type(exc).__name__)
    return str(exc) or type(exc).__name__
