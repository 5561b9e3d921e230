"""Rate limiting of repeated log lines (pure: the caller passes ``now_ms``).

A line that one peer can make the server write again and again (a refused connection, a failed
auth, a malformed frame, an ignored SASL token, ...) goes through a `LogLimiter` with the line's
kind and the peer (its IP address, or a server id). Two limits apply:

* similar lines: lines of one kind from one peer whose texts differ only in port numbers (every
  ``:<digits>``, so a reconnecting client's lines are alike) are written at most ``burst`` times
  in each window of ``window_ms``; the first one written after a window with suppressed lines
  says how many were suppressed;
* each peer: whatever the lines say, a peer gets at most ``peer_burst`` lines at once and
  ``peer_per_s`` lines a second after that (a token bucket), so varying the text (a bad length
  each time, a random session id) does not get around the first limit.

So N bad packets from one peer grow the log by at most ``burst`` lines per window when they are
alike, and by at most ``peer_burst`` plus ``peer_per_s`` lines a second in any case. The number
of keys remembered is bounded (``max_keys``): past it, the stale ones are forgotten first, and
then all of them (a bound on memory matters more than an exact count of the lines suppressed).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from typing import TypeVar

WINDOW_MS = 60_000  # one window per minute for similar lines
BURST = 10  # similar lines written per window before the rest are suppressed
PEER_BURST = 500  # lines one peer gets at once, whatever they say ...
PEER_PER_S = 5  # ... and a second after that
MAX_KEYS = 4096  # keys (and peers) remembered at once

_PORT = re.compile(r":\d+")
_V = TypeVar("_V")


class _Window:
    __slots__ = ("start_ms", "written", "suppressed")

    def __init__(self, start_ms: int) -> None:
        self.start_ms = start_ms
        self.written = 0
        self.suppressed = 0


class _Bucket:
    __slots__ = ("tokens", "at_ms", "suppressed")

    def __init__(self, tokens: float, at_ms: int) -> None:
        self.tokens = tokens
        self.at_ms = at_ms
        self.suppressed = 0


class LogLimiter:
    """Limits lines per kind and peer; see the module's doc."""

    def __init__(self, window_ms: int = WINDOW_MS, burst: int = BURST, peer_burst: int = PEER_BURST,
                 peer_per_s: float = PEER_PER_S, max_keys: int = MAX_KEYS) -> None:
        self.window_ms = window_ms
        self.burst = burst
        self.peer_burst = peer_burst
        self.peer_per_s = peer_per_s
        self.max_keys = max_keys
        self._windows: dict[Hashable, _Window] = {}
        self._buckets: dict[Hashable, _Bucket] = {}

    def line(self, kind: str, peer: Hashable, now_ms: int, message: str) -> str | None:
        """``message`` to write (saying how many lines were suppressed before it), or None."""
        key = (kind, peer, _PORT.sub(":*", message))
        w = self._windows.get(key)
        if w is not None and now_ms - w.start_ms < self.window_ms and w.written >= self.burst:
            w.suppressed += 1
            return None
        bucket = self._bucket(peer, now_ms)
        if bucket.tokens < 1:
            bucket.suppressed += 1
            return None
        bucket.tokens -= 1
        if w is None or now_ms - w.start_ms >= self.window_ms:
            suppressed = w.suppressed if w is not None else 0
            if w is None and len(self._windows) >= self.max_keys:
                self._windows = _forget(self._windows, lambda v: now_ms - v.start_ms >= self.window_ms,
                                        self.max_keys)
            w = self._windows[key] = _Window(now_ms)
        else:
            suppressed, w.suppressed = w.suppressed, 0
        w.written += 1
        others, bucket.suppressed = bucket.suppressed, 0
        notes = []
        if suppressed:
            notes.append(f"{suppressed} similar lines suppressed")
        if others:
            notes.append(f"{others} lines from {peer} suppressed")
        return f"{message} ({', '.join(notes)})" if notes else message

    def log(self, write: Callable[[str], None], kind: str, peer: Hashable, now_ms: int, message: str) -> None:
        """Write ``message`` through ``write`` unless this kind of line or this peer had its share."""
        text = self.line(kind, peer, now_ms, message)
        if text is not None:
            write(text)

    def _bucket(self, peer: Hashable, now_ms: int) -> _Bucket:
        b = self._buckets.get(peer)
        if b is None:
            if len(self._buckets) >= self.max_keys:  # a full bucket is as good as a new one: forget those
                self._buckets = _forget(self._buckets, lambda v: v.tokens >= self.peer_burst and not v.suppressed,
                                        self.max_keys)
            b = self._buckets[peer] = _Bucket(self.peer_burst, now_ms)
            return b
        if now_ms > b.at_ms:
            b.tokens = min(self.peer_burst, b.tokens + (now_ms - b.at_ms) * self.peer_per_s / 1000)
            b.at_ms = now_ms
        return b

    def __len__(self) -> int:
        return len(self._windows)


def _forget(entries: dict[Hashable, _V], stale: Callable[[_V], bool], limit: int) -> dict[Hashable, _V]:
    kept = {k: v for k, v in entries.items() if not stale(v)}
    return kept if len(kept) < limit else {}
