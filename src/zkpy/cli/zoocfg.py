"""zoo.cfg parsing: Java properties syntax, ZooKeeper's standalone keys, errors naming key and file."""

from __future__ import annotations

import logging
from dataclasses import fields
from typing import Any

from zkpy.config import ServerConfig

log = logging.getLogger("zkpy.config")


class ConfigError(Exception):
    """A bad configuration: the message names the key and the file."""


_INT_KEYS = {
    "tickTime": "tick_ms",
    "clientPort": "client_port",
    "maxClientCnxns": "max_client_cnxns",
    "minSessionTimeout": "min_session_timeout_ms",
    "maxSessionTimeout": "max_session_timeout_ms",
    "jute.maxbuffer": "max_buffer",
    "znode.container.checkIntervalMs": "container_check_interval_ms",
    "znode.container.maxPerMinute": "container_max_per_minute",
    "snapCount": "snap_count",
    "preAllocSize": "prealloc_kb",
    "autopurge.snapRetainCount": "autopurge_snap_retain_count",
    "autopurge.purgeInterval": "autopurge_purge_interval_h",
}
_STR_KEYS = {
    "dataDir": "data_dir",
    "dataLogDir": "data_log_dir",
    "clientPortAddress": "client_port_address",
    "superDigest": "super_digest",
}
_IGNORED = {  # known ZooKeeper keys that do not apply to a standalone zkpy server yet
    "initLimit", "syncLimit", "admin.enableServer", "admin.serverPort", "standaloneEnabled", "reconfigEnabled",
    "metricsProvider.className", "audit.enable",
}
_FOUR_LETTER = {"ruok", "srvr", "stat", "mntr", "conf", "cons", "crst", "srst", "envi", "wchs", "wchc",
                "wchp", "dump", "dirs", "isro", "gtmk", "stmk", "*"}


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties lines: ``key=value`` or ``key: value``; ``#`` and ``!`` start comments."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for i, ch in enumerate(line):
            if ch in "=:":
                out[line[:i].strip()] = line[i + 1 :].strip()
                break
        else:
            out[line] = ""
    return out


def load_zoo_cfg(path: str) -> ServerConfig:
    try:
        with open(path, encoding="utf-8") as f:
            props = parse_properties(f.read())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    return config_from_properties(props, path)


def config_from_properties(props: dict[str, str], source: str) -> ServerConfig:
    values: dict[str, Any] = {}
    for key, value in props.items():
        if key in _INT_KEYS:
            try:
                number = int(value)
            except ValueError:
                raise ConfigError(f"{source}: {key}={value!r} is not an integer") from None
            if number < 0 and key not in ("minSessionTimeout", "maxSessionTimeout"):
                raise ConfigError(f"{source}: {key}={value} must not be negative")
            values[_INT_KEYS[key]] = number
        elif key in _STR_KEYS:
            if not value:
                raise ConfigError(f"{source}: {key} is empty")
            values[_STR_KEYS[key]] = value
        elif key == "4lw.commands.whitelist":
            words = frozenset(w.strip() for w in value.split(",") if w.strip())
            bad = sorted(words - _FOUR_LETTER)
            if bad:
                raise ConfigError(f"{source}: 4lw.commands.whitelist names unknown command {bad[0]!r}")
            values["four_letter_words"] = words
        elif key == "forceSync":
            if value.lower() not in ("yes", "no"):
                raise ConfigError(f"{source}: forceSync={value!r} must be yes or no")
            values["force_sync"] = value.lower() == "yes"
        elif key in ("extendedTypesEnabled", "zookeeper.extendedTypesEnabled"):
            if value.lower() not in ("true", "false"):
                raise ConfigError(f"{source}: {key}={value!r} must be true or false")
            values["extended_types"] = value.lower() == "true"
        elif key in _IGNORED or key.startswith("server.") or key.startswith("group.") or key.startswith("weight."):
            continue
        else:
            raise ConfigError(f"{source}: unknown key {key!r}")
    if "data_dir" not in values:
        raise ConfigError(f"{source}: dataDir is not set")
    for key, name in (("tickTime", "tick_ms"), ("snapCount", "snap_count"), ("preAllocSize", "prealloc_kb")):
        if values.get(name, 1) == 0:
            raise ConfigError(f"{source}: {key} must be positive")
    if values.get("autopurge_snap_retain_count", 3) < 3:
        log.warning("%s: invalid autopurge.snapRetainCount=%d, using 3 (as ZooKeeper does)", source,
                    values["autopurge_snap_retain_count"])
        values["autopurge_snap_retain_count"] = 3
    known = {f.name for f in fields(ServerConfig)}
    assert set(values) <= known
    cfg = ServerConfig(**values)
    if cfg.min_session_timeout > cfg.max_session_timeout:
        raise ConfigError(f"{source}: minSessionTimeout={cfg.min_session_timeout} is larger than "
                          f"maxSessionTimeout={cfg.max_session_timeout}")
    return cfg
