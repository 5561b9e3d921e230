"""Durability for one server: group commit of the txn log, fuzzy snapshots, autopurge.

Group commit (``GroupCommit``): the loop encodes each turn's new txns and writes them into the
log file at once (``pwrite``: the page cache); one sync at a time runs in the background over
every file written since the last one, and when it is done the loop learns how many txns are
durable. Only then are they applied and answered, so no reply leaves before the fsync that
covers it. The loop waits on the disk only when the log rolls, for the sync of the file it
leaves (``storage.groupcommit``). The sync itself runs in the fsync helper process
(``runtime.fsync_helper``) for the OS's files; where the disk injects faults or is not the OS's
(tests), or with forceSync=no, each file's own ``sync`` runs on the loop and is reported on the
next turn.

Snapshots start when the log rolls (after snapCount/2 + a random share of snapCount/2 txns, as
ZooKeeper staggers them). The snapshot's zxid Z is the tree's last applied zxid when it starts
(every txn logged after Z is replayed over it at recovery, DESIGN guarantee 7).

Where the OS allows it (``snapfork``: a real disk without injected failures), the loop forks a
child that serializes the copy-on-write image of the tree and writes ``tmp.snapshot.<zxid>``,
syncing every MiB (a large flush would hold up the log's fsync behind it) and resting after each
sync as long as it took (the log's fsyncs get at least half the disk's time), while the loop goes
on serving: it pauses only for the fork. A thread waits for the child and renames the file into
place. The child's tree is the tree at Z exactly, a special case of a fuzzy snapshot.

Elsewhere (no fork, injected disk faults, a fork that failed) the snapshot is serialized on the
loop in slices of about 2 ms, each followed by as long a gap for requests; a separate thread
writes the slices to ``tmp.snapshot.<zxid>``, syncing every 8 MiB; the loop serializes at most
16 slices ahead of that thread. Then it syncs the file and renames it into place.

Either way a crash never leaves a half-written ``snapshot.<zxid>``; the next start removes the
``tmp.`` file.

A disk error (ENOSPC, EIO, ...) writing or syncing the log is fatal: nothing after the last good
fsync is acknowledged and the server stops (fail-stop, as ZooKeeper's SyncRequestProcessor does);
the next start recovers from the files.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, cast

from zkpy.config import ServerConfig
from zkpy.runtime.fsync_helper import SyncHelper
from zkpy.runtime.osdisk import OsDisk, OsFile, describe_error
from zkpy.runtime.snapfork import fork_available, fork_child, kill_child, wait_child
from zkpy.server.metrics import ServerMetrics
from zkpy.server.outputs import Propose
from zkpy.storage.disk import AppendFile, Disk, join
from zkpy.storage.files import DataDirs
from zkpy.storage.groupcommit import GroupCommit, StartSync, SyncDone
from zkpy.storage.roll import RollPolicy
from zkpy.storage.snapshot import TMP_PREFIX, SnapshotWriter, snapshot_name, write_snapshot_file
from zkpy.storage.txnlog import TxnLogWriter, encode_entry, frame_payloads
from zkpy.tree.datatree import DataTree

log = logging.getLogger("zkpy.persistence")

SNAPSHOT_SLICE_S = 0.002  # serialize for at most this long per loop turn
SNAPSHOT_SYNC_BYTES = 8 << 20  # sync the snapshot file every this many bytes
SNAPSHOT_MAX_PENDING_WRITES = 16  # slices serialized but not yet written: past this the loop waits for the disk
SNAPSHOT_CHILD_SYNC_BYTES = 1 << 20  # the forked writer writes far faster than slices come: sync more often
SNAPSHOT_CHILD_STEP_NODES = 4096  # nodes per chunk the forked child serializes and writes


class Persistence:
    """The txn log and snapshots of one server; every method runs on the loop."""

    def __init__(self, config: ServerConfig, disk: Disk, dirs: DataDirs, rng: random.Random | None = None) -> None:
        self.config = config
        self.disk = disk
        self.dirs = dirs
        self.rng = rng or random.Random()
        self.commit: GroupCommit | None = None
        self._helper: SyncHelper | None = None
        self._on_durable: Callable[[int], None] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.rolls = RollPolicy(config.snap_count, self.rng)
        self.snapshot: SnapshotWriter | None = None
        self._snap_file: AppendFile | None = None
        self._snap_synced = 0  # bytes of the snapshot file already synced
        self._snap_writes: deque[Future[None]] = deque()  # slices handed to the writer thread, oldest first
        self._snap_io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="zkpy-snapshot")
        self._snap_started = 0.0
        self.snapshot_pause_ms = 0.0  # the same for the current (or last) snapshot: its log line shows it
        self.fork_snapshots = True  # write snapshots from a forked child where that is possible
        self._snap_child: int | None = None  # the pid of the child writing the current snapshot
        self.metrics: ServerMetrics | None = None  # the server's registry: snapshottime goes there
        self.failed: BaseException | None = None
        self.closed = False

    # ---- startup ----

    def start(self, loop: asyncio.AbstractEventLoop, on_durable: Callable[[int], None],
              on_fatal: Callable[[BaseException], None]) -> None:
        self.loop = loop
        for directory in (self.dirs.snap_dir, self.dirs.log_dir):
            self.disk.makedirs(directory)
            for name in self.disk.listdir(directory):
                if name.startswith(TMP_PREFIX):
                    log.info("removing unfinished %s", join(directory, name))
                    self.disk.remove(join(directory, name))
        writer = TxnLogWriter(self.disk, self.dirs.log_dir, self.config.prealloc_kb * 1024)

        def fail(exc: BaseException) -> None:  # on the next turn: the turn that failed finishes first
            loop.call_soon(self._fatal, exc, on_fatal)

        self._on_durable = on_durable
        self.commit = GroupCommit(writer, self._syncer(loop), on_durable, fail, time.perf_counter_ns)

    def _syncer(self, loop: asyncio.AbstractEventLoop) -> StartSync:
        """How a group commit's files are synced: by the fsync helper process where the files are
        the OS's and really synced (no injected faults: their counters live in this process),
        else by each file's ``sync`` on the loop, reported on the next turn."""
        disk = self.disk
        if isinstance(disk, OsDisk) and disk.force_sync and not disk.faults.plan.injects():
            try:
                helper = self._helper = SyncHelper(loop)
            except OSError as exc:
                log.warning("cannot start the fsync helper (%s): syncing the log on the loop", describe_error(exc))
            else:
                return lambda files, done: helper.sync([cast(OsFile, f).fileno() for f in files], done)

        def sync_here(files: list[AppendFile], done: SyncDone) -> None:
            failure: BaseException | None = None
            try:
                for f in files:
                    f.sync()
            except OSError as exc:
                failure = exc
            loop.call_soon(done, failure)

        return sync_here

    def write_snapshot_now(self, tree: DataTree) -> None:
        """Write ``tree`` as a snapshot before going on (a fresh data dir's snapshot.0, as ZooKeeper
        writes it: its loader refuses logs without a snapshot; a learner's SNAP)."""
        write_snapshot_file(self.disk, self.dirs.snap_dir, tree)

    def _fatal(self, exc: BaseException, on_fatal: Callable[[BaseException], None]) -> None:
        if self.failed is None:
            self.failed = exc
            on_fatal(exc)

    # ---- the log ----

    def log_txns(self, entries: Sequence[Propose], tree: DataTree) -> None:
        """Write the txns of one loop turn to the log; roll and snapshot when due."""
        if self.failed is not None or not entries:
            return
        assert self.commit is not None
        records = b"".join([encode_entry(p.hdr, p.txn, None, p.body) for p in entries])
        roll = self.rolls.logged(len(entries))
        self.commit.submit(entries[0].hdr.zxid, records, len(entries), roll)
        if roll:
            self.start_snapshot(tree)

    def log_payloads(self, zxids: Sequence[int], payloads: Sequence[bytes], tree: DataTree) -> None:
        """The same for txns already serialized (a quorum peer's proposals), written as they are."""
        if self.failed is not None or not payloads:
            return
        assert self.commit is not None
        records = frame_payloads(payloads)
        roll = self.rolls.logged(len(payloads))
        self.commit.submit(zxids[0], records, len(payloads), roll)
        if roll:
            self.start_snapshot(tree)

    # ---- snapshots ----

    def start_snapshot(self, tree: DataTree) -> bool:
        if self.closed:
            return False
        if self.snapshot is not None:
            log.warning("too busy to snapshot, skipping (a snapshot is still being written)")
            return False
        t0 = time.perf_counter()
        self.snapshot_pause_ms = 0.0
        self.snapshot = SnapshotWriter(tree)
        path = join(self.dirs.snap_dir, TMP_PREFIX + snapshot_name(self.snapshot.zxid))
        if self._can_fork():
            return self._fork_snapshot(tree, path, t0)
        first = self.snapshot.step(0)
        self._note_pause(t0)
        self._snap_started = t0
        self._snap_file = None
        self._snap_io.submit(self._open_snapshot_file, path, first)
        log.info("snapshotting 0x%x to %s", self.snapshot.zxid, path)
        assert self.loop is not None
        self.loop.call_soon(self._snapshot_slice)
        return True

    def _can_fork(self) -> bool:
        """A forked child writes the file where the OS's files are written with no injected
        failure (their byte and sync counters live in this process and would not see the child's)."""
        if not self.fork_snapshots or not fork_available() or not isinstance(self.disk, OsDisk):
            return False
        plan = self.disk.faults.plan
        return plan.fail_after_bytes is None and plan.fail_sync_after is None

    def _fork_snapshot(self, tree: DataTree, path: str, t0: float) -> bool:
        writer = self.snapshot
        assert writer is not None and self.loop is not None
        disk = self.disk
        assert isinstance(disk, OsDisk)  # (_can_fork)

        def write_in_child() -> None:  # runs in the child only: no loop, no logging
            f = disk.create(path)
            synced = 0
            while not writer.done:
                f.write(writer.step(SNAPSHOT_CHILD_STEP_NODES))
                if f.position - synced >= SNAPSHOT_CHILD_SYNC_BYTES:
                    t = time.monotonic()
                    # small flushes, written back without a journal commit of their own: a large
                    # flush would hold up the log's fdatasync behind it
                    f.write_back(synced, f.position)
                    synced = f.position
                    time.sleep(time.monotonic() - t)  # and at most half the disk's time
            f.write(writer.finish())
            f.sync()
            f.close()

        try:
            pid = fork_child(write_in_child)
        except OSError as exc:  # no memory or process slot for a child: serialize on the loop
            log.warning("cannot fork a snapshot writer (%s), snapshotting on the loop", describe_error(exc))
            self.fork_snapshots = False
            self.snapshot = None
            return self.start_snapshot(tree)
        self._snap_child = pid
        writer.nodes_written = len(tree.nodes)  # the child writes the tree as it is at the fork
        self._note_pause(t0)
        self._snap_started = t0
        log.info("snapshotting 0x%x to %s (child %d)", writer.zxid, path, pid)
        done = self._snap_io.submit(self._wait_snapshot_child, pid, path, writer.zxid)
        done.add_done_callback(self._snapshot_done_threadsafe)
        return True

    def _wait_snapshot_child(self, pid: int, tmp: str, zxid: int) -> str:
        code = wait_child(pid)
        self._snap_child = None
        if code != 0:
            self.disk.remove(tmp)
            how = f"exit code {code}" if code > 0 else f"signal {-code}"
            raise RuntimeError(f"the snapshot child {pid} ended with {how}")
        path = join(self.dirs.snap_dir, snapshot_name(zxid))
        self.disk.rename(tmp, path)
        return path

    def _snapshot_done_threadsafe(self, future: Any) -> None:
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(self._snapshot_done, future)
        except RuntimeError:  # the loop closed meanwhile
            pass

    def _open_snapshot_file(self, path: str, first: bytes) -> None:
        self._snap_synced = 0
        self._snap_file = self.disk.create(path)
        self._snap_file.write(first)

    def _snapshot_slice(self) -> None:
        writer = self.snapshot
        if writer is None or self.failed is not None or self.closed:
            return
        assert self.loop is not None
        writes = self._snap_writes
        while writes and writes[0].done():
            writes.popleft()
        if len(writes) >= SNAPSHOT_MAX_PENDING_WRITES:  # a slow disk: serialize no further ahead of it
            self.loop.call_later(SNAPSHOT_SLICE_S, self._snapshot_slice)
            return
        t0 = time.perf_counter()
        deadline = t0 + SNAPSHOT_SLICE_S
        chunks = []
        while not writer.done and time.perf_counter() < deadline:
            chunks.append(writer.step(256))
        if writer.done:
            chunks.append(writer.finish())
        self._note_pause(t0)
        data = b"".join(chunks)
        if data:
            writes.append(self._snap_io.submit(self._write_snapshot_chunk, data))
        if writer.done:
            done = self._snap_io.submit(self._seal_snapshot, writer.zxid)
            done.add_done_callback(self._snapshot_done_threadsafe)
        else:
            # leave the loop as long again for requests: a snapshot takes about twice the CPU
            # time it needs, and request latency stays near its level outside snapshots
            self.loop.call_later(SNAPSHOT_SLICE_S, self._snapshot_slice)

    def _write_snapshot_chunk(self, data: bytes) -> None:
        f = self._snap_file
        assert f is not None
        f.write(data)
        if f.position - self._snap_synced >= SNAPSHOT_SYNC_BYTES:
            f.sync()  # many small flushes: one big one would hold up the log's fsync for 100 ms
            self._snap_synced = f.position

    def _seal_snapshot(self, zxid: int) -> str:
        f = self._snap_file
        assert f is not None
        f.sync()
        f.close()
        path = join(self.dirs.snap_dir, snapshot_name(zxid))
        self.disk.rename(f.path, path)
        return path

    def _snapshot_done(self, future: Any) -> None:
        writer, self.snapshot = self.snapshot, None
        if future.cancelled():  # stopped mid-snapshot: the next start removes the tmp file
            return
        exc = future.exception()
        if exc is not None and self.closed:  # stopped mid-snapshot: its writer was killed
            log.info("snapshot 0x%x abandoned at stop", writer.zxid if writer else -1)
            return
        if exc is not None:
            log.error("snapshot 0x%x failed: %s", writer.zxid if writer else -1, describe_error(exc))
            return
        elapsed = time.perf_counter() - self._snap_started
        if self.metrics is not None:
            self.metrics.record("snapshottime", int(elapsed * 1000))
        log.info("snapshot %s written: %d znodes in %.2fs, longest pause on the loop %.1f ms",
                 future.result(), writer.nodes_written if writer else -1, elapsed, self.snapshot_pause_ms)

    def _note_pause(self, t0: float) -> None:
        pause_ms = (time.perf_counter() - t0) * 1000
        self.snapshot_pause_ms = max(self.snapshot_pause_ms, pause_ms)


    # ---- shutdown ----

    def close(self) -> None:
        """Sync what the log was given (so a clean stop loses nothing; that is reported like any
        sync, should the loop run on), then stop. A snapshot still being written is abandoned (a
        forked writer is killed); its tmp file is removed at the next start."""
        self.closed = True
        child = self._snap_child
        if child is not None:
            kill_child(child)  # its waiter removes the tmp file, or the next start does
        if self.commit is not None:
            try:
                durable = self.commit.close()
            except OSError as exc:
                log.error("cannot sync the txn log at stop: %s", describe_error(exc))
                durable = 0
            if durable and self._on_durable is not None and self.loop is not None and not self.loop.is_closed():
                self.loop.call_soon(self._on_durable, durable)
        if self._helper is not None:
            self._helper.close()
        self._snap_io.shutdown(wait=True, cancel_futures=True)

