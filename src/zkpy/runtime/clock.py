"""The shell's clocks, the one place the server's processes read time: monotonic milliseconds
for timeouts, wall milliseconds for txn times and ``cons``. How often a process runs its cores'
timers is its config's (``ServerConfig.tick_interval_ms``)."""

from __future__ import annotations

import time


def now_ms() -> int:
    """Monotonic milliseconds (timeouts, deadlines, latencies)."""
    return int(time.monotonic() * 1000)


def wall_ms() -> int:
    """Milliseconds since the epoch (txn times, stats, ``cons``)."""
    return int(time.time() * 1000)
