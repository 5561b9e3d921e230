"""The simulated clock: a heap of timed events, run one at a time in (time, insertion) order.

Nothing here knows about servers. Time is integer milliseconds and only moves when the next
event is taken; two events at the same time run in the order they were scheduled, so a run
is a pure function of the seed that chose the delays.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any


class Scheduler:
    """Events are ``fn(*args)`` calls due at a time; ``step`` runs the earliest one."""

    def __init__(self) -> None:
        self.now = 0
        self._heap: list[tuple[int, int, Callable[..., Any], tuple[Any, ...]]] = []
        self._seq = 0
        self.steps = 0

    def at(self, when: int, fn: Callable[..., Any], *args: Any) -> None:
        if when < self.now:
            when = self.now
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, fn, args))

    def after(self, delay_ms: int, fn: Callable[..., Any], *args: Any) -> None:
        self.at(self.now + max(0, delay_ms), fn, *args)

    def next_time(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def step(self) -> bool:
        """Run the earliest event; False if there is none."""
        if not self._heap:
            return False
        when, _, fn, args = heapq.heappop(self._heap)
        self.now = when
        self.steps += 1
        fn(*args)
        return True

    def __len__(self) -> int:
        return len(self._heap)
