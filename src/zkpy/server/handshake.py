"""The client handshake's records, apart from what the pipeline decides with them.

A connection's first frame is a ConnectRequest (``read_connect``); it is answered by a
ConnectResponse (``connect_response``) once the pipeline knows whether the session lives.
Who the client is (auth packets, SASL, certificates) is ``server.auth``'s.
"""

from __future__ import annotations

import struct

from zkpy.errors import ProtocolError
from zkpy.server.sessions import session_password
from zkpy.wire.proto import ConnectRequest, ConnectResponse


def read_connect(frame: bytes) -> tuple[ConnectRequest, bool | None]:
    """The request, and the readOnly flag the client sent after it: None when it sent none
    (3.4+ clients send it, and expect the byte back), else whether it asks for read-only service."""
    try:
        req, pos = ConnectRequest.read(frame, 0)
    except (ProtocolError, struct.error) as exc:
        raise ProtocolError(f"malformed connect request ({len(frame)} bytes): {exc}") from exc
    return req, (frame[pos] != 0) if pos < len(frame) else None


def connect_response(session_id: int, timeout_ms: int, valid: bool, read_only_byte: bool,
                     read_only: bool = False) -> bytes:
    """The ConnectResponse payload: the session, or zeros when it is invalid (expired); with
    ``read_only_byte``, the readOnly byte after it (1 from a read-only server)."""
    sid = session_id if valid else 0
    rsp = ConnectResponse(0, timeout_ms if valid else 0, sid, session_password(sid) if valid else bytes(16))
    return rsp.to_bytes() + ((b"\x01" if read_only else b"\x00") if read_only_byte else b"")
