"""The client handshake and authentication, apart from what the pipeline decides with them.

A connection's first frame is a ConnectRequest (``read_connect``); it is answered by a
ConnectResponse (``connect_response``) once the pipeline knows whether the session lives.
``auth`` packets add identities to the connection (``authenticate``: digest, with the super
digest of ``zookeeper.DigestAuthenticationProvider.superDigest``, and ip). SASL packets are
answered by the connection's SASL server (``new_sasl_server``: DIGEST-MD5 from the JAAS users,
or ``server.sasl.NoSaslServer`` without them); ``enforced_schemes`` says which identities a
connection needs before any other request (enforce.auth.*, sessionRequireClientSASLAuth).
"""

from __future__ import annotations

import struct

from zkpy.config import SaslConfig, ServerConfig
from zkpy.errors import ProtocolError
from zkpy.server.sasl import NONCE_BYTES, DigestMD5Server, NoSaslServer
from zkpy.server.sessions import session_password
from zkpy.tree.acl import digest_id
from zkpy.wire.proto import AuthPacket, ConnectRequest, ConnectResponse, GetSASLRequest, Id, SetSASLResponse

SUPER = Id("super", "")
_REPLY_HEADER = struct.Struct(">iqi")


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


def read_sasl_token(body: bytes) -> bytes:
    """A SASL packet's token. ZooKeeper closes the connection on a null one (ProtocolError here)."""
    try:
        token = GetSASLRequest.from_bytes(body).token
    except (ProtocolError, struct.error) as exc:
        raise ProtocolError(f"malformed SASL request ({len(body)} bytes): {exc}") from exc
    if token is None:
        raise ProtocolError("SASL request with a null token")
    return token


def sasl_response(xid: int, err: int, token: bytes | None) -> bytes:
    """The reply to a SASL packet: its header (zxid 0, as ZooKeeper) and a SetSASLResponse."""
    return _REPLY_HEADER.pack(xid, 0, err) + SetSASLResponse(token).to_bytes()


def new_sasl_server(sasl: SaslConfig | None) -> DigestMD5Server | NoSaslServer:
    """A connection's SASL server: DIGEST-MD5 over the JAAS users, with a nonce from the shell's
    randomness (``SaslConfig.random_bytes``); without users, `NoSaslServer`."""
    if sasl is None or not sasl.users:
        return NoSaslServer()
    if sasl.random_bytes is None:  # a shell's bug: it must hand over its randomness with the users
        raise ProtocolError("SASL users are configured but no source of randomness for nonces")
    return DigestMD5Server(sasl.users, sasl.random_bytes(NONCE_BYTES),
                           remove_host=sasl.remove_host_from_principal,
                           remove_realm=sasl.remove_realm_from_principal)


def enforced_schemes(config: ServerConfig) -> tuple[str, ...]:
    """The schemes one of whose ids a connection needs for any request but auth and SASL
    (AuthenticationHelper): ``sasl`` alone under sessionRequireClientSASLAuth (it overrides
    enforce.auth.*), else enforce.auth.schemes when enforce.auth.enabled, else none."""
    if config.session_require_client_sasl_auth:
        return ("sasl",)
    return config.enforce_auth_schemes
