"""Local sessions (localSessionsEnabled) on a zkpy ensemble and on an Apache ZooKeeper 3.8 one
(3 voters and an observer each).

The same scenario runs on both, member by member, and what a client can observe is compared:
a session created on a member is local (its id carries the member's id; ``mntr`` counts it in
``zk_local_sessions``, not ``zk_global_sessions``); reads and writes work; an ephemeral create
upgrades it to a global session (the member has ``localSessionsUpgradingEnabled=true``) or fails
with EphemeralOnLocalSession (-120) (``false``); the ephemeral is seen from another member;
moving the session to another member is refused (the session is expired there) unless it was
upgraded; the member keeps serving the session after a refused move; a closed session cannot be
resumed; a session whose client went away expires after its timeout, with its ephemerals;
``dump`` shows the local sessions' expiry sets apart from the global sessions. When the leader
changes, a member's local sessions are gone (it serves the new term with a new pipeline); an
upgraded session lives on.

Members 2, 3 and 4 (the observer) upgrade, member 1 does not; the observations are keyed by the
member's role and its upgrading flag, so that the comparison does not depend on which member
leads. Member 1 never leads (with equal logs an election picks the highest id of a quorum), so
the member that does not upgrade is a follower on both ensembles, however the start is timed.
"""

from __future__ import annotations

import re
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from tests.conftest import require_apache
from tests.helpers.rawzk import RawConn

from zkpy.testing.servers import (
    ServerProcess,
    cleanup_ensemble,
    four_letter,
    server_mode,
    start_ensemble,
    wait_ensemble_serving,
)
from zkpy.wire.consts import CreateMode, OpCode
from zkpy.wire.multi import Op, read_multi_response, write_multi_request
from zkpy.wire.proto import ACL, CreateRequest, ExistsRequest, GetDataRequest, Id, SetDataRequest, SyncRequest

pytestmark = pytest.mark.interop

TIMEOUT_MS = 2000  # the sessions' timeout: expiry waits for it
OPEN = [ACL(31, Id("world", "anyone"))]
UPGRADES = {1: "false", 2: "true", 3: "true", 4: "true"}  # member 4 observes; 1 never leads (see above)


class Session:
    """A raw connection to one member with its session, issuing requests one at a time."""

    def __init__(self, server: ServerProcess, session_id: int = 0, passwd: bytes = bytes(16),
                 timeout_ms: int = TIMEOUT_MS) -> None:
        self.conn = RawConn(server.port)
        rsp = self.conn.handshake(timeout_ms, session_id, passwd)
        self.valid = rsp.timeOut > 0 and rsp.sessionId != 0
        self.id, self.passwd = rsp.sessionId, rsp.passwd
        self.xid = 0

    def call(self, op: int, body: bytes) -> tuple[int, bytes] | None:
        """(error code, reply body), or None when the server closed the connection."""
        self.xid += 1
        if not self.conn.send_request(self.xid, op, body):
            return None
        while True:
            reply = self.conn.read_reply(10.0)
            if reply is None:
                return None
            if reply.header.xid == self.xid:
                return reply.err, reply.body

    def err(self, op: int, body: bytes) -> int | str:
        got = self.call(op, body)
        return "closed" if got is None else got[0]

    def create(self, path: str, mode: CreateMode = CreateMode.PERSISTENT) -> int | str:
        return self.err(OpCode.CREATE, CreateRequest(path, b"x", OPEN, int(mode)).to_bytes())

    def multi_create(self, path: str, mode: CreateMode) -> object:
        out = bytearray()
        write_multi_request(out, [Op(OpCode.CREATE, CreateRequest(path, b"", OPEN, int(mode)))])
        got = self.call(OpCode.MULTI, bytes(out))
        if got is None:
            return "closed"
        err, body = got
        if err:
            return err
        return [r.err for r in read_multi_response(body, 0)[0]]

    def exists(self, path: str) -> bool:
        got = self.call(OpCode.EXISTS, ExistsRequest(path, False).to_bytes())
        assert got is not None
        return got[0] == 0

    def sync(self, path: str) -> None:
        assert self.err(OpCode.SYNC, SyncRequest(path).to_bytes()) == 0

    def close(self) -> int | str:
        got = self.err(OpCode.CLOSE_SESSION, b"")
        self.conn.close()
        return got

    def drop(self) -> None:
        self.conn.close()


def _mntr(server: ServerProcess) -> dict[str, str]:
    lines = four_letter(server.port, "mntr").splitlines()
    return dict(line.split("\t", 1) for line in lines if "\t" in line)


