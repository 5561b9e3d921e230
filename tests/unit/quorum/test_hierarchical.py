"""QuorumHierarchical: a weighted majority in a majority of the groups, as ZooKeeper 3.8 counts it;
the config text it adds to every notification; the election's rule that weight 0 never leads.
tests/interop/test_hierarchy_oracle.py checks the same against Apache's own class."""

from __future__ import annotations

from itertools import combinations

import pytest

from zkpy.cli.zoocfg import config_from_properties
from zkpy.config import QuorumConfig
from zkpy.ids import make_zxid
from zkpy.quorum import Election
from zkpy.quorum.hierarchical import HierarchyError, QuorumHierarchical
from zkpy.quorum.verifier import QuorumMaj, QuorumVerifier, config_string, quorum_verifier
from zkpy.wire.quorum import Notification, ServerState

FIVE = frozenset({1, 2, 3, 4, 5})
# The acceptance ensemble: three groups, server 1 weighs 2 in the first.
ACCEPTANCE = QuorumHierarchical(FIVE, frozenset(), {1: (1, 2, 3), 2: (4,), 3: (5,)}, {1: 2})


def subsets(sids: frozenset[int]) -> list[frozenset[int]]:
    return [frozenset(c) for n in range(len(sids) + 1) for c in combinations(sorted(sids), n)]


def test_the_acceptance_ensemble_against_a_hand_checked_table() -> None:
    # Worked by hand: group 1 weighs 2+1+1 = 4 and needs more than 2 (so {1,2}, {1,3}, {1,2,3});
    # groups 2 and 3 weigh 1 and need their one server; a quorum needs 2 of the 3 groups.
    minimal = [{4, 5}, {1, 2, 4}, {1, 3, 4}, {1, 2, 5}, {1, 3, 5}]
    table = {s: any(m <= s for m in minimal) for s in subsets(FIVE)}
    assert sum(table.values()) == 14  # 8 sets hold {4, 5}; 3 + 3 hold one of them and a group-1 majority
    for acks, expected in table.items():
        assert ACCEPTANCE.contains_quorum(acks) is expected, sorted(acks)
    majority = QuorumMaj.of(FIVE)
    disagree = {tuple(sorted(s)): table[s] for s in table if majority.contains_quorum(s) != table[s]}
    # a plain majority without a weighted quorum, and a weighted quorum of two servers in five
    assert disagree == {(1, 2, 3): False, (2, 3, 4): False, (2, 3, 5): False, (4, 5): True}


def test_weights_and_voting() -> None:
    assert [ACCEPTANCE.weight(s) for s in sorted(FIVE)] == [2, 1, 1, 1, 1]
    assert ACCEPTANCE.weight(99) == 0 and not ACCEPTANCE.is_voter(99)
    assert ACCEPTANCE.members == FIVE and ACCEPTANCE.group_of(3) == 1


def test_a_group_of_weight_zero_is_not_counted() -> None:
    qv = QuorumHierarchical(frozenset({1, 2, 3, 4}), frozenset(), {1: (1, 2), 2: (3,), 3: (4,)}, {4: 0})
    # two counted groups: both must have a majority
    assert qv.contains_quorum({1, 2, 3})
    assert not qv.contains_quorum({1, 3}) and not qv.contains_quorum({1, 2, 4}) and not qv.contains_quorum({3, 4})
    assert not qv.contains_quorum(set())


def test_a_weighted_observer_counts_in_its_group_but_never_acks() -> None:
    qv = QuorumHierarchical(frozenset({1, 2, 3}), frozenset({4}), {1: (1, 2, 4), 2: (3,)}, {4: 2})
    # group 1 weighs 1+1+2 = 4: servers 1 and 2 (2) are not more than half, with or without 4's ack
    assert not qv.contains_quorum({1, 2, 3, 4})
    assert qv.oddities() == [("weight.4", "server 4 is an observer: it never acks, yet its weight counts in "
                                          "group.1's (as in ZooKeeper 3.8)")]


@pytest.mark.parametrize(("groups", "weights", "observers", "key", "needle"), [
    ({1: (1, 2), 2: (2, 3)}, {}, (), "group.2", "also in group.1"),
    ({1: (1, 2)}, {}, (), "server.3", "no group"),
    ({}, {1: 2}, (), "weight.1", "without group lines"),
    ({1: (1, 2, 3, 4)}, {}, (4,), "group.1", "observer"),
    ({1: (1, 2, 3, 9)}, {}, (), "group.1", "not a server.N"),
    ({1: (1, 2, 3)}, {2: -1}, (), "weight.2", "negative"),
    ({1: (1, 2, 3)}, {1: 0, 2: 0, 3: 0}, (), "group.1", "weighs 0"),
])
def test_configurations_zookeeper_would_not_run_are_refused_naming_the_line(
        groups: dict[int, tuple[int, ...]], weights: dict[int, int], observers: tuple[int, ...], key: str,
        needle: str) -> None:
    with pytest.raises(HierarchyError) as info:
        QuorumHierarchical(frozenset({1, 2, 3}), frozenset(observers), groups, weights)
    assert info.value.key == key and needle in info.value.message


