"""Local sessions (localSessionsEnabled) in the pure pipeline: the tracker, a leader's and a
learner's request pipeline driven with bytes and a fake clock, the learner's requests handed to
the leader and the leader's txns applied back on the learner as Zab would."""

from __future__ import annotations

from typing import Any

import pytest

from zkpy.config import QuorumConfig, QuorumServer, ServerConfig
from zkpy.errors import Code
from zkpy.ids import ServerId
from zkpy.server.connection import Connection
from zkpy.server.core import ServerCore
from zkpy.server.leader import LeaderServerCore
from zkpy.server.learner import LearnerServerCore
from zkpy.server.local_sessions import LocalSessions, needs_global
from zkpy.server.outputs import Forward, Propose, Revalidate, Touches
from zkpy.server.sessions import session_password
from zkpy.wire.consts import CreateMode, OpCode
from zkpy.wire.jute import INT
from zkpy.wire.multi import Op, read_multi_response, write_multi_request
from zkpy.wire.proto import (
    ACL,
    ConnectRequest,
    ConnectResponse,
    CreateRequest,
    ExistsRequest,
    Id,
    ReplyHeader,
    RequestHeader,
)
from zkpy.wire.txn import ErrorTxn

OPEN = [ACL(31, Id("world", "anyone"))]
WALL = 1_700_000_000_000
TICK = 100


# ---- the tracker


def test_tracker_upgrade_moves_a_live_local_session_to_upgrading_once() -> None:
    local = LocalSessions(TICK, 0, upgrading_enabled=True)
    local.add(7, 1000, 0)
    assert local.is_local(7) and local.is_live(7) and len(local) == 1
    assert local.upgrade(7) == 1000
    assert not local.is_local(7) and local.upgrading == {7: 1000} and len(local) == 0
    assert local.upgrade(7) is None  # not local any more: no second createSession
    local.committed(7)
    assert local.upgrading == {}


def test_tracker_expires_untouched_sessions_and_forgets_them() -> None:
    local = LocalSessions(TICK, 0, upgrading_enabled=False)
    local.add(1, 1000, 0)
    local.add(2, 1000, 0)
    assert local.touch(2, 600)
    assert local.expired(1100) == [1]  # its bucket passed; 2 was touched
    assert not local.is_local(1) and not local.touch(1, 1100)
    assert local.expired(1800) == [2]
    assert len(local) == 0 and local.expired(10_000) == []


def test_needs_global_only_for_ephemeral_creates() -> None:
    def create(mode: CreateMode) -> CreateRequest:
        return CreateRequest("/a", b"", OPEN, int(mode))

    assert needs_global(OpCode.CREATE, create(CreateMode.EPHEMERAL))
    assert needs_global(OpCode.CREATE2, create(CreateMode.EPHEMERAL_SEQUENTIAL))
    assert not needs_global(OpCode.CREATE, create(CreateMode.PERSISTENT))
    assert not needs_global(OpCode.CREATE_CONTAINER, create(CreateMode.CONTAINER))
    assert not needs_global(OpCode.SET_DATA, None)
    assert needs_global(OpCode.MULTI, [Op(OpCode.CREATE, create(CreateMode.PERSISTENT)),
                                       Op(OpCode.CREATE, create(CreateMode.EPHEMERAL))])
    assert not needs_global(OpCode.MULTI, [Op(OpCode.CREATE, create(CreateMode.PERSISTENT))])


# ---- pipelines


def _config(my_id: int, local: bool = True, upgrading: bool = True) -> ServerConfig:
    servers = tuple(QuorumServer(ServerId(i), "127.0.0.1", 2000 + i, 3000 + i) for i in (1, 2, 3))
    quorum = QuorumConfig(servers, ServerId(my_id), 10, 5, local_sessions=local, local_sessions_upgrading=upgrading)
    return ServerConfig(tick_ms=TICK, server_id=my_id, quorum=quorum)


