"""A secured quorum: ``sslQuorum`` (TLS between members on the election and quorum ports) and quorum
SASL (``quorum.auth.*``, DIGEST-MD5 from the JAAS ``QuorumServer``/``QuorumLearner`` sections), zkpy
alone and mixed with Apache ZooKeeper 3.8, with the leader on each kind in turn.

Every member gets the same ``ssl.quorum.*`` stores (``zkpy.testing.certs``; PKCS#12 here, the client
port tests cover PEM and JKS) and the same JAAS file. Guarantees checked: the ensemble forms,
replicates writes made through every member and fails over with nothing acknowledged lost, as the
plain mixed-ensemble tests do; the election and quorum ports speak TLS and refuse a peer without a
trusted certificate; a member with the wrong quorum password never joins, and the rest go on serving.
"""

from __future__ import annotations

import signal
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers.failover import replicate_and_fail_over

from zkpy.testing.certs import PASSWORD, Pki, make_pki
from zkpy.testing.servers import (
    ServerProcess,
    apache_available,
    cleanup_ensemble,
    ensemble_leader,
    restart_ensemble_member,
    server_mode,
    start_ensemble,
    wait_ensemble_serving,
)

pytestmark = [pytest.mark.skipif(not apache_available(), reason="Apache ZooKeeper 3.8 is not installed"),
              pytest.mark.timeout(300), pytest.mark.interop]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("quorum-pki"))


def quorum_tls_settings(pki: Pki) -> dict[str, str | None]:
    return {"sslQuorum": "true",
            "ssl.quorum.keyStore.location": str(pki.server.p12), "ssl.quorum.keyStore.password": PASSWORD,
            "ssl.quorum.trustStore.location": str(pki.ca_p12), "ssl.quorum.trustStore.password": PASSWORD}


JAAS = """QuorumServer {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_member="%(server)s";
};
QuorumLearner {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="member"
    password="%(learner)s";
};
"""


def jaas_file(d: Path, learner_password: str = "quorum-secret") -> Path:
    path = d / f"quorum-jaas-{learner_password}.conf"
    path.write_text(JAAS % {"server": "quorum-secret", "learner": learner_password})
    return path


def quorum_sasl_settings(jaas: Path) -> dict[str, str | None]:
    """zkpy reads the JAAS file from this zoo.cfg key (or SERVER_JVMFLAGS); Apache from the system
    property of the same name (``jvm_props``), and takes the zoo.cfg key as an unused property."""
    return {"quorum.auth.enableSasl": "true", "quorum.auth.learnerRequireSasl": "true",
            "quorum.auth.serverRequireSasl": "true", "java.security.auth.login.config": str(jaas)}


@pytest.fixture(params=[("zkpy", "zkpy", "zkpy"), ("zkpy", "zkpy", "apache")], ids=["3zkpy", "2zkpy+1apache"])
def secured(request: pytest.FixtureRequest, pki: Pki, tmp_path: Path) -> Iterator[list[ServerProcess]]:
    jaas = jaas_file(tmp_path)
    servers = start_ensemble(list(request.param), {**quorum_tls_settings(pki), **quorum_sasl_settings(jaas)},
                             jvm_props={"java.security.auth.login.config": str(jaas)})
    yield servers
    cleanup_ensemble(servers)


def test_a_secured_quorum_replicates_and_fails_over(secured: list[ServerProcess]) -> None:
    """Kill the leader until each kind present has led, checking replication under every leader."""
    led = replicate_and_fail_over(secured)
    assert led == {s.kind for s in secured}, f"only {led} led"


def _accepted(port: int, ctx: ssl.SSLContext) -> bool:
    """Whether the port keeps a TLS connection with ``ctx``'s certificate open (a TLS 1.3 server
    checks the client's certificate after the client's side of the handshake is done, so a refusal
    shows as an alert or a close on the first read; an accepted peer is read from until it talks)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10.0) as raw:
        try:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.settimeout(1.0)
                try:
                    return tls.recv(1) != b""
                except TimeoutError:
                    return True
        except (ssl.SSLError, ConnectionError):
            return False


def _context(ca: Path, cert: Path | None, key: Path | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        ctx.load_cert_chain(str(cert), str(key))
    return ctx


def test_the_quorum_ports_speak_tls_and_refuse_an_untrusted_peer(pki: Pki) -> None:
    servers = start_ensemble(["zkpy", "zkpy", "zkpy"], quorum_tls_settings(pki))
    try:
        leader = ensemble_leader(servers)
        follower = next(s for s in servers if s is not leader)
        member = _context(pki.ca_pem, pki.server.cert_pem, pki.server.key_pem)
        assert _accepted(int(follower.extra["election_port"]), member)  # a member's certificate
        stranger = _context(pki.ca_pem, pki.untrusted_client.cert_pem, pki.untrusted_client.key_pem)
        for port in (int(follower.extra["election_port"]), int(leader.extra["quorum_port"])):
            assert not _accepted(port, stranger), port
        wait_ensemble_serving(servers)  # and the ensemble goes on serving
    finally:
        cleanup_ensemble(servers)


def test_a_member_with_the_wrong_quorum_password_never_joins(tmp_path: Path) -> None:
    good, bad = jaas_file(tmp_path), jaas_file(tmp_path, "not-the-secret")
    servers = start_ensemble(["zkpy", "zkpy", "zkpy"], quorum_sasl_settings(good), wait=False)
    try:
        intruder = servers[2]
        # restart member 3 with the wrong learner password: members 1 and 2 form the quorum alone
        intruder.stop(signal.SIGKILL)
        cfg = Path(intruder.workdir) / "zoo.cfg"
        cfg.write_text(cfg.read_text().replace(str(good), str(bad)))
        restart_ensemble_member(intruder)
        wait_ensemble_serving(servers[:2])
        deadline_log = "refuses election connection"
        for s in servers[:2]:
            assert s.proc.poll() is None
        assert server_mode(intruder) not in ("leader", "follower"), server_mode(intruder)
        logs = servers[0].log() + servers[1].log()
        assert deadline_log in logs or "learner connection" in logs, logs[-3000:]
        assert "not-the-secret" not in logs + intruder.log()  # a password is never logged
    finally:
        cleanup_ensemble(servers)
