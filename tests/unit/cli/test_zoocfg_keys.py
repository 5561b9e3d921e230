"""zoo.cfg as ZooKeeper 3.8 reads it: every key is honoured, accepted with one WARN, or refused,
as ``zoocfg_keys`` says; unknown keys are accepted with a WARN; ``dynamicConfigFile`` is read;
the README lists exactly the table."""

from __future__ import annotations

import logging
import os
import string
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

import pytest

from zkpy.cli.properties import parse_properties
from zkpy.cli.security_keys import SSL_KEYS_WITHOUT_EFFECT, is_security_key
from zkpy.cli.zoocfg import ConfigError, MyidReader, config_from_properties, load_zoo_cfg
from zkpy.cli.zoocfg_keys import (
    ALL_KEYS,
    ALSO,
    KEYS,
    README_BEGIN,
    README_END,
    SECURITY_KEYS,
    Treatment,
    readme_section,
    rows,
    rule_for,
)
from zkpy.config import LearnerType, QuorumConfig, ServerConfig

SOURCE = "/etc/zk/zoo.cfg"
ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"


def parse(props: dict[str, str], myid: MyidReader | None = None, **kw: object) -> ServerConfig:
    base = {"dataDir": "/data", "clientPortAddress": "127.0.0.1"}
    if myid is None:
        return config_from_properties({**base, **props}, SOURCE, **kw)  # type: ignore[arg-type]
    return config_from_properties({**base, **props}, SOURCE, myid, **kw)  # type: ignore[arg-type]


