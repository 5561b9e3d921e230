"""Group commit (``storage.groupcommit.GroupCommit``) and the fsync helper process
(``runtime.fsync_helper``): what is written while a sync runs waits for the next one, reports
come in order and only after their sync, a roll syncs the file it leaves before the next one, a
failure stops every later report, and the helper really syncs, reports errors, outlives
SIGTERM until the server lets it go and is started again if it dies."""

from __future__ import annotations

import asyncio
import errno
import os
import signal
from pathlib import Path

import pytest

from zkpy.runtime import fsync_helper
from zkpy.runtime.fsync_helper import SyncHelper
from zkpy.storage.disk import AppendFile, MemoryDisk
from zkpy.storage.groupcommit import GroupCommit, SyncDone
from zkpy.storage.txnlog import TxnLogWriter, encode_entry
from zkpy.wire.txn import SetDataTxn, TxnHeader

LOG_DIR = "/data/version-2"


def records(first: int, count: int) -> bytes:
    return b"".join(encode_entry(TxnHeader(1, z, z, 1000 + z, 5), SetDataTxn("/a", b"v", z), None)
                    for z in range(first, first + count))


class Harness:
    """A GroupCommit over a MemoryDisk whose syncs finish when the test says so."""

    def __init__(self) -> None:
        self.disk = MemoryDisk()
        self.syncs: list[tuple[list[AppendFile], SyncDone]] = []
        self.reports: list[int] = []
        self.failures: list[BaseException] = []
        self.clock = 0
        self.commit = GroupCommit(TxnLogWriter(self.disk, LOG_DIR), self.start_sync, self.reports.append,
                                  self.failures.append, lambda: self.clock)
        self.zxid = 1

    def start_sync(self, files: list[AppendFile], done: SyncDone) -> None:
        self.syncs.append((files, done))

    def submit(self, count: int, roll: bool = False) -> None:
        self.commit.submit(self.zxid, records(self.zxid, count), count, roll)
        self.zxid += count

    def finish(self, failure: BaseException | None = None) -> list[AppendFile]:
        """Finish the oldest unfinished sync: its files are synced for real, then reported."""
        files, done = self.syncs.pop(0)
        if failure is None:
            for f in files:
                f.sync()
        done(failure)
        return files

    def durable_bytes(self) -> int:
        return sum(len(v) for v in self.disk.durable.values())


def test_writes_during_a_sync_wait_for_the_next_one_and_reports_keep_order() -> None:
    h = Harness()
    h.submit(3)
    assert len(h.syncs) == 1 and h.reports == []  # written, one sync started, nothing reported
    h.submit(2)
    h.submit(4)
    assert len(h.syncs) == 1  # no second sync while one runs
    h.finish()
    assert h.reports == [3]
    assert len(h.syncs) == 1  # the next sync covers both later batches
    h.finish()
    assert h.reports == [3, 6]
    assert h.syncs == []
    assert h.commit.batch_size.count == 2 and h.commit.batch_size.max == 6


def test_fsync_time_is_measured_by_the_clock_it_was_given() -> None:
    h = Harness()
    h.submit(1)
    h.clock += 7_400_000
    h.finish()
    assert (h.commit.fsync_time_ms.count, h.commit.fsync_time_ms.max) == (1, 7)


def test_nothing_is_reported_before_its_sync_made_it_durable() -> None:
    h = Harness()
    h.submit(5)
    assert h.durable_bytes() == 0 and h.reports == []
    h.finish()
    assert h.reports == [5]
    (path,) = [p for p in h.disk.files if p.startswith(LOG_DIR)]
    assert h.disk.durable[path] == bytes(h.disk.files[path])


def test_a_roll_syncs_the_file_it_leaves_before_the_next_file_gets_a_byte() -> None:
    h = Harness()
    h.submit(1)  # sync 1 in flight over log.1
    h.submit(2, roll=True)  # log.1 again, then rolled away from: synced on the spot
    old = f"{LOG_DIR}/log.1"
    assert h.disk.durable[old] == bytes(h.disk.files[old])
    assert h.reports == []  # durable, but reported only with the sync that follows
    h.submit(3)  # log.4
    h.finish()
    assert h.reports == [1]
    files, _ = h.syncs[0]
    assert [f.path for f in files] == [f"{LOG_DIR}/log.4"]  # the synced file is not synced again
    h.finish()
    assert h.reports == [1, 5]
    assert all(h.disk.durable[p] == bytes(h.disk.files[p]) for p in h.disk.files)


def test_a_roll_with_nothing_after_it_is_still_reported_by_a_sync() -> None:
    h = Harness()
    h.submit(1)
    h.submit(2, roll=True)
    h.finish()
    assert h.syncs[0][0] == []  # no file left to sync, but the report still waits its turn
    h.finish()
    assert h.reports == [1, 2]


