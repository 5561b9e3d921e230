"""Reconfiguration's pure parts: the next config of a reconfig request (3.8's PrepRequestProcessor
rules), config strings read back, what a member does with a newer config, the designated leader,
the files, and Zab's commit rule while a reconfig is pending (a quorum of both configs)."""

from __future__ import annotations

import pytest
from tests.unit.quorum.test_zab import make

from zkpy.config import LearnerType, QuorumConfig, QuorumServer, ServerConfig
from zkpy.errors import BadArgumentsError, NoAuthError, ReconfigDisabledError, UnimplementedError
from zkpy.ids import ServerId, make_zxid
from zkpy.quorum import dynconfig as dc
from zkpy.quorum import leader as zl
from zkpy.quorum.verifier import QuorumMaj, config_string
from zkpy.server.prep import Prep
from zkpy.tree.datatree import DataTree
from zkpy.wire.consts import OpCode
from zkpy.wire.proto import Id, ReconfigRequest
from zkpy.wire.quorum import PacketType
from zkpy.wire.txn import SetDataTxn


def server(sid: int, role: LearnerType = LearnerType.PARTICIPANT, client: bool = True) -> QuorumServer:
    return QuorumServer(ServerId(sid), "127.0.0.1", 2000 + sid, 3000 + sid, role, "127.0.0.1" if client else None,
                        4000 + sid if client else None)


THREE = (server(1), server(2), server(3))


def quorum(servers: tuple[QuorumServer, ...] = THREE, me: int = 1, version: int = 0x100000000) -> QuorumConfig:
    return QuorumConfig(servers, my_id=ServerId(me), init_limit_ticks=10, sync_limit_ticks=5, config_version=version,
                        standalone_enabled=False)


def test_a_config_string_reads_back() -> None:
    q = quorum((*THREE, server(4, LearnerType.OBSERVER), server(5, client=False)))
    servers, version = dc.parse_config_data(config_string(q).encode())
    assert servers == q.servers and version == 0x100000000


def test_incremental_add_and_remove() -> None:
    joined = dc.next_servers(THREE, "server.4=127.0.0.1:2004:3004:participant;127.0.0.1:4004", "2", None,
                             standalone_enabled=True)
    assert [s.sid for s in joined] == [1, 3, 4] and joined[-1] == server(4)
    # a joiner that is already a member is replaced (its role changes)
    promoted = dc.next_servers(THREE, "server.3=127.0.0.1:2003:3003:observer;127.0.0.1:4003", None, None,
                               standalone_enabled=True)
    assert promoted[2].role is LearnerType.OBSERVER


def test_non_incremental_members_by_commas_or_lines() -> None:
    text = "server.1=127.0.0.1:2001:3001;127.0.0.1:4001,server.2=127.0.0.1:2002:3002;127.0.0.1:4002\n" \
           "server.5=127.0.0.1:2005:3005:observer;127.0.0.1:4005"
    servers = dc.next_servers(THREE, None, None, text, standalone_enabled=True)
    assert [(s.sid, s.role) for s in servers] == [(1, LearnerType.PARTICIPANT), (2, LearnerType.PARTICIPANT),
                                                  (5, LearnerType.OBSERVER)]


@pytest.mark.parametrize(("joining", "leaving", "members", "error"), [
    ("server.9=garbage", None, None, dc.BadReconfig),
    ("server.4=127.0.0.1:2004:3004", None, None, dc.BadReconfig),  # no client address
    ("server.4", None, None, dc.BadReconfig),  # no '='
    ("server.4=127.0.0.1:2001:3004;4004", None, None, dc.BadReconfig),  # server 1's peer address
    (None, "x", None, ValueError),  # 3.8: NumberFormatException, answered MarshallingError
    (None, "2,3", None, dc.BadReconfig),  # one voter left: fewer than 2 with standaloneEnabled
    (None, None, "server.1=x", dc.BadReconfig),
    (None, None, "tickTime=2", dc.BadReconfig),
    (None, None, "server.1=127.0.0.1:2001:3001:observer;4001", ValueError),  # 3.8: MarshallingError
])
def test_bad_requests(joining: str | None, leaving: str | None, members: str | None, error: type) -> None:
    with pytest.raises(error):
        dc.next_servers(THREE, joining, leaving, members, standalone_enabled=True)


