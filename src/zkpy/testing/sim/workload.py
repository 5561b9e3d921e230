"""Clients of the simulated ensemble: sessions and writes with unique values.

Each client holds one session at a time on one server; it writes only once the session is
open there, and when that server stops serving it leaves the session to expire and opens a
new one on another server (chosen by the seeded RNG). A request enters a server as a real client's
would reach its pipeline: on the leader through ``LeaderServerCore.learner_request`` (prep, a
txn, a proposal), on a learner through ``Learner.request`` (a REQUEST packet the leader's core
turns into ``LearnerRequest``). Writes create persistent znodes ``/w<n>`` (never deleted, so
their presence shows the txn survived), set ``/k<i>`` to unique values, create ephemerals
``/e<n>`` and delete them, and close sessions; with ``SimConfig.reconfig`` a client now and then
asks for a reconfig instead. Clients that stop writing let their sessions expire on the leader.
These writers never read and never move a session; the real clients (``sessions``) do.

A write is *acknowledged* when the server the client sent it to applies its txn in the same
term (the reply would leave then); the checker requires every acknowledged write to stay in
the committed history forever.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from zkpy.config import QuorumConfig
from zkpy.quorum.dynconfig import CONFIG_NODE
from zkpy.tree.acl import OPEN_ACL_UNSAFE
from zkpy.wire.consts import CreateMode, OpCode
from zkpy.wire.jute import INT, Record
from zkpy.wire.proto import CreateRequest, DeleteRequest, ReconfigRequest, SetDataRequest
from zkpy.wire.txn import TxnHeader

from .config import SimConfig
from .scheduler import Scheduler

_ACL = list(OPEN_ACL_UNSAFE)
SESSION_BASE = 0x5A00_0000_0000


@dataclass(slots=True)
class Write:
    session: int
    cxid: int
    op: int
    path: str
    origin: int
    incarnation: int
    term: int
    submitted_ms: int
    flags: int = 0
    zxid: int | None = None
    ok: bool = False

    @property
    def persistent_create(self) -> bool:
        return self.op == OpCode.CREATE and self.flags == CreateMode.PERSISTENT and self.path.startswith("/w")

    def describe(self) -> str:
        return f"{OpCode(self.op).name} {self.path} (session 0x{self.session:x} cxid {self.cxid} via {self.origin})"


@dataclass(slots=True)
class Client:
    index: int
    session: int = 0
    cxid: int = 0
    server: int = 0
    state: str = "none"  # none, opening (createSession sent), open, closed
    ephemerals: list[str] | None = None


def server_line(sid: int, role: str = "participant") -> str:
    """Server ``sid``'s line in a config string (``joiningServers`` of a reconfig)."""
    return f"server.{sid}=10.0.0.{sid}:2888:3888:{role};10.0.0.{sid}:2181"


class Server(Protocol):
    """What a client uses of a server (``node.SimNode``)."""

    @property
    def sid(self) -> int: ...

    @property
    def incarnation(self) -> int: ...

    @property
    def term_seq(self) -> int: ...

    @property
    def serving(self) -> bool: ...

    @property
    def paused(self) -> bool: ...

    @property
    def quorum(self) -> QuorumConfig: ...

    def submit(self, session: int, cxid: int, op: int, body: bytes) -> bool: ...


class Ensemble(Protocol):
    """What the clients use of the ensemble (``cluster.Cluster``)."""

    @property
    def config(self) -> SimConfig: ...

    @property
    def sched(self) -> Scheduler: ...

    @property
    def nodes(self) -> Mapping[int, Server]: ...

    @property
    def stats(self) -> Counter[str]: ...


