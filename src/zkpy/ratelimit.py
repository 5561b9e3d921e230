"""Rate limiting of repeated log lines (pure: the caller passes ``now_ms``).

A line that one peer can make the server write again and again (a refused connection, a failed
auth, a malformed frame, an ignored SASL token, ...) goes through a `LogLimiter` under a key
naming the line's kind and the peer, e.g. ``("auth failed", ip)``. Per key, at most ``burst``
lines are written in each window of ``window_ms``; the rest are counted, and the first line
written after them says how many were suppressed. So N bad packets from one peer grow the log
by at most ``burst`` lines per window, whatever N is.

The number of keys is bounded too (``max_keys``): past it, keys whose window has ended are
forgotten, and if none has, every key is (a bound on memory matters more than an exact count
of the lines suppressed).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

WINDOW_MS = 60_000  # one window per minute, per key
BURST = 5  # lines written per key and window before the rest are suppressed
MAX_KEYS = 4096  # keys remembered at once


class _Window:
    __slots__ = ("start_ms", "written", "suppressed")

    def __init__(self, start_ms: int) -> None:
        self.start_ms = start_ms
        self.written = 0
        self.suppressed = 0


class LogLimiter:
    """At most ``burst`` lines per key in each ``window_ms``; see the module's doc."""

    def __init__(self, window_ms: int = WINDOW_MS, burst: int = BURST, max_keys: int = MAX_KEYS) -> None:
        self.window_ms = window_ms
        self.burst = burst
        self.max_keys = max_keys
        self._windows: dict[Hashable, _Window] = {}

    def check(self, key: Hashable, now_ms: int) -> int | None:
        """None: suppress this line. Otherwise write it; the number returned is how many lines
        of this key were suppressed since the last one written (usually 0)."""
        w = self._windows.get(key)
        if w is None or now_ms - w.start_ms >= self.window_ms:
            suppressed = w.suppressed if w is not None else 0
            if w is None and len(self._windows) >= self.max_keys:
                self._forget(now_ms)
            w = self._windows[key] = _Window(now_ms)
            w.written = 1
            return suppressed
        if w.written < self.burst:
            w.written += 1
            suppressed, w.suppressed = w.suppressed, 0
            return suppressed
        w.suppressed += 1
        return None

    def line(self, key: Hashable, now_ms: int, message: str) -> str | None:
        """``message`` to write (with the count of similar lines suppressed before it), or None."""
        suppressed = self.check(key, now_ms)
        if suppressed is None:
            return None
        if suppressed:
            return f"{message} ({suppressed} similar lines suppressed)"
        return message

    def log(self, write: Callable[[str], None], key: Hashable, now_ms: int, message: str) -> None:
        """Write ``message`` through ``write`` unless this key has had its share of this window."""
        text = self.line(key, now_ms, message)
        if text is not None:
            write(text)

    def _forget(self, now_ms: int) -> None:
        stale = [k for k, w in self._windows.items() if now_ms - w.start_ms >= self.window_ms]
        for k in stale:
            del self._windows[k]
        if len(self._windows) >= self.max_keys:
            self._windows.clear()

    def __len__(self) -> int:
        return len(self._windows)
