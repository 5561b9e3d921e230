"""zoo.cfg parsing: Java properties syntax, ZooKeeper's keys, errors naming key and file.

The ensemble keys follow ZooKeeper 3.8 (``QuorumPeerConfig``): ``server.N`` lines of the form
``host:peerPort:electionPort[:participant|observer][;[clientHost:]clientPort]`` (an IPv6 host in
brackets), ``initLimit``, ``syncLimit``, ``peerType``, ``electionAlg``, ``standaloneEnabled`` and
``quorumListenOnAllIPs``, the hierarchical quorum's ``group.G=sid:sid:...`` and ``weight.SID=W``
lines (any key starting with ``group`` or ``weight`` is one, as ZooKeeper reads them; the rules a
group and weight configuration must keep are ``quorum.hierarchical``'s, and what breaks them exits
naming the line and the file), plus this server's id from ``dataDir/myid``. Reading that file is the
only I/O here besides reading zoo.cfg itself: ``config_from_properties`` takes a ``MyidReader``,
so it can be driven with a dict and a fake.

Which keys zkpy honours, which it accepts with one WARN (no effect) and which it refuses is
``zoocfg_keys.KEYS``; the generic readers below are built from it. A key in no row is accepted
with a WARN, as ZooKeeper accepts it. ``dynamicConfigFile`` names the file with the ``server.N``
(``group``, ``weight``) lines, read as ZooKeeper 3.8's ``QuorumPeerConfig`` reads it: those lines
may then not be in zoo.cfg, the dynamic file holds nothing else (no ``version=``: the version is
the file name's hex suffix, ``zoo.cfg.dynamic.100000000``), and a relative path is taken from the
working directory.
"""

from __future__ import annotations

import difflib
import ipaddress
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import fields, replace
from typing import Any

from zkpy.cli.jaas import read_sasl_section
from zkpy.cli.jvmflags import SOURCE as FLAG_SOURCE
from zkpy.cli.jvmflags import FlagSettings
from zkpy.cli.properties import PropertiesError, parse_properties
from zkpy.cli.security_keys import SSL_KEYS_WITHOUT_EFFECT, is_security_key, security_config
from zkpy.cli.zoocfg_keys import ALL_KEYS, KEYS, Treatment, refuses, rule_for
from zkpy.config import LearnerType, QuorumConfig, QuorumServer, ServerConfig
from zkpy.ids import ServerId
from zkpy.quorum.dynconfig import endpoint_clash, parse_server, server_id
from zkpy.quorum.hierarchical import HierarchyError, QuorumHierarchical

log = logging.getLogger("zkpy.config")
_DIGITS = re.compile(r"[0-9]+")

MyidReader = Callable[[str], str | None]
"""Given the path of ``dataDir/myid``: its text, or ``None`` when there is no such file (may raise OSError)."""


class ConfigError(Exception):
    """A bad configuration: the message names the key and the file."""


def _generic(parse: str, quorum: bool) -> dict[str, str]:
    """zoo.cfg key -> field, for the honoured keys read by one generic reader."""
    out = {}
    for key, rule in KEYS.items():
        if rule.treatment is Treatment.HONOURED and rule.parse == parse and rule.field is not None:
            if rule.field.startswith("quorum.") == quorum:
                out[key] = rule.field.removeprefix("quorum.")
    return out


_INT_KEYS = _generic("int", quorum=False)
_STR_KEYS = _generic("str", quorum=False)
_QUORUM_INT_KEYS = _generic("int", quorum=True)
_QUORUM_BOOL_KEYS = _generic("bool", quorum=True)
_QUORUM_STR_KEYS = _generic("str", quorum=True)
PROMETHEUS_PROVIDER = "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider"
DEFAULT_METRICS_PROVIDER = "org.apache.zookeeper.metrics.impl.DefaultMetricsProvider"
_FOUR_LETTER = {"ruok", "srvr", "stat", "mntr", "conf", "cons", "crst", "srst", "envi", "wchs", "wchc",
                "wchp", "dump", "dirs", "isro", "gtmk", "stmk", "*"}


