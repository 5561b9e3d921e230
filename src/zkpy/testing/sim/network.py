"""The simulated network: quorum-port connections (TCP semantics) and election channels.

Quorum port (learner -> leader): a ``QConn`` carries bytes both ways. Within one direction
bytes arrive in order (each send is delivered no earlier than the one before it); sends on
different connections get independent random delays, so they reorder. A connection never
loses bytes in the middle and goes on: it is either open, closed gracefully (what was sent
still arrives, then the other side hears the close), or broken (an abort, a crash, a
partition, an injected drop): what is in flight is lost and nothing more gets through; the
other side hears of it after a delay, or never (then only its own timeouts tell it).
Packets travel as the bytes ``QuorumPacket.to_bytes`` makes (the SNAP stream after its
packet), sometimes split in two, so the receivers' stream parsers do real work.

Election port: one channel per pair of servers, up while both are running and reachable.
As in QuorumCnxManager, each direction remembers the latest notification given to it (a
one-slot queue, the last message sent); when a channel comes (back) up, that latest
notification is sent again both ways. Notifications travel framed (``frame`` /
``encode_notification``) and are parsed back on arrival.

Partitions are groups of servers; servers in different groups cannot reach each other: the
connections and channels between them break when the partition starts, and new connects fail.
"""

from __future__ import annotations

import itertools
import random
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .scheduler import Scheduler


class QuorumEnd(Protocol):
    """What one side of a quorum connection is told (a leader or learner term)."""

    def on_data(self, conn: QConn, data: bytes) -> None: ...

    def on_close(self, conn: QConn) -> None: ...


@dataclass(slots=True, eq=False)
class QConn:
    """One learner's connection to a leader's quorum port."""

    id: int
    learner: int
    leader: int
    ends: dict[int, QuorumEnd]  # sid -> the term that owns this side
    incs: dict[int, int]  # sid -> the incarnation of the process that owns this side
    open: bool = True
    leader_cid: int = -1  # the leader term's number for it
    gen: int = 0  # bumped when the connection breaks: what was in flight is lost
    last: dict[int, int] = field(default_factory=dict)  # destination sid -> time of the last delivery
    snap_meta: deque[Any] = field(default_factory=deque)  # simulator-only facts sent with each SNAP

    def other(self, sid: int) -> int:
        return self.leader if sid == self.learner else self.learner


@dataclass(slots=True)
class DelayModel:
    """Per-message latency: uniform in [low, high], now and then a spike up to ``spike_max``."""

    low: int = 1
    high: int = 8
    spike_p: float = 0.0
    spike_max: int = 0

    def draw(self, rng: random.Random) -> int:
        if self.spike_p and rng.random() < self.spike_p:
            return rng.randint(self.high, max(self.high, self.spike_max))
        return rng.randint(self.low, self.high)


class Host(Protocol):
    """What the network needs of a server (``node.SimNode``): whether it runs, the term that
    listens on its quorum port, and a way to hand it an event."""

    @property
    def alive(self) -> bool: ...

    @property
    def incarnation(self) -> int: ...

    @property
    def term(self) -> QuorumEnd | None: ...

    def run_event(self, inc: int, fn: Callable[..., Any], *args: Any) -> None: ...

    def on_notification(self, src: int, payload: bytes) -> None: ...


