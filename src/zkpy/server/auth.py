"""Who a client connection is: auth packets, SASL, TLS certificates and the schemes a server
enforces (pure), as ZooKeeper 3.8's ZooKeeperServer and AuthenticationHelper decide them.

Each step adds identities to the connection (``Connection.auth``, which ACL checks read) and
says what the pipeline does next, as an `AuthStep`: the reply to queue, whether the
connection closes, and the line to log (rate-limited by the pipeline, per kind and peer, since
a client can make it repeat). Nothing here logs a secret: a digest user's password, a SASL
token or a certificate never reaches a line.

* ``auth`` packets (``auth_packet``): digest (with the super digest of
  ``zookeeper.DigestAuthenticationProvider.superDigest``) and ip; any other scheme is AUTHFAILED
  and the connection closes.
* SASL packets (``sasl_packet``): answered by the connection's SASL server (``new_sasl_server``:
  DIGEST-MD5 over the JAAS users, or ``server.sasl.NoSaslServer`` without them).
* a TLS client's certificate (``certificate``): its ``x509:`` ids (``server.x509``).
* enforcement (``enforced_schemes``, ``admitted``): enforce.auth.* and
  sessionRequireClientSASLAuth make an id of one of those schemes a condition of every request
  but auth and SASL packets.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from zkpy.config import SaslConfig, ServerConfig
from zkpy.errors import Code, ProtocolError
from zkpy.ids import long_hex
from zkpy.server.connection import Connection
from zkpy.server.replies import header
from zkpy.server.sasl import NONCE_BYTES, DigestMD5Server, NoSaslServer, SaslError
from zkpy.tree.acl import digest_id
from zkpy.wire.proto import AuthPacket, GetSASLRequest, Id, SetSASLResponse

SUPER = Id("super", "")


@dataclass(frozen=True, slots=True)
class AuthStep:
    """What the pipeline does after an authentication step: queue ``reply`` (a reply's payload),
    close the connection with ``close`` as the reason, log ``line`` under ``kind``, and count
    a refused authentication (``failed``: mntr's zk_auth_failed_count)."""

    reply: bytes | None = None
    close: str | None = None
    kind: str = ""
    line: str = ""
    failed: bool = False


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


def auth_packet(conn: Connection, xid: int, body: bytes, super_digest: str | None) -> AuthStep:
    """An ``auth`` packet: its ids join the connection's, or AUTHFAILED and the connection closes.
    Raises ProtocolError for a packet that does not decode."""
    packet = AuthPacket.from_bytes(body)
    ids = authenticate(packet, conn.ip, super_digest)
    if ids is None:
        return AuthStep(header(xid, 0, Code.AUTHFAILED), "auth failed", "auth failed",
                        f"authentication failed for scheme {packet.scheme!r} from {conn.ip}:{conn.port}", failed=True)
    for ident in ids:
        conn.add_auth(ident)
    return AuthStep(header(xid, 0, 0), None, "auth success",
                    f"session 0x{long_hex(conn.session_id)}: auth success for scheme {packet.scheme}")


def enforced_schemes(config: ServerConfig) -> tuple[str, ...]:
    """The schemes one of whose ids a connection needs for any request but auth and SASL
    (AuthenticationHelper): ``sasl`` alone under sessionRequireClientSASLAuth (it overrides
    enforce.auth.*), else enforce.auth.schemes when enforce.auth.enabled, else none."""
    if config.session_require_client_sasl_auth:
        return ("sasl",)
    return config.enforce_auth_schemes


def admitted(conn: Connection, xid: int, enforced: tuple[str, ...]) -> AuthStep | None:
    """enforce.auth.enabled / sessionRequireClientSASLAuth (AuthenticationHelper.enforceAuthentication):
    None when the connection holds an id of an enforced scheme; else the request is answered
    SESSIONCLOSEDREQUIRESASLAUTH (zxid 0) and the connection closes. Pings need one too."""
    if any(i.scheme in enforced for i in conn.auth):
        return None
    return AuthStep(header(xid, 0, Code.SESSIONCLOSEDREQUIRESASLAUTH), "authentication enforced", "auth enforced",
                    f"client {conn.ip}:{conn.port} authentication scheme(s) {[i.scheme for i in conn.auth]} do not "
                    f"match any of the expected authentication schemes {list(enforced)}, closing the connection")


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
    return header(xid, 0, err) + SetSASLResponse(token).to_bytes()


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


def sasl_packet(conn: Connection, xid: int, body: bytes, config: ServerConfig) -> AuthStep:
    """A SASL token (ZooKeeperServer.processSasl), answered by the connection's SASL server: a
    completed exchange adds ``sasl:<id>`` (and ``super`` for a zookeeper.superUser); a failed
    one is answered AUTHFAILED (SESSIONCLOSEDREQUIRESASLAUTH when SASL is enforced) with a null
    token, and the connection closes. Raises ProtocolError for a packet that does not decode."""
    token = read_sasl_token(body)
    if conn.sasl is None:
        conn.sasl = new_sasl_server(config.sasl)
    server = conn.sasl
    try:
        answer = server.evaluate(token)
    except SaslError as exc:
        line = f"client {conn.ip}:{conn.port} failed to SASL authenticate: {exc}"
        if isinstance(server, NoSaslServer):
            # ZooKeeper would answer OK again (kazoo loops); the refusal ends the exchange, and
            # the connection may go on without SASL as it could after the first answer
            return AuthStep(sasl_response(xid, Code.AUTHFAILED, None), None, "sasl failed", line, failed=True)
        code = Code.SESSIONCLOSEDREQUIRESASLAUTH if "sasl" in enforced_schemes(config) else Code.AUTHFAILED
        return AuthStep(sasl_response(xid, code, None), "SASL authentication failed", "sasl failed", line,
                        failed=True)
    kind, line = "", ""
    if isinstance(server, NoSaslServer):
        kind, line = "sasl ignored", (f"SASL token from {conn.ip}:{conn.port} answered with a null token: "
                                      "no SASL server is configured")
    elif server.complete and server.authorization_id is not None:  # this token completed it
        authz = server.authorization_id
        conn.add_auth(Id("sasl", authz))
        super_user = config.sasl is not None and authz in config.sasl.super_users
        if super_user:
            conn.add_auth(SUPER)
        kind, line = "sasl success", (f"session 0x{long_hex(conn.session_id)}: adding SASL authorization for "
                                      f"authorizationID: {authz}{' (a super user)' if super_user else ''}")
    return AuthStep(sasl_response(xid, Code.OK, answer), None, kind, line)


def certificate(conn: Connection, cert_der: bytes | None, config: ServerConfig) -> AuthStep | None:
    """A TLS handshake is done: the client certificate (DER; None without one) gives the
    connection its ``x509:`` ids, as ZooKeeper's X509AuthenticationProvider on a TLS port. A
    certificate that yields no id under the configured rules closes the connection."""
    if cert_der is None:
        return None
    from zkpy.server.x509 import X509IdError, x509_identities  # cryptography: only TLS ports need it

    try:
        ids = x509_identities(cert_der, config.x509)
    except X509IdError as exc:
        return AuthStep(None, "x509 auth failed", "x509 failed",
                        f"x509 authentication failed for {conn.ip}:{conn.port}: {exc}")
    for ident in ids:
        conn.add_auth(ident)
    return None
