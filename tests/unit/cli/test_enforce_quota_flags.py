"""enforceQuota reaches the server's config from zoo.cfg (both spellings), from
``-Dzookeeper.enforceQuota`` in ``SERVER_JVMFLAGS``/``JVMFLAGS`` (zoo.cfg wins, as ZooKeeper sets
the property from it after the JVM's flags) and from ``--enforce-quota`` (the flag wins)."""

from __future__ import annotations

from pathlib import Path

import pytest

from zkpy.cli.main import _config


def cfg(tmp_path: Path, *lines: str) -> str:
    path = tmp_path / "zoo.cfg"
    path.write_text("\n".join([f"dataDir={tmp_path}", "clientPortAddress=127.0.0.1", *lines]) + "\n")
    return str(path)


@pytest.mark.parametrize(("jvm", "lines", "flag", "expected"), [
    ("", (), None, False),
    ("", ("enforceQuota=true",), None, True),
    ("", ("zookeeper.enforceQuota=true",), None, True),
    ("-Xmx1g -Dzookeeper.enforceQuota=true", (), None, True),
    ("-Dzookeeper.enforceQuota=false", (), None, False),
    ("-Dzookeeper.enforceQuota=true", ("enforceQuota=false",), None, False),
    ("", ("enforceQuota=true",), False, False),
    ("", (), True, True),
])
def test_where_enforce_quota_comes_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jvm: str,
                                        lines: tuple[str, ...], flag: bool | None, expected: bool) -> None:
    monkeypatch.setenv("SERVER_JVMFLAGS", jvm)
    monkeypatch.delenv("JVMFLAGS", raising=False)
    assert _config(cfg(tmp_path, *lines), {"enforce_quota": flag}, quiet=True).enforce_quota is expected
