"""A simulated server's disk and its fsync worker (group commit), over ``MemoryDisk``.

``SimDisk.crash_now`` is power loss: every file goes back to what its last ``sync`` (or metadata
change: create, rename, truncate, remove) made durable. In mode ``torn`` the txn logs keep a
random prefix of the bytes written since their last sync, so the last record may be cut in
the middle (written bytes land in order: a later byte never survives an earlier one; writes
that overwrite preallocated zeros tear the same way). In mode ``kill`` (kill -9, the OS
survives) every written byte stays, synced or not.

``SimLog`` drives the server's own group commit (``storage.groupcommit``): txns handed to it
are written to the log at once (unsynced), and a sync covering everything written so far
completes after a random delay, then reports how many txns are durable; txns handed while a
sync is in flight wait for the next one (group commit). The log rolls after ``snap_count / 2 +
random(snap_count / 2)`` txns and a snapshot of the tree is written (synchronously: fuzzy
snapshots are not modelled, see the package docstring).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from zkpy.storage.disk import AppendFile, MemoryDisk
from zkpy.storage.groupcommit import GroupCommit, SyncDone
from zkpy.storage.roll import RollPolicy
from zkpy.storage.txnlog import LOG_PREFIX, TxnLogWriter, frame_payloads

CRASH_MODES = ("power", "torn", "kill")


class SimDisk(MemoryDisk):
    """MemoryDisk whose crash can lose, tear or keep the unsynced tail of the txn logs."""

    def crash_now(self, rng: random.Random, mode: str = "power") -> list[str]:
        """``power``: power loss, every file back to its durable content. ``torn``: the txn logs
        keep a random prefix of their unsynced bytes. ``kill``: kill -9 of the process, the
        page cache survives, so every written byte does. Returns the logs whose unsynced bytes
        were (partly) kept."""
        if mode not in CRASH_MODES:
            raise ValueError(f"crash mode {mode!r}")
        kept = []
        for path, buf in list(self.files.items()):
            durable = self.durable.get(path, b"")
            if mode == "kill" or bytes(buf) == durable:
                new = bytes(buf)
                if new != durable:
                    kept.append(path)
            elif mode == "torn" and path.rsplit("/", 1)[-1].startswith(LOG_PREFIX + "."):
                n = min(len(buf), len(durable))
                d = next((i for i in range(n) if buf[i] != durable[i]), n)
                k = rng.randrange(0, len(buf) - d + 1)
                new = bytes(buf[:d + k]) + durable[d + k:]
                if k:
                    kept.append(path)
            else:
                new = durable
            self.files[path] = bytearray(new)
            self.durable[path] = new
        return kept


Post = Callable[[int, Callable[..., Any]], None]


class SimLog:
    """The txn log of one term and its group commit; ``on_durable(count)`` reports progress.

    ``post(delay_ms, fn)`` schedules ``fn`` as an event of the owning server (it does not run
    while the server is paused, nor after it crashed): a sync completes in such an event."""

    def __init__(self, disk: SimDisk, log_dir: str, *, prealloc_bytes: int, snap_count: int, rng: random.Random,
                 post: Post, fsync_delay: Callable[[], int], on_durable: Callable[[int], None],
                 on_roll: Callable[[], None]) -> None:
        self.rolls = RollPolicy(snap_count, rng)
        self._post = post
        self._fsync_delay = fsync_delay
        self._on_roll = on_roll
        self.commit = GroupCommit(TxnLogWriter(disk, log_dir, prealloc_bytes), self._start_sync, on_durable,
                                  _raise, lambda: 0)

    def log_payloads(self, zxids: Sequence[int], payloads: Sequence[bytes]) -> None:
        """Txns already serialized (a term core's `AppendLog`), written as they are."""
        if self.commit.closed or not payloads:
            return
        roll = self.rolls.logged(len(payloads))
        self.commit.submit(zxids[0], frame_payloads(payloads), len(payloads), roll)
        if roll:
            self._on_roll()

    def _start_sync(self, files: list[AppendFile], done: SyncDone) -> None:
        def synced() -> None:
            if self.commit.closed:  # its files were synced at the close, and may be gone since
                return
            for f in files:
                f.sync()
            done(None)

        self._post(self._fsync_delay(), synced)

    def close(self) -> int:
        """Sync what was written (a clean stop loses nothing) and stop; returns how many txns that
        made durable without reporting them (the server reports them through its loop)."""
        if self.commit.closed:
            return 0
        return self.commit.close()


def _raise(exc: BaseException) -> None:
    raise exc  # the simulated disk injects no faults: a failure is a bug
