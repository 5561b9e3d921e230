"""AsyncClient over TLS (stdlib ``ssl``), against zkpy and Apache ZooKeeper 3.8 (``any_server``).

Neither server has TLS on, so a TLS-terminating ``TcpProxy`` sits in front of each: the client
speaks TLS to the proxy, the proxy plain TCP to the server. The certificate is a throwaway
self-signed one for ``IP:127.0.0.1``, made with the ``openssl`` CLI in ``tmp_path``.

Guarantees checked: a client whose context trusts the certificate works through TLS (the host
name it checks is the connect string's host); a client whose context does not trust it never
gets a session and ``start()`` fails with ``ConnectionLoss`` naming the TLS error.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers.clientwait import run

from zkpy import AsyncClient, ClientState
from zkpy.errors import ConnectionLoss
from zkpy.testing.proxy import TcpProxy
from zkpy.testing.servers import ServerProcess


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(cert.pem, key.pem): self-signed, CN=localhost, subjectAltName IP:127.0.0.1, one day."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl CLI is not installed")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-days", "1",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    return cert, key


@pytest.fixture
def tls_proxy(any_server: ServerProcess, certificate: tuple[Path, Path]) -> Iterator[TcpProxy]:
    cert, key = certificate
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    host, port = any_server.hosts.rsplit(":", 1)
    with TcpProxy(host, int(port), ssl_context=server_ctx) as proxy:
        yield proxy


def test_client_trusting_the_certificate_works_through_tls(tls_proxy: TcpProxy,
                                                           certificate: tuple[Path, Path]) -> None:
    cert, _ = certificate
    ctx = ssl.create_default_context(cafile=str(cert))

    async def scenario() -> None:
        async with AsyncClient(tls_proxy.hosts, session_timeout=10.0, ssl_context=ctx) as zk:
            assert zk.state is ClientState.CONNECTED
            path = f"/tls-{uuid.uuid4().hex[:10]}"
            assert await zk.create(path, b"over tls") == path
            data, stat = await zk.get(path)
            assert (data, stat.version) == (b"over tls", 0)
            await zk.delete(path)

    run(scenario, 30.0)
    assert tls_proxy.forwarded >= 1


def test_client_not_trusting_the_certificate_fails_to_connect(tls_proxy: TcpProxy) -> None:
    ctx = ssl.create_default_context()  # the system CAs only: the self-signed cert is not trusted

    async def scenario() -> None:
        zk = AsyncClient(tls_proxy.hosts, session_timeout=10.0, connect_timeout=1.0, ssl_context=ctx)
        with pytest.raises(ConnectionLoss, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
            await zk.start(timeout=2.0)
        assert zk.state is ClientState.CLOSED

    run(scenario, 30.0)
    assert tls_proxy.forwarded == 0
