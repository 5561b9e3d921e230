"""System properties given as zkServer.sh users give them, differential against Apache ZooKeeper 3.8:
the digest super user of ``-Dzookeeper.DigestAuthenticationProvider.superDigest`` (the flag kazoo's
own test harness gives the server; on zkpy it was ignored, and kazoo's observer reconfig test got
NoAuth) and the four-letter words of ``-Dzookeeper.4lw.commands.whitelist``."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_digest_acl
from tests.conftest import require_apache

from zkpy.testing.servers import ServerProcess, four_letter, start_apache, start_zkpy

pytestmark = pytest.mark.interop

SUPER_DIGEST = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="  # password "test", as kazoo's harness sets it
PROPS = {"zookeeper.DigestAuthenticationProvider.superDigest": SUPER_DIGEST,
         "zookeeper.4lw.commands.whitelist": "ruok,srvr"}


def start(kind: str, monkeypatch: pytest.MonkeyPatch) -> ServerProcess:
    if kind == "apache":
        require_apache()
        return start_apache({"4lw.commands.whitelist": None}, jvm_props=PROPS)
    with monkeypatch.context() as m:
        m.setenv("SERVER_JVMFLAGS", "-Xmx1g " + " ".join(f"-D{k}={v}" for k, v in PROPS.items()))
        m.delenv("JVMFLAGS", raising=False)
        return start_zkpy({"4lw.commands.whitelist": None})


@pytest.mark.parametrize("kind", ["apache", "zkpy"])
def test_super_digest_and_four_letter_words_from_server_jvmflags(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    server = start(kind, monkeypatch)
    owner = KazooClient(hosts=f"127.0.0.1:{server.port}", timeout=10)
    stranger = KazooClient(hosts=f"127.0.0.1:{server.port}", timeout=10)
    root = KazooClient(hosts=f"127.0.0.1:{server.port}", timeout=10, auth_data=[("digest", "super:test")])
    try:
        for c in (owner, stranger, root):
            c.start(30)
        owner.add_auth("digest", "alice:secret")
        owner.create("/locked", b"v", acl=[make_digest_acl("alice", "secret", all=True)])
        with pytest.raises(NoAuthError):
            stranger.get("/locked")
        assert root.get("/locked")[0] == b"v"
        assert four_letter(server.port, "ruok") == "imok"
        assert "not in the whitelist" in four_letter(server.port, "conf")
    finally:
        for c in (owner, stranger, root):
            c.stop()
            c.close()
        server.cleanup()
