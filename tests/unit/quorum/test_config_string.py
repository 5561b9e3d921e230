"""config_string: the quorum config every election notification carries, byte for byte what Apache
ZooKeeper 3.8's QuorumMaj.toString gives for the same zoo.cfg (the expected strings were printed by
zookeeper-3.8.0.jar's QuorumPeerConfig.parse(...).getQuorumVerifier().toString())."""

from __future__ import annotations

from zkpy.cli.zoocfg import config_from_properties
from zkpy.config import QuorumConfig
from zkpy.quorum.verifier import address_string, config_string, host_string, quorum_maj


def quorum(lines: dict[str, str], myid: int, client_port: str | None = None) -> QuorumConfig:
    props = {"tickTime": "2000", "initLimit": "10", "syncLimit": "5", "dataDir": "/data", **lines}
    if client_port is not None:
        props["clientPort"] = client_port
    cfg = config_from_properties(props, "zoo.cfg", lambda path: f"{myid}\n")
    assert cfg.quorum is not None
    return cfg.quorum


def test_static_lines_print_role_and_no_client_part() -> None:
    q = quorum({"server.1": "127.0.0.1:2888:3888", "server.2": "127.0.0.1:2889:3889",
                "server.3": "127.0.0.1:2890:3890"}, myid=1, client_port="2181")
    assert config_string(q) == (
        "server.1=127.0.0.1:2888:3888:participant\n"
        "server.2=127.0.0.1:2889:3889:participant\n"
        "server.3=127.0.0.1:2890:3890:participant\n"
        "version=0"
    )


def test_client_parts_observers_and_ipv6_as_java_prints_them() -> None:
    q = quorum({"server.1": "localhost:2888:3888;2181", "server.2": "127.0.0.1:2889:3889:participant;127.0.0.1:2182",
                "server.3": "[::1]:2890:3890:observer;[::1]:2183", "server.4": "127.0.0.1:2891:3891"}, myid=2)
    assert config_string(q) == (
        "server.1=localhost:2888:3888:participant;0.0.0.0:2181\n"
        "server.2=127.0.0.1:2889:3889:participant;127.0.0.1:2182\n"
        "server.3=[0:0:0:0:0:0:0:1]:2890:3890:observer;[0:0:0:0:0:0:0:1]:2183\n"
        "server.4=127.0.0.1:2891:3891:participant\n"
        "version=0"
    )
    assert quorum_maj(q).voting == {1, 2, 4} and quorum_maj(q).observers == {3}


def test_members_come_in_java_hashmap_order() -> None:
    sids = [100, 200, 300, 17, 1, 16]
    q = quorum({f"server.{sid}": f"127.0.0.1:{2000 + i}:{3000 + i}" for i, sid in enumerate(sids)}, myid=100,
               client_port="2181")
    printed = [line.split("=")[0] for line in config_string(q).splitlines()]
    assert printed == ["server.16", "server.1", "server.17", "server.100", "server.200", "server.300", "version"]


def test_version_is_hex() -> None:
    q = quorum({"server.1": "127.0.0.1:2888:3888", "server.2": "127.0.0.1:2889:3889"}, myid=1)
    assert config_string(q, version=0x100000000).endswith("\nversion=100000000")


def test_election_address_string() -> None:
    assert address_string("127.0.0.1", 3888) == "127.0.0.1:3888"
    assert address_string("zk1.example", 3888) == "zk1.example:3888"
    assert address_string("::1", 3888) == "[0:0:0:0:0:0:0:1]:3888"
    assert host_string("::ffff:10.0.0.1") == "10.0.0.1"


def test_the_version_is_the_dynamic_config_files_unless_given() -> None:
    from dataclasses import replace

    q = replace(quorum({"server.1": "127.0.0.1:2888:3888", "server.2": "127.0.0.1:2889:3889"}, myid=1),
                config_version=0x100000000)
    assert config_string(q).endswith("\nversion=100000000")
    assert config_string(q, 5).endswith("\nversion=5")