def read_myid_file(path: str) -> str | None:
    """The text of a myid file, or ``None`` when it is not a file (ZooKeeper's test too)."""
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def load_zoo_cfg(path: str, read_myid: MyidReader = read_myid_file, jaas_path: str | None = None,
                 loopback_note: bool = True, flags: FlagSettings | None = None) -> ServerConfig:
    """``jaas_path``: the JAAS file the environment names (``SERVER_JVMFLAGS``/``JVMFLAGS``);
    ``loopback_note``: see ``config_from_properties``; ``flags``: the JVM flags' system
    properties as zoo.cfg lines (``jvmflags``), read with the file's."""
    try:
        with open(path, encoding="utf-8") as f:
            props = parse_properties(f.read())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except PropertiesError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    config = config_from_properties(props, path, read_myid, jaas_path, loopback_note=loopback_note, flags=flags)
    if "dynamicConfigFile" in props and os.path.exists(path + NEXT_DYNAMIC_SUFFIX):
        _warner(path)(path + NEXT_DYNAMIC_SUFFIX, "it holds the configuration of a reconfig in progress; zkpy does "
                      "not read it: a reconfig whose txn is in the log is completed from the log (/zookeeper/config) "
                      "by the next leader; the server list is dynamicConfigFile's")
    if config.quorum is not None:
        config = replace(config, quorum=replace(config.quorum, static_path=os.path.abspath(path)))
    return config


NEXT_DYNAMIC_SUFFIX = ".dynamic.next"
"""ZooKeeper keeps a proposed (not yet committed) server list beside zoo.cfg under this suffix."""


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _no_myid(path: str) -> str | None:
    return None


def _int(source: str, key: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"{source}: {key}={value!r} is not an integer") from None
    if number < 0 and key not in ("minSessionTimeout", "maxSessionTimeout"):
        raise ConfigError(f"{source}: {key}={value} must not be negative")
    if key.endswith("Port") and number > 65535:
        raise ConfigError(f"{source}: {key}={value} is out of range (0-65535)")
    return number


MAX_SERVER_WORKERS = 256


def server_workers(source: str, key: str, value: str) -> int:
    """serverWorkers: a count of serving processes, 1 to MAX_SERVER_WORKERS, or ``auto`` (one per
    CPU this process may run on)."""
    if value.strip().lower() == "auto":
        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"{source}: {key}={value!r} must be a number of processes or auto") from None
    if not 1 <= number <= MAX_SERVER_WORKERS:
        raise ConfigError(f"{source}: {key}={value} must be between 1 and {MAX_SERVER_WORKERS} (or auto)")
    return number


