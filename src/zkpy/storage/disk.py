"""The Disk protocol every storage module writes through, and an in-memory Disk (pure).

Storage code never touches the OS: it gets a ``Disk`` (``runtime.osdisk.OsDisk`` in a server,
``MemoryDisk`` in unit tests and the simulator). Paths are POSIX strings.

Durability model shared by both implementations: bytes written to an ``AppendFile`` are
durable only after its ``sync`` returns; ``rename``, ``remove``, ``truncate`` and file creation
are durable when they return (the OS disk syncs the directory). A crash loses everything a
file received since its last ``sync`` (``MemoryDisk.crash``; ``FaultPlan.lose_unsynced`` in a
real process).

Fault points (``FaultPlan``) are no-ops unless a test sets them: fail appends or syncs with
ENOSPC or EIO after a byte budget, and keep unsynced bytes in memory only.
"""

from __future__ import annotations

import errno
import posixpath
from dataclasses import dataclass
from typing import Protocol


class AppendFile(Protocol):
    """A file written front to back, opened by ``Disk.create`` or ``Disk.append``."""

    path: str

    def write(self, data: bytes) -> None:
        """Append ``data`` at the write position."""

    def preallocate(self, size: int) -> None:
        """Make the file at least ``size`` bytes long with zeros past the write position
        (ZooKeeper's FilePadding); the write position does not move."""

    def sync(self) -> None:
        """Return once every byte written so far is on stable storage."""

    @property
    def position(self) -> int:
        """Bytes written so far (the next write's offset)."""

    def close(self) -> None: ...


class Disk(Protocol):
    def makedirs(self, path: str) -> None: ...

    def listdir(self, path: str) -> list[str]:
        """File names in ``path`` (empty if it does not exist)."""

    def exists(self, path: str) -> bool: ...

    def size(self, path: str) -> int: ...

    def read(self, path: str) -> bytes: ...

    def create(self, path: str) -> AppendFile:
        """A new empty file (an existing one is replaced)."""

    def append(self, path: str) -> AppendFile:
        """An existing file, opened to write after its current end."""

    def truncate(self, path: str, size: int) -> None: ...

    def rename(self, src: str, dst: str) -> None:
        """Atomically replace ``dst`` with ``src``."""

    def remove(self, path: str) -> None: ...


class DiskFault(OSError):
    """An injected disk error (ENOSPC or EIO), raised where the real one would be."""


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """Injected disk faults; the default injects nothing.

    ``fail_after_bytes``: appends fail with ``fail_errno`` once this many bytes have been
    written in all (counting preallocation). ``fail_sync_after``: the n-th and later syncs fail
    with EIO. ``lose_unsynced``: written bytes stay in memory until ``sync``, so a kill of the
    process loses them exactly as power loss would.
    """

    fail_after_bytes: int | None = None
    fail_errno: int = errno.ENOSPC
    fail_sync_after: int | None = None
    lose_unsynced: bool = False

    def injects(self) -> bool:
        """Whether this plan changes anything: a file's writes and syncs then go through its counters."""
        return self.fail_after_bytes is not None or self.fail_sync_after is not None or self.lose_unsynced


class FaultCounter:
    """Counts bytes and syncs against a FaultPlan; shared by every file of one Disk."""

    def __init__(self, plan: FaultPlan) -> None:
        self.plan = plan
        self.written = 0
        self.syncs = 0

    def before_write(self, n: int) -> None:
        limit = self.plan.fail_after_bytes
        if limit is not None and self.written + n > limit:
            code = self.plan.fail_errno
            raise DiskFault(code, f"injected fault: {errno.errorcode.get(code, code)} after {limit} bytes")
        self.written += n

    def before_sync(self) -> None:
        self.syncs += 1
        after = self.plan.fail_sync_after
        if after is not None and self.syncs >= after:
            raise DiskFault(errno.EIO, f"injected fault: EIO on sync number {self.syncs}")


class _MemoryFile:
    """An in-memory AppendFile: ``data`` is what the OS would show, ``durable`` what survives a crash."""

    def __init__(self, disk: MemoryDisk, path: str, data: bytearray) -> None:
        self.disk = disk
        self.path = path
        self._pos = len(data)

    @property
    def position(self) -> int:
        return self._pos

    def write(self, data: bytes) -> None:
        self.disk.faults.before_write(len(data))
        buf = self.disk.files[self.path]
        end = self._pos + len(data)
        if len(buf) < end:
            buf.extend(bytes(end - len(buf)))
        buf[self._pos:end] = data
        self._pos = end

    def preallocate(self, size: int) -> None:
        buf = self.disk.files[self.path]
        if size > len(buf):
            self.disk.faults.before_write(size - len(buf))
            buf.extend(bytes(size - len(buf)))

    def sync(self) -> None:
        self.disk.faults.before_sync()
        self.disk.durable[self.path] = bytes(self.disk.files[self.path])

    def close(self) -> None:
        pass


class MemoryDisk:
    """A Disk in memory, with crashes: what was not synced is lost (or torn) on ``crash``."""

    def __init__(self, faults: FaultPlan | None = None) -> None:
        self.files: dict[str, bytearray] = {}
        self.durable: dict[str, bytes] = {}  # a file's content as of its last sync (or metadata change)
        self.faults = FaultCounter(faults or FaultPlan())

    def makedirs(self, path: str) -> None:
        pass  # directories are implied by file paths

    def listdir(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted(p[len(prefix):] for p in self.files if p.startswith(prefix) and "/" not in p[len(prefix):])

    def exists(self, path: str) -> bool:
        return path in self.files

    def size(self, path: str) -> int:
        return len(self.files[path])

    def read(self, path: str) -> bytes:
        try:
            return bytes(self.files[path])
        except KeyError:
            raise FileNotFoundError(errno.ENOENT, "no such file", path) from None

    def create(self, path: str) -> _MemoryFile:
        self.files[path] = bytearray()
        self.durable[path] = b""
        return _MemoryFile(self, path, self.files[path])

    def append(self, path: str) -> _MemoryFile:
        return _MemoryFile(self, path, self._buffer(path))

    def _buffer(self, path: str) -> bytearray:
        if path not in self.files:
            raise FileNotFoundError(errno.ENOENT, "no such file", path)
        return self.files[path]

    def truncate(self, path: str, size: int) -> None:
        del self._buffer(path)[size:]
        self.durable[path] = bytes(self.files[path])

    def rename(self, src: str, dst: str) -> None:
        self.files[dst] = self.files.pop(src)
        self.durable[dst] = self.durable.pop(src, b"")

    def remove(self, path: str) -> None:
        self.files.pop(path, None)
        self.durable.pop(path, None)

    def crash(self, keep_unsynced: int = 0) -> None:
        """Power loss: every file goes back to its durable content. ``keep_unsynced`` bytes of
        each file's unsynced tail survive (a torn write)."""
        for path, buf in self.files.items():
            durable = self.durable.get(path, b"")
            tail = bytes(buf[len(durable):len(durable) + keep_unsynced]) if buf[:len(durable)] == durable else b""
            self.files[path] = bytearray(durable + tail)
            self.durable[path] = durable + tail


def join(*parts: str) -> str:
    return posixpath.join(*parts)
