"""zoo.cfg's ensemble part, read as ZooKeeper 3.8 reads it: server.N lines, the quorum keys, myid.

Pure: ``config_from_properties`` with a dict and a fake myid reader; no files.
"""

from __future__ import annotations

import logging

import pytest

from zkpy.cli.zoocfg import ConfigError, MyidReader, config_from_properties
from zkpy.config import LearnerType, QuorumConfig, QuorumServer, ServerConfig
from zkpy.ids import ServerId

SOURCE = "/etc/zk/zoo.cfg"
MYID_PATH = "/data/myid"


def myid(text: str | None) -> MyidReader:
    """A myid reader that finds ``text`` in /data/myid (None: no such file)."""

    def read(path: str) -> str | None:
        assert path == MYID_PATH
        return text

    return read


def parse(props: dict[str, str], myid_text: str | None = None) -> ServerConfig:
    return config_from_properties({"dataDir": "/data", **props}, SOURCE, myid(myid_text))


def quorum_of(props: dict[str, str], myid_text: str | None = None) -> QuorumConfig:
    quorum = parse(props, myid_text).quorum
    assert quorum is not None
    return quorum


def refused(props: dict[str, str], myid_text: str | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        parse(props, myid_text)
    message = str(info.value)
    assert message.startswith(f"{SOURCE}: "), message
    return message


THREE = {
    "initLimit": "10", "syncLimit": "5",
    "server.1": "zk1:2888:3888", "server.2": "zk2:2888:3888", "server.3": "zk3:2888:3888",
}


# --- forms of a server line -------------------------------------------------------------------

@pytest.mark.parametrize(("line", "expected"), [
    ("zk2:2888:3888", QuorumServer(ServerId(2), "zk2", 2888, 3888)),
    ("zk2:2888:3888:participant", QuorumServer(ServerId(2), "zk2", 2888, 3888, LearnerType.PARTICIPANT)),
    ("zk2:2888:3888:observer", QuorumServer(ServerId(2), "zk2", 2888, 3888, LearnerType.OBSERVER)),
    ("zk2:2888:3888:OBSERVER", QuorumServer(ServerId(2), "zk2", 2888, 3888, LearnerType.OBSERVER)),
    ("zk2:2888:3888;2181", QuorumServer(ServerId(2), "zk2", 2888, 3888, client_port=2181)),
    ("zk2:2888:3888;10.0.0.2:2181", QuorumServer(ServerId(2), "zk2", 2888, 3888, client_host="10.0.0.2",
                                                 client_port=2181)),
    ("zk2:2888:3888:observer;0.0.0.0:2181",
     QuorumServer(ServerId(2), "zk2", 2888, 3888, LearnerType.OBSERVER, "0.0.0.0", 2181)),
    ("[2001:db8::2]:2888:3888", QuorumServer(ServerId(2), "2001:db8::2", 2888, 3888)),
    ("[2001:db8::2]:2888:3888:observer;[::1]:2181",
     QuorumServer(ServerId(2), "2001:db8::2", 2888, 3888, LearnerType.OBSERVER, "::1", 2181)),
    ("10.0.0.2:2888:3888;[::]:2181", QuorumServer(ServerId(2), "10.0.0.2", 2888, 3888, client_host="::",
                                                  client_port=2181)),
])
def test_server_line_forms(line: str, expected: QuorumServer) -> None:
    quorum = quorum_of({**THREE, "server.2": line}, "1")
    assert quorum.server(2) == expected


def test_servers_are_in_sid_order_and_the_ensemble_keys_are_read() -> None:
    quorum = quorum_of({
        "server.3": "zk3:2888:3888", "server.1": "zk1:2888:3888", "server.2": "zk2:2888:3888",
        "server.10": "zk10:2888:3888:observer",
        "initLimit": "10", "syncLimit": "5", "electionAlg": "3", "quorumListenOnAllIPs": "TRUE",
        "standaloneEnabled": "true",
    }, "2\n")
    assert [s.sid for s in quorum.servers] == [1, 2, 3, 10]
    assert [s.sid for s in quorum.participants] == [1, 2, 3]
    assert [s.sid for s in quorum.observers] == [10]
    assert quorum.my_id == 2 and quorum.me == QuorumServer(ServerId(2), "zk2", 2888, 3888)
    assert (quorum.init_limit_ticks, quorum.sync_limit_ticks, quorum.election_alg) == (10, 5, 3)
    assert quorum.quorum_listen_on_all_ips is True and quorum.standalone_enabled is True
    assert quorum.is_ensemble


def test_no_server_lines_means_no_quorum() -> None:
    cfg = parse({"initLimit": "10", "syncLimit": "5", "peerType": "participant", "quorumListenOnAllIPs": "false"})
    assert cfg.quorum is None and cfg.server_id == 0


def test_myid_first_line_is_the_id_and_becomes_server_id() -> None:
    cfg = parse(THREE, "3\nanything after the first line\n")
    assert cfg.quorum is not None and cfg.quorum.my_id == 3 and cfg.server_id == 3


# --- ensemble or standalone: ZooKeeper 3.8's isDistributed -------------------------------------

def test_one_server_line_with_standalone_enabled_runs_standalone() -> None:
    cfg = parse({"server.1": "zk1:2888:3888"})  # no myid, no initLimit: not needed standalone
    assert cfg.quorum is not None and not cfg.quorum.is_ensemble
    assert cfg.server_id == 0


def test_one_server_line_with_standalone_disabled_is_an_ensemble_of_one() -> None:
    quorum = quorum_of({"server.1": "zk1:2888:3888", "standaloneEnabled": "false",
                        "initLimit": "10", "syncLimit": "5"}, "1")
    assert quorum.is_ensemble and len(quorum.servers) == 1


def test_two_participants_are_an_ensemble() -> None:
    assert quorum_of({**THREE, "server.3": "zk3:2888:3888:observer"}, "1").is_ensemble


def test_standalone_disabled_without_server_lines_is_refused() -> None:
    message = refused({"standaloneEnabled": "false"})
    assert "standaloneEnabled" in message


def test_observers_without_participants_are_refused() -> None:
    message = refused({"server.1": "zk1:2888:3888:observer"})
    assert "server.N" in message and "observer" in message


def test_observers_beside_a_lone_standalone_participant_are_refused() -> None:
    message = refused({"server.1": "zk1:2888:3888", "server.2": "zk2:2888:3888:observer"})
    assert "standaloneEnabled" in message and "observer" in message


def test_standalone_one_server_with_a_myid_not_in_the_list_still_runs() -> None:
    cfg = parse({"server.1": "zk1:2888:3888"}, "7")
    assert cfg.quorum is not None and cfg.quorum.my_id == 7 and not cfg.quorum.is_ensemble


# --- client port: clientPort vs the ;client part of this server's line -------------------------

def test_client_address_of_my_line_becomes_the_client_port() -> None:
    cfg = parse({**THREE, "server.1": "zk1:2888:3888;10.0.0.1:2190"}, "1")
    assert (cfg.client_port_address, cfg.client_port) == ("10.0.0.1", 2190)


def test_a_port_only_client_part_keeps_the_configured_address() -> None:
    cfg = parse({**THREE, "server.1": "zk1:2888:3888;2190", "clientPort": "2190"}, "1")
    assert (cfg.client_port_address, cfg.client_port) == ("127.0.0.1", 2190)


def test_clientport_0_is_not_compared() -> None:
    assert parse({**THREE, "server.1": "zk1:2888:3888;2190", "clientPort": "0"}, "1").client_port == 2190


def test_other_servers_client_parts_do_not_apply() -> None:
    assert parse({**THREE, "server.2": "zk2:2888:3888;2190", "clientPort": "2181"}, "1").client_port == 2181


def test_client_port_disagreeing_with_my_line_is_refused() -> None:
    message = refused({**THREE, "server.1": "zk1:2888:3888;2190", "clientPort": "2181"}, "1")
    assert "clientPort=2181" in message and "server.1" in message and "2190" in message


def test_wildcard_client_port_address_compares_ports_only() -> None:
    cfg = parse({**THREE, "server.1": "zk1:2888:3888;10.0.0.1:2190", "clientPort": "2190",
                 "clientPortAddress": "0.0.0.0"}, "1")
    assert (cfg.client_port_address, cfg.client_port) == ("10.0.0.1", 2190)


def test_specific_client_port_address_must_match_my_line_exactly() -> None:
    props = {**THREE, "clientPort": "2190", "clientPortAddress": "10.0.0.1"}
    assert parse({**props, "server.1": "zk1:2888:3888;10.0.0.1:2190"}, "1").client_port == 2190
    # 3.8 reads a port-only client part as the wildcard address, which differs from 10.0.0.1
    message = refused({**props, "server.1": "zk1:2888:3888;2190"}, "1")
    assert "clientPortAddress=10.0.0.1" in message and "server.1" in message


# --- peerType ----------------------------------------------------------------------------------

def test_peer_type_follows_my_line(caplog: pytest.LogCaptureFixture) -> None:
    props = {**THREE, "server.4": "zk4:2888:3888:observer"}
    assert quorum_of({**props, "peerType": "observer"}, "4").peer_type is LearnerType.OBSERVER
    with caplog.at_level(logging.WARNING, logger="zkpy.config"):
        quorum = quorum_of({**props, "peerType": "observer"}, "1")
    assert quorum.peer_type is LearnerType.PARTICIPANT  # 3.8 warns and believes the server list
    assert "peerType=observer" in caplog.text and SOURCE in caplog.text


def test_bad_peer_type_is_refused() -> None:
    assert "peerType=" in refused({**THREE, "peerType": "leader"}, "1")


# --- refusals, each naming the key and the file --------------------------------------------------

@pytest.mark.parametrize(("key", "value", "says"), [
    ("server.2", "zk2:2888:x", "electionPort 'x' is not a number"),
    ("server.2", "zk2:x:3888", "peerPort 'x' is not a number"),
    ("server.2", "zk2:2888:99999", "electionPort 99999 is out of range"),
    ("server.2", "zk2:2888:3888;x", "clientPort 'x' is not a number"),
    ("server.2", "zk2:2888:3888;h:x", "clientPort 'x' is not a number"),
    ("server.2", "zk2:2888", "expected host:peerPort:electionPort"),
    ("server.2", "zk2:2888:3888:observer:x", "expected host:peerPort:electionPort"),
    ("server.2", "zk2:2888:3888;a:b:2181", "expected host:peerPort:electionPort"),
    ("server.2", "zk2:2888:3888;2181;2182", "more than one ';'"),
    ("server.2", "zk2:2888:3888:leader", "role 'leader' is neither participant nor observer"),
    ("server.2", "zk2:2888:2888", "peerPort and electionPort are both 2888"),
    ("server.2", "zk2:2888:3888|zk2b:2888:3888", "multiAddress"),
    ("server.2", "[2001:db8::2:2888:3888", "no ']'"),
    ("server.2", "[2001:db8::2]2888:3888", "no port after"),
    ("server.2", "2001:db8::2:2888:3888", "expected host:peerPort:electionPort"),
    ("server.2", ":2888:3888", "the host is empty"),
])
def test_bad_server_line_names_key_and_file(key: str, value: str, says: str) -> None:
    message = refused({**THREE, key: value}, "1")
    assert f"{key}={value}: " in message and says in message


def test_server_id_not_a_number() -> None:
    message = refused({**THREE, "server.two": "zk2:2888:3888"}, "1")
    assert "server.two" in message and "not a number" in message


def test_one_server_id_written_twice() -> None:
    message = refused({**THREE, "server.01": "zk9:2888:3888"}, "1")
    assert "server.01" in message and "server.1" in message


@pytest.mark.parametrize(("lines", "says"), [
    ({"server.2": "zk1:2888:3889"}, "server.2 peerPort and server.1 peerPort both use zk1:2888"),
    ({"server.2": "zk1:3888:2889"}, "server.2 peerPort and server.1 electionPort both use zk1:3888"),
    ({"server.1": "10.0.0.1:2888:3888", "server.2": "10.0.0.1:2888:3889"}, "both use 10.0.0.1:2888"),
    ({"server.1": "zk1:2888:3888;2888"}, "server.1 clientPort and server.1 peerPort both use zk1:2888"),
    ({"server.2": "zk2:2888:3888;zk1:3888"}, "server.2 clientPort and server.1 electionPort"),
])
def test_two_listeners_on_one_address_are_refused(lines: dict[str, str], says: str) -> None:
    message = refused({**THREE, **lines}, "1")
    assert says in message


def test_same_ports_on_different_hosts_are_fine() -> None:
    quorum = quorum_of({**THREE, "server.1": "zk1:2888:3888;2181", "server.2": "zk2:2888:3888;2181"}, "1")
    assert len(quorum.servers) == 3


@pytest.mark.parametrize(("props", "key"), [
    ({"electionAlg": "1"}, "electionAlg"),
    ({"electionAlg": "three"}, "electionAlg"),
    ({"initLimit": "ten"}, "initLimit"),
    ({"syncLimit": "-1"}, "syncLimit"),
    ({"standaloneEnabled": "yes"}, "standaloneEnabled"),
    ({"quorumListenOnAllIPs": "1"}, "quorumListenOnAllIPs"),
    ({"peerType": "voter"}, "peerType"),
])
def test_bad_quorum_key_names_key_and_file(props: dict[str, str], key: str) -> None:
    assert key in refused({**THREE, **props}, "1")
    assert key in refused(props)  # refused even without server lines, as 3.8 does


@pytest.mark.parametrize("key", ["initLimit", "syncLimit"])
def test_an_ensemble_needs_init_and_sync_limits(key: str) -> None:
    props = dict(THREE)
    del props[key]
    assert f"{key} is not set" in refused(props, "1")


def test_an_ensemble_needs_a_myid_file() -> None:
    message = refused(THREE, None)
    assert "myid file is missing" in message and MYID_PATH in message and "dataDir" in message


@pytest.mark.parametrize("text", ["", "\n", "one\n", "1.5", "-1"])
def test_myid_not_a_number_is_refused(text: str) -> None:
    message = refused(THREE, text)
    assert "myid" in message and MYID_PATH in message and "not a server id" in message


def test_myid_not_a_number_is_refused_even_standalone() -> None:
    assert MYID_PATH in refused({"server.1": "zk1:2888:3888"}, "x")


def test_myid_not_among_the_servers_is_refused() -> None:
    message = refused(THREE, "4")
    assert "myid 4" in message and MYID_PATH in message and "server.N" in message


def test_an_unreadable_myid_file_is_a_config_error() -> None:
    def unreadable(path: str) -> str | None:
        raise PermissionError(13, "Permission denied")

    with pytest.raises(ConfigError) as info:
        config_from_properties({"dataDir": "/data", **THREE}, SOURCE, unreadable)
    assert str(info.value).startswith(SOURCE) and MYID_PATH in str(info.value)


def test_without_a_reader_there_is_no_myid() -> None:
    with pytest.raises(ConfigError, match="myid file is missing"):
        config_from_properties({"dataDir": "/data", **THREE}, SOURCE)