class Member:
    """One pipeline with connections; ``now`` advances with ``advance``."""

    def __init__(self, core: ServerCore) -> None:
        self.core = core
        self.ids = 0
        self.now = core.now_ms

    def connect(self, session: int = 0, passwd: bytes = bytes(16), timeout: int = 1000) -> tuple[Connection, ConnectResponse]:
        self.ids += 1
        conn = self.core.open(self.ids, "127.0.0.1", 40000 + self.ids)
        payload = ConnectRequest(0, 0, timeout, session, passwd).to_bytes() + b"\x00"
        self.core.receive(conn, INT.pack(len(payload)) + payload)
        frames = conn_frames(conn)
        return conn, ConnectResponse.from_bytes(frames[0]) if frames else None  # type: ignore[return-value]

    def send(self, conn: Connection, xid: int, op: int, record: Any = None, raw: bytes = b"") -> None:
        payload = RequestHeader(xid, op).to_bytes() + (record.to_bytes() if record is not None else raw)
        self.core.receive(conn, INT.pack(len(payload)) + payload)

    def advance(self, ms: int) -> None:
        self.now += ms
        self.core.set_time(self.now, WALL + self.now)
        self.core.tick()


def conn_frames(conn: Connection) -> list[bytes]:
    return [f[4:] for f in conn.take_output()]


def replies(conn: Connection) -> list[tuple[int, int]]:
    return [(h.xid, h.err) for h in (ReplyHeader.read(f, 0)[0] for f in conn_frames(conn))]


def proposals(core: ServerCore) -> list[Propose]:
    return [o for o in core.ready() if isinstance(o, Propose)]


def ephemeral(path: str) -> CreateRequest:
    return CreateRequest(path, b"", OPEN, int(CreateMode.EPHEMERAL))


def persistent(path: str) -> CreateRequest:
    return CreateRequest(path, b"", OPEN, 0)


class Ensemble:
    """A leader (myid 2) and a learner (myid 1): the learner's forwards go to the leader, the
    leader's txns are persisted and applied on both, as one Zab round would."""

    def __init__(self, upgrading: bool = True) -> None:
        self.leader = Member(LeaderServerCore(_config(2, upgrading=upgrading), 0, WALL))
        self.learner = Member(LearnerServerCore(_config(1, upgrading=upgrading), 0, WALL))
        self.revalidated: list[tuple[int, bool]] = []

    def round(self) -> list[Propose]:
        """Hand the learner's output to the leader, commit every proposal everywhere."""
        for o in self.learner.core.ready():
            if isinstance(o, Forward):
                self.leader.core.learner_request(o.session, o.cxid, o.op, o.body, o.auth)  # type: ignore[attr-defined]
            elif isinstance(o, Revalidate):
                valid = self.leader.core.revalidate(o.session, o.timeout_ms)  # type: ignore[attr-defined]
                self.revalidated.append((o.session, valid))
                self.learner.core.revalidated(o.session, valid)  # type: ignore[attr-defined]
        out = proposals(self.leader.core)
        self.leader.core.apply_persisted(len(out))
        for p in out:
            self.learner.core.apply_committed(p.hdr, p.txn)  # type: ignore[attr-defined]
        return out

    def advance(self, ms: int) -> None:
        self.leader.advance(ms)
        self.learner.advance(ms)
        self.round()


def test_a_local_session_needs_no_txn_to_be_created_used_or_closed() -> None:
    m = Member(LeaderServerCore(_config(2), 0, WALL))
    conn, rsp = m.connect()
    assert rsp.timeOut == 1000 and rsp.sessionId >> 56 == 2  # the member's id in the top byte
    assert proposals(m.core) == [] and len(m.core.local or ()) == 1 and not m.core.sessions.sessions
    m.send(conn, 1, OpCode.EXISTS, ExistsRequest("/", False))
    m.send(conn, 2, OpCode.CLOSE_SESSION)
    assert replies(conn) == [(1, 0), (2, 0)]
    assert conn.closing and proposals(m.core) == [] and len(m.core.local or ()) == 0