def warned(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def warn_lines_naming(caplog: pytest.LogCaptureFixture, key: str) -> list[str]:
    return [m for m in warned(caplog) if m.startswith(f"{SOURCE}: {key} has no effect in zkpy: ")]


def refusal(props: dict[str, str], source: str = SOURCE, **kw: object) -> str:
    with pytest.raises(ConfigError) as info:
        parse(props, **kw)  # type: ignore[arg-type]
    message = str(info.value)
    assert message.startswith(f"{source}: "), message
    return message


def sample_name(name: str) -> str:
    """A zoo.cfg key for a row (``server.N`` -> ``server.7``)."""
    if name.endswith(".N"):
        return name[:-1] + "7"
    if name.endswith(".*"):
        return name[:-1] + "someSetting"
    return name


# --- the table itself ---------------------------------------------------------------------------

def test_every_honoured_field_exists_in_the_config() -> None:
    server_fields = {f.name for f in fields(ServerConfig)}
    quorum_fields = {f.name for f in fields(QuorumConfig)}
    for name, rule in rows(Treatment.HONOURED):
        if rule.field is None:
            continue
        if rule.field.startswith("quorum."):
            assert rule.field.removeprefix("quorum.") in quorum_fields, name
        else:
            assert rule.field in server_fields, name


def test_the_table_and_security_keys_agree_on_who_reads_what() -> None:
    """zoocfg hands every security key to security_keys before it looks at the table: a row of
    KEYS that security_keys claims would never be reached, and a security row it does not claim
    would be warned about as unknown."""
    for name in KEYS:
        key = sample_name(name)
        assert not is_security_key(key) and key not in SSL_KEYS_WITHOUT_EFFECT, name
    for name in SECURITY_KEYS:
        key = sample_name(name)
        assert is_security_key(key) or key in SSL_KEYS_WITHOUT_EFFECT, name


def test_rows_match_their_zoo_cfg_spellings() -> None:
    assert rule_for("server.12") == ("server.N", ALL_KEYS["server.N"])
    assert rule_for("group.a") == ("group.N", ALL_KEYS["group.N"])
    assert rule_for("metricsProvider.numWorkerThreads") == ("metricsProvider.*", ALL_KEYS["metricsProvider.*"])
    # a property the guide names zookeeper.X is the zoo.cfg line X
    found = rule_for("nio.numSelectorThreads")
    assert found is not None and found[0] == "zookeeper.nio.numSelectorThreads"
    assert rule_for("noSuchKey") is None


# --- honoured keys ------------------------------------------------------------------------------

HONOURED_SAMPLES: dict[str, tuple[str, str, object]] = {
    # row: (value, field, expected) -- field "quorum.x" is QuorumConfig's x
    "clientPort": ("2999", "client_port", 2999),
    "dataDir": ("/srv/zk", "data_dir", "/srv/zk"),
    "tickTime": ("500", "tick_ms", 500),
    "dataLogDir": ("/srv/zklog", "data_log_dir", "/srv/zklog"),
    "clientPortAddress": ("0.0.0.0", "client_port_address", "0.0.0.0"),
    "maxClientCnxns": ("7", "max_client_cnxns", 7),
    "minSessionTimeout": ("1000", "min_session_timeout_ms", 1000),
    "maxSessionTimeout": ("90000", "max_session_timeout_ms", 90000),
    "preAllocSize": ("1024", "prealloc_kb", 1024),
    "snapCount": ("10", "snap_count", 10),
    "autopurge.snapRetainCount": ("5", "autopurge_snap_retain_count", 5),
    "autopurge.purgeInterval": ("2", "autopurge_purge_interval_h", 2),
    "jute.maxbuffer": ("4096", "max_buffer", 4096),
    "znode.container.checkIntervalMs": ("100", "container_check_interval_ms", 100),
    "znode.container.maxPerMinute": ("9", "container_max_per_minute", 9),
    "extendedTypesEnabled": ("true", "extended_types", True),
    "zookeeper.extendedTypesEnabled": ("true", "extended_types", True),
    "enforceQuota": ("true", "enforce_quota", True),
    "zookeeper.enforceQuota": ("TRUE", "enforce_quota", True),
    "forceSync": ("no", "force_sync", False),
    "4lw.commands.whitelist": ("ruok, mntr", "four_letter_words", frozenset({"ruok", "mntr"})),
    "superDigest": ("super:abc=", "super_digest", "super:abc="),
    "DigestAuthenticationProvider.superDigest": ("super:xyz=", "super_digest", "super:xyz="),
    "datadir.autocreate": ("true", "data_dir", "/data"),
    "initLimit": ("10", "quorum.init_limit_ticks", 10),
    "syncLimit": ("5", "quorum.sync_limit_ticks", 5),
    "electionAlg": ("3", "quorum.election_alg", 3),
    "cnxTimeout": ("700", "quorum.cnx_timeout_ms", 700),
    "peerType": ("participant", "quorum.peer_type", LearnerType.PARTICIPANT),
    "standaloneEnabled": ("false", "quorum.standalone_enabled", False),
    "quorumListenOnAllIPs": ("true", "quorum.quorum_listen_on_all_ips", True),
    "reconfigEnabled": ("true", "reconfig_enabled", True),
    "zkpy.quorumSync": ("true", "quorum.quorum_sync", True),
    "zkpy.quorumBindAddress": ("127.0.0.2", "quorum.bind_host", "127.0.0.2"),
    "localSessionsEnabled": ("true", "quorum.local_sessions", True),
    "localSessionsUpgradingEnabled": ("true", "quorum.local_sessions_upgrading", True),
    "admin.enableServer": ("false", "admin_enabled", False),
    "admin.serverAddress": ("0.0.0.0", "admin_address", "0.0.0.0"),
    "admin.serverPort": ("9090", "admin_port", 9090),
    "admin.idleTimeout": ("5000", "admin_idle_timeout_ms", 5000),
    "admin.commandURL": ("/zk", "admin_command_url", "/zk"),
    "admin.forceHttps": ("true", "admin_force_https", True),
    "metricsProvider.className": ("org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider",
                                  "metrics_prometheus", True),
    "metricsProvider.httpHost": ("0.0.0.0", "metrics_http_host", "0.0.0.0"),
    "metricsProvider.httpPort": ("7001", "metrics_http_port", 7001),
    "metricsProvider.exportJvmInfo": ("false", "metrics_export_jvm_info", False),
    "readonlymode.enabled": ("true", "read_only_mode", True),
    "serverWorkers": ("2", "server_workers", 2),  # an ensemble's sample; a standalone's: below
}
THREE = {"server.1": "127.0.0.1:2888:3888", "server.2": "127.0.0.1:2889:3889", "server.3": "127.0.0.1:2890:3890",
         "initLimit": "10", "syncLimit": "5"}
ONLY_WITH_SERVERS = {"server.N", "dynamicConfigFile", "group.N", "weight.N"}  # group/weight: test_zoocfg_hierarchy


def myid(text: str | None) -> MyidReader:
    return lambda path: text


def test_every_honoured_row_has_a_sample_here() -> None:
    """A row added to the table without a test here fails: each honoured key is shown to be read."""
    names = {name for name, rule in rows(Treatment.HONOURED) if not rule.security}
    assert names - ONLY_WITH_SERVERS == set(HONOURED_SAMPLES)


@pytest.mark.parametrize("key", sorted(HONOURED_SAMPLES))
def test_an_honoured_key_sets_its_field_without_a_warning(key: str, caplog: pytest.LogCaptureFixture) -> None:
    value, field, expected = HONOURED_SAMPLES[key]
    with caplog.at_level(logging.WARNING, logger="zkpy.config"):
        cfg = parse({**THREE, key: value}, myid("1"))
    assert warned(caplog) == []
    target: object = cfg.quorum if field.startswith("quorum.") else cfg
    assert getattr(target, field.removeprefix("quorum.")) == expected


@pytest.mark.parametrize(("key", "value"), [
    ("tickTime", "fast"), ("clientPort", "-3"), ("snapCount", "0"), ("forceSync", "maybe"),
    ("extendedTypesEnabled", "maybe"), ("enforceQuota", "yes"), ("datadir.autocreate", "perhaps"), ("initLimit", "x"),
    ("standaloneEnabled", "sometimes"), ("4lw.commands.whitelist", "rmrf"), ("electionAlg", "1"),
    ("DigestAuthenticationProvider.superDigest", ""), ("peerType", "leader"), ("readonlymode.enabled", "yes"),
])
def test_a_bad_value_of_an_honoured_key_is_refused_naming_key_and_file(key: str, value: str) -> None:
    assert key in refusal({key: value})


def test_datadir_autocreate_false_refuses_a_missing_data_dir(tmp_path: Path) -> None:
    message = refusal({"dataDir": str(tmp_path / "gone"), "datadir.autocreate": "false"})
    assert "dataDir" in message and "datadir.autocreate" in message
    message = refusal({"dataDir": str(tmp_path), "dataLogDir": str(tmp_path / "gone"),
                       "datadir.autocreate": "false"})
    assert "dataLogDir" in message
    assert parse({"dataDir": str(tmp_path), "datadir.autocreate": "false"}).data_dir == str(tmp_path)


# --- accepted without effect: one WARN, or none for zkpy's own behaviour ----------------------

NO_EFFECT = [name for name, rule in rows(Treatment.NO_EFFECT) if not rule.security]


def some_other_value(name: str) -> str:
    same = ALL_KEYS[name].same
    for value in ("true", "42", "yes", "gz", "x"):
        if value not in same:
            return value
    raise AssertionError(name)


@pytest.mark.parametrize("name", NO_EFFECT)
def test_a_key_without_effect_gets_one_warning_naming_it_and_why(name: str,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    key = sample_name(name)
    with caplog.at_level(logging.WARNING, logger="zkpy.config"):
        parse({key: some_other_value(name)})
    lines = warn_lines_naming(caplog, key)
    assert lines == [f"{SOURCE}: {key} has no effect in zkpy: {ALL_KEYS[name].detail}"]
    assert len(warned(caplog)) == 1


@pytest.mark.parametrize(("key", "value"), [
    (key, value) for key, rule in KEYS.items() if rule.treatment is Treatment.NO_EFFECT for value in rule.same
])
def test_a_value_asking_for_what_zkpy_does_anyway_is_accepted_silently(key: str, value: str,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="zkpy.config"):
        parse({key: value})
    assert warned(caplog) == []


def test_reconfig_enabled_is_honoured_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="zkpy.config"):
        parse({"reconfigEnabled": "true"})
    assert warn_lines_naming(caplog, "reconfigEnabled") == []


def test_a_bad_reconfig_enabled_names_the_key() -> None:
    with pytest.raises(ConfigError, match="reconfigEnabled"):
        parse({"reconfigEnabled": "sometimes"})


def test_a_property_name_without_its_zookeeper_prefix_gets_its_rows_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="zkpy.config"):
        parse({"nio.numSelectorThreads": "4"})
    assert warn_lines_naming(caplog, "nio.numSelectorThreads") == [
        f"{SOURCE}: nio.numSelectorThreads has no effect in zkpy: "
        f"{ALL_KEYS['zookeeper.nio.numSelectorThreads'].detail}"]


