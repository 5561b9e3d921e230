"""SASL DIGEST-MD5 on the client port, pure: the mechanism (server.sasl) driven by pure-sasl's
DIGEST-MD5 client (kazoo's), and the pipeline core answering SASL packets, enforcing auth and
matching sasl: ACLs. No sockets: the core is fed bytes; randomness is a seeded function."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable

import pytest
from puresasl.client import SASLClient

from zkpy.config import SaslConfig, ServerConfig
from zkpy.errors import Code
from zkpy.server.connection import Connection
from zkpy.server.core import ServerCore
from zkpy.server.outputs import Propose
from zkpy.server.sasl import (
    NONCE_BYTES,
    DigestMD5Server,
    NoSaslServer,
    SaslError,
    authorized_id,
    parse_directives,
)
from zkpy.tree.acl import is_valid_kerberos_name
from zkpy.wire.consts import OpCode
from zkpy.wire.jute import INT
from zkpy.wire.proto import (
    ACL,
    AuthPacket,
    ConnectRequest,
    CreateRequest,
    GetDataRequest,
    GetSASLRequest,
    Id,
    ReplyHeader,
    RequestHeader,
    SetSASLResponse,
    WhoAmIResponse,
)

USERS = {"bob": "bobsecret", "super": "adminsecret", "ünï": "pässwörd"}
SEED = random.randrange(2**32)


def seeded_bytes(seed: int) -> Callable[[int], bytes]:
    rng = random.Random(seed)
    return lambda n: rng.randbytes(n)


@pytest.fixture
def entropy() -> Callable[[int], bytes]:
    print(f"seed {SEED}")  # shown on failure: the nonces of a failing run replay with it
    return seeded_bytes(SEED)


def client(user: str, password: str, **props: object) -> SASLClient:
    """kazoo's client side: service zookeeper, host zk-sasl-md5 (ZooKeeper's fixed server name)."""
    return SASLClient("zk-sasl-md5", service="zookeeper", mechanism="DIGEST-MD5", username=user,
                      password=password, **props)


def exchange(server: DigestMD5Server, cli: SASLClient) -> bytes | None:
    """kazoo's loop: an empty first token, the challenge's response; returns the server's last token."""
    challenge = server.evaluate(b"")
    assert challenge is not None
    response = cli.process(challenge)
    assert response
    final = server.evaluate(response)
    assert final is not None and final.startswith(b"rspauth=")
    cli.process(final)  # raises if rspauth does not prove the server knows the password
    return final


# ---- the mechanism ----

def test_challenge_is_what_zookeepers_java_server_sends(entropy: Callable[[int], bytes]) -> None:
    """Captured from Apache ZooKeeper 3.8: realm, a 40-character nonce, charset, algorithm; no qop."""
    server = DigestMD5Server(USERS, entropy(NONCE_BYTES))
    challenge = server.evaluate(b"")
    assert challenge is not None
    directives = parse_directives(challenge)
    assert list(directives) == ["realm", "nonce", "charset", "algorithm"]
    assert directives["realm"] == "zk-sasl-md5"
    assert len(directives["nonce"]) == 40
    assert (directives["charset"], directives["algorithm"]) == ("utf-8", "md5-sess")


def test_pure_sasl_client_authenticates_and_checks_rspauth(entropy: Callable[[int], bytes]) -> None:
    server = DigestMD5Server(USERS, entropy(NONCE_BYTES))
    cli = client("bob", "bobsecret")
    exchange(server, cli)
    assert cli.complete and server.complete
    assert server.authorization_id == "bob"


def test_each_connection_gets_its_own_nonce(entropy: Callable[[int], bytes]) -> None:
    nonces = {DigestMD5Server(USERS, entropy(NONCE_BYTES)).nonce for _ in range(50)}
    assert len(nonces) == 50


@pytest.mark.parametrize(("user", "password"), [("bob", "wrong"), ("nobody", "x"), ("bob", "")])
def test_wrong_password_or_unknown_user_fails(entropy: Callable[[int], bytes], user: str, password: str) -> None:
    server = DigestMD5Server(USERS, entropy(NONCE_BYTES))
    cli = client(user, password)
    response = cli.process(server.evaluate(b""))
    with pytest.raises(SaslError) as err:
        server.evaluate(response)
    assert not server.complete and server.authorization_id is None
    for secret in USERS.values():
        assert secret not in str(err.value)  # no password in what gets logged


