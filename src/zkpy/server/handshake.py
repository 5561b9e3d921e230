"""The client handshake and authentication, apart from what the pipeline decides with them.

A connection's first frame is a ConnectRequest (``read_connect``); it is answered by a
ConnectResponse (``connect_response``) once the pipeline knows whether the session lives.
``auth`` packets add identities to the connection (``authenticate``: digest, with the super
digest of ``zookeeper.DigestAuthenticationProvider.superDigest``, and ip); zkpy has no SASL
server yet, and answers a SASL token as ZooKeeper without one does (``sasl_reply``).
"""

from __future__ import annotations

import struct

from zkpy.errors import ProtocolError
from zkpy.server.sessions import session_password
from zkpy.tree.acl import digest_id
from zkpy.wire.proto import AuthPacket, ConnectRequest, ConnectResponse, GetSASLRequest, Id, SetSASLResponse

SUPER = Id("super", "")
_REPLY_HEADER = struct.Struct(">iqi")


def read_connect(frame: bytes) -> tuple[ConnectRequest, bool]:
    """The request, and whether the client sent the readOnly byte after it (3.4+ clients do,
    and expect it back)."""
    try:
        req, pos = ConnectRequest.read(frame, 0)
    except (ProtocolError, struct.error) as exc:
        raise ProtocolError(f"malformed connect request ({len(frame)} bytes): {exc}") from exc
    return req, pos < len(frame)


def connect_response(session_id: int, timeout_ms: int, valid: bool, read_only_byte: bool) -> bytes:
    """The ConnectResponse payload: the session, or zeros when it is invalid (expired)."""
    sid = session_id if valid else 0
    rsp = ConnectResponse(0, timeout_ms if valid else 0, sid, session_password(sid) if valid else bytes(16))
    return rsp.to_bytes() + (b"\x00" if read_only_byte else b"")


def authenticate(packet: AuthPacket, ip: str, super_digest: str | None) -> list[Id] | None:
    """The identities an auth packet proves, or None for a scheme zkpy does not know
    (AUTHFAILED, and the connection closes)."""
    if packet.scheme == "digest" and packet.auth is not None:
        digest = digest_id(packet.auth.decode("utf-8", "replace"))
        ids = [Id("digest", digest)]
        if super_digest and digest == super_digest:
            ids.insert(0, SUPER)
        return ids
    if packet.scheme == "ip":
        return [Id("ip", ip)]
    return None


def sasl_reply(xid: int, body: bytes) -> bytes:
    """ZooKeeper without a SASL server answers a token with OK and a null token, and closes the
    connection on a null token (ProtocolError here)."""
    if GetSASLRequest.from_bytes(body).token is None:
        raise ProtocolError("SASL request with a null token")
    return _REPLY_HEADER.pack(xid, 0, 0) + SetSASLResponse(None).to_bytes()
