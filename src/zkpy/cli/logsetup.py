"""Where and how a zkpy server logs: ZooKeeper's ``zookeeper.log.dir`` / ``zookeeper.root.logger``.

``zkpy server`` flags (they win over nothing: zoo.cfg has no logging keys in ZooKeeper either, its
log4j/logback file does that job):

* ``--log-level LEVEL`` the root level (``zookeeper.root.logger``'s level); ``--log-level
  NAME=LEVEL`` (repeatable) a level for one logger and its children, e.g. ``zkpy.election=DEBUG``;
* ``--log-dir DIR`` (``zookeeper.log.dir``) writes ``DIR/zkpy-server.log`` (``--log-file NAME``
  changes the name; an absolute ``--log-file`` needs no ``--log-dir``), rotated by size with the
  standard library's RotatingFileHandler: ``--log-max-bytes`` (default 10 MiB, ZooKeeper's
  ``zookeeper.log.maxfilesize``) and ``--log-backups`` (default 10, ``zookeeper.log.maxbackupindex``);
  with a log file, stderr gets WARN and above only (the log file has everything);
* ``--log-format text|json``: JSON lines (one object a line: ``ts``, ``level``, ``logger``, ``msg``,
  and ``exc`` when there is a traceback) for log shippers.

Bad values raise ``LogSetupError`` with one line to print; nothing is configured until all are valid.
"""

from __future__ import annotations

import datetime
import json
import logging
import logging.handlers
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_LOG_FILE = "zkpy-server.log"
DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_BACKUPS = 10
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LEVELS = ("CRITICAL", "ERROR", "WARNING", "WARN", "INFO", "DEBUG", "TRACE")


class LogSetupError(ValueError):
    """A logging flag with a bad value; the message is one line naming the flag."""


@dataclass(frozen=True, slots=True)
class LogSettings:
    root_level: int = logging.INFO
    levels: tuple[tuple[str, int], ...] = ()  # (logger name, level)
    path: str | None = None  # the log file, absolute; None: stderr only
    max_bytes: int = DEFAULT_MAX_BYTES
    backups: int = DEFAULT_BACKUPS
    json: bool = False


def _level(text: str, flag: str) -> int:
    name = text.strip().upper()
    if name == "WARN":
        name = "WARNING"
    if name == "TRACE":  # log4j's finest level: zkpy's finest is DEBUG
        name = "DEBUG"
    if name not in LEVELS:
        raise LogSetupError(f"{flag}{text}: unknown level (one of CRITICAL, ERROR, WARN, INFO, DEBUG)")
    level = logging.getLevelName(name)
    assert isinstance(level, int)
    return level


def parse_settings(levels: Sequence[str], log_dir: str | None, log_file: str | None, max_bytes: int | None,
                   backups: int | None, fmt: str) -> LogSettings:
    """The flags' values checked and resolved; raises LogSetupError with one line."""
    root = logging.INFO
    per_logger: list[tuple[str, int]] = []
    for text in levels:
        name, sep, value = text.partition("=")
        if sep:
            if not name.strip():
                raise LogSetupError(f"--log-level {text!r}: expected LEVEL or LOGGER=LEVEL")
            per_logger.append((name.strip(), _level(value, f"--log-level {name.strip()}=")))
        else:
            root = _level(text, "--log-level ")
    path: str | None = None
    if log_file is not None and not log_file:
        raise LogSetupError("--log-file is empty")
    if log_dir is not None or (log_file is not None and os.path.isabs(log_file)):
        path = os.path.abspath(os.path.join(log_dir or "", log_file or DEFAULT_LOG_FILE))
    elif log_file is not None:
        raise LogSetupError(f"--log-file {log_file}: a relative name needs --log-dir")
    if max_bytes is not None and max_bytes <= 0:
        raise LogSetupError(f"--log-max-bytes {max_bytes}: must be positive")
    if backups is not None and backups < 0:
        raise LogSetupError(f"--log-backups {backups}: must not be negative")
    if fmt not in ("text", "json"):
        raise LogSetupError(f"--log-format {fmt!r}: must be text or json")
    return LogSettings(root, tuple(per_logger), path, max_bytes or DEFAULT_MAX_BYTES,
                       DEFAULT_BACKUPS if backups is None else backups, fmt == "json")


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``ts`` (UTC, ISO 8601 with ms), ``level``, ``logger``, ``msg`` [, ``exc``]."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "ts": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def configure(settings: LogSettings) -> None:
    """Install the handlers; raises LogSetupError when the log file cannot be opened."""
    formatter: logging.Formatter = JsonFormatter() if settings.json else logging.Formatter(TEXT_FORMAT)
    handlers: list[logging.Handler] = []
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(formatter)
    if settings.path is not None:
        try:
            os.makedirs(os.path.dirname(settings.path), exist_ok=True)
            file_handler = logging.handlers.RotatingFileHandler(
                settings.path, maxBytes=settings.max_bytes, backupCount=settings.backups, encoding="utf-8")
        except OSError as exc:
            raise LogSetupError(f"log file {settings.path}: {exc.strerror or exc} "
                                f"({_errno_name(exc)})") from None
        file_handler.setFormatter(formatter)
        handlers.append(file_handler)
        stderr.setLevel(logging.WARNING)
    handlers.append(stderr)
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        root.addHandler(h)
    root.setLevel(settings.root_level)
    for name, level in settings.levels:
        logging.getLogger(name).setLevel(level)


def _errno_name(exc: OSError) -> str:
    import errno

    return errno.errorcode.get(exc.errno or 0, str(exc.errno))
