"""The transcript driver of the request pipeline (``server.core.ServerCore``).

Commands (``cN`` names a client connection, ``sN`` the session the transcript named first):

    server [role=ROLE]                  a new pipeline: standalone, leader, follower (or learner),
                                        observer, read-only (a follower or observer gets a leader's
                                        pipeline behind it)
    connect c1 [timeout=MS] [resume=c0] [ro=1]  a client connects (with ``resume``: to c0's session;
                                        ``ro=1``: it asks for read-only service)
    create c1 XID PATH [DATA] [ephemeral] [sequential]
    get|exists|children c1 XID PATH [watch]
    set c1 XID PATH DATA [version=N]
    delete c1 XID PATH [version=N]
    sync c1 XID PATH
    ping c1
    auth c1 SCHEME CREDENTIALS          an auth packet (digest user:password)
    reconfig c1 XID [joining=LINE] [leaving=SIDS]   an incremental reconfig
    close c1 XID                        closeSession
    garbage c1 HEX                      a frame of these bytes
    drop c1                             the client's socket closes
    persist [N]                         the first N txns handed over are durable (all, without N)
    advance MS                          time passes; the pipeline ticks
    commit                              learner: the leader takes what was forwarded (and what it
                                        proposed itself), commits it, and the learner applies it
    sync-done                           learner: the leader's SYNC for the oldest forwarded sync
    revalidated c1 valid|invalid        learner: the leader's word on c1's session
    remote connect|create|set|delete|close r1 [XID ARGS]
                                        a client of another server (named r1): its request, forwarded
                                        to the leader (this pipeline, or a learner's leader)

After each command the pipeline's ``ready()`` is rendered, one line per output; an `Output`
becomes the replies, notifications and close that the client would read.
"""

from __future__ import annotations

import struct
from typing import Any, assert_never

from zkpy.config import LearnerType, QuorumConfig, QuorumServer, ServerConfig
from zkpy.errors import Code
from zkpy.server import outputs as out
from zkpy.server.connection import Connection
from zkpy.server.core import ServerCore
from zkpy.server.leader import LeaderServerCore
from zkpy.server.learner import LearnerServerCore
from zkpy.server.read_only import ReadOnlyServerCore
from zkpy.server.sessions import session_password
from zkpy.storage.txnlog import describe_txn
from zkpy.wire.consts import CreateMode, EventType, OpCode, Xid
from zkpy.wire.jute import INT, Record
from zkpy.wire.proto import (
    ACL,
    AuthPacket,
    ConnectRequest,
    ConnectResponse,
    CreateRequest,
    CreateResponse,
    DeleteRequest,
    ExistsRequest,
    GetChildrenRequest,
    GetChildrenResponse,
    GetDataRequest,
    GetDataResponse,
    Id,
    ReconfigRequest,
    RequestHeader,
    SetDataRequest,
    SetDataResponse,
    Stat,
    SyncRequest,
    SyncResponse,
    WatcherEvent,
)

from .datadriven import Driver

OPEN = [ACL(31, Id("world", "anyone"))]
START_MS = 1_000_000
WALL_MS = 1_700_000_000_000
_REPLY = struct.Struct(">iqi")

RESPONSES: dict[int, Any] = {
    OpCode.CREATE: CreateResponse, OpCode.GET_DATA: GetDataResponse, OpCode.EXISTS: Stat,
    OpCode.SET_DATA: SetDataResponse, OpCode.SYNC: SyncResponse, OpCode.GET_CHILDREN: GetChildrenResponse,
}


class Names:
    """Short, stable names for the numbers a transcript would otherwise be full of."""

    def __init__(self) -> None:
        self.sessions: dict[int, str] = {}

    def session(self, sid: int) -> str:
        if sid == 0:
            return "0"
        if sid not in self.sessions:
            self.sessions[sid] = f"s{len(self.sessions) + 1}"
        return self.sessions[sid]


def show_stat(stat: Stat, names: Names) -> str:
    owner = f" owner={names.session(stat.ephemeralOwner)}" if stat.ephemeralOwner else ""
    return (f"stat(czxid=0x{stat.czxid:x} mzxid=0x{stat.mzxid:x} pzxid=0x{stat.pzxid:x} version={stat.version}"
            f" cversion={stat.cversion} children={stat.numChildren}{owner})")


