"""Groups and weights, differentially: for each zoo.cfg below, Apache ZooKeeper 3.8's own
QuorumHierarchical (driven by tests/interop/java/HierarchyOracle.java) and zkpy agree on the config
text the members exchange, on every subset of the voters (quorum or not), and on each weight."""

from __future__ import annotations

import subprocess
from itertools import combinations
from pathlib import Path

import pytest
from tests.conftest import require_apache

from zkpy.cli.zoocfg import config_from_properties
from zkpy.quorum.verifier import config_string, quorum_verifier
from zkpy.testing.servers import ZK_JAR

ORACLE = Path(__file__).parent / "java" / "HierarchyOracle.java"
SLF4J_API = "/usr/share/java/slf4j-api.jar"


def servers(*sids: int, observers: tuple[int, ...] = ()) -> dict[str, str]:
    return {f"server.{sid}": f"127.0.0.1:{2000 + sid}:{3000 + sid}{':observer' if sid in observers else ''}"
            for sid in sids}


CONFIGS = {
    # the acceptance ensemble: a plain majority ({1,2,3}) that is no quorum, and a quorum of two ({4,5})
    "acceptance": {**servers(1, 2, 3, 4, 5), "group.1": "1:2:3", "group.2": "4", "group.3": "5", "weight.1": "2"},
    "hash-order": {**servers(1, 2, 16, 20), "group.20": "20:1", "group.3": "16:2", "weight.16": "3"},
    "zero-weight-group": {**servers(1, 2, 3, 4), "group.1": "1:2", "group.2": "3", "group.3": "4", "weight.4": "0"},
    # lines 3.8 accepts that do not do what they seem to: a weighted observer in a group, a weight
    # for a server in no group
    "odd-but-accepted": {**servers(1, 2, 3, 4, 5, observers=(5,)), "group.1": "1:2:5", "group.2": "3:4",
                         "weight.5": "3", "weight.9": "2", "weight.3": "0"},
    "seven-in-three": {**servers(*range(1, 8)), "group.1": "1:2:3", "group.2": "4:5", "group.3": "6:7",
                       "weight.1": "3", "weight.4": "2", "weight.7": "0"},
}


def apache_says(tmp_path: Path, props: dict[str, str]) -> tuple[str, dict[tuple[int, ...], bool], dict[int, int]]:
    cfg = tmp_path / "quorum.properties"
    cfg.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    proc = subprocess.run(["java", "-cp", f"{ZK_JAR}:{SLF4J_API}", str(ORACLE), str(cfg)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    text, _, rest = proc.stdout.partition("\n--\n")
    quorums: dict[tuple[int, ...], bool] = {}
    weights: dict[int, int] = {}
    for line in rest.splitlines():
        kind, *fields = line.split(" ")
        if kind == "quorum":
            acks, answer = fields
            quorums[tuple(int(s) for s in acks.split(",") if s)] = answer == "true"
        else:
            weights[int(fields[0])] = int(fields[1])
    return text, quorums, weights


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_zkpy_counts_and_prints_groups_and_weights_as_apache(name: str, tmp_path: Path) -> None:
    require_apache()
    props = CONFIGS[name]
    text, quorums, weights = apache_says(tmp_path, props)
    cfg = config_from_properties({"tickTime": "2000", "initLimit": "10", "syncLimit": "5", "dataDir": "/data",
                                  **props}, "zoo.cfg", lambda path: "1\n")
    assert cfg.quorum is not None
    assert config_string(cfg.quorum) == text
    qv = quorum_verifier(cfg.quorum)
    voters = sorted(qv.voting)
    assert len(quorums) == 2 ** len(voters)
    for n in range(len(voters) + 1):
        for acks in combinations(voters, n):
            assert qv.contains_quorum(acks) is quorums[acks], acks
    assert {sid: qv.weight(sid) for sid in voters} == weights
