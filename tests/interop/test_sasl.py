"""SASL DIGEST-MD5 on the client port, zkpy beside Apache ZooKeeper 3.8 with the same JAAS file.

Both servers read one JAAS file (its ``Server`` section's ``user_NAME="password"`` options) and
register ``SASLAuthenticationProvider``; Apache gets the file as
``-Djava.security.auth.login.config`` and ``zookeeper.superUser`` as system properties, zkpy gets
them as zkServer.sh users give them: in ``SERVER_JVMFLAGS`` (or the zoo.cfg keys).

Guarantees checked, each the same on both servers:
- the Java client (zkCli.sh with a JAAS ``Client`` section) and kazoo (``sasl_options``)
  authenticate, and ``whoami`` shows ``sasl: NAME``;
- ``sasl:`` ACLs allow the named user, deny another user and an anonymous session; the
  ``zookeeper.superUser`` passes every ACL;
- a wrong password or an unknown user is refused as Apache refuses it: AUTHFAILED with a null
  token, then the connection closes; the Java client sees AuthFailed, kazoo stops in AUTH_FAILED;
- ``enforce.auth.enabled`` refuses every request (pings included) of a session without a sasl id
  with SESSIONCLOSEDREQUIRESASLAUTH and closes;
- against a server without SASL the Java client sees AuthFailed on both; the first token is
  answered the same way (OK, null token). Deliberate difference: Apache answers every later token
  the same, so kazoo loops for ever; zkpy refuses the second, and kazoo stops in AUTH_FAILED;
- many SASL packets from one client grow zkpy's log by a bounded number of lines.
"""

from __future__ import annotations

import os
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import AuthFailedError, ConnectionClosedError, InvalidACLError, NoAuthError
from kazoo.protocol.serialization import int_struct, read_string
from kazoo.security import ACL as KazooACL
from kazoo.security import Id as KazooId
from puresasl.client import SASLClient
from tests.conftest import require_apache
from tests.helpers.rawzk import RawConn
from tests.interop.test_zkcli import whole_lines

from zkpy.errors import Code
from zkpy.testing.servers import ServerProcess, start_apache, start_zkpy
from zkpy.wire.consts import OpCode
from zkpy.wire.proto import GetSASLRequest, SetSASLResponse

pytestmark = pytest.mark.interop

