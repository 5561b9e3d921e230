"""When an ensemble member serves read-only clients (``readonlymode.enabled``), as a pure decision.

Apache ZooKeeper 3.8's QuorumPeer, LOOKING with read-only mode on, starts its read-only server
once it has been looking for ``max(2000 ms, tickTime)`` (a member that only blinked between two
terms does not switch), and shuts it down when the election decides: its read-only clients are
disconnected then, and reconnect to whichever server serves them next.

Invariants owned here: read-only service starts only while looking, never before the delay,
at most once per election; ``decided`` ends it. Times are arguments.
"""

from __future__ import annotations

READ_ONLY_DELAY_MIN_MS = 2000  # QuorumPeer: Math.max(2000, tickTime) before the read-only server starts


class ReadOnlyGate:
    """One member's read-only switch, driven by its election's start and end and by time."""

    def __init__(self, enabled: bool, tick_ms: int) -> None:
        self.enabled = enabled
        self.delay_ms = max(READ_ONLY_DELAY_MIN_MS, tick_ms)
        self.serving = False
        self._looking_since: int | None = None

    def looking(self, now_ms: int) -> None:
        """An election began."""
        self._looking_since = now_ms
        self.serving = False

    def due_ms(self) -> int | None:
        """When read-only service is due (absolute ms), or None: not enabled, not looking, or serving."""
        if not self.enabled or self._looking_since is None or self.serving:
            return None
        return self._looking_since + self.delay_ms

    def tick(self, now_ms: int) -> bool:
        """True exactly when read-only service starts now."""
        due = self.due_ms()
        if due is None or now_ms < due:
            return False
        self.serving = True
        return True

    def decided(self) -> bool:
        """The election decided (or the member stops): True when read-only service ends with it."""
        was = self.serving
        self.serving = False
        self._looking_since = None
        return was
