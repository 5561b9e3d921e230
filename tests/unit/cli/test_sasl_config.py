"""SASL settings as zoo.cfg, the JAAS file and zkServer.sh's JVM flags give them, and the refusals
Apache ZooKeeper 3.8 makes at startup (measured: it exits 2 on enforced sasl without the provider)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from zkpy.cli.zoocfg import ConfigError, load_zoo_cfg

SASL_PROVIDER = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
DIGEST_JAAS = 'Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  user_bob="bobsecret";\n};\n'
KERBEROS_JAAS = ('Server {\n  com.sun.security.auth.module.Krb5LoginModule required\n  useKeyTab=true\n'
                 '  keyTab="/etc/zk.keytab"\n  principal="zookeeper/host@EXAMPLE.COM";\n};\n')


def write_cfg(tmp_path: Path, jaas_text: str | None, **keys: str) -> str:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    lines = [f"dataDir={data}", "clientPort=2181"]
    if jaas_text is not None:
        jaas = tmp_path / "jaas.conf"
        jaas.write_text(jaas_text, encoding="utf-8")
        lines.append(f"java.security.auth.login.config={jaas}")
    lines += [f"{k}={v}" for k, v in keys.items()]
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(cfg)


def test_digest_users_provider_and_super_users(tmp_path: Path) -> None:
    cfg = load_zoo_cfg(write_cfg(tmp_path, DIGEST_JAAS, **{"authProvider.1": SASL_PROVIDER, "superUser": "bob",
                                                            "superUser.2": "carol"}))
    assert cfg.sasl is not None and cfg.sasl.users == {"bob": "bobsecret"}
    assert cfg.sasl_auth
    assert cfg.sasl.super_users == ("bob", "carol")
    assert cfg.sasl.random_bytes is not None and len(cfg.sasl.random_bytes(30)) == 30
    assert "bobsecret" not in repr(cfg)


def test_without_the_provider_sasl_acls_are_off(tmp_path: Path) -> None:
    cfg = load_zoo_cfg(write_cfg(tmp_path, DIGEST_JAAS))
    assert cfg.sasl is not None and not cfg.sasl_auth


def test_kerberos_section_is_refused_at_startup_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"jaas\.conf.*Krb5LoginModule.*GSSAPI"):
        load_zoo_cfg(write_cfg(tmp_path, KERBEROS_JAAS, **{"authProvider.1": SASL_PROVIDER}))


@pytest.mark.parametrize("keys", [
    {"enforce.auth.enabled": "true", "enforce.auth.schemes": "sasl"},
    {"sessionRequireClientSASLAuth": "true"},
], ids=["enforce-sasl", "sessionRequireClientSASLAuth"])
def test_enforced_sasl_without_the_provider_is_refused_as_zookeeper_refuses_it(
        tmp_path: Path, keys: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="SASLAuthenticationProvider"):
        load_zoo_cfg(write_cfg(tmp_path, DIGEST_JAAS, **keys))


def test_enforced_sasl_with_the_provider(tmp_path: Path) -> None:
    cfg = load_zoo_cfg(write_cfg(tmp_path, DIGEST_JAAS, **{"authProvider.1": SASL_PROVIDER,
                                                            "sessionRequireClientSASLAuth": "true"}))
    assert cfg.session_require_client_sasl_auth


def test_kerberos_refusal_exits_2_with_one_line(tmp_path: Path) -> None:
    """What an operator sees: exit 2 and one line naming the file, before anything listens."""
    cfg = write_cfg(tmp_path, KERBEROS_JAAS, **{"authProvider.1": SASL_PROVIDER})
    env = {k: v for k, v in os.environ.items() if k not in ("SERVER_JVMFLAGS", "JVMFLAGS")}
    proc = subprocess.run([sys.executable, "-m", "zkpy.cli.main", "server", cfg], capture_output=True, text=True,
                          timeout=60, env=env, check=False)
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("zkpy:")]
    assert len(errors) == 1 and "GSSAPI" in errors[0] and "jaas.conf" in errors[0]


@pytest.mark.parametrize(("jaas_text", "expected"), [
    ("Other {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  user_bob=\"x\";\n};\n",
     "has no 'Server' section"),
    (None, "no JAAS file is configured"),
])
def test_sasl_without_a_usable_jaas_section_gets_one_warning_that_says_why(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, jaas_text: str | None, expected: str) -> None:
    """Issue 26: a JAAS file without the Server section also got "no JAAS file is configured"."""
    with caplog.at_level("WARNING", logger="zkpy"):
        load_zoo_cfg(write_cfg(tmp_path, jaas_text, **{"authProvider.1": SASL_PROVIDER}))
    lines = [r.getMessage() for r in caplog.records if "SASL" in r.getMessage()]
    assert len(lines) == 1 and expected in lines[0], lines
