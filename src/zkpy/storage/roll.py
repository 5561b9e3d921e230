"""When the txn log rolls, and a snapshot starts: after ``snapCount/2`` plus a random share of
``snapCount/2`` txns, as ZooKeeper's SyncRequestProcessor staggers it (so that the servers of
an ensemble do not all snapshot at once). One policy for the server and the simulator."""

from __future__ import annotations

from typing import Protocol


class RandomSource(Protocol):
    def randrange(self, stop: int, /) -> int: ...


class RollPolicy:
    def __init__(self, snap_count: int, rng: RandomSource) -> None:
        self.snap_count = snap_count
        self.rng = rng
        self.since_roll = 0
        self.roll_at = self._next()

    def _next(self) -> int:
        half = max(1, self.snap_count // 2)
        return half + self.rng.randrange(half)

    def logged(self, count: int) -> bool:
        """``count`` more txns went to the log: True if the log rolls after them."""
        self.since_roll += count
        if self.since_roll <= self.roll_at:
            return False
        self.since_roll = 0
        self.roll_at = self._next()
        return True
