"""Real clients of the simulated ensemble: zkpy's client core (``client.core.ClientCore``) talking
to the servers' request pipelines (``ServerCore``) through in-memory connections, with the same
bytes a socket would carry.

A ``SessionClient`` lives for one session at a time: it connects to a server of its connect
string, moves to another (with its session) when that server stops serving or falls silent,
reconnects, re-registers its watches (setWatches), and starts a new session once its session
expired. It reads, writes, syncs and watches a few keys ``/r<i>``, and creates ephemerals.

``SessionChecker`` checks what a client sees, as ZooKeeper promises it (DESIGN §2):

* FIFO client order: replies come back in request order (the client core enforces it: a reply
  for another xid breaks the connection; the checker counts none were out of order);
* a session's reads never go back: the mzxid a read of a key returns never decreases, and a
  read after the session's own write of that key sees that write (or a later one);
* a watch event comes before any reply that shows the state after the change: while a data
  watch on a key is armed, no read on that session may show the key modified after the watch
  was set;
* after ``sync`` (with ``zkpy.quorumSync``, which makes it a linearizable read), a read returns
  every write to that key acknowledged to anyone before the sync was sent;
* a server's reads never go back: a read sent to a server returns every write to that key the
  server acknowledged (to any session) before the read was sent, whichever of its serving
  processes answers (with ``serverWorkers``, the member publishes what it applied before any
  reply tells of it: ``member.term``'s `PublishApplied`);
* a session that moves to another server keeps its ephemerals;
* with local sessions (localSessionsEnabled): a session that never asked for an ephemeral is
  local, so no other server takes it (a move finds it expired and the client starts a new
  session); an ephemeral create upgrades it (with localSessionsUpgradingEnabled) or fails with
  EphemeralOnLocalSession (without), never the other way round.

Clients are seeded from the cluster's RNG: a run replays exactly.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from zkpy.client.core import (
    ClientCore,
    ClientState,
    Connected,
    Reply,
    RequestFailed,
    StateChanged,
    WatchedEvent,
    WatchFired,
    WatchRegistration,
)
from zkpy.errors import (
    EphemeralOnLocalSessionError,
    NodeExistsError,
    NoNodeError,
    NotReadOnlyCallError,
    ProtocolError,
    ZookeeperError,
)
from zkpy.server.connection import Connection
from zkpy.server.core import ServerCore
from zkpy.tree.acl import OPEN_ACL_UNSAFE
from zkpy.wire.consts import CreateMode, EventType, OpCode
from zkpy.wire.proto import CreateRequest, ExistsRequest, GetDataRequest, SetDataRequest, SyncRequest

from .checker import Checker
from .config import SimConfig
from .scheduler import Scheduler

CLIENT_PORT = 2181
TICK_MS = 50
KEYS = 3


def host_of(sid: int) -> str:
    return f"10.0.0.{sid}"


class Server(Protocol):
    """What a client connection uses of a server (``node.SimNode``)."""

    @property
    def sid(self) -> int: ...

    @property
    def alive(self) -> bool: ...

    @property
    def paused(self) -> bool: ...

    @property
    def serving(self) -> bool: ...

    @property
    def incarnation(self) -> int: ...

    @property
    def client_links(self) -> dict[int, Link]: ...

    def pipeline_for_client(self) -> ServerCore | None: ...

    def serves(self, pipeline: ServerCore) -> bool: ...

    def before_input(self, pipeline: ServerCore) -> None: ...

    def input_taken(self, pipeline: ServerCore) -> None: ...

    @property
    def now(self) -> int: ...

    @property
    def wall_ms(self) -> int: ...

    def post(self, delay_ms: int, fn: Callable[..., Any], *args: Any) -> None: ...


class Ensemble(Protocol):
    """What the real clients use of the ensemble (``cluster.Cluster``)."""

    @property
    def config(self) -> SimConfig: ...

    @property
    def sched(self) -> Scheduler: ...

    @property
    def rng(self) -> random.Random: ...

    @property
    def nodes(self) -> Mapping[int, Server]: ...

    @property
    def checker(self) -> Checker: ...

    @property
    def stats(self) -> Counter[str]: ...


@dataclass(eq=False)
class Link:
    """One client connection to one server's pipeline (as long as that pipeline serves)."""

    client: SessionClient
    node: Server
    pipeline: ServerCore
    conn: Connection
    incarnation: int
    open: bool = True
    to_server_ms: int = 0  # when the last bytes sent each way arrive: a connection keeps its order
    to_client_ms: int = 0

    def arrival(self, now: int, delay: int, to_server: bool) -> int:
        """The delay for bytes sent now so they arrive after everything sent before (FIFO)."""
        last = self.to_server_ms if to_server else self.to_client_ms
        at = max(now + delay, last)
        if to_server:
            self.to_server_ms = at
        else:
            self.to_client_ms = at
        return at - now