def test_one_voter_is_enough_without_standalone_enabled() -> None:
    assert [s.sid for s in dc.next_servers(THREE, None, "2,3", None, standalone_enabled=False)] == [1]


def data_of(servers: tuple[QuorumServer, ...], version: int) -> bytes:
    return config_string(quorum(servers, version=version)).encode()


def test_activation_keeps_a_follower_whose_leader_stays() -> None:
    act = dc.activation(quorum(me=2), data_of((*THREE, server(4)), 0x100000003), leader=1, designated=1)
    assert act is not None and act.restart is None and act.quorum.config_version == 0x100000003
    assert [s.sid for s in act.quorum.servers] == [1, 2, 3, 4]
    # not newer: nothing to do
    assert dc.activation(quorum(me=2), data_of(THREE, 0x100000000), leader=1, designated=1) is None


def test_activation_restarts_on_a_new_leader_or_role() -> None:
    act = dc.activation(quorum(me=2), data_of((server(2), server(3)), 0x100000005), leader=1, designated=2)
    assert act is not None and act.restart is not None and "designates server 2" in act.restart
    observer = dc.activation(quorum(me=2), data_of((server(1), server(2, LearnerType.OBSERVER), server(3)), 0x100000009),
                             leader=1, designated=1)
    assert observer is not None and observer.restart is not None and "observer" in observer.restart
    # NEWLEADER's config (no designated leader) without my leader among its voters
    gone = dc.activation(quorum(me=2), data_of((server(2), server(3)), 0x100000005), leader=1, designated=None)
    assert gone is not None and gone.restart is not None


def test_a_removed_follower_stays_as_a_non_voting_follower() -> None:
    act = dc.activation(quorum(me=3), data_of((server(1), server(2)), 0x100000004), leader=1, designated=1)
    assert act is not None and act.restart is None and act.quorum.me is None


def test_designated_leader() -> None:
    new = QuorumMaj.of([2, 4])
    assert dc.designated_leader(2, new, {2, 4}, []) == 2  # a voter of the new config stays leader
    assert dc.designated_leader(3, new, {2, 3, 4}, []) == 2  # the smallest sid that acked
    assert dc.designated_leader(3, new, {2, 3, 4}, [{3, 4}]) == 4  # ... of those that acked the most after


def test_files_as_zookeeper_writes_them(tmp_path: object) -> None:
    q = quorum()
    assert dc.dynamic_file_text(q) == config_string(q).rsplit("\n", 1)[0]
    assert not dc.dynamic_file_text(q).endswith("\n") and "version" not in dc.dynamic_file_text(q)
    assert dc.dynamic_file_name("/c/zoo.cfg", 0x100000003) == "/c/zoo.cfg.dynamic.100000003"
    static = "tickTime=500\nclientPort=4001\nclientPortAddress=127.0.0.1\nserver.1=a:1:2\ndataDir=/d\n"
    assert dc.static_file_text(static, "/c/zoo.cfg.dynamic.9", server(1)) == \
        "tickTime=500\ndataDir=/d\ndynamicConfigFile=/c/zoo.cfg.dynamic.9\n"
    again = dc.static_file_text("tickTime=500\ndynamicConfigFile=/c/zoo.cfg.dynamic.9\n", "/c/zoo.cfg.dynamic.a",
                                server(1))
    assert again == "tickTime=500\ndynamicConfigFile=/c/zoo.cfg.dynamic.a\n"
    # without a client address on my line, clientPort stays in zoo.cfg
    assert "clientPort=4001" in dc.static_file_text(static, "/x", server(1, client=False))


def test_a_reconfig_commits_only_with_a_quorum_of_both_configs() -> None:
    net = make(4)  # leader 4, learners 1..3 all voters; the new config is {4, 5, 6}: 5 and 6 never ack
    net.pump()
    z = make_zxid(1, 1)
    net.leader.propose(z, b"reconfig", QuorumMaj.of([4, 5, 6]))
    net.leader.logged(z)
    net.pump()
    assert net.leader_commits == 0  # the old config has its quorum, the new one does not
    z2 = make_zxid(1, 2)
    net.leader.propose(z2, b"after")  # a proposal after a pending reconfig needs both quorums too
    net.leader.logged(z2)
    net.pump()
    assert net.leader_commits == 0 and net.leader.outstanding[1].next_verifier is not None