@pytest.mark.parametrize(("alias", "name"), [("connection_throttle_tokens", "connectionMaxTokens"),
                                           ("leader.maxConcurrentSnapSyncs", "maxConcurrentSnapSyncs")])
def test_the_spelling_of_the_property_zookeeper_reads_gets_its_rows_warning(
        alias: str, name: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="zkpy.config"):
        parse({alias: "5"})
    assert warn_lines_naming(caplog, alias) == [f"{SOURCE}: {alias} has no effect in zkpy: {ALL_KEYS[name].detail}"]


def test_every_alias_belongs_to_a_row() -> None:
    assert set(ALSO) <= set(KEYS)
    assert not {alias for aliases in ALSO.values() for alias in aliases} & set(ALL_KEYS)


def test_an_unknown_key_is_accepted_with_one_warning_as_zookeeper_accepts_it(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="zkpy.config"):
        cfg = parse({"noSuchKey": "1", "tickTime": "1000"})
    assert cfg.tick_ms == 1000
    [line] = warned(caplog)
    assert line.startswith(f"{SOURCE}: noSuchKey has no effect in zkpy: ")
    assert "zookeeper.noSuchKey" in line


# --- refused: safety is never silently ignored --------------------------------------------------

@pytest.mark.parametrize(("key", "value", "reason"), [
    ("oraclePath", "/tmp/oracle", "quorum"),
    ("skipACL", "yes", "ACL"),
    ("db.autocreate", "false", "acknowledged"),
    ("emulate353TTLNodes", "true", "3.5.3"),
    ("DigestAuthenticationProvider.enabled", "false", "digest"),
    ("DigestAuthenticationProvider.digestAlg", "SHA-256", "SHA1"),
])
def test_a_key_that_changes_safety_is_refused_with_the_reason(key: str, value: str, reason: str) -> None:
    message = refusal({key: value})
    assert key in message and reason in message


