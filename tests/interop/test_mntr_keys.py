"""mntr against Apache ZooKeeper 3.8: zkpy reports every key Apache reports (standalone, and on an
ensemble's leader), less the documented exclusions (``fourletter.MNTR_EXCLUDED*``), and the
values whose kind is fixed agree in kind (an integer where Apache prints one, a decimal where it
prints one)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest
from kazoo.client import KazooClient
from tests.conftest import require_apache

from zkpy.admin.fourletter import MNTR_EXCLUDED, MNTR_EXCLUDED_PATTERNS
from zkpy.testing.servers import (
    ServerProcess,
    cleanup_ensemble,
    ensemble_leader,
    four_letter,
    start_apache,
    start_ensemble,
    start_zkpy,
    wait_ensemble_serving,
)

ALL_WORDS = {"4lw.commands.whitelist": "*"}
_SUMMARY_PART = re.compile(r"^(avg|min|max|cnt|sum|p50|p95|p99|p999)_")
_INT = re.compile(r"^-?\d+$")
_DECIMAL = re.compile(r"^-?\d+\.\d+(E-?\d+)?$")
_VARYING = {"version", "server_state", "peer_state"}  # text, compared as text below


def mntr(server: ServerProcess) -> dict[str, str]:
    lines = four_letter(server.port, "mntr").splitlines()
    pairs = [line.split("\t", 1) for line in lines if line]
    assert all(len(p) == 2 and p[0].startswith("zk_") for p in pairs), lines
    return {key[3:]: value for key, value in pairs}


def excluded(key: str) -> bool:
    base = _SUMMARY_PART.sub("", key)
    return (key in MNTR_EXCLUDED or base in MNTR_EXCLUDED
            or any(re.fullmatch(pattern, base) for pattern in MNTR_EXCLUDED_PATTERNS))


def kind(value: str) -> str:
    return "int" if _INT.match(value) else "decimal" if _DECIMAL.match(value) else "text"


def compare(apache: dict[str, str], zkpy: dict[str, str]) -> None:
    missing = sorted(k for k in apache if k not in zkpy and not excluded(k))
    assert not missing, f"keys Apache 3.8 reports and zkpy does not: {missing}"
    assert len(zkpy) >= len(apache) - sum(1 for k in apache if excluded(k))
    kinds = {k: (kind(apache[k]), kind(zkpy[k])) for k in apache if k in zkpy and k not in _VARYING}
    differing = {k: v for k, v in kinds.items() if v[0] != v[1]}
    assert not differing, differing
    assert zkpy["version"].startswith("3.8.")
    assert zkpy["server_state"] == apache["server_state"]
    if "peer_state" in apache:
        assert zkpy["peer_state"] == apache["peer_state"]


def test_exclusions_are_documented() -> None:
    assert all(reason for reason in (*MNTR_EXCLUDED.values(), *MNTR_EXCLUDED_PATTERNS.values()))


def test_standalone_keys_cover_apache() -> None:
    require_apache()
    apache, zkpy = start_apache(ALL_WORDS), start_zkpy(ALL_WORDS)
    try:
        a, z = mntr(apache), mntr(zkpy)
    finally:
        apache.cleanup()
        zkpy.cleanup()
    assert len(a) > 400
    compare(a, z)
    assert z["znode_count"] == a["znode_count"] == "5"
    assert z["approximate_data_size"] == a["approximate_data_size"] == str(
        sum(len(p) for p in ("/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config")))


def _leader_mntr(kinds: Sequence[str]) -> dict[str, str]:
    servers = start_ensemble(list(kinds), ALL_WORDS)
    try:
        wait_ensemble_serving(servers)
        return mntr(ensemble_leader(servers))
    finally:
        cleanup_ensemble(servers)


@pytest.mark.timeout(240)
def test_leader_keys_cover_apache() -> None:
    require_apache()
    a = _leader_mntr(["apache"] * 3)
    z = _leader_mntr(["zkpy"] * 3)
    assert "learners" in a and "quorum_size" in a
    compare(a, z)
    assert z["learners"] == a["learners"] == "2"
    assert z["quorum_size"] == a["quorum_size"] == "3"
    assert int(z["cnt_election_time"]) >= 1 and int(z["looking_count"]) >= 1


def test_approximate_data_size_follows_writes_as_apaches() -> None:
    """The same creates, setDatas and deletes move zk_approximate_data_size alike on both."""
    require_apache()
    sizes = {}
    for kind, start in (("apache", start_apache), ("zkpy", start_zkpy)):
        server = start(ALL_WORDS)
        try:
            client = KazooClient(hosts=server.hosts)
            client.start()
            try:
                client.create("/size", b"abc")
                client.create("/size/child", b"0123456789")
                client.create("/size/ephemeral", b"e", ephemeral=True)
                client.set("/size", b"a longer value")
                client.set("/size/child", b"")
                client.create("/gone", b"xyz")
                client.delete("/gone")
                sizes[kind] = mntr(server)["approximate_data_size"]
            finally:
                client.stop()
                client.close()
        finally:
            server.cleanup()
    assert sizes["zkpy"] == sizes["apache"]
