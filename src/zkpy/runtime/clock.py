"""The shell's clocks, the one place the server's processes read time: monotonic milliseconds
for timeouts, wall milliseconds for txn times and ``cons``; and how often a process ticks its
cores (``tick_interval_s``)."""

from __future__ import annotations

import time


def now_ms() -> int:
    """Monotonic milliseconds (timeouts, deadlines, latencies)."""
    return int(time.monotonic() * 1000)


def wall_ms() -> int:
    """Milliseconds since the epoch (txn times, stats, ``cons``)."""
    return int(time.time() * 1000)


def tick_interval_s(tick_ms: int) -> float:
    """How often a server process runs its cores' timers: a quarter of tickTime, between 10 and 100 ms."""
    return max(10, min(100, tick_ms // 4)) / 1000