def test_a_committed_reconfig_activates_and_hands_over() -> None:
    net = make(3)  # leader 3, learners 1 and 2; the new config {1, 2} drops the leader
    net.pump()
    z = make_zxid(1, 1)
    net.leader.propose(z, b"reconfig", QuorumMaj.of([1, 2], version=z))
    net.leader.logged(z)
    net.pump()
    assert net.leader_commits == 1
    assert "L->1 COMMITANDACTIVATE" in net.log and "L->1 COMMIT" not in net.log
    assert any(line.startswith("L Activate(zxid=4294967297") and "designated=1" in line for line in net.log)
    assert not net.leader.allowed_to_commit and net.leader.verifier.voting == {1, 2}
    net.leader.disconnected(1)
    net.leader.disconnected(2)
    assert any(isinstance(a, zl.Failed) for a in net.leader.ready())


def test_observers_get_inform_and_activate() -> None:
    net = make(4, observers=(2,))
    net.pump()
    z = make_zxid(1, 1)
    net.leader.propose(z, b"reconfig", QuorumMaj.of([1, 3, 4], [2], version=z))
    net.leader.logged(z)
    net.pump()
    assert "L->2 INFORMANDACTIVATE" in net.log
    assert net.applied[2] == [z] and any(line.startswith("2 Activate(") for line in net.log)
    assert PacketType.INFORMANDACTIVATE == 19


def test_election_takes_a_designated_leader() -> None:
    from zkpy.quorum.election import Election
    from zkpy.wire.quorum import ServerState
    e = Election(3, QuorumMaj.of([1, 2, 3]), last_zxid=5, current_epoch=1)
    decision = e.designate(2, 7)
    assert decision.leader == 2 and decision.state is ServerState.FOLLOWING and e.current_vote.leader == 2
    assert e.current_vote.zxid == 7


class FakeReconfigurer:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.proposed_at: list[int] = []

    def next_config(self, request: ReconfigRequest, zxid: int) -> bytes:
        if self.error is not None:
            raise self.error
        return b"server.1=127.0.0.1:2001:3001:participant;127.0.0.1:4001\nversion=" + f"{zxid:x}".encode()

    def proposed(self, zxid: int, data: bytes) -> None:
        self.proposed_at.append(zxid)


def prep_reconfig(enabled: bool, reconfigurer: FakeReconfigurer | None, auth: list[Id]) -> tuple[object, object]:
    prep = Prep(DataTree(), ServerConfig(reconfig_enabled=enabled))
    prep.reconfigurer = reconfigurer
    hdr, txn, error = prep.prep(OpCode.RECONFIG, ReconfigRequest(None, "2", None, -1), 1, 1, auth, 7, 0, True)
    return txn, error


def test_prep_checks_a_reconfig_in_zookeepers_order() -> None:
    world = [Id("world", "anyone")]
    superuser = [Id("super", "")]
    _, error = prep_reconfig(False, FakeReconfigurer(), superuser)
    assert isinstance(error, ReconfigDisabledError)
    _, error = prep_reconfig(True, None, superuser)  # a standalone server (no leader)
    assert isinstance(error, UnimplementedError)
    # the new config's checks come before the ACL: a bad request from anyone is BadArguments
    _, error = prep_reconfig(True, FakeReconfigurer(BadArgumentsError("no")), world)
    assert isinstance(error, BadArgumentsError)
    fake = FakeReconfigurer()
    _, error = prep_reconfig(True, fake, world)
    assert isinstance(error, NoAuthError) and fake.proposed_at == []
    txn, error = prep_reconfig(True, fake, superuser)
    assert error is None and fake.proposed_at == [7]
    assert isinstance(txn, SetDataTxn) and txn.path == "/zookeeper/config" and txn.version == -1
    assert txn.data.endswith(b"version=7")


def test_newleader_with_a_newer_config_needs_a_quorum_of_it_too() -> None:
    net = make(3)  # leader 3, learners 1 and 2; NEWLEADER carries a config {3, 4, 5} whose 4 and 5 are away
    net.leader.newleader_verifier = QuorumMaj.of([3, 4, 5])
    net.pump()
    assert not net.leader.established
    net = make(3)
    net.leader.newleader_verifier = QuorumMaj.of([1, 2, 3, 4, 5])  # 1, 2 and 3 are a quorum of it
    net.pump()
    assert net.leader.established
