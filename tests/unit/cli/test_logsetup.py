"""zkpy server's logging flags: levels per logger, a rotated log file, JSON lines."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from zkpy.cli.logsetup import LogSetupError, configure, parse_settings


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        root.removeHandler(h)
        h.close()
    for h in handlers:
        root.addHandler(h)
    root.setLevel(level)
    for name in ("zkpy.election", "zkpy.test"):
        logging.getLogger(name).setLevel(logging.NOTSET)


def test_levels_root_and_per_logger() -> None:
    s = parse_settings(["warn", "zkpy.election=DEBUG", "zkpy.test=trace"], None, None, None, None, "text")
    assert s.root_level == logging.WARNING
    assert s.levels == (("zkpy.election", logging.DEBUG), ("zkpy.test", logging.DEBUG))
    assert s.path is None


@pytest.mark.parametrize(("args", "problem"), [
    ((["foo"], None, None, None, None, "text"), "--log-level foo: unknown level"),
    ((["=DEBUG"], None, None, None, None, "text"), "expected LEVEL or LOGGER=LEVEL"),
    (([], None, "zk.log", None, None, "text"), "a relative name needs --log-dir"),
    (([], "d", None, 0, None, "text"), "--log-max-bytes 0: must be positive"),
    (([], "d", None, None, -1, "text"), "--log-backups -1: must not be negative"),
    (([], None, None, None, None, "yaml"), "--log-format 'yaml'"),
])
def test_bad_values_are_one_line(args: tuple, problem: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(LogSetupError) as info:
        parse_settings(*args)
    assert problem in str(info.value) and "\n" not in str(info.value)


def test_log_file_rotates_by_size(tmp_path: Path) -> None:
    configure(parse_settings(["zkpy.test=DEBUG"], str(tmp_path / "logs"), None, 2000, 2, "text"))
    log = logging.getLogger("zkpy.test")
    for i in range(200):
        log.debug("line %d %s", i, "x" * 40)
    files = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert files == ["zkpy-server.log", "zkpy-server.log.1", "zkpy-server.log.2"]
    assert all(p.stat().st_size <= 2000 for p in (tmp_path / "logs").iterdir())
    assert "line 199 " in (tmp_path / "logs" / "zkpy-server.log").read_text(encoding="utf-8")


def test_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "server.json"
    configure(parse_settings(["INFO"], None, str(path), None, None, "json"))
    log = logging.getLogger("zkpy.test")
    log.debug("not written at INFO")
    log.info("session 0x%x expired", 0x1234)
    try:
        raise OSError(30, "Read-only file system")
    except OSError:
        log.exception("snapshot failed")
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [r["msg"] for r in records] == ["session 0x1234 expired", "snapshot failed"]
    assert records[0]["level"] == "INFO" and records[0]["logger"] == "zkpy.test" and records[0]["ts"].endswith("+00:00")
    assert "Read-only file system" in records[1]["exc"]


def test_unopenable_log_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("", encoding="utf-8")
    with pytest.raises(LogSetupError, match=r"^log file .*zkpy-server.log: .* \(E[A-Z]+\)$"):
        configure(parse_settings([], str(tmp_path / "f"), None, None, None, "text"))
