"""Jute's variable-length primitives: buffers and strings, read and written. Used by the
generated codecs (``wire/codecs.py``), by ``wire.jute`` and by hand-written hot paths."""

from __future__ import annotations

import struct
from typing import Any

from zkpy.errors import ProtocolError

INT = struct.Struct(">i")


def read_buffer(buf: bytes | memoryview, pos: int) -> tuple[bytes | None, int]:
    (n,) = INT.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        if n != -1:
            raise ProtocolError(f"negative buffer length {n}")
        return None, pos
    end = pos + n
    if end > len(buf):
        raise ProtocolError(f"buffer length {n} runs past the frame")
    return bytes(buf[pos:end]), end


def read_ustring(buf: bytes | memoryview, pos: int) -> tuple[Any, int]:
    (n,) = INT.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        if n != -1:
            raise ProtocolError(f"negative string length {n}")
        return None, pos
    end = pos + n
    if end > len(buf):
        raise ProtocolError(f"string length {n} runs past the frame")
    return str(buf[pos:end], "utf-8", "replace"), end


def write_buffer(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
    else:
        out += INT.pack(len(value))
        out += value


def write_ustring(out: bytearray, value: str | None) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
    else:
        data = value.encode("utf-8")
        out += INT.pack(len(data))
        out += data