def respond(server: DigestMD5Server, **changes: str) -> bytes:
    """A correct response from pure-sasl's client, with some directives changed afterwards."""
    response = client("bob", "bobsecret").process(server.evaluate(b""))
    d = parse_directives(response)
    d.update(changes)
    return ",".join(f'{k}="{v}"' for k, v in d.items()).encode()


@pytest.mark.parametrize("changes", [
    {"digest-uri": "zookeeper/elsewhere"},
    {"digest-uri": "ldap/zk-sasl-md5"},
    {"nonce": "AAAA"},
    {"nc": "00000002"},
    {"qop": "auth-conf"},
    {"realm": "other"},
    {"charset": "latin-1"},
    {"response": "0" * 32},
    {"cnonce": ""},
], ids=lambda c: ",".join(c))
def test_a_response_that_does_not_match_the_challenge_fails(entropy: Callable[[int], bytes],
                                                            changes: dict[str, str]) -> None:
    server = DigestMD5Server(USERS, entropy(NONCE_BYTES))
    with pytest.raises(SaslError):
        server.evaluate(respond(server, **changes))


def test_the_unchanged_response_passes(entropy: Callable[[int], bytes]) -> None:
    """The control for the test above: re-quoting every directive changes nothing."""
    server = DigestMD5Server(USERS, entropy(NONCE_BYTES))
    assert server.evaluate(respond(server)) is not None
    assert server.authorization_id == "bob"


@pytest.mark.parametrize("garbage", [b"", b"\xff\xfe", b'username="bob', b"=,=,", b"username=a,username=b"])
def test_a_malformed_response_fails(entropy: Callable[[int], bytes], garbage: bytes) -> None:
    server = DigestMD5Server(USERS, entropy(NONCE_BYTES))
    server.evaluate(b"")
    with pytest.raises(SaslError):
        server.evaluate(garbage)


def test_a_token_after_completion_fails(entropy: Callable[[int], bytes]) -> None:
    """Apache ZooKeeper answers it AUTHFAILED and closes (measured)."""
    server = DigestMD5Server(USERS, entropy(NONCE_BYTES))
    exchange(server, client("bob", "bobsecret"))
    with pytest.raises(SaslError, match="already completed"):
        server.evaluate(b"")


def rfc2831_response(user: str, password: str, nonce: str, cnonce: str, authzid: str | None,
                     uri: str = "zookeeper/zk-sasl-md5", nc: str = "00000001") -> bytes:
    """A digest-response written from RFC 2831 2.1.2.1 directly (pure-sasl sends no authzid)."""
    def h(data: bytes) -> bytes:
        return hashlib.md5(data).digest()

    def hexh(data: bytes) -> str:
        return hashlib.md5(data).hexdigest()

    a1 = h(f"{user}:zk-sasl-md5:{password}".encode()) + f":{nonce}:{cnonce}".encode()
    if authzid:
        a1 += f":{authzid}".encode()
    value = hexh(f"{hexh(a1)}:{nonce}:{nc}:{cnonce}:auth:{hexh(f'AUTHENTICATE:{uri}'.encode())}".encode())
    parts = [f'username="{user}"', 'realm="zk-sasl-md5"', f'nonce="{nonce}"', f'cnonce="{cnonce}"', f"nc={nc}",
             "qop=auth", f'digest-uri="{uri}"', f"response={value}", "charset=utf-8"]
    if authzid:
        parts.append(f'authzid="{authzid}"')
    return ",".join(parts).encode()


@pytest.mark.parametrize(("uri", "nc"), [("zookeeper/other-host", "00000001"), ("http/zk-sasl-md5", "00000001"),
                                       ("zookeeper/zk-sasl-md5", "00000002")])
def test_a_correctly_hashed_response_for_another_service_or_count_fails(
        entropy: Callable[[int], bytes], uri: str, nc: str) -> None:
    """The hash alone would pass: the server checks digest-uri and the nonce count themselves."""
    server = DigestMD5Server(USERS, entropy(NONCE_BYTES))
    nonce = parse_directives(server.evaluate(b"") or b"")["nonce"]
    with pytest.raises(SaslError):
        server.evaluate(rfc2831_response("bob", "bobsecret", nonce, "c0ffee", None, uri, nc))


