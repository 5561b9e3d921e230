"""``zkpy server --from-env`` (``cli.container``): for each set of the official image's variables in
tests/fixtures/official_image/, the zoo.cfg and myid its docker-entrypoint.sh writes (read from
that public script and kept here as test data) are what zkpy writes; mounted files are left as
they are; the container's addresses go under zoo.cfg's own lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from zkpy.cli.container import (
    CONTAINER_ADDRESSES,
    ContainerError,
    myid_text,
    prepare,
    with_statefulset,
    zoo_cfg_text,
)
from zkpy.cli.jvmflags import as_zoo_cfg
from zkpy.cli.zoocfg import load_zoo_cfg
from zkpy.config import ServerConfig

CASES = Path(__file__).resolve().parents[2] / "fixtures" / "official_image"


def env_of(case: str) -> dict[str, str]:
    env = {}
    for line in (CASES / case / "env").read_text(encoding="utf-8").splitlines():
        name, _, value = line.partition("=")
        env[name] = value
    return env


@pytest.mark.parametrize("case", sorted(p.name for p in CASES.iterdir()))
def test_the_files_are_the_official_entrypoints(case: str) -> None:
    env = env_of(case)
    assert zoo_cfg_text(env) == (CASES / case / "zoo.cfg").read_text(encoding="utf-8")
    assert myid_text(env) == (CASES / case / "myid").read_text(encoding="utf-8")


def test_files_are_written_only_where_none_is_mounted(tmp_path: Path) -> None:
    env = {"ZOO_CONF_DIR": str(tmp_path / "conf"), "ZOO_DATA_DIR": str(tmp_path / "data"),
           "ZOO_DATA_LOG_DIR": str(tmp_path / "datalog"), "ZOO_MY_ID": "2"}
    first = prepare(env)
    assert first.wrote == (str(tmp_path / "conf" / "zoo.cfg"), str(tmp_path / "data" / "myid"))
    assert (tmp_path / "data" / "myid").read_text() == "2\n" and (tmp_path / "datalog").is_dir()
    (tmp_path / "conf" / "zoo.cfg").write_text("mounted=yes\n")
    (tmp_path / "data" / "myid").write_text("7\n")
    again = prepare({**env, "ZOO_MY_ID": "3", "ZOO_TICK_TIME": "100"})
    assert again.wrote == () and again.zoo_cfg == str(tmp_path / "conf" / "zoo.cfg")
    assert (tmp_path / "conf" / "zoo.cfg").read_text() == "mounted=yes\n"
    assert (tmp_path / "data" / "myid").read_text() == "7\n"


def _config(tmp_path: Path, text: str, properties: dict[str, str] | None = None) -> ServerConfig:
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(f"dataDir={tmp_path}/data\nclientPort=2181\n{text}", encoding="utf-8")
    return load_zoo_cfg(str(cfg), flags=as_zoo_cfg(properties or {}, CONTAINER_ADDRESSES))


def test_in_a_container_the_ports_listen_on_every_address_unless_configured(tmp_path: Path) -> None:
    config = _config(tmp_path, "admin.enableServer=true\n")
    assert (config.client_port_address, config.admin_address, config.metrics_http_host) == ("0.0.0.0",) * 3
    named = _config(tmp_path, "clientPortAddress=10.1.2.3\nmetricsProvider.httpHost=10.1.2.5\n",
                    {"zookeeper.admin.serverAddress": "10.1.2.4"})  # the JVM flags win over the container's too
    assert (named.client_port_address, named.admin_address, named.metrics_http_host) == (
        "10.1.2.3", "10.1.2.4", "10.1.2.5")


def test_a_statefulset_pod_gets_its_myid_from_the_ordinal_and_the_members_from_the_set() -> None:
    env = with_statefulset({"ZKPY_REPLICAS": "3", "ZKPY_PEER_SERVICE": "zkpy-hs", "HOSTNAME": "zkpy-2"})
    assert myid_text(env) == "3\n"
    assert env["ZOO_SERVERS"] == ("server.1=zkpy-0.zkpy-hs:2888:3888;2181 server.2=zkpy-1.zkpy-hs:2888:3888;2181 "
                                  "server.3=zkpy-2.zkpy-hs:2888:3888;2181")
    explicit = with_statefulset({"ZKPY_REPLICAS": "3", "ZKPY_PEER_SERVICE": "s", "HOSTNAME": "my-zk-0",
                                 "ZOO_MY_ID": "7", "ZOO_SERVERS": "server.7=a:1:2"})
    assert (explicit["ZOO_MY_ID"], explicit["ZOO_SERVERS"]) == ("7", "server.7=a:1:2")
    assert with_statefulset({"HOSTNAME": "zkpy-0"}) == {"HOSTNAME": "zkpy-0"}  # not asked for: unchanged
    for bad, why in (({"ZKPY_REPLICAS": "x", "ZKPY_PEER_SERVICE": "s", "HOSTNAME": "a-0"}, "ZKPY_REPLICAS"),
                     ({"ZKPY_REPLICAS": "3", "ZKPY_PEER_SERVICE": "s", "HOSTNAME": "laptop"}, "HOSTNAME"),
                     ({"ZKPY_REPLICAS": "3", "HOSTNAME": "a-0"}, "ZKPY_PEER_SERVICE")):
        with pytest.raises(ContainerError, match=why):
            with_statefulset(bad)