def test_a_failed_sync_stops_every_later_report() -> None:
    h = Harness()
    h.submit(2)
    h.submit(3)
    h.finish(OSError(errno.EIO, "injected"))
    assert h.reports == [] and len(h.failures) == 1
    h.submit(1)
    assert h.syncs == [] and h.reports == []  # nothing written or synced after the failure
    assert h.commit.close() == 0


def test_close_syncs_what_was_written_and_returns_what_it_made_durable() -> None:
    h = Harness()
    h.submit(2)  # in flight
    h.submit(3)  # waiting
    assert h.commit.close() == 5
    assert all(h.disk.durable[p] == bytes(h.disk.files[p]) for p in h.disk.files)
    h.syncs[0][1](None)  # the helper's late answer is ignored
    assert h.reports == []


def run_on_loop(helper_fn: object) -> object:
    async def main() -> object:
        return await helper_fn(asyncio.get_running_loop())  # type: ignore[operator]
    return asyncio.run(main())


async def synced(helper: SyncHelper, fds: list[int]) -> BaseException | None:
    fut: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
    helper.sync(fds, fut.set_result)
    return await asyncio.wait_for(fut, 10)


def test_the_helper_syncs_a_file_and_answers_errors(tmp_path: Path) -> None:
    async def go(loop: asyncio.AbstractEventLoop) -> tuple[object, ...]:
        helper = SyncHelper(loop)
        fd = os.open(tmp_path / "log", os.O_CREAT | os.O_WRONLY)
        r, w = os.pipe()
        try:
            os.pwrite(fd, b"records", 0)
            ok = await synced(helper, [fd])
            bad = await synced(helper, [r])  # a pipe cannot be fsynced: EINVAL
            again = await synced(helper, [fd])  # and the helper goes on
        finally:
            helper.close()
            for f in (fd, r, w):
                os.close(f)
        return ok, bad, again, helper.proc.returncode

    ok, bad, again, code = run_on_loop(go)  # type: ignore[misc]
    assert ok is None and again is None
    assert isinstance(bad, OSError) and bad.errno == errno.EINVAL
    assert code == 0  # closing the socket ends it


def test_the_helper_outlives_sigterm_and_a_killed_one_is_started_again(tmp_path: Path) -> None:
    async def go(loop: asyncio.AbstractEventLoop) -> tuple[object, ...]:
        helper = SyncHelper(loop)
        fd = os.open(tmp_path / "log", os.O_CREAT | os.O_WRONLY)
        try:
            assert await synced(helper, [fd]) is None  # started: its signal handlers are set
            first = helper.proc
            first.send_signal(signal.SIGTERM)
            after_term = await synced(helper, [fd])
            first.kill()
            first.wait(10)
            after_kill = await synced(helper, [fd])
            return after_term, after_kill, helper.proc is not first, first.returncode
        finally:
            helper.close()
            os.close(fd)

    after_term, after_kill, replaced, code = run_on_loop(go)  # type: ignore[misc]
    assert after_term is None and after_kill is None and replaced
    assert code == -signal.SIGKILL


def test_helpers_that_keep_dying_fail_the_sync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fsync_helper, "MAX_DEATHS", 0)

    async def go(loop: asyncio.AbstractEventLoop) -> object:
        helper = SyncHelper(loop)
        fd = os.open(tmp_path / "log", os.O_CREAT | os.O_WRONLY)
        try:
            helper.proc.kill()
            helper.proc.wait(10)
            return await synced(helper, [fd])
        finally:
            helper.close()
            os.close(fd)

    failure = run_on_loop(go)
    assert isinstance(failure, OSError) and failure.errno == errno.EPIPE


def test_the_helper_exits_at_close_while_a_copy_of_its_socket_lives(tmp_path: Path) -> None:
    async def go(loop: asyncio.AbstractEventLoop) -> int | None:
        helper = SyncHelper(loop)
        inherited = os.dup(helper.sock.fileno())  # a copy another process might hold
        try:
            assert await synced(helper, []) is None
            helper.close(timeout=5)
            return helper.proc.returncode
        finally:
            os.close(inherited)

    assert run_on_loop(go) == 0  # it saw the end at once, it was not killed after the timeout


@pytest.mark.parametrize("count", [1, 3])
def test_the_helper_syncs_several_files_in_one_request(tmp_path: Path, count: int) -> None:
    async def go(loop: asyncio.AbstractEventLoop) -> object:
        helper = SyncHelper(loop)
        fds = [os.open(tmp_path / f"log.{i}", os.O_CREAT | os.O_WRONLY) for i in range(count)]
        try:
            return await synced(helper, fds)
        finally:
            helper.close()
            for f in fds:
                os.close(f)

    assert run_on_loop(go) is None