@pytest.mark.parametrize("authzid", [None, "super"])
def test_the_clients_authzid_is_not_taken(entropy: Callable[[int], bytes], authzid: str | None) -> None:
    """SaslServerCallbackHandler authorises any authzid but sets the id from the user name: asking
    for "super" as bob gives sasl:bob."""
    server = DigestMD5Server(USERS, entropy(NONCE_BYTES))
    nonce = parse_directives(server.evaluate(b"") or b"")["nonce"]
    final = server.evaluate(rfc2831_response("bob", "bobsecret", nonce, "c0ffee", authzid))
    assert final is not None and final.startswith(b"rspauth=")
    assert server.authorization_id == "bob"


def test_utf8_names_and_passwords_when_the_client_says_charset_utf8(entropy: Callable[[int], bytes]) -> None:
    """pure-sasl hashes UTF-8 but sends no charset directive; Java's server then reads ISO 8859-1.
    With charset=utf-8 added, the non-ASCII user authenticates."""
    server = DigestMD5Server(USERS, entropy(NONCE_BYTES))
    cli = client("ünï", "pässwörd")
    response = cli.process(server.evaluate(b""))
    final = server.evaluate(response + b",charset=utf-8")
    assert final is not None and server.authorization_id == "ünï"


def test_nonce_needs_enough_randomness() -> None:
    with pytest.raises(ValueError):
        DigestMD5Server(USERS, b"short")


@pytest.mark.parametrize(("user", "authzid", "host", "realm", "expected"), [
    ("bob", None, False, False, "bob"),
    ("bob", "alice", False, False, "bob"),  # a plain name: the client's authzid is ignored
    ("svc/host@", None, False, False, "svc/host@"),
    ("svc/host@", None, True, False, "svc@"),
    ("svc/host@", None, True, True, "svc"),
    ("bob@EXAMPLE.COM", None, False, False, "bob@EXAMPLE.COM"),  # no rule maps another realm
    ("bob@EXAMPLE.COM", "carol", True, True, "carol"),  # ... and ZooKeeper keeps the negotiated id
])
def test_authorization_id_as_saslservercallbackhandler_derives_it(
        user: str, authzid: str | None, host: bool, realm: bool, expected: str) -> None:
    assert authorized_id(user, authzid, host, realm) == expected


def test_kerberos_name_validity_of_sasl_acl_ids() -> None:
    assert is_valid_kerberos_name("bob") and is_valid_kerberos_name("a/b") and is_valid_kerberos_name("s/h@R")
    assert not is_valid_kerberos_name("a@b@c") and not is_valid_kerberos_name("a/b/c@R")
    with pytest.raises(SaslError):
        authorized_id("a@b@c")


def test_no_sasl_server_answers_once_then_refuses() -> None:
    server = NoSaslServer()
    assert server.evaluate(b"") is None
    with pytest.raises(SaslError):
        server.evaluate(b"")


# ---- the pipeline core ----

OPEN = [ACL(31, Id("world", "anyone"))]


