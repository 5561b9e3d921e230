"""The fsync helper: a small child process that ``fdatasync``s the txn log for the loop.

Why a process and not a thread: a thread needs the GIL to start each sync and again when
``fdatasync`` returns, while the loop holds it nearly all the time under load. Every group
commit then cost several GIL handoffs (futex waits, context switches, the loop's caches
cooled), and the loop spent a third more CPU per write. The helper holds no GIL of ours: the
loop writes the records itself (``pwrite`` into the page cache), sends the helper the files'
descriptors over a socketpair (SCM_RIGHTS), and reads one byte back when they are on disk.

The helper is its own small program (``runtime.fsync_child`` under ``python -c``: no copy of
the server's memory, the standard library only, so it starts in hundredths of a second), in its own
session, and ignores SIGINT and SIGTERM (a service manager that signals every process of the
server leaves the helper to the server, which stops it after its own last sync): it exits when
the server closes the socket or dies. One that dies anyway is started again. A failed
``fdatasync`` comes back as its errno; the server then stops as it does on any log write error.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Sequence

from zkpy.runtime.fsync_child import FAILED, MAX_FILES, OK, REQUEST
from zkpy.storage.groupcommit import SyncDone

log = logging.getLogger("zkpy.persistence")

MAX_DEATHS = 3  # helpers that may die in a row, each started again, before a sync fails
_CHILD = "from zkpy.runtime.fsync_child import serve; serve({fd})"


class SyncHelper:
    """The loop's end of the helper: one request in flight at a time (group commit keeps it so).

    A helper that dies (killed by hand, by the OOM killer) is started again and given the request
    it had not answered (``fdatasync`` may run twice; it is idempotent): the request holds its own
    duplicates of the descriptors, so a file closed meanwhile is still the one synced. Only if
    helpers keep dying without answering does the sync fail, and the server with it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._fds: list[int] = []  # the request in flight: our duplicates of its descriptors
        self._done: SyncDone | None = None
        self._deaths = 0  # helpers that died since the last answer
        self._gone: OSError | None = None  # set once no helper is started again: every sync fails
        self.proc, self.sock = self._spawn()

    def _spawn(self) -> tuple[subprocess.Popen[bytes], socket.socket]:
        mine, theirs = socket.socketpair()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", _CHILD.format(fd=theirs.fileno())], pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL, start_new_session=True)
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        mine.setblocking(False)
        self.loop.add_reader(mine.fileno(), self._answered)
        return proc, mine

    def sync(self, fds: Sequence[int], done: SyncDone) -> None:
        """Start syncing ``fds``; ``done(None)`` runs on the loop once they are on disk, or
        ``done(error)`` if they may not be."""
        assert self._done is None, "one sync at a time"
        if len(fds) > MAX_FILES:  # the helper would not receive the rest
            raise ValueError(f"{len(fds)} files in one sync, at most {MAX_FILES}")
        self._done = done
        if self._gone is not None:
            self._finish(self._gone)
            return
        try:
            self._fds = [os.dup(fd) for fd in fds]
        except OSError as exc:
            self._finish(exc)
            return
        self._send()

    def _send(self) -> None:
        try:
            socket.send_fds(self.sock, [REQUEST], self._fds)
        except OSError:  # the helper is gone: its end of the socket is closed
            self._lost()

    def _answered(self) -> None:
        try:
            data = self.sock.recv(64)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data == OK:
            self._deaths = 0
            self._finish(None)
        elif data.startswith(FAILED):
            self._deaths = 0
            code = int(data[1:] or errno.EIO)
            self._finish(OSError(code, f"fdatasync: {os.strerror(code)}"))
        else:
            self._lost()

    def _lost(self) -> None:
        """The helper died: start another and give it the unanswered request, if there is one."""
        self.loop.remove_reader(self.sock.fileno())
        self.sock.close()
        code = self._reap()
        self._deaths += 1
        if self._deaths > MAX_DEATHS:
            self._gone = OSError(errno.EPIPE, f"the fsync helper exited {self._deaths} times in a row")
            self._finish(self._gone)
            return
        log.warning("the fsync helper (pid %d) exited with %s: starting another", self.proc.pid,
                    f"code {code}" if code >= 0 else f"signal {-code}")
        try:
            self.proc, self.sock = self._spawn()
        except OSError as exc:
            self._gone = exc
            self._finish(exc)
            return
        if self._done is not None:
            self._send()

    def _reap(self, timeout: float = 5.0) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def _finish(self, failure: BaseException | None) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds = []
        done, self._done = self._done, None
        if done is not None:
            done(failure)

    def close(self, timeout: float = 10.0) -> None:
        """Shut the socket down (the helper exits at once) and wait for it. A shutdown, not only a
        close: should another process hold a copy of the descriptor (a snapshot child between its
        fork and its closing of what it inherited), a close alone would leave the helper, and this
        wait, hanging on that process."""
        if self.sock.fileno() >= 0:
            try:
                self.loop.remove_reader(self.sock.fileno())
            except (RuntimeError, ValueError):  # the loop is closed already
                pass
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # the helper is gone already
                pass
            self.sock.close()
        for fd in self._fds:
            os.close(fd)
        self._fds = []
        self._reap(timeout)