def test_a_local_close_waits_for_the_sessions_writes() -> None:
    m = Member(LeaderServerCore(_config(2), 0, WALL))
    conn, _ = m.connect()
    m.send(conn, 1, OpCode.CREATE, persistent("/p"))
    m.send(conn, 2, OpCode.CLOSE_SESSION)
    assert replies(conn) == []
    props = proposals(m.core)
    assert [p.hdr.type for p in props] == [OpCode.CREATE]  # a local session writes; its close is no txn
    m.core.apply_persisted(1)
    assert replies(conn) == [(1, 0), (2, 0)]


def test_leader_upgrades_a_local_session_before_its_ephemeral_create() -> None:
    m = Member(LeaderServerCore(_config(2, upgrading=True), 0, WALL))
    conn, rsp = m.connect()
    m.send(conn, 1, OpCode.CREATE, ephemeral("/e"))
    props = proposals(m.core)
    assert [(p.hdr.type, p.hdr.clientId) for p in props] == [(OpCode.CREATE_SESSION, rsp.sessionId),
                                                               (OpCode.CREATE, rsp.sessionId)]
    assert props[0].txn.timeOut == 1000
    m.core.apply_persisted(2)
    assert replies(conn) == [(1, 0)]
    assert m.core.tree.ephemerals[rsp.sessionId] == {"/e"}
    assert len(m.core.local or ()) == 0 and m.core.sessions.is_live(rsp.sessionId)
    # now global: a second ephemeral needs no upgrade; the close is a txn that takes the ephemerals
    m.send(conn, 2, OpCode.CREATE, ephemeral("/e2"))
    m.send(conn, 3, OpCode.CLOSE_SESSION)
    assert [p.hdr.type for p in proposals(m.core)] == [OpCode.CREATE, OpCode.CLOSE_SESSION]
    m.core.apply_persisted(2)
    assert replies(conn) == [(2, 0), (3, 0)] and rsp.sessionId not in m.core.tree.ephemerals


def test_without_upgrading_an_ephemeral_create_fails_and_the_session_stays_local() -> None:
    m = Member(LeaderServerCore(_config(2, upgrading=False), 0, WALL))
    conn, rsp = m.connect()
    out = bytearray()
    write_multi_request(out, [Op(OpCode.CREATE, persistent("/m")), Op(OpCode.CREATE, ephemeral("/m/e"))])
    m.send(conn, 1, OpCode.CREATE, ephemeral("/e"))
    m.send(conn, 2, OpCode.MULTI, raw=bytes(out))
    m.send(conn, 3, OpCode.CREATE, persistent("/p"))
    props = proposals(m.core)
    assert [p.hdr.type for p in props] == [OpCode.ERROR, OpCode.MULTI, OpCode.CREATE]
    assert props[0].txn == ErrorTxn(Code.EPHEMERALONLOCALSESSION)
    m.core.apply_persisted(3)
    frames = conn_frames(conn)
    assert [ReplyHeader.read(f, 0)[0].err for f in frames] == [Code.EPHEMERALONLOCALSESSION, 0, 0]
    hdr, pos = ReplyHeader.read(frames[1], 0)
    assert [r.err for r in read_multi_response(frames[1], pos)[0]] == [0, Code.EPHEMERALONLOCALSESSION]
    assert m.core.local is not None and m.core.local.is_live(rsp.sessionId) and not m.core.sessions.sessions


def test_a_local_session_expires_on_its_member_without_a_txn() -> None:
    m = Member(LeaderServerCore(_config(2), 0, WALL))
    conn, rsp = m.connect(timeout=1000)
    m.advance(900)
    m.send(conn, 1, OpCode.EXISTS, ExistsRequest("/", False))  # touched: lives on
    m.advance(900)
    assert not conn.closing
    m.advance(1200)
    assert conn.closing and proposals(m.core) == [] and len(m.core.local or ()) == 0
    assert m.core.metrics.counters["stale_sessions_expired"] == 1
    again, rsp2 = m.connect(rsp.sessionId, rsp.passwd)
    assert rsp2.sessionId == 0 and again.closing  # expired


