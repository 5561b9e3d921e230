"""group.G / weight.SID lines in zoo.cfg and in a dynamic config file, read as ZooKeeper 3.8 reads
them: honoured; what 3.8 refuses or fails on is refused naming the line and the file; what 3.8
accepts without effect gets one WARN. (Apache's behaviour for each was checked by starting
QuorumPeerMain on the same lines.)"""

from __future__ import annotations

import logging

import pytest

from zkpy.cli.zoocfg import ConfigError, config_from_properties
from zkpy.config import ServerConfig
from zkpy.quorum.hierarchical import QuorumHierarchical
from zkpy.quorum.verifier import quorum_verifier

SOURCE = "/etc/zk/zoo.cfg"
DYNAMIC_PATH = "/etc/zk/zoo.cfg.dynamic.100000000"
SERVERS = {f"server.{sid}": f"127.0.0.1:{2000 + sid}:{3000 + sid}" for sid in (1, 2, 3)}
BASE = {"dataDir": "/data", "clientPortAddress": "127.0.0.1", "initLimit": "10", "syncLimit": "5"}


def parse(props: dict[str, str], dynamic: str | None = None) -> ServerConfig:
    def read(path: str) -> str:
        assert path == DYNAMIC_PATH and dynamic is not None
        return dynamic

    return config_from_properties({**BASE, **props}, SOURCE, lambda path: "1\n", read_file=read)


def refusal(props: dict[str, str], dynamic: str | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        parse(props, dynamic)
    return str(info.value)


def test_group_and_weight_lines_are_honoured_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="zkpy.config"):
        cfg = parse({**SERVERS, "group.1": "1:2", "group.2": "3", "weight.1": "2", "weight.3": "0"})
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == []
    assert cfg.quorum is not None and cfg.quorum.hierarchical
    assert cfg.quorum.groups == ((1, (1, 2)), (2, (3,))) and cfg.quorum.weights == ((1, 2), (3, 0))
    qv = quorum_verifier(cfg.quorum)
    assert isinstance(qv, QuorumHierarchical) and [qv.weight(s) for s in (1, 2, 3)] == [2, 1, 0]


def test_a_dynamic_config_file_holds_them_too() -> None:
    dynamic = "".join(f"{k}={v}\n" for k, v in SERVERS.items()) + "group.1=1:2:3\nweight.2=3\n"
    cfg = parse({"dynamicConfigFile": DYNAMIC_PATH}, dynamic)
    assert cfg.quorum is not None and cfg.quorum.config_version == 0x100000000
    assert cfg.quorum.groups == ((1, (1, 2, 3)),) and cfg.quorum.weights == ((2, 3),)
    message = refusal({"dynamicConfigFile": DYNAMIC_PATH}, dynamic + "group.2=3\n")
    assert message.startswith(f"{DYNAMIC_PATH}: group.2: ") and "group.1" in message
    message = refusal({"dynamicConfigFile": DYNAMIC_PATH, "group.1": "1:2:3"}, dynamic)
    assert message.startswith(f"{SOURCE}: group.1: ") and "dynamic config file" in message


@pytest.mark.parametrize(("lines", "key", "needle"), [
    ({"group.1": "1:2", "group.2": "2:3"}, "group.2", "also in group.1"),  # 3.8: is in multiple groups
    ({"group.1": "1:2"}, "server.3", "no group"),  # 3.8: Server 3is not in a group
    ({"weight.1": "2"}, "weight.1", "without group lines"),  # 3.8: Server 1is not in a group
    ({"group.1": "1:2:3:9"}, "group.1", "not a server.N"),  # 3.8: NullPointerException
    ({"group.1": "1:2:3", "weight.1": "x"}, "weight.1", "not a number"),  # 3.8: NumberFormatException
    ({"group.1": "1: 2:3"}, "group.1", "not a number"),
    ({"groupx": "1:2:3"}, "groupx", "expected group.G"),
    ({"group.a": "1:2:3"}, "group.a", "group id"),
    ({"group.1": "1:2:3", "weight.2": "-1"}, "weight.2", "negative"),  # 3.8 accepts it
    ({"group.1": "1:2:3", "weight.1": "0", "weight.2": "0", "weight.3": "0"}, "group.1", "weighs 0"),
    ({"group.1": "1:2", "group.01": "3"}, "group.01", "both name group 1"),
    ({"group.1": "1:2:3", "weight.1": "2", "weight.01": "3"}, "weight.01", "both weigh server 1"),
])
def test_a_bad_group_or_weight_line_is_refused_naming_it_and_the_file(lines: dict[str, str], key: str,
                                                                      needle: str) -> None:
    message = refusal({**SERVERS, **lines})
    assert message.startswith(f"{SOURCE}: {key}") and needle in message, message


def test_an_observer_in_a_group_needs_a_weight_as_in_zookeeper() -> None:
    servers = {**SERVERS, "server.4": "127.0.0.1:2004:3004:observer"}
    message = refusal({**servers, "group.1": "1:2:3:4"})
    assert message.startswith(f"{SOURCE}: group.1: ") and "observer" in message


def test_lines_zookeeper_accepts_without_effect_get_one_warning_each(caplog: pytest.LogCaptureFixture) -> None:
    servers = {**SERVERS, "server.4": "127.0.0.1:2004:3004:observer"}
    with caplog.at_level(logging.WARNING, logger="zkpy.config"):
        cfg = parse({**servers, "group.1": "1:2:3:4", "weight.4": "1", "weight.9": "5"})
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert lines == [f"{SOURCE}: weight.4: server 4 is an observer: it never acks, yet its weight counts in "
                     "group.1's (as in ZooKeeper 3.8)",
                     f"{SOURCE}: weight.9: has no effect: server 9 is in no group"]
    assert cfg.quorum is not None and cfg.quorum.weights == ((4, 1), (9, 5))
