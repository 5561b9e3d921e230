"""TLS on the client port (``secureClientPort``) and x509 identities, zkpy beside Apache ZooKeeper 3.8.

Both servers get the same certificate files (``zkpy.testing.certs``: a CA, a server certificate for
127.0.0.1, client certificates for ``alice`` and ``bob``, an untrusted and an expired one). Apache
needs its Netty connection factory for TLS; everything else in the two zoo.cfg files is the same.

Guarantees checked, each the same on both servers:
- zkpy's client, kazoo (``use_ssl``) and Apache's zkCli.sh (Netty socket) connect over TLS, run the
  usual operations and are known by their certificate's subject (``whoami``: ``x509:CN=...``);
- ``x509:`` ACLs allow the named certificate and deny another;
- with ``ssl.clientAuth=need`` a client without a certificate, with an untrusted one or an expired
  one gets no session; with ``want`` a client without one gets a session and no x509 id;
- plain bytes on the TLS port and a TLS hello on the plain port are refused, and the server goes on
  serving everyone else;
- zkpy reads PEM, PKCS#12 and JKS key stores, and refuses to start (exit 2, naming the key and the
  file) on a wrong password, a missing file or a store whose type it cannot tell.
"""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL as KazooACL
from kazoo.security import Id as KazooId
from tests.conftest import require_apache

from zkpy import Client
from zkpy.errors import ConnectionLoss
from zkpy.testing.certs import PASSWORD, Pki, make_pki
from zkpy.testing.servers import ServerProcess, apache_classpath, free_port, start_apache, start_zkpy

pytestmark = pytest.mark.interop

ZKCLI = "/usr/share/zookeeper/bin/zkCli.sh"
NETTY = "org.apache.zookeeper.server.NettyServerCnxnFactory"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def tls_settings(pki: Pki, secure_port: int, *, store: str = "jks", client_auth: str | None = None,
                 extra: dict[str, str] | None = None) -> dict[str, str | None]:
    key_store = {"jks": pki.server.jks, "p12": pki.server.p12, "pem": pki.server.pem}[store]
    trust_store = {"jks": pki.ca_jks, "p12": pki.ca_p12, "pem": pki.ca_pem}[store]
    settings: dict[str, str | None] = {
        "secureClientPort": str(secure_port),
        "secureClientPortAddress": "127.0.0.1",
        "ssl.keyStore.location": str(key_store),
        "ssl.trustStore.location": str(trust_store),
    }
    if store != "pem":
        settings["ssl.keyStore.password"] = PASSWORD
        settings["ssl.trustStore.password"] = PASSWORD
    if client_auth is not None:
        settings["ssl.clientAuth"] = client_auth
    settings.update(extra or {})
    return settings


class TlsServer:
    def __init__(self, server: ServerProcess, secure_port: int) -> None:
        self.server = server
        self.secure_port = secure_port

    @property
    def tls_hosts(self) -> str:
        return f"127.0.0.1:{self.secure_port}"


def start_tls(kind: str, pki: Pki, **kw: object) -> TlsServer:
    secure_port = free_port()
    settings = tls_settings(pki, secure_port, **kw)  # type: ignore[arg-type]
    if kind == "apache":
        require_apache()
        return TlsServer(start_apache({**settings, "serverCnxnFactory": NETTY}), secure_port)
    return TlsServer(start_zkpy(settings), secure_port)


@pytest.fixture(scope="module", params=["zkpy", "apache"])
def need_server(request: pytest.FixtureRequest, pki: Pki) -> Iterator[TlsServer]:
    """A server on each side with ``ssl.clientAuth`` at its default (need)."""
    server = start_tls(request.param, pki)
    yield server
    server.server.cleanup()


def client_context(pki: Pki, who: str | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca_pem))
    if who is not None:
        ident = getattr(pki, who)
        ctx.load_cert_chain(str(ident.cert_pem), str(ident.key_pem))
    return ctx


def zkpy_client(server: TlsServer, pki: Pki, who: str | None = "client") -> Client:
    client = Client(server.tls_hosts, ssl_context=client_context(pki, who), session_timeout=10.0,
                    connect_timeout=3.0)
    client.start(timeout=10.0)
    return client


def kazoo_client(server: TlsServer, pki: Pki, who: str = "client") -> KazooClient:
    ident = getattr(pki, who)
    zk = KazooClient(server.tls_hosts, use_ssl=True, certfile=str(ident.cert_pem), keyfile=str(ident.key_pem),
                     ca=str(pki.ca_pem), timeout=10.0)
    zk.start(timeout=15.0)
    return zk