def show_record(record: Any, names: Names) -> str:
    if isinstance(record, Stat):
        return show_stat(record, names)
    if isinstance(record, Record):
        fields = []
        for name, _ in record.JUTE_FIELDS:
            value = getattr(record, name)
            shown = show_record(value, names) if isinstance(value, Record) else repr(value)
            fields.append(f"{name}={shown}")
        return f"{type(record).__name__}({' '.join(fields)})"
    return repr(record)


def show_txn(hdr: Any, txn: Any, names: Names) -> str:
    return (f"0x{hdr.zxid:x} session={names.session(hdr.clientId)} cxid={hdr.cxid} "
            f"{describe_txn(hdr.type, txn)}")


class ClientView:
    """What a client reads from its connection: the connect response first, then replies
    decoded by the op of their xid."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.connected = False
        self.ops: dict[int, int] = {}

    def render(self, conn: Connection, names: Names) -> list[str]:
        lines = []
        for frame in conn.take_output():
            payload = frame[4:]
            if not self.connected:
                rsp = ConnectResponse.read(payload, 0)[0]
                self.connected = True
                if rsp.sessionId:
                    lines.append(f"{self.name} <- connected session={names.session(rsp.sessionId)} "
                                 f"timeout={rsp.timeOut}")
                else:
                    lines.append(f"{self.name} <- session expired")
                continue
            xid, zxid, err = _REPLY.unpack_from(payload, 0)
            body = payload[_REPLY.size:]
            if xid == Xid.NOTIFICATION:
                ev = WatcherEvent.read(body, 0)[0]
                lines.append(f"{self.name} <- event {EventType(ev.type).name} {ev.path}")
                continue
            if xid == Xid.PING:
                lines.append(f"{self.name} <- pong zxid=0x{zxid:x}")
                continue
            op = self.ops.pop(xid, None)
            head = f"{self.name} <- xid={xid} zxid={f'0x{zxid:x}' if zxid >= 0 else zxid}"
            if err:
                lines.append(f"{head} {Code(err).name}")
            elif op in RESPONSES and body:
                lines.append(f"{head} {show_record(RESPONSES[op].read(body, 0)[0], names)}")
            else:
                lines.append(f"{head} ok")
        if conn.closing:
            lines.append(f"{self.name} closed: {conn.close_reason}")
        return lines


class Clients:
    """Client connections to one or more pipelines: requests in, what the clients read out."""

    def __init__(self, names: Names) -> None:
        self.names = names
        self.conns: dict[str, tuple[ServerCore, Connection]] = {}
        self.views: dict[int, ClientView] = {}
        self.conn_ids = 0

    def connect(self, core: ServerCore, name: str, *args: str) -> None:
        opts = dict(a.split("=", 1) for a in args)
        session, passwd = 0, bytes(16)
        if "resume" in opts:
            old = self.conns[opts["resume"]][1]
            session, passwd = old.session_id, session_password(old.session_id)
        self.conn_ids += 1
        conn = core.open(self.conn_ids, "127.0.0.1", 40000 + self.conn_ids)
        self.conns[name] = (core, conn)
        self.views[conn.conn_id] = ClientView(name)
        read_only = b"\x01" if opts.get("ro") == "1" else b"\x00"
        payload = ConnectRequest(0, 0, int(opts.get("timeout", 10000)), session, passwd).to_bytes() + read_only
        core.receive(conn, INT.pack(len(payload)) + payload)

    def request(self, verb: str, name: str, *args: str) -> None:
        """One of the client commands (create, get, exists, children, set, delete, sync, ping,
        close, garbage, drop) on the connection ``name``."""
        core, conn = self.conns[name]
        if verb == "drop":
            core.disconnected(conn)
            return
        if verb == "garbage":
            raw = bytes.fromhex(args[0])
            core.receive(conn, INT.pack(len(raw)) + raw)
            return
        xid: int
        op: int
        record: Record | None
        if verb == "ping":
            xid, op, record = Xid.PING, OpCode.PING, None
        elif verb == "auth":
            xid, op, record = Xid.AUTH, OpCode.AUTH, AuthPacket(0, args[0], args[1].encode())
        else:
            xid, (op, record) = int(args[0]), self._record(verb, args[1:])
        self.views[conn.conn_id].ops[xid] = op
        payload = RequestHeader(xid, op).to_bytes() + (record.to_bytes() if record is not None else b"")
        core.receive(conn, INT.pack(len(payload)) + payload)

    @staticmethod
    def _record(verb: str, args: tuple[str, ...]) -> tuple[int, Record | None]:
        rest = args[1:]
        opts = dict(a.split("=", 1) for a in rest if "=" in a)
        plain = [a for a in rest if "=" not in a]
        if verb == "close":
            return OpCode.CLOSE_SESSION, None
        if verb == "reconfig":
            change = dict(a.split("=", 1) for a in args)
            return OpCode.RECONFIG, ReconfigRequest(change.get("joining"), change.get("leaving"), None,  # type: ignore[arg-type]
                                                    -1)
        path = args[0]
        if verb == "create":
            flags = (CreateMode.EPHEMERAL if "ephemeral" in plain else 0) | (
                CreateMode.PERSISTENT_SEQUENTIAL if "sequential" in plain else 0)
            data = next((a for a in plain if a not in ("ephemeral", "sequential")), "")
            return OpCode.CREATE, CreateRequest(path, data.encode(), OPEN, flags)
        if verb == "get":
            return OpCode.GET_DATA, GetDataRequest(path, "watch" in plain)
        if verb == "exists":
            return OpCode.EXISTS, ExistsRequest(path, "watch" in plain)
        if verb == "children":
            return OpCode.GET_CHILDREN, GetChildrenRequest(path, "watch" in plain)
        if verb == "set":
            return OpCode.SET_DATA, SetDataRequest(path, plain[0].encode(), int(opts.get("version", -1)))
        if verb == "delete":
            return OpCode.DELETE, DeleteRequest(path, int(opts.get("version", -1)))
        if verb == "sync":
            return OpCode.SYNC, SyncRequest(path)
        raise ValueError(f"unknown client command {verb!r}")

    def session_of(self, name: str) -> int:
        return self.conns[name][1].session_id

    def render(self, conn: Connection) -> list[str]:
        return self.views[conn.conn_id].render(conn, self.names)


CLIENT_VERBS = frozenset({"create", "get", "exists", "children", "set", "delete", "sync", "ping", "auth", "reconfig",
                          "close", "garbage", "drop"})


class PipelineDriver(Driver):
    def __init__(self) -> None:
        self.names = Names()
        self.now = START_MS
        self.core = self._core("standalone")
        self.leader: LeaderServerCore | None = None  # a learner's leader
        self.clients = Clients(self.names)
        self.handed = 0  # txns handed over by ready() and not persisted
        self.forwarded: list[out.Forward] = []
        self.remote_sessions: dict[str, int] = {}  # another server's clients' sessions, by name
        self.remotes = 0

    def _core(self, role: str) -> ServerCore:
        now, wall = self.now, WALL_MS + self.now
        if role == "standalone":
            return ServerCore(ServerConfig(server_id=1), now, wall)
        if role == "leader":
            return LeaderServerCore(ServerConfig(server_id=2), now, wall)
        if role in ("learner", "follower"):
            return LearnerServerCore(ServerConfig(server_id=1), now, wall)
        if role == "observer":
            servers = (QuorumServer(1, "127.0.0.1", 2888, 3888, LearnerType.OBSERVER),  # type: ignore[arg-type]
                       QuorumServer(2, "127.0.0.1", 2889, 3889), QuorumServer(3, "127.0.0.1", 2890, 3890))  # type: ignore[arg-type]
            quorum = QuorumConfig(servers, my_id=1)  # type: ignore[arg-type]
            return LearnerServerCore(ServerConfig(server_id=1, quorum=quorum), now, wall)
        if role == "read-only":
            return ReadOnlyServerCore(ServerConfig(server_id=1), now, wall)
        raise ValueError(f"unknown role {role!r}")

    # ---- commands

    def run(self, command: str) -> list[str]:
        verb, *args = command.split()
        if verb in CLIENT_VERBS:
            self.clients.request(verb, *args)
            pre: list[str] = []
        else:
            pre = super().run(command)
        return pre + self.ready()

    def cmd_server(self, *args: str) -> None:
        opts = dict(a.split("=", 1) for a in args)
        role = opts.get("role", "standalone")
        self.core = self._core(role)
        self.leader = LeaderServerCore(ServerConfig(server_id=2), self.now, WALL_MS + self.now) \
            if isinstance(self.core, LearnerServerCore) else None

    def cmd_connect(self, name: str, *args: str) -> None:
        self.clients.connect(self.core, name, *args)

    def cmd_persist(self, count: str | None = None) -> None:
        n = self.handed if count is None else int(count)
        self.handed -= n
        self.core.apply_persisted(n)

    def cmd_advance(self, ms: str) -> None:
        self.now += int(ms)
        for core in (self.core, self.leader):
            if core is not None:
                core.set_time(self.now, WALL_MS + self.now)
                core.tick()

    def cmd_commit(self) -> list[str]:
        leader, learner = self.leader, self.core
        if leader is None or not isinstance(learner, LearnerServerCore):
            raise ValueError("commit: not a learner")
        for f in self.forwarded:
            if f.op != OpCode.SYNC:
                leader.learner_request(f.session, f.cxid, f.op, f.body, f.auth)
        self.forwarded.clear()
        txns = [o for o in leader.ready() if isinstance(o, out.Propose)]
        leader.apply_persisted(len(txns))
        lines = []
        for t in txns:
            lines.append(f"leader commits {show_txn(t.hdr, t.txn, self.names)}")
            learner.apply_committed(t.hdr, t.txn)
        return lines

    def cmd_remote(self, verb: str, name: str, *args: str) -> None:
        """A client of another server: its request as the learner there forwards it."""
        leader = self.leader if self.leader is not None else self.core
        if not isinstance(leader, LeaderServerCore):
            raise ValueError("remote: no leader")
        if verb == "connect":
            self.remotes += 1
            session = self.remote_sessions[name] = (3 << 56) | self.remotes
            leader.learner_request(session, 0, OpCode.CREATE_SESSION, INT.pack(10000), ())
            return
        session = self.remote_sessions[name]
        op, record = Clients._record(verb, args[1:])
        leader.learner_request(session, int(args[0]), op, record.to_bytes() if record is not None else b"", ())

    def cmd_sync_done(self) -> None:
        assert isinstance(self.core, LearnerServerCore)
        self.core.sync_done()

    def cmd_revalidated(self, name: str, verdict: str) -> None:
        assert isinstance(self.core, LearnerServerCore)
        self.core.revalidated(self.clients.session_of(name), verdict == "valid")

    # ---- output

    def ready(self) -> list[str]:
        return [line for o in self.core.ready() for line in self.show(o)]

    def show(self, o: out.ServerOutput) -> list[str]:
        names = self.names
        match o:
            case out.Propose():
                self.handed += 1
                return [f"propose {show_txn(o.hdr, o.txn, names)}"]
            case out.Forward():
                self.forwarded.append(o)
                return [f"forward session={names.session(o.session)} cxid={o.cxid} {OpCode(o.op).name}"]
            case out.Revalidate():
                return [f"revalidate session={names.session(o.session)} timeout={o.timeout_ms}"]
            case out.CheckQuorum():
                return [f"check-quorum token={o.token}"]
            case out.Touches():
                return [f"touches for ping 0x{o.ping:x}: {' '.join(f'{names.session(s)}:{t}' for s, t in o.sessions) or '(none)'}"]
            case out.Relayed():
                return [f"relayed to worker {o.link}: {'sync' if o.session is None else 'revalidation'}"]
            case out.TxnApplied():
                return [f"applied {show_txn(o.hdr, o.txn, names)}"]
            case out.Output():
                return self.clients.render(o.conn)
            case _:
                assert_never(o)
