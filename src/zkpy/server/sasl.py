"""SASL on the client port (pure): the DIGEST-MD5 server mechanism as ZooKeeper's servers speak it.

ZooKeeper serves SASL through Java's DIGEST-MD5 ``SaslServer`` created for protocol ``zookeeper``
and server name ``zk-sasl-md5`` (RFC 2831). One `DigestMD5Server` per connection, driven by the
tokens of the client's SASL packets (opcode 102); ``evaluate`` returns the token to answer with::

    client: (empty token)           server: realm="zk-sasl-md5",nonce="...",charset=utf-8,algorithm=md5-sess
    client: digest-response         server: rspauth=<hex>            (complete: the identity is known)
    anything else, any failure      SaslError (the server answers AUTHFAILED and closes)

The challenge carries no ``qop`` directive (Java's server offers only ``auth``, which RFC 2831 makes
the default); the nonce is 30 random bytes in base64 (40 characters), as Java's server makes them.
The randomness is an argument: this module draws none. Hashes come from ``hashlib`` and responses
are compared with ``hmac.compare_digest``. Passwords never appear in an exception's message.

The identity a completed exchange gives is ``sasl:<authorization id>``, where the id is derived
from the user name as ZooKeeper's ``SaslServerCallbackHandler`` derives it (`authorized_id`):
the client's own authzid is not taken, except where ZooKeeper keeps it (a principal whose realm
no Kerberos rule maps).

`NoSaslServer` is what a connection meets when the server has no SASL users: ZooKeeper without a
JAAS ``Server`` section answers each token with OK and a null token. The Java client fails on that
by itself (AuthFailed); kazoo sends an empty token again, for ever (measured against Apache
ZooKeeper 3.8: 22,600 packets in 6 s, one ERROR log line each). zkpy answers the first token as
ZooKeeper does and every later one with AUTHFAILED (the connection stays open, as it would
without SASL), so no client loops: kazoo stops with AuthFailedError.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Mapping
from enum import Enum

SERVICE = "zookeeper"  # the SASL protocol name ZooKeeper's server and clients use
SERVER_NAME = "zk-sasl-md5"  # the server name (and realm) ZooKeeper hard-codes for DIGEST-MD5
NONCE_BYTES = 30  # Java's DIGEST-MD5 server: 30 random bytes, base64 in the challenge

# KerberosName's parser: service[/host]@realm
_KERBEROS_NAME = re.compile(r"([^/@]*)(/([^/@]*))?@([^/@]*)")
# a directive: name = token | quoted-string (RFC 2831 2.1.2, with backslash escapes in quotes)
_DIRECTIVE = re.compile(r'\s*([A-Za-z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s"]*))\s*(?:,|$)', re.S)
_SINGLE = ("username", "realm", "nonce", "cnonce", "nc", "qop", "digest-uri", "response", "maxbuf",
           "charset", "cipher", "authzid")


class SaslError(Exception):
    """The client failed to authenticate; the message says why (never a password)."""


def authorized_id(user: str, authzid: str | None = None, remove_host: bool = False,
                  remove_realm: bool = False) -> str:
    """The authorization id ZooKeeper gives user ``user`` (SaslServerCallbackHandler): a plain name
    as it is; a principal ``service[/host]@realm`` in the empty default realm (no Kerberos
    configuration, as here) as ``service``, with ``/host`` and ``@realm`` kept unless
    ``kerberos.removeHostFromPrincipal`` / ``removeRealmFromPrincipal``; a principal of another
    realm maps to no short name, and ZooKeeper then keeps the negotiated id (the client's authzid,
    else the user). SaslError for a name KerberosName refuses."""
    if "@" not in user:
        return user
    m = _KERBEROS_NAME.fullmatch(user)
    if m is None:
        raise SaslError(f"malformed Kerberos name: {user!r}")
    service, host, realm = m.group(1), m.group(3), m.group(4)
    if realm != "":  # DEFAULT rule: only the default realm ("" without krb5.conf) maps
        return authzid or user
    out = service
    if host is not None and not remove_host:
        out += "/" + host
    if not remove_realm:
        out += "@" + realm
    return out


def parse_directives(token: bytes) -> dict[str, str]:
    """A digest-response's directives (RFC 2831 2.1.2). SaslError when malformed or when a
    directive that may appear once appears twice."""
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslError("DIGEST-MD5: digest response is not UTF-8") from None
    out: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        if not text[pos:].strip(" \t\r\n,"):
            break
        m = _DIRECTIVE.match(text, pos)
        if m is None or m.end() == pos:
            raise SaslError(f"DIGEST-MD5: digest response format violation at byte {pos}")
        pos = m.end()
        name = m.group(1).lower()
        value = re.sub(r"\\(.)", r"\1", m.group(2)) if m.group(2) is not None else m.group(3)
        if name in out and name in _SINGLE:
            raise SaslError(f"DIGEST-MD5: digest response format violation: {name} appears twice")
        out[name] = value
    return out


def _md5(data: bytes) -> bytes:
    return hashlib.md5(data, usedforsecurity=False).digest()  # RFC 2831 is MD5 by definition


def _hex_md5(data: bytes) -> bytes:
    return hashlib.md5(data, usedforsecurity=False).hexdigest().encode("ascii")


def _encode(text: str, utf8: bool) -> bytes:
    """User names and passwords in the hash: UTF-8 when the client answered charset=utf-8,
    else ISO 8859-1 where it can hold them (RFC 2831 2.1.2.1)."""
    if not utf8:
        try:
            return text.encode("latin-1")
        except UnicodeEncodeError:
            pass
    return text.encode("utf-8")


class State(Enum):
    CHALLENGE = "challenge"  # waiting for the client's first (empty) token
    RESPONSE = "response"  # challenge sent, waiting for the digest-response
    COMPLETE = "complete"  # rspauth sent: authenticated
    FAILED = "failed"


class DigestMD5Server:
    """One connection's DIGEST-MD5 exchange (RFC 2831, qop=auth, algorithm=md5-sess), server side."""

    mechanism = "DIGEST-MD5"

    def __init__(self, users: Mapping[str, str], nonce: bytes, *, service: str = SERVICE,
                 server_name: str = SERVER_NAME, remove_host: bool = False, remove_realm: bool = False) -> None:
        """``users``: name -> password (the JAAS ``user_NAME`` options); ``nonce``: fresh random
        bytes (`NONCE_BYTES` of them, from the shell's randomness)."""
        if len(nonce) < 16:
            raise ValueError(f"a DIGEST-MD5 nonce needs at least 16 random bytes, got {len(nonce)}")
        self._users = users
        self.nonce = base64.b64encode(nonce).decode("ascii")
        self.realm = server_name
        self.digest_uri = f"{service}/{server_name}"
        self._remove_host = remove_host
        self._remove_realm = remove_realm
        self.state = State.CHALLENGE
        self.user: str | None = None  # the authenticated user (the authentication id)
        self.authorization_id: str | None = None  # set once complete

    @property
    def complete(self) -> bool:
        return self.state is State.COMPLETE

    def challenge(self) -> bytes:
        return (f'realm="{self.realm}",nonce="{self.nonce}",charset=utf-8,algorithm=md5-sess').encode("ascii")

    def evaluate(self, token: bytes) -> bytes | None:
        """The token to answer ``token`` with; SaslError when the client fails (the exchange is then over)."""
        try:
            if self.state is State.CHALLENGE:
                # Java's server answers any first token with the challenge (its content is not read)
                self.state = State.RESPONSE
                return self.challenge()
            if self.state is State.RESPONSE:
                answer = self._verify(token)
                self.state = State.COMPLETE
                return answer
            raise SaslError("DIGEST-MD5: authentication exchange already completed"
                            if self.state is State.COMPLETE else "DIGEST-MD5: authentication failed earlier")
        except SaslError:
            self.state = State.FAILED
            raise

    def _verify(self, token: bytes) -> bytes:
        d = parse_directives(token)
        charset = d.get("charset")
        if charset is not None and charset.lower() != "utf-8":
            raise SaslError(f"DIGEST-MD5: digest response format violation: charset {charset!r}")
        utf8 = charset is not None
        user = d.get("username")
        if not user:
            raise SaslError("DIGEST-MD5: digest response format violation: missing username")
        realm = d.get("realm", "")
        if realm != self.realm:
            raise SaslError(f"DIGEST-MD5: digest response format violation: nonmatching realm {realm!r}")
        if d.get("nonce") != self.nonce:
            raise SaslError("DIGEST-MD5: digest response format violation: nonmatching nonce")
        cnonce = d.get("cnonce")
        if not cnonce:
            raise SaslError("DIGEST-MD5: digest response format violation: missing cnonce")
        nc = d.get("nc", "")
        try:
            nonce_count = int(nc, 16)
        except ValueError:
            nonce_count = -1
        if nonce_count != 1:
            raise SaslError(f"DIGEST-MD5: nonce count does not match: {nc!r}")
        qop = d.get("qop", "auth")
        if qop != "auth":
            raise SaslError(f"DIGEST-MD5: invalid qop {qop!r} (offered: auth)")
        uri = d.get("digest-uri")
        if uri != self.digest_uri:
            raise SaslError(f"DIGEST-MD5: nonmatching digest-uri {uri!r}, expected {self.digest_uri!r}")
        response = d.get("response", "")
        password = self._users.get(user)
        if password is None:
            raise SaslError(f"DIGEST-MD5: cannot acquire password for {user} in realm : {self.realm}")
        authzid = d.get("authzid")
        ha1 = self._ha1(user, password, cnonce, authzid, utf8)
        expected = self._kd(ha1, nc, cnonce, qop, f"AUTHENTICATE:{uri}")
        if not hmac.compare_digest(expected, response.lower().encode("ascii", "replace")):
            raise SaslError(f"DIGEST-MD5: digest response format violation: mismatched response for user {user}")
        self.user = user
        self.authorization_id = authorized_id(user, authzid, self._remove_host, self._remove_realm)
        return b"rspauth=" + self._kd(ha1, nc, cnonce, qop, f":{uri}")

    def _ha1(self, user: str, password: str, cnonce: str, authzid: str | None, utf8: bool) -> bytes:
        """HEX(H(A1)), A1 = H(user:realm:password):nonce:cnonce[:authzid] (md5-sess)."""
        secret = _md5(_encode(user, utf8) + b":" + _encode(self.realm, utf8) + b":" + _encode(password, utf8))
        a1 = secret + f":{self.nonce}:{cnonce}".encode()
        if authzid:
            a1 += b":" + authzid.encode("utf-8")
        return _hex_md5(a1)

    def _kd(self, ha1: bytes, nc: str, cnonce: str, qop: str, a2: str) -> bytes:
        """HEX(KD(HEX(H(A1)), nonce:nc:cnonce:qop:HEX(H(A2))))."""
        return _hex_md5(ha1 + f":{self.nonce}:{nc}:{cnonce}:{qop}:".encode() + _hex_md5(a2.encode("utf-8")))


class NoSaslServer:
    """A connection's SASL when the server has no SASL users: the first token is answered as
    ZooKeeper without a JAAS ``Server`` section answers every token (OK, a null token); a later
    one is refused (SaslError: AUTHFAILED), where ZooKeeper would answer again and kazoo loops."""

    mechanism = "none"
    complete = False
    authorization_id: str | None = None

    def __init__(self) -> None:
        self.tokens = 0

    def evaluate(self, token: bytes) -> bytes | None:
        self.tokens += 1
        if self.tokens > 1:
            raise SaslError("no SASL server is configured, and the client sent another SASL token "
                            "after a null answer")
        return None