@pytest.mark.parametrize(("key", "value"), [
    ("skipACL", "no"), ("skipACL", "false"), ("db.autocreate", "true"), ("emulate353TTLNodes", "false"),
    ("DigestAuthenticationProvider.enabled", "true"), ("DigestAuthenticationProvider.digestAlg", "SHA1"),
])
def test_a_safety_key_asking_for_what_zkpy_does_is_accepted_silently(key: str, value: str,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="zkpy.config"):
        parse({key: value})
    assert warned(caplog) == []


def test_several_addresses_on_a_server_line_name_multi_address() -> None:
    message = refusal({**THREE, "server.1": "10.0.0.1:2888:3888|10.0.1.1:2889:3889"}, myid=myid("1"))
    assert "server.1" in message and "multiAddress.enabled" in message


# --- dynamicConfigFile --------------------------------------------------------------------------

DYNAMIC = ("server.1=127.0.0.1:2888:3888;2181\nserver.2=127.0.0.1:2889:3889;2182\n"
           "server.3=127.0.0.1:2890:3890;2183\n")


def files(contents: dict[str, str]) -> Callable[[str], str]:
    def read(path: str) -> str:
        if path not in contents:
            raise FileNotFoundError(2, "No such file or directory")
        return contents[path]
    return read


def test_the_server_lines_come_from_the_dynamic_file_and_its_version_from_its_name() -> None:
    path = "/etc/zk/zoo.cfg.dynamic.100000000"
    cfg = parse({"initLimit": "10", "syncLimit": "5", "dynamicConfigFile": path}, myid("2"),
                read_file=files({path: DYNAMIC}))
    assert cfg.quorum is not None and [s.sid for s in cfg.quorum.servers] == [1, 2, 3]
    assert cfg.quorum.config_version == 0x100000000
    assert cfg.client_port == 2182 and cfg.server_id == 2


def test_a_dynamic_file_without_a_hex_suffix_has_version_zero() -> None:
    path = "/etc/zk/zoo.cfg.dynamic"
    cfg = parse({**{k: v for k, v in THREE.items() if not k.startswith("server.")}, "dynamicConfigFile": path},
                myid("1"), read_file=files({path: DYNAMIC}))
    assert cfg.quorum is not None and cfg.quorum.config_version == 0