def _bool(source: str, key: str, value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise ConfigError(f"{source}: {key}={value!r} must be true or false")
    return value.lower() == "true"


def config_from_properties(props: dict[str, str], source: str, read_myid: MyidReader = _no_myid,
                           jaas_path: str | None = None, read_file: Callable[[str], str] = _read_text,
                           loopback_note: bool = True, flags: FlagSettings | None = None) -> ServerConfig:
    """A ServerConfig from zoo.cfg's properties; ``source`` names the file in errors. ``read_myid``
    reads ``dataDir/myid`` (the default finds none: pass ``read_myid_file`` for the real one);
    ``jaas_path`` is the JAAS file the environment names, if any; ``read_file`` reads the
    ``dynamicConfigFile``. With ``loopback_note``, a config without a client address says in one
    line that zkpy listens on loopback only (the caller passes False when a flag sets the address).
    ``flags``: the JVM flags' system properties as zoo.cfg lines, read as the file's and named as
    flags in errors and WARNs."""
    file_props = props
    from_flags: dict[str, str] = {}  # zoo.cfg key -> the flag it came from
    if flags is not None:
        props = flags.merged_with(file_props)
        from_flags = flags.taken(file_props)
        for name in flags.without_effect:
            log.warning("%s: -D%s has no effect (ZooKeeper reads %s from zoo.cfg only)", FLAG_SOURCE, name,
                        name.removeprefix("zookeeper."))
    values: dict[str, Any] = {}
    quorum_values: dict[str, Any] = {}
    servers: dict[ServerId, tuple[str, QuorumServer]] = {}
    hierarchy = _Hierarchy(source)
    warn = _warner(source, from_flags)
    dynamic = props.get("dynamicConfigFile")
    if dynamic is not None:
        for key in props:
            if key.startswith(("server.", "group", "weight")):
                raise ConfigError(f"{source}: {key}: with dynamicConfigFile set, the server.N, group and weight "
                                  "lines must be in the dynamic config file (as ZooKeeper requires)")
        dynamic_source, dynamic_props, quorum_values["config_version"] = _read_dynamic(source, dynamic, read_file)
        if quorum_values["config_version"]:
            log.info("%s: configuration version 0x%x (from the file name)", dynamic_source,
                     quorum_values["config_version"])
        hierarchy.source = dynamic_source
        for key, value in dynamic_props.items():
            if key.startswith("server."):
                _add_server(dynamic_source, key, value, servers)
            else:
                hierarchy.add(key, value)  # _read_dynamic let through only server, group and weight lines
    autocreate = True
    for key, value in props.items():
        where = f"{FLAG_SOURCE} (-D{from_flags[key]})" if key in from_flags else source
        if key in _INT_KEYS:
            values[_INT_KEYS[key]] = _int(where, key, value)
        elif key in _QUORUM_INT_KEYS:
            quorum_values[_QUORUM_INT_KEYS[key]] = _int(where, key, value)
            if key == "electionAlg" and quorum_values["election_alg"] != 3:
                raise ConfigError(f"{where}: electionAlg={value}: only 3 (fast leader election) is supported")
        elif key in _QUORUM_BOOL_KEYS:
            quorum_values[_QUORUM_BOOL_KEYS[key]] = _bool(where, key, value)
        elif key in _QUORUM_STR_KEYS:
            if not value:
                raise ConfigError(f"{where}: {key} is empty")
            quorum_values[_QUORUM_STR_KEYS[key]] = value
        elif key == "peerType":
            if value.lower() not in ("participant", "observer"):
                raise ConfigError(f"{where}: peerType={value!r} must be participant or observer")
            quorum_values["peer_type"] = LearnerType(value.lower())
        elif key.startswith("server."):
            _add_server(where, key, value, servers)
        elif key.startswith(("group", "weight")):
            hierarchy.add(key, value)
        elif key in _STR_KEYS:
            if not value:
                raise ConfigError(f"{where}: {key} is empty")
            values[_STR_KEYS[key]] = value
        elif key == "4lw.commands.whitelist":
            words = frozenset(w.strip() for w in value.split(",") if w.strip())
            bad = sorted(words - _FOUR_LETTER)
            if bad:
                raise ConfigError(f"{where}: 4lw.commands.whitelist names unknown command {bad[0]!r}")
            values["four_letter_words"] = words
        elif key == "forceSync":
            if value.lower() not in ("yes", "no"):
                raise ConfigError(f"{where}: forceSync={value!r} must be yes or no")
            values["force_sync"] = value.lower() == "yes"
        elif key in ("extendedTypesEnabled", "zookeeper.extendedTypesEnabled"):
            values["extended_types"] = _bool(where, key, value)
        elif key in ("enforceQuota", "zookeeper.enforceQuota"):
            values["enforce_quota"] = _bool(where, key, value)
        elif key == "reconfigEnabled":
            values["reconfig_enabled"] = _bool(where, key, value)
        elif key in ("admin.enableServer", "admin.forceHttps"):
            values["admin_enabled" if key == "admin.enableServer" else "admin_force_https"] = _bool(where, key, value)
        elif key == "metricsProvider.className":
            if value not in (PROMETHEUS_PROVIDER, DEFAULT_METRICS_PROVIDER):
                raise ConfigError(f"{where}: metricsProvider.className={value}: zkpy provides "
                                  f"{PROMETHEUS_PROVIDER} (or {DEFAULT_METRICS_PROVIDER}, no metrics)")
            values["metrics_prometheus"] = value == PROMETHEUS_PROVIDER
        elif key == "readonlymode.enabled":
            values["read_only_mode"] = _bool(where, key, value)
        elif key == "serverWorkers":
            values["server_workers"] = server_workers(where, key, value)
        elif key == "metricsProvider.exportJvmInfo":
            values["metrics_export_jvm_info"] = _bool(where, key, value)
        elif key == "DigestAuthenticationProvider.superDigest":
            if not value:
                raise ConfigError(f"{where}: {key} is empty")
            values["super_digest"] = value
        elif key == "datadir.autocreate":
            autocreate = _bool(where, key, value)
        elif key == "dynamicConfigFile":
            continue  # read above
        elif is_security_key(key) or key in SSL_KEYS_WITHOUT_EFFECT:
            continue  # security_keys reads them all below
        else:
            _check_rule(where, key, value, warn)
    if "data_dir" not in values:
        raise ConfigError(f"{source}: dataDir is not set")
    if not autocreate:
        for key, name in (("dataDir", "data_dir"), ("dataLogDir", "data_log_dir")):
            if name in values and not os.path.isdir(values[name]):
                raise ConfigError(f"{source}: {key}={values[name]} does not exist, and datadir.autocreate=false "
                                  "forbids creating it")
    for key, name in (("tickTime", "tick_ms"), ("snapCount", "snap_count"), ("preAllocSize", "prealloc_kb")):
        if values.get(name, 1) == 0:
            raise ConfigError(f"{source}: {key} must be positive")
    if values.get("autopurge_snap_retain_count", 3) < 3:
        log.warning("%s: invalid autopurge.snapRetainCount=%d, using 3 (as ZooKeeper does)", source,
                    values["autopurge_snap_retain_count"])
        values["autopurge_snap_retain_count"] = 3
    if servers:
        quorum_values["groups"], quorum_values["weights"] = hierarchy.lines()
        hierarchy.check([s for _, s in servers.values()])  # before myid, as ZooKeeper checks them
        quorum = _quorum_config(source, props, values, quorum_values, [s for _, s in servers.values()], read_myid)
        values["quorum"] = quorum
        if quorum.is_ensemble:
            assert quorum.my_id is not None
            values["server_id"] = quorum.my_id
    elif quorum_values.get("standalone_enabled") is False:
        raise ConfigError(f"{source}: standaloneEnabled=false needs server.N lines with at least one participant")
    elif hierarchy.keys:
        raise ConfigError(f"{hierarchy.source}: {hierarchy.keys[0]}: group and weight lines need server.N lines")
    if quorum_values.get("local_sessions") and not (servers and values["quorum"].is_ensemble):
        log.warning("%s: localSessionsEnabled has no effect on a standalone server: its sessions are all global, "
                    "as in ZooKeeper 3.8", source)
    try:
        values.update(security_config(props, warn, _read_text, read_sasl_section, jaas_path))
        if "secure_client_port" in values and "client_port" not in values:
            values["client_port_enabled"] = False  # as ZooKeeper: only the TLS port listens
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    values.setdefault("admin_enabled", True)  # a zoo.cfg's AdminServer is on unless turned off, as ZooKeeper's
    values["initial_configuration"] = "".join(  # the initial_configuration command; passwords masked
        f"{k}={'********' if 'password' in k.lower() else v}\n" for k, v in file_props.items())
    known = {f.name for f in fields(ServerConfig)}
    assert set(values) <= known
    cfg = ServerConfig(**values)
    if cfg.min_session_timeout > cfg.max_session_timeout:
        raise ConfigError(f"{source}: minSessionTimeout={cfg.min_session_timeout} is larger than "
                          f"maxSessionTimeout={cfg.max_session_timeout}")
    if loopback_note and "client_port_address" not in values:
        log.warning("%s: clientPortAddress is not set: zkpy listens on 127.0.0.1 only, where ZooKeeper would "
                    "listen on every address; set clientPortAddress (e.g. 0.0.0.0) for remote clients", source)
    return cfg


def _warner(source: str, from_flags: Mapping[str, str] | None = None) -> Callable[[str, str], None]:
    """The one WARN line for a key without effect, naming where it was given (``from_flags``:
    zoo.cfg key -> the JVM flag it came from)."""
    def warn(key: str, why: str) -> None:
        if from_flags and key in from_flags:
            log.warning("%s: -D%s has no effect in zkpy: %s", FLAG_SOURCE, from_flags[key], why)
        else:
            log.warning("%s: %s has no effect in zkpy: %s", source, key, why)

    return warn


_SUGGESTED = [name for name in ALL_KEYS if not name.endswith((".N", ".*"))]  # "did you mean", for unknown keys


def _check_rule(source: str, key: str, value: str, warn: Callable[[str, str], None]) -> None:
    """A key zoocfg does not read: refused, accepted with one WARN, or (asking for what zkpy does
    anyway) accepted silently, as ``zoocfg_keys`` says; a key in no row is accepted with a WARN."""
    found = rule_for(key)
    if found is None:
        close = difflib.get_close_matches(key, _SUGGESTED, n=1, cutoff=0.8)
        guess = f"did you mean {close[0]}? " if close else ""
        warn(key, f"{guess}zkpy does not know it (ZooKeeper 3.8 would set the system property zookeeper.{key})")
        return
    name, rule = found
    if rule.treatment is Treatment.REFUSED:
        if refuses(rule, value):
            raise ConfigError(f"{source}: {key}={value}: refused: {rule.detail}")
    elif rule.treatment is Treatment.NO_EFFECT:
        if value.strip().lower() not in rule.same:
            warn(key, rule.detail)
    else:
        raise AssertionError(f"zoocfg_keys says zkpy honours {name}, but zoocfg does not read {key}")


class _Hierarchy:
    """The group and weight lines of one config, read as ZooKeeper's QuorumHierarchical reads them:
    ``group.G=sid:sid:...`` and ``weight.SID=W``, numbers in decimal. ``source`` is the file they
    are in (zoo.cfg, or the dynamic config file)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.keys: list[str] = []
        self._groups: dict[int, tuple[str, tuple[int, ...]]] = {}
        self._weights: dict[int, tuple[str, int]] = {}

    def _number(self, key: str, value: str, text: str, what: str) -> int:
        if not _DIGITS.fullmatch(text):
            raise ConfigError(f"{self.source}: {key}={value}: {what} {text!r} is not a number")
        return int(text)

    def add(self, key: str, value: str) -> None:
        self.keys.append(key)
        kind, dot, suffix = key.partition(".")
        if kind not in ("group", "weight") or not dot:
            raise ConfigError(f"{self.source}: {key}={value}: expected group.G=sid:sid:... or weight.SID=W")
        if kind == "group":
            gid = self._number(key, value, suffix, "group id")
            parts = value.split(":")
            while len(parts) > 1 and not parts[-1]:
                parts.pop()  # Java's String.split drops trailing empty strings
            sids = tuple(self._number(key, value, part, "server id") for part in parts)
            if gid in self._groups:
                raise ConfigError(f"{self.source}: {key} and {self._groups[gid][0]} both name group {gid}")
            self._groups[gid] = (key, sids)
        else:
            sid = self._number(key, value, suffix, "server id")
            text = value.strip()
            if text.startswith("-") and _DIGITS.fullmatch(text[1:]):
                raise ConfigError(f"{self.source}: {key}={value}: a weight must not be negative")
            weight = self._number(key, value, text, "weight")
            if sid in self._weights:
                raise ConfigError(f"{self.source}: {key} and {self._weights[sid][0]} both weigh server {sid}")
            self._weights[sid] = (key, weight)

    def lines(self) -> tuple[tuple[tuple[int, tuple[int, ...]], ...], tuple[tuple[int, int], ...]]:
        """QuorumConfig's ``groups`` and ``weights``."""
        return (tuple((gid, sids) for gid, (_, sids) in sorted(self._groups.items())),
                tuple((sid, w) for sid, (_, w) in sorted(self._weights.items())))

    def check(self, servers: list[QuorumServer]) -> None:
        """Refuse what ZooKeeper would not run (naming the line); WARN about lines that do not do
        what they seem to."""
        groups, weights = self.lines()
        quorum = QuorumConfig(tuple(sorted(servers, key=lambda s: s.sid)), groups=groups, weights=weights)
        if not quorum.hierarchical:
            return
        try:
            verifier = QuorumHierarchical.of_config(quorum)
        except HierarchyError as exc:
            raise ConfigError(f"{self.source}: {self._written(exc.key)}: {exc.message}") from None
        for key, why in verifier.oddities():
            log.warning("%s: %s: %s", self.source, self._written(key), why)

    def _written(self, key: str) -> str:
        """A key as the file spells it (``group.01`` for the ``group.1`` the verifier names)."""
        kind, _, number = key.partition(".")
        table: dict[int, Any] = self._groups if kind == "group" else self._weights if kind == "weight" else {}
        found = table.get(int(number)) if number.isdigit() else None
        return found[0] if found is not None else key


def _add_server(source: str, key: str, value: str, servers: dict[ServerId, tuple[str, QuorumServer]]) -> None:
    server = _parse_server(source, key, value)
    if server.sid in servers:
        raise ConfigError(f"{source}: {key} and {servers[server.sid][0]} both name server id {server.sid}")
    servers[server.sid] = (key, server)


def _version_from_name(path: str) -> int:
    """The config version a dynamic file's name ends in (``zoo.cfg.dynamic.100000000``: hex), 0 without one."""
    suffix = path.rsplit(".", 1)[-1] if "." in os.path.basename(path) else ""
    try:
        return int(suffix, 16)
    except ValueError:
        return 0


def _read_dynamic(source: str, path: str, read_file: Callable[[str], str]) -> tuple[str, dict[str, str], int]:
    """The dynamic config file's name (for messages), its lines and its version. A relative path is
    taken from the working directory, as ZooKeeper opens it."""
    full = os.path.abspath(path)
    try:
        props = parse_properties(read_file(full))
    except OSError as exc:
        raise ConfigError(f"{source}: dynamicConfigFile={path}: cannot read {full}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, PropertiesError) as exc:
        raise ConfigError(f"{source}: dynamicConfigFile={path}: {full}: {exc}") from None
    for key in props:
        if key == "version":
            raise ConfigError(f"{full}: version must not be in the dynamic config file: ZooKeeper takes it from "
                              "the file name (zoo.cfg.dynamic.<hex version>)")
        if not key.startswith(("server.", "group", "weight")):
            raise ConfigError(f"{full}: {key}: a dynamic config file holds only server.N, group and weight lines")
    return full, props, _version_from_name(full)


def _parse_server(source: str, key: str, value: str) -> QuorumServer:
    """One ``server.N`` line, as ZooKeeper 3.8's ``QuorumServer`` reads it (``quorum.dynconfig``)."""
    try:
        sid = server_id(key)
    except ValueError as exc:
        raise ConfigError(f"{source}: {key}: {exc}") from None
    try:
        return parse_server(sid, value)
    except ValueError as exc:
        raise ConfigError(f"{source}: {key}={value}: {exc}") from None


def _same_host(a: str, b: str) -> bool:
    try:
        return ipaddress.ip_address(a) == ipaddress.ip_address(b)
    except ValueError:
        return a.lower() == b.lower()


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _check_distinct_endpoints(source: str, servers: list[QuorumServer]) -> None:
    """No two listeners of the ensemble share a host and port. ZooKeeper 3.8 refuses only a line
    whose peer and election ports are equal (and checks the rest on reconfig); a config that binds
    one address twice can never run, so zkpy refuses it up front (``dynconfig.endpoint_clash``)."""
    clash = endpoint_clash(servers)
    if clash is not None:
        raise ConfigError(f"{source}: {clash}")


def _quorum_config(source: str, props: dict[str, str], values: dict[str, Any], quorum_values: dict[str, Any],
                   servers: list[QuorumServer], read_myid: MyidReader) -> QuorumConfig:
    """The ensemble part of the config, checked in ZooKeeper 3.8's order: membership, myid, client
    address, peer type, then what an ensemble needs. Fills in this server's client address."""
    quorum = QuorumConfig(tuple(sorted(servers, key=lambda s: s.sid)), **quorum_values)
    n_participants, n_observers = len(quorum.participants), len(quorum.observers)
    if n_participants == 0:
        if not quorum.standalone_enabled:
            raise ConfigError(f"{source}: standaloneEnabled=false needs at least one participant server.N line")
        raise ConfigError(f"{source}: server.N lines list {n_observers} observer(s) and no participant")
    if n_participants == 1 and quorum.standalone_enabled and n_observers:
        raise ConfigError(f"{source}: server.N lines list observers but one participant, and standaloneEnabled=true "
                          "runs that one standalone: observers need an ensemble")
    _check_distinct_endpoints(source, servers)

    myid_path = os.path.join(values["data_dir"], "myid")
    try:
        text = read_myid(myid_path)
    except OSError as exc:
        raise ConfigError(f"{source}: dataDir: cannot read myid file {myid_path}: {exc.strerror or exc}") from None
    my_id: ServerId | None = None
    if text is not None:  # ZooKeeper reads the first line, and refuses a bad one even standalone
        first = text.splitlines()[0].strip() if text.strip() else ""
        if not _DIGITS.fullmatch(first):
            raise ConfigError(f"{source}: dataDir: myid file {myid_path} holds {first!r}, not a server id")
        my_id = ServerId(int(first))
    me = quorum.server(my_id) if my_id is not None else None

    if me is not None and me.client_port is not None:
        static_port = values.get("client_port", 0)
        static_host = props.get("clientPortAddress")
        line_host = me.client_host or "0.0.0.0"
        if static_port != 0:
            if static_host is not None and not _is_wildcard(static_host):
                agree = _same_host(static_host, line_host) and static_port == me.client_port
                static = f"clientPortAddress={static_host} and clientPort={static_port}"
            else:
                agree = static_port == me.client_port
                static = f"clientPort={static_port}"
            if not agree:
                raise ConfigError(f"{source}: {static} do not match server.{me.sid}'s client address "
                                  f"{line_host}:{me.client_port}")
        values["client_port"] = me.client_port
        if me.client_host is not None:
            values["client_port_address"] = me.client_host

    role = me.role if me is not None else LearnerType.PARTICIPANT
    if role is not quorum.peer_type:
        log.warning("%s: peerType=%s but the server list makes this server a %s; using the server list "
                    "(as ZooKeeper does)", source, quorum.peer_type.value, role.value)
    quorum = replace(quorum, my_id=my_id, peer_type=role)

    if quorum.is_ensemble:
        if quorum.init_limit_ticks == 0:
            raise ConfigError(f"{source}: initLimit is not set; an ensemble needs it")
        if quorum.sync_limit_ticks == 0:
            raise ConfigError(f"{source}: syncLimit is not set; an ensemble needs it")
        if my_id is None:
            raise ConfigError(f"{source}: dataDir: myid file is missing: {myid_path} must hold this server's id "
                              "in an ensemble")
        if me is None:
            raise ConfigError(f"{source}: myid {my_id} (from {myid_path}) is not among the server.N lines")
    elif len(servers) == 1:
        log.info("%s: one server line and standaloneEnabled=true: running standalone (as ZooKeeper does)", source)
    return quorum
