"""readonlymode.enabled: the zoo.cfg key, and ZooKeeper's own form, the system property in the JVM
flags zkServer.sh passes (``SERVER_JVMFLAGS``/``JVMFLAGS``), which wins over the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from zkpy.cli.main import _config


def _cfg(tmp_path: Path, *lines: str) -> str:
    path = tmp_path / "zoo.cfg"
    path.write_text("\n".join(["tickTime=200", f"dataDir={tmp_path / 'data'}", "clientPort=2181", *lines]) + "\n")
    return str(path)


@pytest.mark.parametrize(("file_line", "server_flags", "flags", "expected"), [
    ((), "", "", False),
    (("readonlymode.enabled=true",), "", "", True),
    ((), "-Xmx1g -Dreadonlymode.enabled=true", "", True),
    ((), "", "-Dreadonlymode.enabled=true", True),
    (("readonlymode.enabled=true",), "-Dreadonlymode.enabled=false", "", False),
    ((), "-Dreadonlymode.enabled=true", "-Dreadonlymode.enabled=false", False),  # zkServer.sh: JVMFLAGS last
])
def test_read_only_mode_from_the_file_or_the_jvm_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       file_line: tuple[str, ...], server_flags: str, flags: str,
                                                       expected: bool) -> None:
    monkeypatch.setenv("SERVER_JVMFLAGS", server_flags)
    monkeypatch.setenv("JVMFLAGS", flags)
    assert _config(_cfg(tmp_path, *file_line), {}, quiet=True).read_only_mode is expected


def test_a_bad_flag_value_exits_2_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SERVER_JVMFLAGS", "-Dreadonlymode.enabled=yes")
    monkeypatch.delenv("JVMFLAGS", raising=False)
    with pytest.raises(SystemExit) as exit_:
        _config(_cfg(tmp_path), {}, quiet=True)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "(-Dreadonlymode.enabled)" in err and "'yes'" in err