def _until(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def scenario(servers: list[ServerProcess]) -> dict[str, object]:
    """What a client observes of local sessions on each member (see the module's docstring)."""
    roles = wait_ensemble_serving(servers)  # every member's role, asked until it answers
    out: dict[str, object] = {}
    for home in servers:
        key = f"{roles[home.port]}/upgrading={UPGRADES[int(home.extra['myid'])]}"
        out[key] = _on_member(home, [s for s in servers if s is not home], roles)
    return out


def _on_member(home: ServerProcess, others: list[ServerProcess], roles: dict[int, str]) -> dict[str, object]:
    """The scenario with a session created on ``home``."""
    myid = int(home.extra["myid"])
    base = f"/ls-{uuid.uuid4().hex[:8]}"
    r: dict[str, object] = {}
    a = Session(home)
    r["id_has_member"] = (a.id >> 56) == myid
    r["create"] = a.create(base)
    r["set"] = a.err(OpCode.SET_DATA, SetDataRequest(base, b"y", -1).to_bytes())
    r["get"] = a.err(OpCode.GET_DATA, GetDataRequest(base, False).to_bytes())
    m = _mntr(home)
    r["mntr_local"] = m.get("zk_local_sessions")
    tracker = four_letter(home.port, "dump").split("ephemeral nodes dump:")[0]
    r["dump_sections"] = [re.sub(r"\d+", "N", line) for line in tracker.splitlines()
                          if line.startswith(("Local", "Global", "Session"))]
    global_before = int(m.get("zk_global_sessions", "-1"))
    r["multi_ephemeral"] = a.multi_create(base + "/m", CreateMode.EPHEMERAL)
    r["ephemeral"] = a.create(base + "/e", CreateMode.EPHEMERAL)
    r["ephemeral_seq"] = a.create(base + "/s", CreateMode.EPHEMERAL_SEQUENTIAL)
    m = _mntr(home)
    r["mntr_local_after"] = m.get("zk_local_sessions")
    r["global_grew"] = int(m.get("zk_global_sessions", "-1")) - global_before
    other = Session(others[0])
    other.sync(base)
    r["seen_elsewhere"] = other.exists(base + "/e")
    r["multi_seen_elsewhere"] = other.exists(base + "/m")
    # a move: to the other members, while the first connection stays open
    moved = []
    for target in others:
        b = Session(target, a.id, a.passwd)
        moved.append(b.valid)
        if b.valid:
            b.sync(base)
            r[f"moved_get_{roles[target.port]}"] = b.err(OpCode.GET_DATA, GetDataRequest(base, False).to_bytes())
        b.drop()
    r["moves_valid"] = moved
    if not any(moved):
        r["home_after_refused_move"] = a.err(OpCode.GET_DATA, GetDataRequest(base, False).to_bytes())
        a2 = Session(home, a.id, a.passwd)
        r["resume_home"] = a2.valid
        r["old_connection_after_resume"] = a.err(OpCode.GET_DATA, GetDataRequest(base, False).to_bytes())
        a = a2
    # close; then nobody knows the session
    r["close"] = a.close()
    r["resume_after_close"] = [Session(s, a.id, a.passwd).valid for s in [home, *others]]
    other.sync(base)  # the other member has every txn committed before: the close
    r["ephemeral_after_close"] = other.exists(base + "/e")
    # expiry: a session whose client goes away (waited for without touching it)
    local_before = _mntr(home)["zk_local_sessions"]
    c = Session(home)
    c_eph = c.create(base + "/ce", CreateMode.EPHEMERAL)
    c.drop()
    r["expiry_ephemeral_create"] = c_eph
    other.sync(base)
    r["expiry_ephemeral_seen"] = other.exists(base + "/ce")
    if c_eph == 0:
        r["expiry_ephemeral_gone"] = _until(lambda: not other.exists(base + "/ce"), 3 * TIMEOUT_MS / 1000 + 5)
    else:
        r["expiry_local_gone"] = _until(lambda: int(_mntr(home)["zk_local_sessions"]) <= int(local_before),
                                        3 * TIMEOUT_MS / 1000 + 5)
    r["expired_at_home"] = not Session(home, c.id, c.passwd).valid
    other.close()
    return r


def after_leader_change(servers: list[ServerProcess]) -> dict[str, object]:
    """A follower's local session and an upgraded one, then the leader is killed: once the
    follower serves the new leader, is either session still there?"""
    modes = wait_ensemble_serving(servers)
    leader = next(s for s in servers if modes[s.port] == "leader")
    home = next(s for s in servers if modes[s.port] == "follower" and UPGRADES[int(s.extra["myid"])] == "true")
    local = Session(home, timeout_ms=10_000)
    upgraded = Session(home, timeout_ms=10_000)
    r: dict[str, object] = {"ephemeral": upgraded.create(f"/ls-{uuid.uuid4().hex[:8]}", CreateMode.EPHEMERAL)}
    leader.stop(signal.SIGKILL)
    local.conn.wait_closed(30.0)  # the follower left its term: it closes its clients' connections
    upgraded.drop()
    r["serving_again"] = _until(lambda: server_mode(home) in ("leader", "follower"), 30.0)
    r["local_resumed"] = Session(home, local.id, local.passwd).valid
    r["upgraded_resumed"] = Session(home, upgraded.id, upgraded.passwd).valid
    return r


@contextmanager
def _ensemble(kind: str) -> Iterator[list[ServerProcess]]:
    require_apache()
    servers = start_ensemble([kind] * 4, {"localSessionsEnabled": "true", "4lw.commands.whitelist": "*"},
                             observers=[4],
                             member_settings={i: {"localSessionsUpgradingEnabled": v} for i, v in UPGRADES.items()})
    try:
        yield servers
    finally:
        cleanup_ensemble(servers)


def test_local_sessions_match_apache() -> None:
    results = {}
    for kind in ("apache", "zkpy"):
        with _ensemble(kind) as servers:
            results[kind] = {**scenario(servers), "after leader change": after_leader_change(servers)}
        print(kind, results[kind])
    assert results["zkpy"] == results["apache"]
