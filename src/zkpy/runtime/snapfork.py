"""A forked child that does one piece of work on a copy-on-write image of this process, then exits.

Used to serialise and write a snapshot while the parent's event loop keeps serving: the child
sees the tree frozen at the instant of the fork (a fuzzy snapshot taken in no time at all),
and the parent's writes after the fork never reach it. Also used at the start, to sum the
digest of a tree being loaded on the second core (``sum_in_child``), and to send a starting
worker its replica (``runtime.workers``).

Invariants of the child (it is a copy of a process with threads and an event loop, of which
only the forking thread survives):
- it never returns into the caller's stack, never touches the event loop, its sockets or its
  locks, and never logs: it runs ``work`` and leaves with ``os._exit`` (0 when ``work``
  returned, 1 when it raised, after one line on stderr);
- first it drops every inherited descriptor above stderr (a connection the parent closes is
  then closed at once, not when the child exits; a listening port is free as soon as the
  parent lets it go), restores the default action of the signals the parent's loop handles
  (so a SIGTERM meant for the group kills the child instead of waking the parent's loop), turns
  the cyclic garbage collector off (a collection would touch, and so copy, every page of the
  tree), lowers its own priority (where the cores are busy, the serving parent goes first; the
  snapshot takes longer) and, on Linux, asks to be killed when the parent dies, so no child
  outlives its server.
"""

from __future__ import annotations

import ctypes
import gc
import os
import select
import signal
import struct
import sys
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1
CHILD_NICENESS = 10  # the child yields the CPU to the serving parent (and its clients) where they compete
_DIGEST = struct.Struct(">Q")


def fork_available() -> bool:
    return hasattr(os, "fork") and hasattr(os, "waitpid")


def fork_child(work: Callable[[], None], keep_fd: int | None = None, niceness: int = CHILD_NICENESS) -> int:
    """Fork; the child runs ``work`` and exits. Returns the child's pid (in the parent only).
    ``keep_fd``: a descriptor the child keeps (its way to answer); ``niceness``: how far it
    lowers its priority."""
    parent = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        _become_detached_child(parent, keep_fd, niceness)
        work()
        code = 0
    except BaseException as exc:  # noqa: BLE001 - the child reports and exits, whatever happened
        try:
            os.write(2, f"zkpy child {os.getpid()}: {type(exc).__name__}: {exc}\n".encode(errors="replace"))
        except OSError:
            pass
    finally:
        os._exit(code)


def sum_in_child(work: Callable[[], int]) -> Callable[[], int | None]:
    """``work()`` (a digest sum of 64 bits) in a forked child, on this process's image at the
    fork, while this process goes on loading the tree; what it returns waits for the sum (None
    if the child failed: the loader then sums it itself). The child runs at this process's
    priority: the start waits for it. Where fork is missing the work is done here and now."""
    if not fork_available():
        value = work()
        return lambda: value
    read_end, write_end = os.pipe()
    try:
        pid = fork_child(lambda: write_all(write_end, _DIGEST.pack(work())), keep_fd=write_end, niceness=0)
    except OSError:
        os.close(read_end)
        return lambda: None
    finally:
        os.close(write_end)

    def result() -> int | None:
        try:
            answer = b""
            while len(answer) < _DIGEST.size:
                chunk = os.read(read_end, _DIGEST.size - len(answer))
                if not chunk:
                    break
                answer += chunk
        finally:
            os.close(read_end)
            wait_child(pid)
        return _DIGEST.unpack(answer)[0] if len(answer) == _DIGEST.size else None

    return result


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``, waiting whenever a non-blocking one is full (a child
    writes on a socket its parent's loop made non-blocking: the flag is shared, so it stays)."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            select.select([], [fd], [])


def wait_child(pid: int) -> int:
    """Wait for the child; its exit code, or minus the signal that killed it."""
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def kill_child(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _become_detached_child(parent: int, keep_fd: int | None, niceness: int) -> None:
    gc.disable()
    try:
        signal.set_wakeup_fd(-1)
    except ValueError:  # not the main thread: the parent's loop set no wakeup fd from here
        pass
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        try:
            signal.signal(signum, signal.SIG_DFL)
        except ValueError:
            pass
    if keep_fd is None:
        os.closerange(3, _max_fd())
    else:
        os.closerange(3, keep_fd)
        os.closerange(keep_fd + 1, _max_fd())
    if niceness:
        try:
            os.nice(niceness)
        except OSError:
            pass
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)


def _max_fd() -> int:
    try:
        return int(os.sysconf("SC_OPEN_MAX"))
    except (OSError, ValueError):
        return 65536