class Harness:
    """A standalone core with SASL users, fed bytes, persisting every proposal at once."""

    def __init__(self, entropy: Callable[[int], bytes] | None, **cfg: object) -> None:
        sasl = SaslConfig(users=dict(USERS), random_bytes=entropy, super_users=("super",)) if entropy else None
        cfg.setdefault("sasl_auth", True)
        self.core = ServerCore(ServerConfig(sasl=sasl, **cfg), 1_000_000, 1_700_000_000_000)  # type: ignore[arg-type]
        self.ids = 0

    def flush(self) -> None:
        while proposed := [o for o in self.core.ready() if isinstance(o, Propose)]:
            self.core.apply_persisted(len(proposed))

    def connect(self) -> Connection:
        self.ids += 1
        conn = self.core.open(self.ids, "127.0.0.1", 40000 + self.ids)
        payload = ConnectRequest(0, 0, 10000, 0, bytes(16)).to_bytes() + b"\x00"
        self.core.receive(conn, INT.pack(len(payload)) + payload)
        self.flush()
        assert len(self.take(conn)) == 1
        return conn

    def request(self, conn: Connection, xid: int, op: int, body: bytes = b"") -> list[tuple[ReplyHeader, bytes]]:
        payload = RequestHeader(xid, op).to_bytes() + body
        self.core.receive(conn, INT.pack(len(payload)) + payload)
        self.flush()
        out = []
        for frame in self.take(conn):
            hdr, pos = ReplyHeader.read(frame, 0)
            out.append((hdr, frame[pos:]))
        return out

    def sasl(self, conn: Connection, xid: int, token: bytes) -> tuple[int, bytes | None]:
        [(hdr, body)] = self.request(conn, xid, OpCode.SASL, GetSASLRequest(token).to_bytes())
        assert hdr.zxid == 0  # ZooKeeper answers SASL packets with zxid 0
        return hdr.err, SetSASLResponse.from_bytes(body).token

    def login(self, conn: Connection, user: str, password: str) -> int:
        cli = client(user, password)
        err, challenge = self.sasl(conn, 1, b"")
        assert err == 0 and challenge is not None
        err, final = self.sasl(conn, 2, cli.process(challenge))
        if err == 0:
            assert final is not None
            cli.process(final)
        return err

    def whoami(self, conn: Connection) -> list[tuple[str, str]]:
        [(hdr, body)] = self.request(conn, 9, OpCode.WHO_AM_I)
        assert hdr.err == 0
        return [(i.authScheme, i.user) for i in WhoAmIResponse.from_bytes(body).clientInfo]

    @staticmethod
    def take(conn: Connection) -> list[bytes]:
        return [f[4:] for f in conn.take_output()]


def test_core_authenticates_and_whoami_shows_sasl_name(entropy: Callable[[int], bytes]) -> None:
    h = Harness(entropy)
    c = h.connect()
    assert h.login(c, "bob", "bobsecret") == 0
    assert h.whoami(c) == [("sasl", "bob"), ("ip", "127.0.0.1")]  # the order Apache ZooKeeper 3.8 gave


def test_core_wrong_password_gets_authfailed_and_closes(entropy: Callable[[int], bytes]) -> None:
    h = Harness(entropy)
    c = h.connect()
    assert h.login(c, "bob", "wrong") == Code.AUTHFAILED
    assert c.closing
    assert Id("sasl", "bob") not in c.auth


def test_core_super_user_gets_super(entropy: Callable[[int], bytes]) -> None:
    h = Harness(entropy)
    c = h.connect()
    assert h.login(c, "super", "adminsecret") == 0
    assert Id("super", "") in c.auth and Id("sasl", "super") in c.auth


def test_core_sasl_acls_allow_the_named_user_only(entropy: Callable[[int], bytes]) -> None:
    h = Harness(entropy)
    bob, anon = h.connect(), h.connect()
    assert h.login(bob, "bob", "bobsecret") == 0
    acl = [ACL(31, Id("sasl", "bob"))]
    [(hdr, _)] = h.request(bob, 3, OpCode.CREATE, CreateRequest("/s", b"x", acl, 0).to_bytes())
    assert hdr.err == 0
    [(hdr, _)] = h.request(bob, 4, OpCode.GET_DATA, GetDataRequest("/s", False).to_bytes())
    assert hdr.err == 0
    [(hdr, _)] = h.request(anon, 3, OpCode.GET_DATA, GetDataRequest("/s", False).to_bytes())
    assert hdr.err == Code.NOAUTH
    [(hdr, _)] = h.request(bob, 5, OpCode.CREATE, CreateRequest("/t", b"", [ACL(31, Id("auth", ""))], 0).to_bytes())
    assert hdr.err == 0
    assert h.core.tree.get("/t").acl == (ACL(31, Id("sasl", "bob")),)  # type: ignore[union-attr]
    [(hdr, _)] = h.request(bob, 6, OpCode.CREATE, CreateRequest("/u", b"", [ACL(1, Id("sasl", "a@b@c"))], 0).to_bytes())
    assert hdr.err == Code.INVALIDACL