def test_a_relative_dynamic_file_is_read_from_the_working_directory(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "zoo.cfg.dynamic.5").write_text(DYNAMIC, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    cfg = parse({"initLimit": "10", "syncLimit": "5", "dynamicConfigFile": "zoo.cfg.dynamic.5"}, myid("3"))
    assert cfg.quorum is not None and cfg.quorum.config_version == 5 and cfg.client_port == 2183


def test_server_lines_in_zoo_cfg_and_a_dynamic_file_are_refused_as_zookeeper_refuses_them() -> None:
    path = "/etc/zk/zoo.cfg.dynamic.1"
    message = refusal({**THREE, "dynamicConfigFile": path}, myid=myid("1"), read_file=files({path: DYNAMIC}))
    assert "server.1" in message and "dynamic" in message


@pytest.mark.parametrize(("text", "needle"), [
    (DYNAMIC + "version=100000000\n", "version"),
    (DYNAMIC + "tickTime=2000\n", "tickTime"),
    (DYNAMIC + "group.1=1:2:3\ngroup.2=3\n", "group.2"),
    (DYNAMIC.replace("2888:3888", "2888:x"), "server.1"),
])
def test_a_bad_dynamic_file_is_refused_naming_it(text: str, needle: str) -> None:
    path = "/etc/zk/zoo.cfg.dynamic.1"
    with pytest.raises(ConfigError) as info:
        parse({"initLimit": "10", "syncLimit": "5", "dynamicConfigFile": path}, myid("1"),
              read_file=files({path: text}))
    assert str(info.value).startswith(f"{path}: ") and needle in str(info.value)


def test_a_missing_dynamic_file_is_refused_naming_the_key() -> None:
    message = refusal({"dynamicConfigFile": "/nope/zoo.cfg.dynamic.1"}, read_file=files({}))
    assert "dynamicConfigFile" in message and "/nope/zoo.cfg.dynamic.1" in message


# --- the client address -------------------------------------------------------------------------

def test_without_client_port_address_one_line_says_zkpy_listens_on_loopback(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="zkpy.config"):
        cfg = config_from_properties({"dataDir": "/data"}, SOURCE)
    assert cfg.client_port_address == "127.0.0.1"
    [line] = warned(caplog)
    assert "127.0.0.1" in line and "clientPortAddress" in line and "remote clients" in line
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="zkpy.config"):
        config_from_properties({"dataDir": "/data"}, SOURCE, loopback_note=False)
        config_from_properties({"dataDir": "/data", "clientPortAddress": "0.0.0.0"}, SOURCE)
    assert warned(caplog) == []


# --- the fixtures and the README ----------------------------------------------------------------

def fixture_props(name: str, **extra: str) -> dict[str, str]:
    text = (FIXTURES / name).read_text(encoding="utf-8")
    names = {m.group("named") or m.group("braced") for m in string.Template.pattern.finditer(text)} - {None}
    filled = string.Template(text).substitute({n: extra.get(n, str(2000 + i)) for i, n in enumerate(sorted(names))})
    return parse_properties(filled)


ADMIN_GUIDE_WARNED = {"tcpKeepAlive", "electionPortBindRetry", "clientPortListenBacklog", "globalOutstandingLimit",
                      "fsync.warningthresholdms"}
KAZOO_WARNED = {"serverCnxnFactory", "authProvider.1"}


