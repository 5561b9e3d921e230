"""Hierarchical and weighted quorums in the simulator, with the production cores: the ensemble
commits exactly when QuorumHierarchical says a quorum is up, where a plain majority says otherwise;
random runs with groups and weights (one with a server of weight 0) keep every invariant.

The acceptance ensemble: group.1=1:2:3 (server 1 weighs 2), group.2=4, group.3=5. Servers 1, 2, 3
are a plain majority but hold one group of three: no quorum. Servers 4 and 5 are two of five but
hold two groups of three: a quorum."""

from __future__ import annotations

import dataclasses

import pytest

from zkpy.quorum.verifier import QuorumMaj
from zkpy.testing.sim import run_seed
from zkpy.testing.sim.cluster import Hierarchy

from .scenario import SCRIPT, Script

ACCEPTANCE: Hierarchy = (((1, (1, 2, 3)), (2, (4,)), (3, (5,))), ((1, 2),))
# server 5 weighs 0: its group does not count, it never leads; a quorum is 1, 2, 3 and 4 together
ZERO: Hierarchy = (((1, (1, 2)), (2, (3, 4)), (3, (5,))), ((5, 0),))


def script() -> Script:
    groups, weights = ACCEPTANCE
    return Script(config=dataclasses.replace(SCRIPT, nodes=5, groups=groups, weights=weights))


def serving(s: Script, sids: tuple[int, ...]) -> bool:
    return any(s.node(sid).mode in ("leader", "follower") for sid in sids)


def test_a_plain_majority_without_a_weighted_quorum_stops_writes() -> None:
    s = script()
    assert QuorumMaj.of(range(1, 6)).contains_quorum({1, 2, 3}) and not s.c.verifier.contains_quorum({1, 2, 3})
    s.converge()
    s.c.crash(4)
    s.c.crash(5)
    s.wait(lambda: not serving(s, (1, 2, 3)), "the followers of 5 to notice it is gone")
    # 1, 2 and 3 are up and connected for 20 s: nobody may lead, so no write can commit
    assert not s.c.run_until(lambda: serving(s, (1, 2, 3)), 20_000)
    assert s.c.leader() is None
    s.c.restart(4)  # 1, 2, 3 and 4: group 1 has 4 of its 4 weight, group 2 its one server
    leader = s.converge(only=(1, 2, 3, 4))
    assert leader.sid == 4  # the highest sid of the quorum; 5 is still down
    s.open_session(1)
    s.create(1, "/after")
    s.wait(lambda: s.acked("/after"), "/after")
    s.c.restart(5)
    s.final()
    assert s.everywhere("/after")


def test_a_weighted_quorum_without_a_plain_majority_keeps_writing() -> None:
    s = script()
    assert not QuorumMaj.of(range(1, 6)).contains_quorum({4, 5}) and s.c.verifier.contains_quorum({4, 5})
    s.converge()
    s.open_session(1)
    s.create(1, "/before")
    s.wait(lambda: s.acked("/before"), "/before")
    for sid in (1, 2, 3):
        s.c.crash(sid)
    leader = s.converge(only=(4, 5))
    s.open_session(leader.sid, client=1)
    s.create(leader.sid, "/two-of-five", client=1)
    s.wait(lambda: s.acked("/two-of-five"), "/two-of-five on servers 4 and 5 alone")
    for sid in (1, 2, 3):
        s.c.restart(sid)
    s.final()
    assert s.everywhere("/before") and s.everywhere("/two-of-five")


def test_a_server_of_weight_zero_never_leads() -> None:
    groups, weights = ZERO
    s = Script(config=dataclasses.replace(SCRIPT, nodes=5, groups=groups, weights=weights))
    assert s.converge().sid == 4  # with equal logs the highest sid would lead: 5 weighs 0
    s.open_session(1)
    s.create(1, "/a")
    s.wait(lambda: s.acked("/a"), "/a")
    s.c.crash(4)  # no quorum without 4; back, it leads again, and 5 still never does
    s.c.restart(4)
    assert s.converge().sid == 4
    s.final()


@pytest.mark.parametrize("seed", range(12))
def test_random_runs_with_groups_and_weights_keep_every_invariant(seed: int) -> None:
    hierarchy = ACCEPTANCE if seed % 2 == 0 else ZERO
    print(f"seed={seed} hierarchy={hierarchy}")
    try:
        run_seed(seed, nodes=5, hierarchy=hierarchy)
    except AssertionError as exc:
        pytest.fail(f"seed {seed} with {hierarchy}\n{exc}", pytrace=False)
