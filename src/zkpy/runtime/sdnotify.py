"""systemd's readiness protocol (sd_notify), for a unit with ``Type=notify``: once the client port
listens, the server sends ``READY=1`` and its serving line as ``STATUS=`` to ``$NOTIFY_SOCKET``;
without that variable (not started by systemd) nothing is sent."""

from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger("zkpy.server")


def notify(message: str) -> bool:
    """Send ``message`` (``KEY=value`` lines) to systemd; whether it was sent."""
    path = os.environ.get("NOTIFY_SOCKET")
    if not path:
        return False
    address = "\0" + path[1:] if path.startswith("@") else path  # an abstract socket's name
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.sendto(message.encode("utf-8"), address)
    except OSError as exc:
        log.warning("cannot tell systemd the server is ready (NOTIFY_SOCKET=%s): %s", path, exc)
        return False
    return True


def ready(status: str) -> bool:
    return notify(f"READY=1\nSTATUS={status}")