ZKCLI = "/usr/share/zookeeper/bin/zkCli.sh"
SASL_PROVIDER = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
JAAS_KEY = "java.security.auth.login.config"
USERS = {"bob": "bobsecret", "alice": "alicesecret", "admin": "adminsecret"}
SUPER_USER = "admin"
DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def jaas(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("jaas")
    users = "\n".join(f'    user_{name}="{password}"' for name, password in USERS.items())
    server = d / "server.jaas"
    server.write_text("Server {\n    org.apache.zookeeper.server.auth.DigestLoginModule required\n"
                      f"{users};\n}};\n", encoding="utf-8")
    return server


def client_jaas(directory: Path, user: str, password: str) -> Path:
    """A JAAS file with the ``Client`` section the Java client reads (DigestLoginModule)."""
    path = directory / f"client-{user}-{uuid.uuid4().hex[:6]}.jaas"
    path.write_text("Client {\n    org.apache.zookeeper.server.auth.DigestLoginModule required\n"
                    f'    username="{user}"\n    password="{password}";\n}};\n', encoding="utf-8")
    return path


def start(kind: str, jaas: Path | None, monkeypatch: pytest.MonkeyPatch | None = None, provider: bool = True,
          **extra: str) -> ServerProcess:
    """A server of ``kind`` with the SASL provider (unless not ``provider``) and, given ``jaas``, that
    JAAS file and the super user: Apache through system properties, zkpy through SERVER_JVMFLAGS
    (as zkServer.sh)."""
    settings: dict[str, str | None] = {"authProvider.1": SASL_PROVIDER} if provider else {}
    settings.update(extra)
    if kind == "apache":
        require_apache()
        props = {JAAS_KEY: str(jaas), "zookeeper.superUser": SUPER_USER} if jaas else {}
        return start_apache(settings, jvm_props=props)
    if jaas is None:
        return start_zkpy(settings)
    assert monkeypatch is not None
    with monkeypatch.context() as m:
        m.setenv("SERVER_JVMFLAGS", f"-Xmx1g -D{JAAS_KEY}={jaas} -Dzookeeper.superUser={SUPER_USER}")
        return start_zkpy(settings)


@pytest.fixture(scope="module", params=["zkpy", "apache"])
def sasl_server(request: pytest.FixtureRequest, jaas: Path) -> Iterator[ServerProcess]:
    with pytest.MonkeyPatch.context() as m:
        server = start(request.param, jaas, m)
    yield server
    server.cleanup()


@pytest.fixture(scope="module", params=["zkpy", "apache"])
def enforcing_server(request: pytest.FixtureRequest, jaas: Path) -> Iterator[ServerProcess]:
    with pytest.MonkeyPatch.context() as m:
        server = start(request.param, jaas, m, **{"enforce.auth.enabled": "true", "enforce.auth.schemes": "sasl"})
    yield server
    server.cleanup()


@pytest.fixture(scope="module", params=["zkpy", "apache"])
def providerless_server(request: pytest.FixtureRequest, jaas: Path) -> Iterator[ServerProcess]:
    """SASL users but no authProvider.N=SASLAuthenticationProvider."""
    with pytest.MonkeyPatch.context() as m:
        server = start(request.param, jaas, m, provider=False)
    yield server
    server.cleanup()


# ---- clients ----

class WhoAmI:
    """kazoo has no whoAmI (opcode 107): a request record it can send through ``_call``."""

    type = OpCode.WHO_AM_I

    def serialize(self) -> bytearray:
        return bytearray()

    @classmethod
    def deserialize(cls, data: bytes, offset: int) -> list[tuple[str, str]]:
        count = int_struct.unpack_from(data, offset)[0]
        offset += int_struct.size
        out = []
        for _ in range(max(count, 0)):
            scheme, offset = read_string(data, offset)
            user, offset = read_string(data, offset)
            out.append((scheme, user))
        return out


def whoami(zk: KazooClient) -> list[tuple[str, str]]:
    result = zk.handler.async_result()
    zk._call(WhoAmI(), result)
    return result.get(timeout=DEADLINE_S)  # type: ignore[no-any-return]


class Kazoo:
    """A kazoo client with SASL DIGEST-MD5; ``lost`` is set when it gives up (AUTH_FAILED)."""

    def __init__(self, server: ServerProcess, user: str, password: str, wait: bool = True) -> None:
        """``wait``: until CONNECTED (which kazoo reaches before SASL: requests queue behind it);
        without, the caller waits for ``lost`` (a failing exchange may end before CONNECTED is seen)."""
        self.lost = threading.Event()
        self.lost_state: str | None = None  # the client's state when it gave up
        self.zk = KazooClient(hosts=server.hosts, timeout=10,
                              sasl_options={"mechanism": "DIGEST-MD5", "username": user, "password": password},
                              connection_retry={"max_tries": 0})
        self.zk.add_listener(self._listen)
        if wait:
            self.zk.start(timeout=DEADLINE_S)
        else:
            self.zk.start_async()

    def _listen(self, state: str) -> None:
        if state == KazooState.LOST and not self.lost.is_set():
            self.lost_state = self.zk.client_state  # AUTH_FAILED here; CLOSED soon after
            self.lost.set()

    def __enter__(self) -> KazooClient:
        return self.zk

    def __exit__(self, *exc: object) -> None:
        self.zk.stop()
        self.zk.close()


def run_zkcli(server: ServerProcess, script: str, jaas_file: Path | None) -> list[str]:
    """zkCli.sh with a JAAS Client section: its output lines, JVM noise and blank lines dropped."""
    env = dict(os.environ)
    flags = "-Xshare:auto -XX:TieredStopAtLevel=1 -Xmx128m"
    if jaas_file is not None:
        flags += f" -D{JAAS_KEY}={jaas_file}"
    env["CLIENT_JVMFLAGS"] = flags
    proc = subprocess.run([ZKCLI, "-server", server.hosts], input=script.encode(), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, env=env, timeout=90, check=False)
    # an event the client's thread printed inside a command's line goes after that line
    lines = whole_lines(proc.stdout.decode("utf-8", "replace")).splitlines()
    keep = []
    for line in lines:
        if not line.strip() or line.startswith(("SLF4J:", "Connecting to", "Welcome to", "JLine")) \
                or line == "WATCHER::":
            continue
        keep.append(line.replace(f"127.0.0.1:{server.port}", "127.0.0.1:<port>"))
    return keep


def raw_sasl(conn: RawConn, xid: int, token: bytes) -> tuple[int, int, bytes | None] | None:
    """Send one SASL packet: (zxid, err, token) of the reply, or None when the server closed."""
    conn.send_request(xid, OpCode.SASL, GetSASLRequest(token).to_bytes())
    reply = conn.read_reply(DEADLINE_S)
    if reply is None:
        return None
    return reply.header.zxid, reply.err, SetSASLResponse.from_bytes(reply.body).token


def raw_login(server: ServerProcess, user: str, password: str) -> list[object]:
    """A DIGEST-MD5 exchange over a raw connection: each reply's (zxid, err, token kind), and
    'closed' when the server closed the connection after the last one."""
    out: list[object] = []
    with RawConn(server.port, timeout=DEADLINE_S) as conn:
        conn.handshake()
        cli = SASLClient("zk-sasl-md5", service="zookeeper", mechanism="DIGEST-MD5", username=user, password=password)
        first = raw_sasl(conn, 1, b"")
        assert first is not None and first[2] is not None
        out.append((first[0], first[1], first[2].split(b"=")[0]))
        second = raw_sasl(conn, 2, cli.process(first[2]))
        assert second is not None
        out.append((second[0], second[1], None if second[2] is None else second[2].split(b"=")[0]))
        try:
            frames = conn.wait_closed(5.0)
            out.append(("closed", len(frames)))
        except TimeoutError:
            out.append("open")
    return out


# ---- the Java client ----

def test_java_client_authenticates_whoami_and_sasl_acls(sasl_server: ServerProcess,
                                                         tmp_path: Path) -> None:
    node = f"/java-{uuid.uuid4().hex[:8]}"
    script = "\n".join([
        "whoami",
        f"create {node} x sasl:bob:cdrwa",
        f"getAcl {node}",
        f"get {node}",
        f"create {node}-auth y auth::cdrwa",
        f"getAcl {node}-auth",
        f"create {node}-bad z sasl:a@b@c:r",
        f"create {node}-alice a sasl:alice:cdrwa",
        f"get {node}-alice",
        f"setAcl {node} sasl:alice:r",
        f"get {node}",
    ]) + "\n"
    lines = run_zkcli(sasl_server, script, client_jaas(tmp_path, "bob", "bobsecret"))
    print("\n".join(lines))
    # the SaslAuthenticated event is printed by the client's event thread: where it lands among
    # the first commands' output is a race, on either server (seen in a clean-clone run)
    authenticated = "WatchedEvent state:SaslAuthenticated type:None path:null"
    assert lines.count(authenticated) == 1
    assert [line for line in lines if line != authenticated] == [
        "WatchedEvent state:SyncConnected type:None path:null",
        "Auth scheme: User",
        "sasl: bob",
        "ip: 127.0.0.1",
        f"Created {node}",
        "'sasl,'bob",
        ": cdrwa",
        "x",
        f"Created {node}-auth",
        "'sasl,'bob",
        ": cdrwa",
        f"KeeperErrorCode = InvalidACL for {node}-bad",
        f"Acl is not valid : {node}-bad",
        f"Created {node}-alice",
        f"Insufficient permission : {node}-alice",
        f"Insufficient permission : {node}",
    ]
    # the super user reads what only alice may read
    admin = run_zkcli(sasl_server, f"get {node}-alice\nwhoami\n", client_jaas(tmp_path, "admin", "adminsecret"))
    print("\n".join(admin))
    assert admin[-5:] == ["a", "Auth scheme: User", "sasl: admin", "super: ", "ip: 127.0.0.1"]


def test_java_client_with_a_wrong_password_sees_auth_failed(sasl_server: ServerProcess, tmp_path: Path) -> None:
    lines = run_zkcli(sasl_server, "whoami\nls /\n", client_jaas(tmp_path, "bob", "wrong"))
    print("\n".join(lines))
    assert "WatchedEvent state:AuthFailed type:None path:null" in lines
    assert "WatchedEvent state:SaslAuthenticated type:None path:null" not in lines
    assert "sasl: bob" not in lines


# ---- kazoo ----

def test_kazoo_authenticates_and_whoami_shows_sasl_name(sasl_server: ServerProcess) -> None:
    with Kazoo(sasl_server, "bob", "bobsecret") as zk:
        assert whoami(zk) == [("sasl", "bob"), ("ip", "127.0.0.1")]


def test_kazoo_sasl_acls_allow_and_deny_the_same(sasl_server: ServerProcess) -> None:
    node = f"/kazoo-{uuid.uuid4().hex[:8]}"
    acl = [KazooACL(31, KazooId("sasl", "bob"))]
    with Kazoo(sasl_server, "bob", "bobsecret") as bob:
        bob.create(node, b"secret", acl=acl)
        assert bob.get(node)[0] == b"secret"
    with Kazoo(sasl_server, "alice", "alicesecret") as alice:
        with pytest.raises(NoAuthError):
            alice.get(node)
    anon = KazooClient(hosts=sasl_server.hosts)
    anon.start(timeout=DEADLINE_S)
    try:
        with pytest.raises(NoAuthError):
            anon.get(node)
    finally:
        anon.stop()
        anon.close()
    with Kazoo(sasl_server, SUPER_USER, USERS[SUPER_USER]) as admin:
        assert admin.get(node)[0] == b"secret"


@pytest.mark.parametrize(("user", "password"), [("bob", "wrong"), ("nobody", "x")])
def test_kazoo_with_a_wrong_password_stops_in_auth_failed(sasl_server: ServerProcess, user: str,
                                                          password: str) -> None:
    client = Kazoo(sasl_server, user, password, wait=False)
    try:
        assert client.lost.wait(DEADLINE_S), "kazoo neither authenticated nor gave up"
        assert client.lost_state == "AUTH_FAILED"
        with pytest.raises((AuthFailedError, ConnectionClosedError)):
            client.zk.get("/")
    finally:
        client.__exit__()


def test_without_the_sasl_provider_sasl_acls_are_invalid_and_whoami_names_nobody(
        providerless_server: ServerProcess) -> None:
    """ZooKeeper adds the sasl id anyway, but only a registered provider validates, matches and
    names it (AuthUtil.getUser): whoAmI shows the scheme with an empty user."""
    with Kazoo(providerless_server, "bob", "bobsecret") as zk:
        assert whoami(zk) == [("sasl", ""), ("ip", "127.0.0.1")]
        with pytest.raises(InvalidACLError):
            zk.create(f"/np-{uuid.uuid4().hex[:8]}", b"", acl=[KazooACL(31, KazooId("sasl", "bob"))])


# ---- the wire: both servers must say the same bytes ----

EXPECTED_LOGIN = {
    "good": [(0, 0, b"realm"), (0, 0, b"rspauth"), "open"],
    "wrong password": [(0, 0, b"realm"), (0, Code.AUTHFAILED, None), ("closed", 0)],
    "unknown user": [(0, 0, b"realm"), (0, Code.AUTHFAILED, None), ("closed", 0)],
}


@pytest.mark.parametrize(("case", "user", "password"),
                         [("good", "bob", "bobsecret"), ("wrong password", "bob", "nope"),
                          ("unknown user", "carol", "x")])
def test_sasl_replies_on_the_wire(sasl_server: ServerProcess, case: str, user: str, password: str) -> None:
    assert raw_login(sasl_server, user, password) == EXPECTED_LOGIN[case]


def test_a_token_after_completion_is_refused_and_closes(sasl_server: ServerProcess) -> None:
    with RawConn(sasl_server.port, timeout=DEADLINE_S) as conn:
        conn.handshake()
        cli = SASLClient("zk-sasl-md5", service="zookeeper", mechanism="DIGEST-MD5", username="bob",
                         password="bobsecret")
        first = raw_sasl(conn, 1, b"")
        assert first is not None and first[2] is not None
        second = raw_sasl(conn, 2, cli.process(first[2]))
        assert second is not None and second[1] == 0
        assert raw_sasl(conn, 3, b"") == (0, Code.AUTHFAILED, None)
        assert conn.wait_closed(DEADLINE_S) == []


# ---- enforce.auth.enabled ----

def test_enforced_auth_refuses_unauthenticated_requests_and_closes(enforcing_server: ServerProcess) -> None:
    with RawConn(enforcing_server.port, timeout=DEADLINE_S) as conn:
        conn.handshake()
        conn.send_request(-2, OpCode.PING)  # even a ping
        reply = conn.read_reply(DEADLINE_S)
        assert reply is not None
        assert (reply.header.xid, reply.header.zxid, reply.err, reply.body) == (-2, 0, Code.SESSIONCLOSEDREQUIRESASLAUTH, b"")
        assert conn.wait_closed(DEADLINE_S) == []


def test_enforced_auth_java_client_without_sasl(enforcing_server: ServerProcess) -> None:
    lines = run_zkcli(enforcing_server, "ls /\nwhoami\n", None)
    print("\n".join(lines))
    # the Disconnected event comes from the client's event thread: where it lands among the
    # commands' output is a race, on either server, and zkCli may exit at the end of its input
    # before the thread prints it (seen once in CI). That the server closes the connection is
    # checked on the wire above (the raw client's wait_closed).
    disconnected = "WatchedEvent state:Disconnected type:None path:null"
    assert [line for line in lines if line != disconnected][:3] == [
        "WatchedEvent state:SyncConnected type:None path:null",
        "KeeperErrorCode = Session closed because client failed to authenticate for /",
        "Auth scheme: User"]


def test_enforced_auth_lets_a_sasl_session_work(enforcing_server: ServerProcess) -> None:
    with Kazoo(enforcing_server, "bob", "bobsecret") as zk:
        assert zk.exists("/") is not None
        assert ("sasl", "bob") in whoami(zk)


def test_enforced_auth_wrong_password_gets_session_closed_require_sasl(enforcing_server: ServerProcess) -> None:
    assert raw_login(enforcing_server, "bob", "nope") == [(0, 0, b"realm"), (0, Code.SESSIONCLOSEDREQUIRESASLAUTH, None),
                                                         ("closed", 0)]


# ---- a server without SASL ----

def test_java_client_against_a_server_without_sasl_sees_auth_failed(any_server: ServerProcess,
                                                                    tmp_path: Path) -> None:
    lines = run_zkcli(any_server, "whoami\n", client_jaas(tmp_path, "bob", "bobsecret"))
    print("\n".join(lines))
    assert lines[:2] == ["WatchedEvent state:SyncConnected type:None path:null",
                         "WatchedEvent state:AuthFailed type:None path:null"]


def test_first_sasl_token_without_sasl_is_answered_as_zookeeper_does(any_server: ServerProcess) -> None:
    with RawConn(any_server.port, timeout=DEADLINE_S) as conn:
        conn.handshake()
        assert raw_sasl(conn, 1, b"") == (0, 0, None)


def test_kazoo_against_zkpy_without_sasl_stops_instead_of_looping() -> None:
    """Deliberate difference: Apache ZooKeeper 3.8 answers every token OK with a null token, and
    kazoo sends the next at once, for ever (measured: 22,600 tokens and as many ERROR log lines in
    6 s). zkpy refuses the second token with AUTHFAILED: kazoo stops, as on a wrong password.
    A server of its own: should kazoo loop, stopping the server is what ends its loop."""
    server = start_zkpy({"authProvider.1": SASL_PROVIDER})
    client = None
    try:
        mark = server.log_size()
        client = Kazoo(server, "bob", "bobsecret", wait=False)
        assert client.lost.wait(DEADLINE_S), "kazoo did not give up"
        assert client.lost_state == "AUTH_FAILED"
        assert server.log(mark).count("\n") <= 10
    finally:
        server.cleanup()
        if client is not None:
            client.__exit__()


def test_apache_without_sasl_answers_every_token(apache_server: ServerProcess) -> None:
    """The cause of kazoo's loop on Apache ZooKeeper, and why zkpy differs (see above)."""
    with RawConn(apache_server.port, timeout=DEADLINE_S) as conn:
        conn.handshake()
        assert [raw_sasl(conn, xid, b"") for xid in (1, 2, 3)] == [(0, 0, None)] * 3


# ---- log lines ----

def test_many_sasl_packets_grow_zkpys_log_by_bounded_lines(jaas: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """1,000 SASL packets from one client: 500 connections, each an empty token and a bad response."""
    server = start("zkpy", jaas, monkeypatch)
    try:
        mark = server.log_size()
        for i in range(500):
            with RawConn(server.port, timeout=DEADLINE_S) as conn:
                conn.handshake()
                assert raw_sasl(conn, 1, b"") is not None
                assert raw_sasl(conn, 2, b'username="bob",response=00') == (0, Code.AUTHFAILED, None), i
        lines = server.log(mark).splitlines()
        print(f"{len(lines)} log lines; the last: {lines[-3:]}")
        assert len(lines) <= 50
        assert not any(p in line for line in lines for p in USERS.values())
    finally:
        server.cleanup()
