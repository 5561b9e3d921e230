"""Reconfiguration in the simulator: the production member cores add and remove members while
faults happen, and the checker watches every step (one leader per epoch, nothing committed lost,
same zxid -> same digest). Each scenario then asserts that every server agrees on the active
config, that it is the one ``/zookeeper/config`` holds, and that the acknowledged writes survived.

Seeds are printed on failure (``Cluster.describe`` names the seed and the last events).
"""

from __future__ import annotations

import pytest

from zkpy.errors import ReconfigInProcessError
from zkpy.quorum.dynconfig import parse_config_data
from zkpy.testing.sim import SimConfig
from zkpy.testing.sim.terms import SimLeaderTerm
from zkpy.tree.acl import OPEN_ACL_UNSAFE
from zkpy.wire.consts import CreateMode, OpCode
from zkpy.wire.proto import CreateRequest, ReconfigRequest

from .scenario import Script

CONFIG = SimConfig(nodes=5, session_timeout_ms=60_000, fsync_ms=(2, 4), reconfig=True)


def line(sid: int, role: str = "participant") -> str:
    return f"server.{sid}=10.0.0.{sid}:2888:3888:{role};10.0.0.{sid}:2181"


def reconfig(s: Script, sid: int, joining: str | None = None, leaving: str | None = None,
             members: str | None = None) -> None:
    assert s.c.submit(sid, OpCode.RECONFIG, "/zookeeper/config", ReconfigRequest(joining, leaving, members, -1)), \
        f"server {sid} is not serving"


def config_of(s: Script, sid: int) -> tuple[list[int], list[int], int]:
    """The voters, observers and version of server ``sid``'s active config."""
    q = s.node(sid).quorum
    return (sorted(x.sid for x in q.participants), sorted(x.sid for x in q.observers), q.config_version)


def agreed(s: Script) -> tuple[list[int], list[int], int]:
    """Every live server's active config, the same, and the one its /zookeeper/config holds."""
    configs = {sid: config_of(s, sid) for sid, n in s.c.nodes.items() if n.alive}
    first = next(iter(configs.values()))
    assert all(c == first for c in configs.values()), f"servers disagree: {configs}\n{s.c.describe()}"
    for sid, n in s.c.nodes.items():
        if n.alive and n.tree is not None:
            node = n.tree.get("/zookeeper/config")
            assert node is not None and node.data
            servers, version = parse_config_data(node.data)
            assert version == first[2], (sid, version, first)
    return first


def settled(s: Script, version_above: int) -> bool:
    live = [n for n in s.c.nodes.values() if n.alive]
    return s.c.converged() and all(n.quorum.config_version > version_above for n in live)


def write(s: Script, path: str) -> None:
    leader = s.leader()
    req = CreateRequest(path, path.encode(), list(OPEN_ACL_UNSAFE), int(CreateMode.PERSISTENT))  # type: ignore[call-arg]
    assert s.c.submit(leader.sid, OpCode.CREATE, path, req)
    s.wait(lambda: s.acked(path), f"the write of {path}")