def test_a_local_session_resumes_on_its_member_only_with_its_password() -> None:
    m = Member(LeaderServerCore(_config(2), 0, WALL))
    first, rsp = m.connect()
    wrong, refused = m.connect(rsp.sessionId, bytes(16))
    assert refused.sessionId == 0 and wrong.closing and not first.closing
    second, resumed = m.connect(rsp.sessionId, session_password(rsp.sessionId))
    assert resumed.sessionId == rsp.sessionId and first.closing and not second.closing


def test_learner_local_session_upgrade_goes_to_the_leader_before_the_create() -> None:
    ens = Ensemble(upgrading=True)
    conn, rsp = ens.learner.connect()
    sid = rsp.sessionId
    assert sid >> 56 == 1 and not [o for o in ens.learner.core.ready() if isinstance(o, Forward)]  # nothing to the leader
    ens.learner.send(conn, 1, OpCode.CREATE, persistent("/p"))  # a local session writes through the leader
    ens.learner.send(conn, 2, OpCode.CREATE, ephemeral("/p/e"))
    out = [o for o in ens.learner.core.ready() if isinstance(o, Forward)]
    assert [(o.op, o.cxid) for o in out] == [
        (OpCode.CREATE, 1), (OpCode.CREATE_SESSION, 0), (OpCode.CREATE, 2)]
    for o in out:
        ens.leader.core.learner_request(o.session, o.cxid, o.op, o.body, o.auth)  # type: ignore[attr-defined]
    props = proposals(ens.leader.core)
    assert [p.hdr.type for p in props] == [OpCode.CREATE, OpCode.CREATE_SESSION, OpCode.CREATE]
    ens.leader.core.apply_persisted(3)
    for p in props:
        ens.learner.core.apply_committed(p.hdr, p.txn)  # type: ignore[attr-defined]
    assert replies(conn) == [(1, 0), (2, 0)]
    learner = ens.learner.core
    assert learner.local is not None and not learner.local.is_local(sid) and not learner.local.upgrading
    assert learner.sessions.is_live(sid) and ens.leader.core.tree.ephemerals[sid] == {"/p/e"}
    # global now: it moves to the leader and its ephemeral goes when the leader expires it
    moved, again = ens.leader.connect(sid, session_password(sid))
    assert again.sessionId == sid
    ens.advance(3000)
    assert sid not in ens.leader.core.tree.ephemerals and sid not in learner.tree.ephemerals


def test_learner_without_upgrading_answers_ephemeral_on_local_session() -> None:
    ens = Ensemble(upgrading=False)
    conn, rsp = ens.learner.connect()
    ens.learner.send(conn, 1, OpCode.CREATE, ephemeral("/e"))
    props = ens.round()
    # the leader sees a session that is not global: its own answer (SessionExpired) is not the client's
    assert [p.hdr.type for p in props] == [OpCode.ERROR] and props[0].txn == ErrorTxn(Code.SESSIONEXPIRED)
    assert replies(conn) == [(1, Code.EPHEMERALONLOCALSESSION)]
    assert "/e" not in ens.leader.core.tree.ephemerals.get(rsp.sessionId, set())


def test_a_local_session_moved_to_another_member_is_expired_there() -> None:
    ens = Ensemble()
    conn, rsp = ens.learner.connect()
    sid = rsp.sessionId
    moved, refused = ens.leader.connect(sid, rsp.passwd)
    assert refused.sessionId == 0 and moved.closing
    # and the other way: the leader's local session, revalidated for the learner, is not valid
    lconn, lrsp = ens.leader.connect()
    there, _ = ens.learner.connect(lrsp.sessionId, lrsp.passwd)
    ens.round()
    assert ens.revalidated == [(lrsp.sessionId, False)] and there.closing
    # the members keep serving the sessions where they live
    assert not conn.closing and not lconn.closing
    ens.learner.send(conn, 1, OpCode.EXISTS, ExistsRequest("/", False))
    assert replies(conn) == [(1, 0)]