class Network:
    def __init__(self, sched: Scheduler, hosts: Mapping[int, Host], rng: random.Random, delays: DelayModel,
                 split_p: float = 0.1) -> None:
        self.sched = sched
        self.hosts = hosts
        self.rng = rng
        self.delays = delays
        self.split_p = split_p
        self.groups: list[frozenset[int]] | None = None
        self.conns: dict[int, QConn] = {}
        self._ids = itertools.count(1)
        self.latest: dict[tuple[int, int], bytes] = {}  # (src, dst) -> latest election notification
        self.egen: dict[tuple[int, int], int] = {}  # (low sid, high sid) -> channel generation
        self.elast: dict[tuple[int, int], int] = {}  # (src, dst) -> time of the last delivery
        self.sent_packets = 0
        self.sent_notifications = 0

    # ------------------------------------------------------------ reachability

    def reachable(self, a: int, b: int) -> bool:
        if self.groups is None or a == b:
            return True
        for g in self.groups:
            if a in g:
                return b in g
        return False

    def delay(self) -> int:
        return self.delays.draw(self.rng)

    def partition(self, groups: Iterable[Iterable[int]], notify_p: float = 0.3) -> None:
        """Servers in different groups stop reaching each other (a server in no group is alone).
        The connections across break; each side hears of it (late) with probability ``notify_p``."""
        before = self.groups
        self.groups = [frozenset(g) for g in groups]
        for conn in list(self.conns.values()):
            if not self.reachable(conn.learner, conn.leader):
                self.break_conn(conn, notify_p=notify_p, slow=True)
        sids = sorted(self.hosts)
        for a, b in itertools.combinations(sids, 2):
            was = before is None or self._reach_in(before, a, b)
            if was and not self.reachable(a, b):
                self._reset_channel(a, b)

    def heal(self) -> None:
        before = self.groups
        self.groups = None
        if before is None:
            return
        for a, b in itertools.combinations(sorted(self.hosts), 2):
            if not self._reach_in(before, a, b):
                self.channel_up(a, b)

    @staticmethod
    def _reach_in(groups: list[frozenset[int]], a: int, b: int) -> bool:
        return any(a in g and b in g for g in groups)

    # ------------------------------------------------------------ quorum port

    def connect(self, learner: int, leader: int, term: QuorumEnd) -> None:
        """Dial ``leader``'s quorum port for ``term``; it is told ``on_connected(conn)`` or
        ``on_connect_failed()``."""
        inc = self.hosts[learner].incarnation
        self.sched.after(self.delay(), self._connect_arrives, learner, inc, leader, term)

    def _connect_arrives(self, learner: int, inc: int, leader: int, term: Any) -> None:
        ln = self.hosts[learner]
        if not ln.alive or ln.incarnation != inc:
            return
        ld = self.hosts[leader]
        lt = ld.term if ld.alive else None
        back = self.delay()
        if not self.reachable(learner, leader):
            # no answer to the SYN: the connect times out
            self.sched.after(back + 500 + self.rng.randrange(500), ln.run_event, inc, term.on_connect_failed)
            return
        accept = getattr(lt, "accept", None)  # only a leader's term listens on the quorum port
        if lt is None or accept is None:
            self.sched.after(back, ln.run_event, inc, term.on_connect_failed)  # refused
            return
        conn = QConn(next(self._ids), learner, leader, {learner: term, leader: lt},
                     {learner: inc, leader: ld.incarnation})
        conn.last = {learner: 0, leader: 0}
        self.conns[conn.id] = conn
        ld.run_event(ld.incarnation, accept, conn)
        conn.last[learner] = self.sched.now + back
        self.sched.after(back, ln.run_event, inc, term.on_connected, conn)

    def send(self, conn: QConn, src: int, data: bytes, meta: Any = None) -> None:
        if not conn.open:
            return
        dst = conn.other(src)
        now = self.sched.now
        t = max(conn.last.get(dst, 0), now + self.delay())
        conn.last[dst] = t
        self.sent_packets += 1
        if meta is not None:
            conn.snap_meta.append(meta)
        if len(data) > 8 and self.rng.random() < self.split_p:
            cut = self.rng.randrange(1, len(data))
            self.sched.at(t, self._deliver, conn, conn.gen, dst, data[:cut])
            self.sched.at(t, self._deliver, conn, conn.gen, dst, data[cut:])
        else:
            self.sched.at(t, self._deliver, conn, conn.gen, dst, data)

    def _deliver(self, conn: QConn, gen: int, dst: int, data: bytes) -> None:
        if conn.gen != gen:
            return
        self.hosts[dst].run_event(conn.incs[dst], conn.ends[dst].on_data, conn, data)

    def close(self, conn: QConn, by: int, abort: bool = False) -> None:
        """``by`` closes its side: gracefully (what it sent still arrives, then the close) or by
        abort (what is in flight is lost)."""
        if not conn.open:
            return
        conn.open = False
        self.conns.pop(conn.id, None)
        other = conn.other(by)
        now = self.sched.now
        if abort:
            conn.gen += 1
            t = now + self.delay()
        else:
            t = max(conn.last.get(other, 0), now + self.delay())
        self.sched.at(t, self._deliver_close, conn, other)

    def break_conn(self, conn: QConn, notify_p: float = 0.7, slow: bool = False) -> None:
        """The connection breaks: in-flight bytes are lost; each side hears of it after a delay
        (with probability ``notify_p``) or never."""
        if not conn.open:
            return
        conn.open = False
        conn.gen += 1
        self.conns.pop(conn.id, None)
        for sid in (conn.learner, conn.leader):
            if self.rng.random() < notify_p:
                d = self.delay() + (self.rng.randrange(3000) if slow else 0)
                self.sched.after(d, self._deliver_close, conn, sid)

    def _deliver_close(self, conn: QConn, dst: int) -> None:
        self.hosts[dst].run_event(conn.incs[dst], conn.ends[dst].on_close, conn)

    def node_crashed(self, sid: int) -> None:
        for conn in list(self.conns.values()):
            if sid in (conn.learner, conn.leader):
                conn.open = False
                conn.gen += 1
                self.conns.pop(conn.id, None)
                other = conn.other(sid)
                if self.rng.random() < 0.7:  # the kernel resets the connections of a dead process
                    self.sched.after(self.delay(), self._deliver_close, conn, other)
        for other in self.hosts:
            if other != sid:
                self._reset_channel(sid, other)
                self.latest.pop((sid, other), None)

    def node_started(self, sid: int) -> None:
        for other in sorted(self.hosts):
            if other != sid:
                self.channel_up(sid, other)

    def open_conns(self) -> list[QConn]:
        return list(self.conns.values())

    # ------------------------------------------------------------ election port

    @staticmethod
    def _pair(a: int, b: int) -> tuple[int, int]:
        return (a, b) if a < b else (b, a)

    def _channel_is_up(self, a: int, b: int) -> bool:
        na, nb = self.hosts[a], self.hosts[b]
        return na.alive and nb.alive and self.reachable(a, b)

    def send_notification(self, src: int, dst: int, payload: bytes) -> None:
        self.latest[(src, dst)] = payload
        if self._channel_is_up(src, dst):
            self._transmit(src, dst, payload)

    def _transmit(self, src: int, dst: int, payload: bytes) -> None:
        key = self._pair(src, dst)
        now = self.sched.now
        t = max(self.elast.get((src, dst), 0), now + self.delay())
        self.elast[(src, dst)] = t
        self.sent_notifications += 1
        self.sched.at(t, self._deliver_note, src, dst, self.hosts[dst].incarnation,
                        self.egen.get(key, 0), payload)

    def _deliver_note(self, src: int, dst: int, inc: int, gen: int, payload: bytes) -> None:
        if self.egen.get(self._pair(src, dst), 0) != gen:
            return
        node = self.hosts[dst]
        node.run_event(inc, node.on_notification, src, payload)

    def _reset_channel(self, a: int, b: int) -> None:
        key = self._pair(a, b)
        self.egen[key] = self.egen.get(key, 0) + 1

    def channel_up(self, a: int, b: int) -> None:
        """The channel (re)connects: the latest notification each way is sent again."""
        if not self._channel_is_up(a, b):
            return
        for src, dst in ((a, b), (b, a)):
            payload = self.latest.get((src, dst))
            if payload is not None:
                self._transmit(src, dst, payload)

    def drop_channel(self, a: int, b: int, reconnect_after_ms: int) -> None:
        """An election connection breaks; it comes back after a while and resends."""
        self._reset_channel(a, b)
        self.sched.after(reconnect_after_ms, self.channel_up, a, b)