@pytest.mark.parametrize("seed", range(1, 41))
def test_members_removed_and_added_while_servers_crash(seed: int) -> None:
    s = Script(seed, CONFIG)
    leader = s.converge()
    s.open_session(leader.sid)
    before = agreed(s)
    assert before[0] == [1, 2, 3, 4, 5] and before[2] > 0  # the first established config has a version

    # remove a follower; a crash of another follower meanwhile does not stop it (4 of 5 remain)
    gone = min(sid for sid in s.c.nodes if sid != leader.sid)
    crashed = max(sid for sid in s.c.nodes if sid != leader.sid)
    reconfig(s, leader.sid, leaving=str(gone))
    # one reconfig at a time: a second one prepped before the first commits is ReconfigInProgress
    term = leader.term
    assert isinstance(term, SimLeaderTerm)
    with pytest.raises(ReconfigInProcessError):
        term.core.next_config(ReconfigRequest(None, str(crashed), None, -1), 0)  # type: ignore[arg-type]
    s.c.crash(crashed)
    s.wait(lambda: s.c.leader() is not None and s.c.leader().quorum.config_version > before[2],  # type: ignore[union-attr]
           "the removal to commit")
    write(s, "/after-remove")
    s.c.restart(crashed)
    s.wait(lambda: settled(s, before[2]), "every server on the new config")
    removed = agreed(s)
    assert gone not in removed[0] and len(removed[0]) == 4

    # remove the leader: it hands over to the server it designates, no election
    leader = s.leader()
    reconfig(s, leader.sid, leaving=str(leader.sid))
    s.wait(lambda: s.c.leader() is not None and s.c.leader().sid != leader.sid, "a new leader")
    s.wait(lambda: settled(s, removed[2]), "every server on the config without the old leader")
    handed = agreed(s)
    assert leader.sid not in handed[0] and s.c.stats["configs_activated"] > 0
    write(s, "/after-handover")

    # the first one comes back; the leader crashes right after proposing it
    leader = s.leader()
    reconfig(s, leader.sid, joining=line(gone))
    s.run(5)
    s.c.crash(leader.sid, "power")
    s.run(200)
    s.c.restart(leader.sid)
    s.wait(lambda: s.c.converged(), "the ensemble to converge after the leader's crash", 60_000)
    after = agreed(s)
    # the reconfig committed or not, but everyone agrees, and its member set is one of the two
    assert after[0] in (handed[0], sorted([*handed[0], gone])), after
    write(s, "/after-crash")
    s.final()
    for path in ("/after-remove", "/after-handover", "/after-crash"):
        assert s.everywhere(path)


@pytest.mark.parametrize("seed", range(1, 21))
def test_shrinking_to_three_while_the_two_removed_are_cut_off(seed: int) -> None:
    s = Script(seed, CONFIG)
    leader = s.converge()
    s.open_session(leader.sid)
    before = agreed(s)
    others = [sid for sid in s.c.nodes if sid != leader.sid]
    keep, drop = sorted([leader.sid, *others[:2]]), others[2:]
    reconfig(s, leader.sid, members=",".join(line(sid) for sid in keep))
    s.c.partition(drop, keep)
    s.wait(lambda: s.c.leader() is not None and s.c.leader().quorum.config_version > before[2],  # type: ignore[union-attr]
           "the shrink to commit without the two cut off")
    write(s, "/shrunk")
    s.c.heal()
    s.wait(lambda: settled(s, before[2]), "every server on the three-member config", 60_000)
    voters, observers, _ = agreed(s)
    assert voters == keep and observers == []
    # the two removed are not shut down: they follow without a vote, as in 3.8
    assert all(s.node(sid).mode == "follower" for sid in drop), [s.node(sid).mode for sid in drop]
    s.final()
    assert s.everywhere("/shrunk")


@pytest.mark.parametrize("seed", range(1, 11))
def test_an_observer_promoted_to_participant_and_back(seed: int) -> None:
    s = Script(seed, SimConfig(nodes=4, observers=1, session_timeout_ms=60_000, fsync_ms=(2, 4), reconfig=True))
    leader = s.converge()
    s.open_session(leader.sid)
    before = agreed(s)
    assert before[1] == [4]
    reconfig(s, leader.sid, joining=line(4))
    s.wait(lambda: settled(s, before[2]), "the promotion to be active everywhere")
    promoted = agreed(s)
    assert promoted[0] == [1, 2, 3, 4] and promoted[1] == []
    s.wait(lambda: s.node(4).mode == "follower", "the old observer to follow")
    write(s, "/promoted")
    leader = s.leader()
    reconfig(s, leader.sid, joining=line(4, "observer"))
    s.wait(lambda: settled(s, promoted[2]), "the demotion to be active everywhere")
    assert agreed(s)[1] == [4]
    s.wait(lambda: s.node(4).mode == "observer", "the member to observe again")
    s.final()
    assert s.everywhere("/promoted")