def test_learner_local_sessions_expire_there_and_are_not_reported_to_the_leader() -> None:
    ens = Ensemble()
    conn, rsp = ens.learner.connect(timeout=1000)
    ens.learner.send(conn, 1, OpCode.EXISTS, ExistsRequest("/", False))
    learner = ens.learner.core
    assert isinstance(learner, LearnerServerCore)
    learner.report_touches()
    assert [o for o in learner.ready() if isinstance(o, Touches)] == [Touches(-1, ())]
    ens.advance(2500)
    assert conn.closing and len(ens.learner.core.local or ()) == 0


def test_standalone_and_disabled_cores_have_no_local_sessions() -> None:
    assert ServerCore(_config(2), 0, WALL).local is None
    core = LeaderServerCore(_config(2, local=False), 0, WALL)
    assert core.local is None
    m = Member(core)
    m.connect()
    assert [p.hdr.type for p in proposals(core)] == [OpCode.CREATE_SESSION]


@pytest.mark.parametrize("upgrading", [True, False])
def test_another_members_local_session_may_write_through_the_leader(upgrading: bool) -> None:
    leader = LeaderServerCore(_config(2, upgrading=upgrading), 0, WALL)
    other_members_session = (3 << 56) | 5
    leader.learner_request(other_members_session, 1, OpCode.CREATE, persistent("/x").to_bytes(), ())
    leader.learner_request(other_members_session, 2, OpCode.CREATE, ephemeral("/x/e").to_bytes(), ())
    own_unknown = (2 << 56) | 5  # the leader's own id: a session it does not know is expired
    leader.learner_request(own_unknown, 1, OpCode.CREATE, persistent("/y").to_bytes(), ())
    props = proposals(leader)
    assert [p.hdr.type for p in props] == [OpCode.CREATE, OpCode.ERROR, OpCode.ERROR]
    assert props[1].txn == ErrorTxn(Code.SESSIONEXPIRED) and props[2].txn == ErrorTxn(Code.SESSIONEXPIRED)


# ---- zoo.cfg


def _zoo(**props: str) -> dict[str, str]:
    return {"dataDir": "/data", "initLimit": "5", "syncLimit": "2", **props}


def _members() -> dict[str, str]:
    return {f"server.{n}": f"127.0.0.1:{20000 + n}:{21000 + n}" for n in (1, 2, 3)}


def test_zoo_cfg_keys_are_read_into_the_quorum_config() -> None:
    from zkpy.cli.zoocfg import config_from_properties

    cfg = config_from_properties(_zoo(localSessionsEnabled="true", localSessionsUpgradingEnabled="TRUE",
                                      **_members()), "zoo.cfg", lambda _d: "1")
    assert cfg.quorum is not None and cfg.quorum.local_sessions and cfg.quorum.local_sessions_upgrading
    cfg = config_from_properties(_zoo(**_members()), "zoo.cfg", lambda _d: "1")
    assert cfg.quorum is not None and not cfg.quorum.local_sessions and not cfg.quorum.local_sessions_upgrading


def test_a_bad_value_names_the_key_and_the_file() -> None:
    from zkpy.cli.zoocfg import ConfigError, config_from_properties

    with pytest.raises(ConfigError, match="zoo.cfg: localSessionsUpgradingEnabled='yes' must be true or false"):
        config_from_properties(_zoo(localSessionsUpgradingEnabled="yes", **_members()), "zoo.cfg", lambda _d: "1")


def test_a_standalone_server_says_its_sessions_stay_global(caplog: pytest.LogCaptureFixture) -> None:
    from zkpy.cli.zoocfg import config_from_properties

    config_from_properties(_zoo(localSessionsEnabled="true"), "zoo.cfg")
    assert any("localSessionsEnabled has no effect on a standalone server" in r.getMessage() for r in caplog.records)