def warned_keys(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [m.split(": ", 2)[1].removesuffix(" has no effect in zkpy") for m in warned(caplog)
            if " has no effect in zkpy: " in m]


def test_the_admin_guide_fixture_parses_with_one_warning_per_key_without_effect(
        caplog: pytest.LogCaptureFixture) -> None:
    props = fixture_props("zoo.cfg.admin-guide", dataDir="/data", dataLogDir="/log")
    with caplog.at_level(logging.WARNING, logger="zkpy.config"):
        cfg = config_from_properties(props, SOURCE, myid("2"))
    assert cfg.quorum is not None and cfg.quorum.is_ensemble and cfg.server_id == 2
    assert sorted(warned_keys(caplog)) == sorted(ADMIN_GUIDE_WARNED)
    assert sum("clientPortAddress" in m for m in warned(caplog)) == 1


def test_the_kazoo_fixture_parses_with_one_warning_per_key_without_effect(
        caplog: pytest.LogCaptureFixture) -> None:
    props = fixture_props("zoo.cfg.kazoo", dataDir="/data", keyStore="/k/keystore.jks",
                          trustStore="/k/truststore.jks")
    with caplog.at_level(logging.WARNING, logger="zkpy.config"):
        cfg = config_from_properties(props, SOURCE)
    assert cfg.secure_client_port is not None and cfg.max_client_cnxns == 0
    assert sorted(warned_keys(caplog)) == sorted(KAZOO_WARNED)


def test_the_kazoo_fixture_with_the_harness_peer_lines_parses_as_an_ensemble() -> None:
    props = fixture_props("zoo.cfg.kazoo", dataDir="/data", keyStore="/k/keystore.jks",
                          trustStore="/k/truststore.jks")
    props.update({"initLimit": "4", "syncLimit": "2", "peerType": "participant",
                  **{f"server.{n}": f"localhost:{20000 + n}:{21000 + n}:participant" for n in (1, 2, 3)}})
    cfg = config_from_properties(props, SOURCE, myid("1"))
    assert cfg.quorum is not None and cfg.quorum.is_ensemble and len(cfg.quorum.participants) == 3


def test_the_readme_lists_exactly_the_table() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.count(README_BEGIN) == 1 and readme.count(README_END) == 1
    start = readme.index(README_BEGIN)
    end = readme.index(README_END) + len(README_END)
    assert readme[start:end] == readme_section(), "run `python -m zkpy.cli.zoocfg_keys` and paste its output"
    listed = {line.split("`")[1] for line in readme[start:end].splitlines() if line.startswith("- `")}
    assert listed == set(ALL_KEYS)



def test_a_proposed_next_dynamic_file_gets_one_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dynamic = tmp_path / "zoo.cfg.dynamic.100000000"
    dynamic.write_text(DYNAMIC, encoding="utf-8")
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(f"dataDir={tmp_path}\nclientPortAddress=127.0.0.1\ninitLimit=10\nsyncLimit=5\n"
                   f"dynamicConfigFile={dynamic}\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="zkpy.config"):
        load_zoo_cfg(str(cfg), myid("1"))
    assert warned(caplog) == []
    (tmp_path / "zoo.cfg.dynamic.next").write_text(DYNAMIC, encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="zkpy.config"):
        load_zoo_cfg(str(cfg), myid("1"))
    [line] = warned(caplog)
    assert "zoo.cfg.dynamic.next has no effect in zkpy" in line and "reconfig" in line


def test_metrics_provider_classes() -> None:
    """ZooKeeper's default provider serves nothing; a class zkpy does not provide is refused."""
    base = {"dataDir": "/data", "clientPort": "2181"}
    default = config_from_properties({**base, "metricsProvider.className":
                                      "org.apache.zookeeper.metrics.impl.DefaultMetricsProvider"}, "zoo.cfg")
    assert not default.metrics_prometheus and not config_from_properties(base, "zoo.cfg").metrics_prometheus
    with pytest.raises(ConfigError, match="metricsProvider.className"):
        config_from_properties({**base, "metricsProvider.className": "com.example.Other"}, "zoo.cfg")


def test_server_workers_counts_serving_processes() -> None:
    assert parse({"dataDir": "/data", "serverWorkers": "4"}).server_workers == 4
    assert parse({"dataDir": "/data"}).server_workers == 1  # the default: one process
    assert parse({"dataDir": "/data", "serverWorkers": "auto"}).server_workers == len(os.sched_getaffinity(0))
    for bad in ("0", "-1", "x", "257", ""):
        with pytest.raises(ConfigError, match=f"{SOURCE}: serverWorkers"):
            parse({"dataDir": "/data", "serverWorkers": bad})
    # an ensemble member keeps it: it serves from that many processes while it leads (runtime.leader_term)
    assert parse({**THREE, "serverWorkers": "2"}, myid("1")).server_workers == 2


@pytest.mark.parametrize(("key", "guess"), [("clientPrt", "clientPort"), ("tickTme", "tickTime"),
                                            ("datadir", "dataDir"), ("maxClientCnxn", "maxClientCnxns"),
                                            ("fooBar", None), ("quux", None)])
def test_an_unknown_key_close_to_a_known_one_gets_did_you_mean(key: str, guess: str | None,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="zkpy.config"):
        parse({key: "1"})
    [line] = warn_lines_naming(caplog, key)
    hint = f"did you mean {guess}? " if guess else ""
    assert line == (f"{SOURCE}: {key} has no effect in zkpy: {hint}zkpy does not know it "
                    f"(ZooKeeper 3.8 would set the system property zookeeper.{key})")
