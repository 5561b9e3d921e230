"""The fsync helper's own program (``runtime.fsync_helper`` starts it): standard library only,
so that it starts in a few hundredths of a second, as often as servers start.

For each request on its socket it ``fdatasync``s the descriptors the request carries
(SCM_RIGHTS), closes them and answers ``OK``, or ``FAILED`` and the errno. It ignores SIGINT and
SIGTERM and returns when the server closes its end.
"""

from __future__ import annotations

import errno
import os
import signal
import socket

OK = b"k"
FAILED = b"e"  # followed by the errno, in decimal
REQUEST = b"s"
MAX_FILES = 8  # descriptors in one request: a batch spans at most a roll or two


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
        answer = OK
        for f in fds:
            try:
                sync(f)
            except OSError as exc:
                answer = FAILED + str(exc.errno or errno.EIO).encode()
            finally:
                os.close(f)
        try:
            sock.sendall(answer)
        except OSError:
            return