def test_core_sasl_acls_are_invalid_without_the_sasl_provider(entropy: Callable[[int], bytes]) -> None:
    """Apache ZooKeeper 3.8 without authProvider.N=SASLAuthenticationProvider: InvalidACL (measured)."""
    h = Harness(entropy, sasl_auth=False)
    c = h.connect()
    assert h.login(c, "bob", "bobsecret") == 0
    [(hdr, _)] = h.request(c, 3, OpCode.CREATE, CreateRequest("/s", b"x", [ACL(31, Id("sasl", "bob"))], 0).to_bytes())
    assert hdr.err == Code.INVALIDACL
    assert h.whoami(c) == [("sasl", ""), ("ip", "127.0.0.1")]  # no provider names the user (measured)


@pytest.mark.parametrize("cfg", [{"enforce_auth_schemes": ("sasl",)}, {"session_require_client_sasl_auth": True}])
def test_core_enforced_auth_refuses_unauthenticated_requests_and_closes(
        entropy: Callable[[int], bytes], cfg: dict[str, object]) -> None:
    h = Harness(entropy, **cfg)
    anon = h.connect()
    [(hdr, body)] = h.request(anon, -2, OpCode.PING)  # pings too (measured on Apache 3.8)
    assert (hdr.xid, hdr.zxid, hdr.err, body) == (-2, 0, Code.SESSIONCLOSEDREQUIRESASLAUTH, b"")
    assert anon.closing
    digest = h.connect()
    [(hdr, _)] = h.request(digest, -4, OpCode.AUTH, AuthPacket(0, "digest", b"a:b").to_bytes())
    assert hdr.err == 0  # auth packets pass, but a digest id is not a sasl id
    [(hdr, _)] = h.request(digest, 3, OpCode.GET_DATA, GetDataRequest("/", False).to_bytes())
    assert hdr.err == Code.SESSIONCLOSEDREQUIRESASLAUTH and digest.closing
    bob = h.connect()
    assert h.login(bob, "bob", "bobsecret") == 0
    [(hdr, _)] = h.request(bob, 3, OpCode.GET_DATA, GetDataRequest("/", False).to_bytes())
    assert hdr.err == 0 and not bob.closing
    wrong = h.connect()
    assert h.login(wrong, "bob", "nope") == Code.SESSIONCLOSEDREQUIRESASLAUTH  # isSaslAuthRequired
    assert wrong.closing


def test_core_enforcing_digest_lets_a_digest_session_through(entropy: Callable[[int], bytes]) -> None:
    h = Harness(entropy, enforce_auth_schemes=("digest",))
    c = h.connect()
    h.request(c, -4, OpCode.AUTH, AuthPacket(0, "digest", b"a:b").to_bytes())
    [(hdr, _)] = h.request(c, 3, OpCode.GET_DATA, GetDataRequest("/", False).to_bytes())
    assert hdr.err == 0


def test_core_without_sasl_answers_once_as_zookeeper_then_refuses() -> None:
    """ZooKeeper 3.8 without a JAAS Server section answers every token OK with a null token, and
    kazoo loops on it (measured: 22,600 packets in 6 s); zkpy answers the first one the same way and
    later ones AUTHFAILED, so kazoo stops. The connection stays usable."""
    h = Harness(None)
    c = h.connect()
    assert h.sasl(c, 1, b"") == (0, None)
    assert h.sasl(c, 2, b"") == (Code.AUTHFAILED, None)
    assert h.sasl(c, 3, b"") == (Code.AUTHFAILED, None)
    assert not c.closing
    [(hdr, _)] = h.request(c, 4, OpCode.GET_DATA, GetDataRequest("/", False).to_bytes())
    assert hdr.err == 0


def test_core_logs_a_bounded_number_of_lines_for_many_sasl_packets(entropy: Callable[[int], bytes]) -> None:
    lines: list[str] = []
    for with_users in (False, True):
        lines.clear()
        h = Harness(entropy if with_users else None)
        h.core.log = lines.append
        c = h.connect()
        for xid in range(1000):
            h.request(c, xid + 1, OpCode.SASL, GetSASLRequest(b"").to_bytes())
        assert len(lines) <= 12, lines


def test_core_never_logs_a_password(entropy: Callable[[int], bytes]) -> None:
    lines: list[str] = []
    h = Harness(entropy)
    h.core.log = lines.append
    for user, password in (("bob", "bobsecret"), ("bob", "wrong"), ("super", "adminsecret")):
        h.login(h.connect(), user, password)
    assert lines
    for secret in (*USERS.values(), "wrong"):
        assert not any(secret in line for line in lines), lines