@dataclass
class Op:
    """One request a client sent, as the checker follows it."""

    kind: str  # get, set, sync-get, watch, create-eph, exists-eph
    key: str
    sent_ms: int
    session: int
    value: bytes = b""
    floor: int = 0  # sync-get: the newest mzxid of a write to key acknowledged before the sync was sent
    server: int = -1  # the server it was sent to
    server_floor: int = 0  # a read: the newest mzxid of a write to key that server acknowledged before it was sent
    result: Any = None


@dataclass
class SessionClient:
    index: int
    core: ClientCore
    link: Link | None = None
    reconnect_at: int = 0
    stopped: bool = False
    inflight: deque[Op] = field(default_factory=deque)
    ephemerals: list[str] = field(default_factory=list)
    watched: dict[str, int] = field(default_factory=dict)  # key -> mzxid when the armed watch was set
    seen: dict[str, int] = field(default_factory=dict)  # key -> newest mzxid this session read or wrote
    sequence: int = 0
    session: int = 0
    session_server: int | None = None  # the server the session was last connected to
    asked_ephemeral: bool = False  # this session sent an ephemeral create (a local session: upgraded, maybe)


class SessionChecker:
    def __init__(self, checker: Checker) -> None:
        self.checker = checker
        self.acked: dict[str, list[tuple[int, int]]] = {}  # key -> [(ack time, mzxid)] of acknowledged writes
        self.acked_by: dict[tuple[int, str], int] = {}  # (server, key) -> newest mzxid of a write it acknowledged
        self.checks = 0

    def fail(self, message: str) -> None:
        self.checker.fail(f"client view: {message}")

    def write_acked(self, key: str, now: int, mzxid: int, server: int) -> None:
        self.acked.setdefault(key, []).append((now, mzxid))
        by = (server, key)
        self.acked_by[by] = max(self.acked_by.get(by, 0), mzxid)

    def server_floor(self, server: int, key: str) -> int:
        """The newest mzxid of a write to ``key`` that ``server`` acknowledged so far: any later
        read there sees it, whichever of the server's processes answers (serverWorkers)."""
        return self.acked_by.get((server, key), 0)

    def floor(self, key: str, before_ms: int) -> int:
        """The newest mzxid of a write to ``key`` acknowledged before ``before_ms``."""
        return max((m for t, m in self.acked.get(key, []) if t < before_ms), default=0)

    def on_read(self, client: SessionClient, op: Op, mzxid: int) -> None:
        self.checks += 1
        key = op.key
        seen = client.seen.get(key, 0)
        if mzxid < seen:
            self.fail(f"session 0x{op.session:x} read {key} at mzxid 0x{mzxid:x} after it saw 0x{seen:x}")
        if key in client.watched and mzxid > client.watched[key]:
            self.fail(f"session 0x{op.session:x} read {key} changed (mzxid 0x{mzxid:x}) before its watch, set at "
                      f"0x{client.watched[key]:x}, fired")
        if op.kind == "sync-get" and mzxid < op.floor:
            self.fail(f"session 0x{op.session:x} read {key} at mzxid 0x{mzxid:x} after a sync sent when 0x{op.floor:x} "
                      f"was acknowledged (quorumSync)")
        if mzxid < op.server_floor:
            self.fail(f"session 0x{op.session:x} read {key} at mzxid 0x{mzxid:x} from server {op.server}, which had "
                      f"acknowledged a write of it at 0x{op.server_floor:x} before the read was sent")
        client.seen[key] = max(seen, mzxid)


