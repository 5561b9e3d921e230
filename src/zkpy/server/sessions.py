"""Session tracking with ZooKeeper's expiry buckets (SessionTrackerImpl).

A session expires at the first bucket boundary after ``now + timeout``; buckets are
``tick_ms`` wide, so expiry happens within one tick of the negotiated timeout. Passwords
are ZooKeeper's: 16 bytes of java.util.Random seeded with ``session_id ^ 0xB3415C00``, so
any ZooKeeper-compatible server can check them.
"""

from __future__ import annotations

from dataclasses import dataclass

from zkpy.ids import MASK64, initial_session_id, to_signed64

_SUPER_SECRET = 0xB3415C00
_MASK48 = (1 << 48) - 1


def java_random_bytes(seed: int, n: int) -> bytes:
    """java.util.Random(seed).nextBytes(n)."""
    state = (seed ^ 0x5DEECE66D) & _MASK48
    out = bytearray()
    while len(out) < n:
        state = (state * 0x5DEECE66D + 0xB) & _MASK48
        rnd = state >> 16
        for _ in range(min(4, n - len(out))):
            out.append(rnd & 0xFF)
            rnd >>= 8
    return bytes(out)


def session_password(session_id: int) -> bytes:
    return java_random_bytes((session_id ^ _SUPER_SECRET) & MASK64, 16)


@dataclass(slots=True)
class Session:
    session_id: int
    timeout_ms: int
    expires_at: int
    closing: bool = False


class SessionTracker:
    """Live sessions and their expiry buckets; time is always passed in."""

    def __init__(self, tick_ms: int, server_id: int, now_ms: int) -> None:
        self.tick_ms = tick_ms
        self.sessions: dict[int, Session] = {}
        self.buckets: dict[int, set[int]] = {}
        self.next_session_id: int = initial_session_id(server_id, now_ms)
        self._stride = 1

    def partition(self, index: int, count: int) -> None:
        """Hand out only ids ``id % count == index`` (as unsigned 64-bit numbers): the ``count``
        processes serving one client port (``member.workers``) never choose the same id."""
        unsigned = self.next_session_id & MASK64
        self.next_session_id = to_signed64(unsigned + (index - unsigned) % count)
        self._stride = count

    def _bucket(self, t: int) -> int:
        return (t // self.tick_ms + 1) * self.tick_ms

    def new_session_id(self) -> int:
        sid = self.next_session_id
        self.next_session_id = to_signed64(sid + self._stride)
        return sid

    def add(self, session_id: int, timeout_ms: int, now_ms: int) -> Session:
        s = Session(session_id, timeout_ms, 0)
        self.sessions[session_id] = s
        self._move(s, now_ms)
        return s

    def _move(self, s: Session, now_ms: int) -> None:
        new = self._bucket(now_ms + s.timeout_ms)
        if new == s.expires_at:
            return
        old = self.buckets.get(s.expires_at)
        if old is not None:
            old.discard(s.session_id)
            if not old:
                del self.buckets[s.expires_at]
        s.expires_at = new
        self.buckets.setdefault(new, set()).add(s.session_id)

    def touch(self, session_id: int, now_ms: int, timeout_ms: int | None = None) -> bool:
        s = self.sessions.get(session_id)
        if s is None or s.closing:
            return False
        if timeout_ms is not None:
            s.timeout_ms = timeout_ms
        self._move(s, now_ms)
        return True

    def expired(self, now_ms: int) -> list[int]:
        """Sessions whose bucket has passed; they are marked closing (expiry is in progress)."""
        out: list[int] = []
        for t in sorted(t for t in self.buckets if t <= now_ms):
            for sid in sorted(self.buckets.pop(t)):
                s = self.sessions.get(sid)
                if s is not None and not s.closing:
                    s.closing = True
                    out.append(sid)
        return out

    def is_live(self, session_id: int) -> bool:
        s = self.sessions.get(session_id)
        return s is not None and not s.closing

    def set_closing(self, session_id: int) -> None:
        s = self.sessions.get(session_id)
        if s is not None:
            s.closing = True

    def remove(self, session_id: int) -> None:
        s = self.sessions.pop(session_id, None)
        if s is not None:
            b = self.buckets.get(s.expires_at)
            if b is not None:
                b.discard(session_id)
                if not b:
                    del self.buckets[s.expires_at]