def quorum(lines: dict[str, str], myid: int = 1) -> QuorumConfig:
    props = {"tickTime": "2000", "initLimit": "10", "syncLimit": "5", "dataDir": "/data", **lines}
    cfg = config_from_properties(props, "zoo.cfg", lambda path: f"{myid}\n")
    assert cfg.quorum is not None
    return cfg.quorum


def test_config_string_is_what_apache_sent_for_the_same_zoo_cfg() -> None:
    # /zookeeper/config read from a 3-member Apache 3.8 ensemble started with this zoo.cfg
    q = quorum({"server.1": "127.0.0.1:44085:35375;127.0.0.1:35155", "server.2": "127.0.0.1:33223:59563;127.0.0.1:58965",
                "server.3": "127.0.0.1:55449:46411;127.0.0.1:47983", "group.1": "1:2", "group.2": "3",
                "weight.1": "2", "weight.2": "1", "weight.3": "5"})
    assert config_string(q) == (
        "server.1=127.0.0.1:44085:35375:participant;127.0.0.1:35155\n"
        "server.2=127.0.0.1:33223:59563:participant;127.0.0.1:58965\n"
        "server.3=127.0.0.1:55449:46411:participant;127.0.0.1:47983\n"
        "group.1=1:2\ngroup.2=3\nweight.1=2\nweight.2=1\nweight.3=5\nversion=0")


def test_config_string_fills_in_default_weights_and_orders_as_a_java_hashmap() -> None:
    servers = {f"server.{sid}": f"127.0.0.1:{2000 + sid}:{3000 + sid}" for sid in (1, 2, 16, 20)}
    q = quorum({**servers, "group.20": "20:1", "group.3": "16:2", "weight.16": "3"})
    assert config_string(q).split("\n")[4:] == [
        "group.3=16:2", "group.20=1:20", "weight.16=3", "weight.1=1", "weight.2=1", "weight.20=1", "version=0"]
    assert isinstance(quorum_verifier(q), QuorumHierarchical)
    assert isinstance(quorum_verifier(quorum(servers)), QuorumMaj)


def elect(sid: int, qv: QuorumVerifier) -> Election:
    e = Election(sid, qv, last_zxid=make_zxid(1, 5), current_epoch=1)
    e.start(0)
    e.ready()
    return e


def test_a_server_of_weight_zero_never_becomes_the_proposal() -> None:
    qv = QuorumHierarchical(frozenset({1, 2, 3}), frozenset(), {1: (1, 2, 3)}, {3: 0})
    e = elect(1, qv)
    e.step(3, Notification(ServerState.LOOKING, 3, make_zxid(1, 9), 1, 1), now_ms=1)
    assert e.proposal.leader == 1  # 3's newer log would win under a majority; weight 0 never does
    e.step(2, Notification(ServerState.LOOKING, 2, make_zxid(1, 5), 1, 1), now_ms=2)
    assert e.proposal.leader == 2  # a better vote for a weighed server still wins
    plain = elect(1, QuorumMaj.of([1, 2, 3]))
    plain.step(3, Notification(ServerState.LOOKING, 3, make_zxid(1, 9), 1, 1), now_ms=1)
    assert plain.proposal.leader == 3


def test_the_election_ends_on_a_weighted_quorum_not_a_head_count() -> None:
    # group 1 = {1, 2, 3} (1 weighs 2), groups {4} and {5}: 4 and 5 agreeing is a quorum
    e = elect(5, ACCEPTANCE)
    e.step(4, Notification(ServerState.LOOKING, 5, make_zxid(1, 5), 1, 1), now_ms=1)
    assert not e.decided
    e.tick(1_000)
    assert e.decided and e.ready().decision is not None
    # while three servers of the first group (a plain majority) agreeing is not
    e = elect(3, ACCEPTANCE)
    e.step(2, Notification(ServerState.LOOKING, 3, make_zxid(1, 5), 1, 1), now_ms=1)
    e.step(1, Notification(ServerState.LOOKING, 3, make_zxid(1, 5), 1, 1), now_ms=2)
    e.tick(1_000)
    assert not e.decided
