"""System properties in SERVER_JVMFLAGS/JVMFLAGS read as the zoo.cfg lines they stand for, as
ZooKeeper 3.8 reads them: ``-Dzookeeper.<key>`` for every key QuorumPeerConfig does not parse
itself (zoo.cfg wins), the unprefixed ``readonlymode.enabled`` and ``jute.maxbuffer`` (the flag
wins), JAVA's own flags left alone."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from zkpy.cli.jvmflags import as_zoo_cfg, system_properties
from zkpy.cli.main import _config

SUPER = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="  # kazoo's test harness's superDigest


def cfg(tmp_path: Path, *lines: str) -> str:
    path = tmp_path / "zoo.cfg"
    path.write_text("\n".join([f"dataDir={tmp_path / 'data'}", "clientPortAddress=127.0.0.1", "clientPort=2181",
                               *lines]) + "\n")
    return str(path)


def flags(monkeypatch: pytest.MonkeyPatch, server: str, plain: str = "") -> None:
    monkeypatch.setenv("SERVER_JVMFLAGS", server)
    monkeypatch.setenv("JVMFLAGS", plain)


def test_the_last_flag_naming_a_property_wins_and_quotes_are_dropped() -> None:
    env = {"SERVER_JVMFLAGS": "-Xmx1g -Dzookeeper.a=1 -Db='2'", "JVMFLAGS": "-Dzookeeper.a=3 -XX:+UseG1GC"}
    assert system_properties(env) == {"zookeeper.a": "3", "b": "2"}


def test_which_properties_zookeeper_reads_as_zoo_cfg_lines() -> None:
    settings = as_zoo_cfg({"zookeeper.snapCount": "5", "zookeeper.tickTime": "9", "readonlymode.enabled": "true",
                           "com.sun.management.jmxremote": "", "zookeeper.server.1": "x", "jute.maxbuffer": "7"})
    assert settings.under_file == {"snapCount": "5"}
    assert settings.over_file == {"readonlymode.enabled": "true", "jute.maxbuffer": "7"}
    assert set(settings.without_effect) == {"zookeeper.tickTime", "zookeeper.server.1"}


def test_the_super_digest_from_the_flags_kazoos_harness_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flags(monkeypatch, f"-Dzookeeper.DigestAuthenticationProvider.superDigest={SUPER} -Dreadonlymode.enabled=true")
    config = _config(cfg(tmp_path), {}, quiet=True)
    assert config.super_digest == SUPER
    assert config.read_only_mode


@pytest.mark.parametrize(("server", "lines", "expected"), [
    ("-Dzookeeper.snapCount=500", (), 500),
    ("-Dzookeeper.snapCount=500", ("snapCount=700",), 700),  # zoo.cfg is set after the JVM's flags
    ("-Dzookeeper.snapCount=500", ("zookeeper.snapCount=700",), 500),  # that line is zookeeper.zookeeper.snapCount
    ("-Dzookeeper.enforceQuota=true", ("zookeeper.enforceQuota=false",), None),  # a spelling zkpy reads
])
def test_zoo_cfg_wins_over_a_prefixed_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: str,
                                           lines: tuple[str, ...], expected: int | None) -> None:
    flags(monkeypatch, server)
    config = _config(cfg(tmp_path, *lines), {}, quiet=True)
    if expected is None:
        assert config.enforce_quota is False
    else:
        assert config.snap_count == expected


def test_super_users_from_the_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jaas = tmp_path / "jaas.conf"
    jaas.write_text('Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  user_bob="b";\n};\n')
    flags(monkeypatch, f"-Djava.security.auth.login.config={jaas} -Dzookeeper.superUser=admin",
          "-Dzookeeper.superUser.2=ops")
    config = _config(cfg(tmp_path, "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider"), {},
                     quiet=True)
    assert config.sasl is not None and config.sasl.super_users == ("admin", "ops")


def test_a_bad_value_exits_2_naming_the_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    flags(monkeypatch, "-Dzookeeper.snapCount=many")
    with pytest.raises(SystemExit) as exit_:
        _config(cfg(tmp_path), {}, quiet=True)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "SERVER_JVMFLAGS/JVMFLAGS (-Dzookeeper.snapCount)" in err and "'many'" in err


def test_flags_without_effect_get_one_warn_line_each_naming_the_flag(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    flags(monkeypatch, "-Dzookeeper.tickTime=100 -Dzookeeper.noSuchKey=1 -Dzookeeper.nio.numSelectorThreads=4 -Xmx1g")
    with caplog.at_level(logging.WARNING, logger="zkpy"):
        _config(cfg(tmp_path), {})  # as the server starts (status and stop are quiet)
    lines = [r.getMessage() for r in caplog.records if "JVMFLAGS" in r.getMessage() and "the JVM's" not in r.getMessage()]
    assert len(lines) == 3, lines
    assert any("-Dzookeeper.tickTime" in line and "zoo.cfg only" in line for line in lines)
    assert any("-Dzookeeper.noSuchKey" in line for line in lines)
    assert any("-Dzookeeper.nio.numSelectorThreads" in line for line in lines)


def test_the_jvms_own_flags_are_named_in_one_warn_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    jaas = tmp_path / "jaas.conf"
    jaas.write_text("Client { x required; };\n")
    flags(monkeypatch, "-Xmx1g -XX:+UseG1GC -Dcom.sun.management.jmxremote -Dzookeeper.snapCount=5000 "
                       f"-Djava.security.auth.login.config={jaas} -Dreadonlymode.enabled=true")
    with caplog.at_level(logging.WARNING, logger="zkpy"):
        _config(cfg(tmp_path), {})
    lines = [r.getMessage() for r in caplog.records if "the JVM's" in r.getMessage()]
    assert lines == ["SERVER_JVMFLAGS/JVMFLAGS: -Xmx1g -XX:+UseG1GC -Dcom.sun.management.jmxremote: the JVM's "
                     "(or other software's), no effect in zkpy"]
