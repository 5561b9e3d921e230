"""Group commit of the txn log, as a state machine the shell drives (the server's loop, the simulator).

``submit`` writes a batch of records into the current log file at once (not durable yet) and,
when no sync is running, starts one over every file written since the last one; whatever is
submitted while a sync runs waits for the next, which covers all of it. ``report(count)`` says
that ``count`` more txns are durable, in submission order; only then may they be applied and
answered. How a sync runs is the shell's: ``start_sync(files, done)`` syncs the files and calls
``done(None)``, or ``done(error)``, later (the server: its fsync helper process; the simulator:
an event after a random delay). A roll syncs the file it leaves on the spot, so no byte of the
next file is written before the last byte of the one before is durable.

After a failure (a write, a sync) nothing more is written or reported: the shell stops the
server, and nothing after the last good sync was acknowledged.
"""

from __future__ import annotations

from collections.abc import Callable

from zkpy.storage.disk import AppendFile
from zkpy.storage.txnlog import TxnLogWriter

SyncDone = Callable[[BaseException | None], None]  # called with None once synced, or with the error
StartSync = Callable[[list[AppendFile], SyncDone], None]


class AvgMinMax:
    """ZooKeeper's AvgMinMaxCounter (a BASIC ``Summary``): count, sum, min and max of integer
    samples, which ``mntr`` prints as ``zk_{avg,min,max,cnt,sum}_<name>``."""

    __slots__ = ("count", "total", "min", "max")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0
        self.min = 0  # 0 until the first sample, as mntr reports an empty counter
        self.max = 0

    def add(self, value: int) -> None:
        if not self.count or value < self.min:
            self.min = value
        if value > self.max:
            self.max = value
        self.total += value
        self.count += 1


class GroupCommit:
    """One log's group commit (see the module doc). Statistics for ``mntr``, under ZooKeeper
    3.8's metric names: ``fsync_time_ms`` is ``fsynctime`` (each group commit's sync, whole
    milliseconds as FileTxnLog measures it, by ``now_ns``) and ``batch_size`` is
    ``sync_processor_batch_size`` (txns per group commit)."""

    def __init__(self, writer: TxnLogWriter, start_sync: StartSync, report: Callable[[int], None],
                 fail: Callable[[BaseException], None], now_ns: Callable[[], int]) -> None:
        self.writer = writer
        self._start_sync = start_sync
        self._report = report
        self._fail = fail
        self._now_ns = now_ns
        self._dirty: list[AppendFile] = []  # files written since the last sync started
        self._waiting = 0  # txns written since the last sync started
        self._syncing: list[AppendFile] | None = None  # the files of the sync in flight
        self._in_flight = 0  # txns that sync covers
        self._started_ns = 0
        self.failed: BaseException | None = None
        self.closed = False
        self.fsync_time_ms = AvgMinMax()
        self.batch_size = AvgMinMax()

    def submit(self, first_zxid: int, records: bytes, count: int, roll_after: bool) -> None:
        """Write ``count`` txns' records (first zxid ``first_zxid``); with ``roll_after`` the
        file is synced and closed after them and the next batch starts a new one."""
        if self.failed is not None or self.closed:
            return
        try:
            self.writer.append(first_zxid, records)
            f = self.writer.current_file
            if roll_after:
                self.writer.roll()
                self._dirty = [d for d in self._dirty if d is not f]
            elif f is not None and not any(f is d for d in self._dirty):
                self._dirty.append(f)
        except Exception as exc:  # the disk failed: nothing after the last sync is acknowledged
            self._failed(exc)
            return
        self._waiting += count
        if self._syncing is None:
            self._sync()

    def _sync(self) -> None:
        files, self._dirty = self._dirty, []
        self._syncing = files
        self._in_flight, self._waiting = self._waiting, 0
        self._started_ns = self._now_ns()
        self._start_sync(files, self._synced)

    def _synced(self, failure: BaseException | None) -> None:
        self._syncing = None
        if self.failed is not None or self.closed:
            return
        if failure is not None:
            self._failed(failure)
            return
        self.fsync_time_ms.add((self._now_ns() - self._started_ns) // 1_000_000)
        self.batch_size.add(self._in_flight)
        count, self._in_flight = self._in_flight, 0
        if self._waiting:
            self._sync()
        self._report(count)

    def _failed(self, exc: BaseException) -> None:
        self.failed = exc
        self._fail(exc)

    def close(self) -> int:
        """Sync what was written and close the log (a clean stop loses nothing); returns how many
        txns this made durable that were not reported (a late ``done`` is ignored). A failing
        sync raises."""
        self.closed = True
        pending, self._in_flight, self._waiting = self._in_flight + self._waiting, 0, 0
        self._syncing, self._dirty = None, []
        if self.failed is not None:
            self.writer.close()
            return 0
        try:
            self.writer.sync()  # a roll synced every earlier file
        finally:
            self.writer.close()
        return pending