def test_zkpy_client_runs_the_usual_operations_and_is_known_by_its_certificate(need_server: TlsServer,
                                                                             pki: Pki) -> None:
    client = zkpy_client(need_server, pki)
    try:
        path = f"/tls-{uuid.uuid4().hex}"
        client.create(path, b"v0")
        client.set(path, b"v1")
        assert client.get(path)[0] == b"v1"
        assert client.get_children("/").count(path[1:]) == 1
        client.delete(path)
        assert client.exists(path) is None
        ids = {(i.authScheme, i.user) for i in client.whoami()}
        assert ("x509", pki.client.subject) in ids, ids
        assert ("ip", "127.0.0.1") in ids, ids
    finally:
        client.close()


def test_x509_acls_allow_the_named_certificate_and_deny_another(need_server: TlsServer, pki: Pki) -> None:
    path = f"/x509-{uuid.uuid4().hex}"
    alice = kazoo_client(need_server, pki, "client")
    bob = kazoo_client(need_server, pki, "other_client")
    try:
        alice.create(path, b"secret", acl=[KazooACL(31, KazooId("x509", pki.client.subject))])
        assert alice.get(path)[0] == b"secret"
        with pytest.raises(NoAuthError):
            bob.get(path)
        alice.delete(path)
    finally:
        alice.stop()
        bob.stop()


def test_zkcli_over_netty_tls_sees_its_x509_identity(need_server: TlsServer, pki: Pki) -> None:
    require_apache()
    flags = [f"-cp {apache_classpath()}", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx128m",
             "-Dzookeeper.client.secure=true", "-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty",
             f"-Dzookeeper.ssl.keyStore.location={pki.client.jks}", f"-Dzookeeper.ssl.keyStore.password={PASSWORD}",
             f"-Dzookeeper.ssl.trustStore.location={pki.ca_jks}", f"-Dzookeeper.ssl.trustStore.password={PASSWORD}"]
    env = dict(os.environ, CLIENT_JVMFLAGS=" ".join(flags))
    path = f"/zkcli-{uuid.uuid4().hex}"
    script = f"create {path} hello\nget {path}\nwhoami\ndelete {path}\n"
    result = subprocess.run([ZKCLI, "-server", need_server.tls_hosts], input=script, env=env, capture_output=True,
                            text=True, timeout=90)
    out = result.stdout
    assert "hello" in out, out[-3000:] + result.stderr[-3000:]  # what it created, read back
    assert f"x509: {pki.client.subject}" in out, out[-3000:]


@pytest.mark.parametrize("who", [None, "untrusted_client", "expired_client"])
def test_a_client_without_a_trusted_valid_certificate_gets_no_session(need_server: TlsServer, pki: Pki,
                                                                      who: str | None) -> None:
    client = Client(need_server.tls_hosts, ssl_context=client_context(pki, who), session_timeout=10.0,
                    connect_timeout=2.0)
    with pytest.raises(ConnectionLoss):
        client.start(timeout=4.0)
    client.close()
    healthy = zkpy_client(need_server, pki)  # the server goes on serving everyone else
    healthy.close()


def _closed_without_reply(port: int, payload: bytes) -> bytes:
    """Send ``payload`` and read until the server closes: what came back."""
    with socket.create_connection(("127.0.0.1", port), timeout=15.0) as s:
        s.sendall(payload)
        got = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                return got
            if not chunk:
                return got
            got += chunk


CONNECT = bytes.fromhex("0000002c" + "00000000" + "0000000000000000" + "00007530" + "0000000000000000"
                        + "00000010" + "00" * 16)


def test_plain_bytes_on_the_tls_port_are_refused(need_server: TlsServer, pki: Pki) -> None:
    reply = _closed_without_reply(need_server.secure_port, CONNECT)
    assert b"\x00\x00\x00\x00" not in reply[:4] or len(reply) < 16  # no ConnectResponse came back
    healthy = zkpy_client(need_server, pki)
    healthy.close()


def test_a_tls_hello_on_the_plain_port_is_refused(need_server: TlsServer, pki: Pki) -> None:
    ctx = client_context(pki, "client")
    with socket.create_connection(("127.0.0.1", need_server.server.port), timeout=15.0) as raw:
        with pytest.raises((ssl.SSLError, OSError)):
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(CONNECT)
                if not tls.recv(16):
                    raise ConnectionResetError("closed")
    healthy = zkpy_client(need_server, pki)
    healthy.close()


