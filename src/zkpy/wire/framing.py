"""Length framing: every packet is a 4-byte big-endian length, then that many bytes.

A length below zero or above jute.maxbuffer is a protocol error: ZooKeeper answers it by
closing the connection ("Len error"), and so do we.
"""

from __future__ import annotations

from zkpy.errors import ProtocolError

from .jute import INT

_COMPACT_AT = 64 * 1024  # bytes read before next_frame moves the rest of the buffer down


class FrameDecoder:
    """Accumulates received bytes and yields whole frames, never more than max_buffer each."""

    __slots__ = ("max_buffer", "_buf", "_pos")

    def __init__(self, max_buffer: int) -> None:
        self.max_buffer = max_buffer
        self._buf = bytearray()
        self._pos = 0

    def feed(self, data: bytes) -> None:
        self._buf += data

    def peek(self, n: int) -> bytes:
        """The first ``n`` buffered bytes, not consumed (used to spot four-letter words)."""
        return bytes(self._buf[self._pos : self._pos + n])

    def frames(self, limit: int = -1) -> list[bytes]:
        """The complete frames received so far, in order (at most ``limit`` when it is not -1).

        ProtocolError when the next length is negative or above max_buffer, as soon as its four
        bytes are in (its payload is never awaited), once every frame before it has been returned."""
        out: list[bytes] = []
        buf, pos = self._buf, self._pos
        end = len(buf)
        while end - pos >= 4 and len(out) != limit:
            (n,) = INT.unpack_from(buf, pos)
            if n < 0 or n > self.max_buffer:
                if out:
                    break  # the frames before the bad length are good: hand them over, raise next call
                raise ProtocolError(f"Len error: packet length {n} is negative or larger than "
                                    f"jute.maxbuffer={self.max_buffer}")
            if end - pos - 4 < n:
                break
            out.append(bytes(buf[pos + 4 : pos + 4 + n]))
            pos += 4 + n
        if pos:
            del buf[:pos]
        self._pos = 0
        return out

    def next_frame(self) -> bytes | None:
        """The next complete frame, or None when it is not all in yet (one at a time: whoever
        reads may stop between two frames and leave the rest buffered).

        ProtocolError when the next length is negative or above max_buffer."""
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 4:
            return None
        (n,) = INT.unpack_from(buf, pos)
        if n < 0 or n > self.max_buffer:
            raise ProtocolError(f"Len error: packet length {n} is negative or larger than "
                                f"jute.maxbuffer={self.max_buffer}")
        end = pos + 4 + n
        if end > len(buf):
            return None
        out = bytes(buf[pos + 4 : end])
        if end == len(buf):
            buf.clear()
            self._pos = 0
        elif end >= _COMPACT_AT and end * 2 >= len(buf):  # drop what was read when it is most of the buffer
            del buf[:end]
            self._pos = 0
        else:
            self._pos = end
        return out

    def has_frame(self) -> bool:
        """A complete frame (or a bad length, which ``next_frame`` raises on) is buffered."""
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 4:
            return False
        n: int = INT.unpack_from(buf, pos)[0]
        return n < 0 or n > self.max_buffer or len(buf) - pos - 4 >= n

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos


def frame(payload: bytes | bytearray) -> bytes:
    return INT.pack(len(payload)) + payload