class Workload:
    def __init__(self, cluster: Ensemble, rng: random.Random, clients: int, session_timeout_ms: int,
                 interval_ms: tuple[int, int] = (20, 200)) -> None:
        self.c = cluster
        self.rng = rng
        self.timeout = session_timeout_ms
        self.interval = interval_ms
        self.clients = [Client(i) for i in range(clients)]
        self.pending: dict[tuple[int, int], Write] = {}
        self.writes: list[Write] = []
        self._next_session = 0
        self._next_value = 0
        self.until_ms = 0
        self.keys = 3

    def start(self, until_ms: int) -> None:
        self.until_ms = until_ms
        for client in self.clients:
            self.c.sched.after(self.rng.randint(*self.interval), self._step, client)

    def stop(self) -> None:
        self.until_ms = 0

    def acked(self) -> list[Write]:
        return [w for w in self.writes if w.zxid is not None]

    # ------------------------------------------------------------ requests

    def _step(self, client: Client) -> None:
        """What a client does next. Like a real one, it uses a session only once createSession
        was answered, and only on the server that answered it (the workload's sessions do not
        move between servers; ``sessions``' do): when that server stops serving, the client
        leaves the session to expire and opens a new one elsewhere."""
        if self.c.sched.now >= self.until_ms:
            return
        self.c.sched.after(self.rng.randint(*self.interval), self._step, client)
        node = self.c.nodes.get(client.server)
        if client.state in ("opening", "open") and (node is None or not node.serving or node.paused):
            client.state = "none"  # connection loss: abandon the session (it expires)
        if client.state == "opening":
            return
        if client.state in ("none", "closed"):
            serving = [n for n in self.c.nodes.values() if n.serving and not n.paused]
            if serving:
                self._new_session(client, self.rng.choice(serving))
            return
        assert node is not None
        if self.c.config.reconfig and self.rng.random() < 0.03:
            self._reconfig(client, node)
            return
        r = self.rng.random()
        if r < 0.45:
            self._create(client, node, f"/w{self._value()}", CreateMode.PERSISTENT)
        elif r < 0.7:
            self._set(client, node, f"/k{self.rng.randrange(self.keys)}")
        elif r < 0.85:
            self._create(client, node, f"/e{self._value()}", CreateMode.EPHEMERAL)
        elif r < 0.96:
            eph = client.ephemerals or []
            if eph:
                path = eph.pop(0)
                self.submit(client, node, OpCode.DELETE, path, DeleteRequest(path, -1))
            else:
                self._set(client, node, f"/k{self.rng.randrange(self.keys)}")
        else:
            self.submit(client, node, OpCode.CLOSE_SESSION, "", None)
            client.state = "closed"

    def _reconfig(self, client: Client, node: Server) -> None:
        """reconfigEnabled: ask to change the config as the server sees it: a voter leaves (while
        more than three vote; the leader too, which hands over), a server that left comes back,
        or an observer becomes a voter."""
        q = node.quorum
        voters = sorted(s.sid for s in q.participants)
        options: list[tuple[str | None, str | None]] = [(None, str(v)) for v in voters] if len(voters) > 3 else []
        options += [(server_line(g), None) for g in sorted(set(self.c.nodes) - {s.sid for s in q.servers})]
        options += [(server_line(o.sid), None) for o in q.observers]
        if options:
            joining, leaving = self.rng.choice(options)
            if self.submit(client, node, OpCode.RECONFIG, CONFIG_NODE, ReconfigRequest(joining, leaving, None, -1)):  # type: ignore[arg-type]
                self.c.stats["reconfig_asked"] += 1

    def _value(self) -> int:
        self._next_value += 1
        return self._next_value

    def _new_session(self, client: Client, node: Server) -> None:
        self._next_session += 1
        client.session = SESSION_BASE + self._next_session
        client.cxid = 0
        client.server = node.sid
        client.ephemerals = []
        client.state = "opening" if self.submit(client, node, OpCode.CREATE_SESSION, "", None) else "none"

    def _create(self, client: Client, node: Server, path: str, mode: CreateMode) -> None:
        data = path.encode() + b"=" + str(self.c.sched.now).encode()
        req = CreateRequest(path, data, _ACL, int(mode))
        w = self.submit(client, node, OpCode.CREATE, path, req)
        if w is not None:
            w.flags = int(mode)
            if mode == CreateMode.EPHEMERAL and client.ephemerals is not None:
                client.ephemerals.append(path)

    def _set(self, client: Client, node: Server, path: str) -> None:
        value = f"v{self._value()}".encode()
        self.submit(client, node, OpCode.SET_DATA, path, SetDataRequest(path, value, -1))

    def submit(self, client: Client, node: Server, op: int, path: str, req: Record | None) -> Write | None:
        client.cxid += 1
        if op == OpCode.CREATE_SESSION:
            body = INT.pack(self.timeout)
        else:
            body = req.to_bytes() if req is not None else b""
        w = Write(client.session, client.cxid, op, path, node.sid, node.incarnation, node.term_seq, self.c.sched.now)
        if not node.submit(client.session, client.cxid, op, body):
            return None
        self.pending[(client.session, client.cxid)] = w
        self.writes.append(w)
        self.c.stats["submitted"] += 1
        return w

    # ------------------------------------------------------------ replies

    def on_applied(self, sid: int, incarnation: int, term: int, hdr: TxnHeader) -> None:
        """Server ``sid`` (in ``incarnation``, ``term``) applied ``hdr``'s txn: the write is
        acknowledged if it was submitted there."""
        key = (hdr.clientId, hdr.cxid)
        w = self.pending.get(key)
        if w is None or w.origin != sid or w.incarnation != incarnation or w.term != term:
            return
        del self.pending[key]
        w.zxid = hdr.zxid
        w.ok = hdr.type != OpCode.ERROR
        self.c.stats["acked"] += 1
        if w.op == OpCode.CREATE_SESSION:
            for client in self.clients:
                if client.session == w.session and client.state == "opening":
                    client.state = "open" if w.ok else "none"