@pytest.mark.parametrize("kind", ["zkpy", "apache"])
def test_client_auth_want_lets_a_client_without_a_certificate_in_without_an_x509_id(kind: str, pki: Pki) -> None:
    server = start_tls(kind, pki, client_auth="want")
    try:
        anonymous = zkpy_client(server, pki, None)
        ids = {i.authScheme for i in anonymous.whoami()}
        anonymous.close()
        assert "x509" not in ids, ids
        known = zkpy_client(server, pki, "client")
        assert ("x509", pki.client.subject) in {(i.authScheme, i.user) for i in known.whoami()}
        known.close()
    finally:
        server.server.cleanup()


@pytest.mark.parametrize("store", ["pem", "p12", "jks"])
def test_zkpy_reads_pem_pkcs12_and_jks_stores(store: str, pki: Pki) -> None:
    server = start_tls("zkpy", pki, store=store)
    try:
        client = zkpy_client(server, pki)
        assert ("x509", pki.client.subject) in {(i.authScheme, i.user) for i in client.whoami()}
        client.close()
    finally:
        server.server.cleanup()


def test_port_unification_serves_tls_and_plain_clients_on_one_port(pki: Pki) -> None:
    server = start_tls("zkpy", pki, extra={"client.portUnification": "true"})
    try:
        tls = Client(server.server.hosts, ssl_context=client_context(pki, "client"), connect_timeout=3.0)
        tls.start(timeout=10.0)
        assert ("x509", pki.client.subject) in {(i.authScheme, i.user) for i in tls.whoami()}
        tls.close()
        plain = Client(server.server.hosts, connect_timeout=3.0)
        plain.start(timeout=10.0)
        assert "x509" not in {i.authScheme for i in plain.whoami()}
        plain.close()
    finally:
        server.server.cleanup()


def _start_fails(tmp_path: Path, settings: dict[str, str]) -> str:
    cfg = tmp_path / "zoo.cfg"
    lines = {"tickTime": "2000", "dataDir": str(tmp_path / "data"), "clientPort": str(free_port()),
             "secureClientPort": str(free_port()), **settings}
    cfg.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    result = subprocess.run([sys.executable, "-m", "zkpy.cli.main", "server", str(cfg)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert str(cfg) in result.stderr
    return result.stderr


def test_a_wrong_key_store_password_exits_2_naming_the_key_and_file(tmp_path: Path, pki: Pki) -> None:
    secret = "Not-The-Password-42"
    err = _start_fails(tmp_path, {"ssl.keyStore.location": str(pki.server.jks), "ssl.keyStore.password": secret})
    assert "ssl.keyStore.password" in err and str(pki.server.jks) in err, err
    assert secret not in err  # a password is never shown


def test_a_missing_store_exits_2_naming_the_key_and_file(tmp_path: Path, pki: Pki) -> None:
    missing = tmp_path / "nope.p12"
    err = _start_fails(tmp_path, {"ssl.keyStore.location": str(pki.server.p12), "ssl.keyStore.password": PASSWORD,
                                  "ssl.trustStore.location": str(missing)})
    assert "ssl.trustStore" in err and str(missing) in err


def test_a_store_of_unknown_type_exits_2(tmp_path: Path, pki: Pki) -> None:
    odd = tmp_path / "server.store"
    odd.write_bytes(pki.server.jks.read_bytes())
    err = _start_fails(tmp_path, {"ssl.keyStore.location": str(odd), "ssl.keyStore.password": PASSWORD})
    assert "ssl.keyStore.type" in err


def test_many_bad_tls_connections_grow_the_log_by_a_bounded_number_of_lines(pki: Pki) -> None:
    server = start_tls("zkpy", pki)
    try:
        before = server.server.log_size()
        for i in range(300):
            # plain bytes on the TLS port, and TLS hellos on the plain port, from one peer
            port = server.secure_port if i % 2 else server.server.port
            payload = CONNECT if i % 2 else bytes.fromhex("16030100") + bytes(60)
            _closed_without_reply(port, payload)
        healthy = zkpy_client(server, pki)  # and everyone else is still served
        healthy.close()
        grown = server.server.log(before).splitlines()
        refusals = [line for line in grown if "closing connection from" in line]
        assert 0 < len(refusals) <= 40, grown[-40:]
    finally:
        server.server.cleanup()