class Sessions:
    """The real clients of one run."""

    def __init__(self, cluster: Ensemble, count: int, session_timeout_ms: int) -> None:
        self.c = cluster
        self.rng = cluster.rng
        self.timeout = session_timeout_ms
        self.checker = SessionChecker(cluster.checker)
        self.clients = [SessionClient(i, self._new_core()) for i in range(count)]
        self.until_ms = 0
        self._conn_ids = 1 << 20  # apart from anything else a pipeline numbers

    def _new_core(self) -> ClientCore:
        hosts = ",".join(f"{host_of(sid)}:{CLIENT_PORT}" for sid in sorted(self.c.nodes))
        return ClientCore(hosts, session_timeout_ms=self.timeout, connect_timeout_ms=1000, rng=self.rng,
                          read_only=self.c.config.read_only)

    def start(self, until_ms: int) -> None:
        self.until_ms = until_ms
        for client in self.clients:
            self.c.sched.after(self.rng.randint(50, 400), self._tick, client)

    def stop(self) -> None:
        """The clients stop, without closing their sessions: the ensemble expires them."""
        for client in self.clients:
            client.stopped = True
            self._drop(client, "client stopped")

    # ------------------------------------------------------------ the client's loop

    def _tick(self, client: SessionClient) -> None:
        if client.stopped:
            return
        self.c.sched.after(TICK_MS, self._tick, client)
        now = self.c.sched.now
        core = client.core
        if core.state.is_terminal:
            self._new_session(client)
            return
        if client.link is None:
            if now >= client.reconnect_at:
                self._connect(client)
            return
        if core.is_dead(now):
            self._drop(client, "nothing heard for too long")
            return
        if core.should_ping(now):
            self._send(client, core.ping(now))
        probe = core.rw_probe(now)
        if probe is not None:  # ClientCnxn.pingRwServer: isro answers rw where a term serves
            probed = self.c.nodes.get(int(probe[0].rsplit(".", 1)[1]))
            if probed is not None and probed.serving and not probed.paused:
                core.rw_server_found(probe)
                self.c.stats["client_rw_server_found"] += 1
                self._drop(client, "a read-write server answered isro")
                return
        if core.state.is_connected and now < self.until_ms and len(client.inflight) < 4:
            self._act(client)

    def _new_session(self, client: SessionClient) -> None:
        self._drop(client, "session over")
        client.core = self._new_core()
        client.ephemerals, client.watched, client.seen = [], {}, {}
        client.asked_ephemeral = False
        client.inflight.clear()
        self.c.stats["client_new_session"] += 1

    def _connect(self, client: SessionClient) -> None:
        core = client.core
        host, _ = core.next_host()
        sid = int(host.rsplit(".", 1)[1])
        node = self.c.nodes.get(sid)
        server = node.pipeline_for_client() if node is not None else None
        if node is None or server is None:
            client.reconnect_at = self.c.sched.now + max(core.backoff_ms(), 20)
            return
        self._conn_ids += 1
        link = Link(client, node, server, server.open(self._conn_ids, f"10.1.0.{client.index}", 40000 + client.index),
                    node.incarnation)
        client.link = link
        node.client_links[link.conn.conn_id] = link
        self._send(client, core.connection_made(self.c.sched.now))

    def _drop(self, client: SessionClient, why: str) -> None:
        link = client.link
        if link is None:
            return
        link.open = False
        client.link = None
        node = link.node
        if node.client_links.get(link.conn.conn_id) is link:
            del node.client_links[link.conn.conn_id]
            node.post(1, link.pipeline.disconnected, link.conn)
        self._events(client, client.core.connection_lost())
        client.inflight.clear()
        client.watched.clear()  # an armed watch may fire late (setWatches): stop judging by it
        client.reconnect_at = self.c.sched.now + self.rng.randint(0, 100)
        self.c.stats["client_reconnect"] += 1

    def server_closed(self, link: Link) -> None:
        """The server closed the connection (its term ended, or it crashed)."""
        if link.open and link.client.link is link:
            link.open = False
            self._drop(link.client, "server closed the connection")

    # ------------------------------------------------------------ bytes both ways

    def _send(self, client: SessionClient, data: bytes) -> None:
        link = client.link
        if link is None:
            return
        now = self.c.sched.now
        link.node.post(link.arrival(now, self.rng.randint(1, 4), True), self._server_receives, link, data)

    def _server_receives(self, link: Link, data: bytes) -> None:
        if not link.open or link.node.incarnation != link.incarnation:
            return
        node = link.node
        if not node.serves(link.pipeline):
            return
        node.before_input(link.pipeline)
        link.pipeline.set_time(node.now, node.wall_ms)
        link.pipeline.receive(link.conn, data)
        while link.pipeline.wants_turn(link.conn):  # the client port's later turns, all at once here
            link.pipeline.resume(link.conn)
        node.input_taken(link.pipeline)

    def server_turn(self, link: Link) -> None:
        """The server takes more of a connection's requests (its output drained, or fewer are in flight)."""
        self._server_receives(link, b"")

    def delivered(self, link: Link, data: bytes, closing: bool) -> None:
        """The server wrote ``data`` on the connection (and closed it after, with ``closing``)."""
        now = self.c.sched.now
        self.c.sched.after(link.arrival(now, self.rng.randint(1, 4), False), self._client_receives, link, data, closing)

    def _client_receives(self, link: Link, data: bytes, closing: bool) -> None:
        client = link.client
        if client.link is not link:
            return
        if data:
            try:
                events = client.core.receive(data, self.c.sched.now)
            except ProtocolError:
                self.c.stats["client_protocol_error"] += 1
                self._drop(client, "protocol error")
                return
            self._events(client, events)
        if closing and client.link is link:
            self._drop(client, "server closed the connection")

    # ------------------------------------------------------------ events

    def _events(self, client: SessionClient, events: list[Any]) -> None:
        for ev in events:
            if isinstance(ev, Connected):
                self._connected(client, ev)
            elif isinstance(ev, Reply):
                self._reply(client, ev)
            elif isinstance(ev, RequestFailed):
                if isinstance(ev.handle, Op):
                    self.c.stats["client_request_lost"] += 1
            elif isinstance(ev, WatchFired):
                for callback in ev.callbacks:  # in order, before the next event (as the shells do)
                    callback(ev.event)
            elif isinstance(ev, StateChanged):
                self.c.stats[f"client_{ev.new.name.lower()}"] += 1
                if ev.new is ClientState.EXPIRED and self.c.config.local_sessions and client.link is not None \
                        and client.link.node.sid != client.session_server:
                    self.c.stats["client_local_session_expired_elsewhere"] += 1

    def _connected(self, client: SessionClient, ev: Connected) -> None:
        if ev.setup:
            self._send(client, ev.setup)
        self.c.stats["client_connected"] += 1
        sid = client.link.node.sid if client.link is not None else -1
        if client.session_server not in (None, sid) and client.session == ev.session_id:
            self.c.stats["client_session_moved"] += 1
            config = self.c.config
            if config.local_sessions and not (config.local_sessions_upgrading and client.asked_ephemeral):
                self.checker.fail(f"local session 0x{ev.session_id:x} of server {client.session_server} was "
                                  f"taken by server {sid}")
        if ev.read_only:
            self.c.stats["client_read_only_session"] += 1
        if client.session and ev.session_id != client.session:
            # a new session in the same client (a read-only one left for a read-write server):
            # the per-session guarantees start over
            client.ephemerals, client.watched, client.seen = [], {}, {}
        client.session, client.session_server = ev.session_id, sid
        for path in client.ephemerals[-2:]:  # the session moved (or came back): its ephemerals are there
            self._request(client, Op("exists-eph", path, self.c.sched.now, client.core.session_id), OpCode.EXISTS,
                          ExistsRequest(path, False))

    def _reply(self, client: SessionClient, ev: Reply) -> None:
        op = ev.handle
        if not isinstance(op, Op):
            return
        if client.inflight and client.inflight[0] is op:
            client.inflight.popleft()
        now = self.c.sched.now
        error = ev.error
        if client.core.state is ClientState.CONNECTED_READ_ONLY:  # the reply came from a read-only server
            if op.kind in ("set", "create", "create-eph") and error is None:
                self.checker.fail(f"session 0x{op.session:x}: a read-only server acknowledged a {op.kind} of {op.key}")
            if isinstance(error, NotReadOnlyCallError):
                self.c.stats["client_not_read_only"] += 1
            elif (error is None or isinstance(error, NoNodeError)) and op.kind in ("get", "watch"):
                self.c.stats["client_read_only_read"] += 1
        if op.kind == "sync" and error is not None:
            for later in client.inflight:  # the sync did not happen: its read promises nothing more
                if later.kind == "sync-get" and later.session == op.session:
                    later.floor = 0
                    break
        if op.kind in ("get", "sync-get", "watch"):
            if isinstance(error, NoNodeError):
                return
            if error is None:
                if op.kind == "sync-get":
                    self.c.stats["client_sync_read"] += 1
                self.checker.on_read(client, op, ev.response.stat.mzxid)
                if op.kind == "watch":
                    client.watched[op.key] = ev.response.stat.mzxid
        elif op.kind == "set":
            if error is None:
                mzxid = ev.response.stat.mzxid
                self.checker.write_acked(op.key, now, mzxid, op.server)
                client.seen[op.key] = max(client.seen.get(op.key, 0), mzxid)
            elif isinstance(error, NoNodeError):
                self._request(client, Op("create", op.key, now, client.core.session_id), OpCode.CREATE,
                              CreateRequest(op.key, b"", list(OPEN_ACL_UNSAFE), int(CreateMode.PERSISTENT)))
        elif op.kind == "create-eph":
            config = self.c.config
            if error is None:
                if config.local_sessions and not client.ephemerals:
                    self.c.stats["client_local_session_upgraded"] += 1
                client.ephemerals.append(op.key)
                if config.local_sessions and not config.local_sessions_upgrading:
                    self.checker.fail(f"session 0x{op.session:x} created ephemeral {op.key} without upgrading")
            elif isinstance(error, EphemeralOnLocalSessionError):
                self.c.stats["client_ephemeral_on_local_session"] += 1
                if not config.local_sessions or config.local_sessions_upgrading:
                    self.checker.fail(f"session 0x{op.session:x}: EphemeralOnLocalSession for {op.key}, "
                                      "though upgrading is enabled")
        elif op.kind == "exists-eph":
            if error is None and ev.response.stat is None and op.session == client.core.session_id:
                self.checker.fail(f"session 0x{op.session:x} moved and lost its ephemeral {op.key}")
            self.checker.checks += 1
        elif op.kind == "create" and error is not None and not isinstance(error, NodeExistsError):
            self.c.stats["client_create_failed"] += 1

    def _watch_fired(self, client: SessionClient, key: str, event: WatchedEvent) -> None:
        if event.type in (EventType.NODE_DATA_CHANGED, EventType.NODE_DELETED, EventType.NODE_CREATED):
            client.watched.pop(key, None)
            self.c.stats["client_watch_fired"] += 1

    # ------------------------------------------------------------ what a client does

    def _request(self, client: SessionClient, op: Op, opcode: int, record: Any,
                 watch: WatchRegistration | None = None) -> None:
        if client.link is not None:
            op.server = client.link.node.sid
            if op.kind in ("get", "sync-get", "watch"):
                op.server_floor = self.checker.server_floor(op.server, op.key)
        try:
            data = client.core.request(opcode, record, op, watch=watch, now_ms=self.c.sched.now)
        except ZookeeperError:
            return
        client.inflight.append(op)
        self._send(client, data)

    def _act(self, client: SessionClient) -> None:
        rng, now, session = self.rng, self.c.sched.now, client.core.session_id
        key = f"/r{rng.randrange(KEYS)}"
        r = rng.random()
        if r < 0.3:
            client.sequence += 1
            value = f"c{client.index}.{client.sequence}".encode()
            self._request(client, Op("set", key, now, session, value), OpCode.SET_DATA, SetDataRequest(key, value, -1))
            self._request(client, Op("get", key, now, session), OpCode.GET_DATA, GetDataRequest(key, False))
        elif r < 0.55:
            self._request(client, Op("get", key, now, session), OpCode.GET_DATA, GetDataRequest(key, False))
        elif r < 0.75:
            floor = self.checker.floor(key, now) if self.c.config.quorum_sync else 0
            self._request(client, Op("sync", key, now, session), OpCode.SYNC, SyncRequest(key))
            self._request(client, Op("sync-get", key, now, session, floor=floor), OpCode.GET_DATA,
                          GetDataRequest(key, False))
        elif r < 0.92:
            if key not in client.watched:
                def fire(event: WatchedEvent, client: SessionClient = client, key: str = key) -> None:
                    self._watch_fired(client, key, event)
                self._request(client, Op("watch", key, now, session), OpCode.GET_DATA, GetDataRequest(key, True),
                              WatchRegistration("data", key, fire))
        else:
            client.sequence += 1
            path = f"/re{client.index}.{client.sequence}"
            client.asked_ephemeral = True
            self._request(client, Op("create-eph", path, now, session), OpCode.CREATE,
                          CreateRequest(path, b"", list(OPEN_ACL_UNSAFE), int(CreateMode.EPHEMERAL)))

    def alive(self) -> bool:
        return any(c.link is not None for c in self.clients)
