"""The fsync helper: a small child process that ``fdatasync``s the txn log for the loop.

Why a process and not a thread: a thread needs the GIL to start each sync and again when
``fdatasync`` returns, while the loop holds it nearly all the time under load. Every group
commit then cost several GIL handoffs (futex waits, context switches, the loop's caches
cooled), and the loop spent a third more CPU per write. The helper holds no GIL of ours: the
loop writes the records itself (``pwrite`` into the page cache), sends the helper the files'
descriptors over a socketpair (SCM_RIGHTS), and reads one byte back when they are on disk.

The helper is its own program (``python -c``, no copy of the server's memory), in its own
session, and ignores SIGINT and SIGTERM: it exits when the server closes the socket or dies,
so a clean stop's last sync never finds it gone. A failed ``fdatasync`` comes back as its
errno; the server then stops as it does on any log write error.
"""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence

from zkpy.storage.groupcommit import SyncDone

_OK = b"k"
_FAILED = b"e"  # followed by the errno, in decimal
_REQUEST = b"s"
MAX_FILES = 8  # descriptors in one request: a batch spans at most a roll or two
_CHILD = "from zkpy.runtime.fsync_helper import serve; serve({fd})"



def serve(fd: int) -> None:
    """The helper's main loop: for each request, fdatasync and close the descriptors it carries,
    then answer. Returns when the server closes its end."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sock = socket.socket(fileno=fd)
    sync = getattr(os, "fdatasync", os.fsync)
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, 16, MAX_FILES)
        except OSError:
            return
        if not msg:
            return
        answer = _OK
        for f in fds:
            try:
                sync(f)
            except OSError as exc:
                answer = _FAILED + str(exc.errno or errno.EIO).encode()
            finally:
                os.close(f)
        try:
            sock.sendall(answer)
        except OSError:
            return


class SyncHelper:
    """The loop's end of the helper: one request in flight at a time (group commit keeps it so)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        mine, theirs = socket.socketpair()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _CHILD.format(fd=theirs.fileno())], pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL, start_new_session=True)
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        mine.setblocking(False)
        self.sock = mine
        self._done: SyncDone | None = None
        loop.add_reader(mine.fileno(), self._answered)

    def sync(self, fds: Sequence[int], done: SyncDone) -> None:
        """Start syncing ``fds``; ``done(None)`` runs on the loop once they are on disk, or
        ``done(error)`` if they may not be."""
        assert self._done is None, "one sync at a time"
        self._done = done
        try:
            socket.send_fds(self.sock, [_REQUEST], list(fds))
        except OSError as exc:  # the helper is gone
            self._finish(exc)

    def _answered(self) -> None:
        failure: OSError | None = None
        try:
            data = self.sock.recv(64)
        except BlockingIOError:
            return
        except OSError as exc:
            data, failure = b"", exc
        if data == _OK:
            self._finish(None)
        elif data.startswith(_FAILED):
            code = int(data[1:] or errno.EIO)
            self._finish(OSError(code, f"fdatasync: {os.strerror(code)}"))
        else:
            self.loop.remove_reader(self.sock.fileno())
            self._finish(failure or OSError(errno.EPIPE, "the fsync helper exited"))

    def _finish(self, failure: BaseException | None) -> None:
        done, self._done = self._done, None
        if done is not None:
            done(failure)

    def close(self, timeout: float = 10.0) -> None:
        """Close the socket (the helper exits at once) and wait for it."""
        if self.sock.fileno() >= 0:
            try:
                self.loop.remove_reader(self.sock.fileno())
            except (RuntimeError, ValueError):  # the loop is closed already
                pass
            self.sock.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
