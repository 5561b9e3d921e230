"""The link between a serving member and its worker processes (``serverWorkers``): both ends, pure.

A server may serve its client port from several processes (``runtime.workers``): the member
(it recovers the data dir, owns the txn log, prepares every txn) and workers, each with a
replica of the tree. A worker is fed exactly as an observer is: the tree as the member has it
(SNAP; the shell may write it from a forked child, off the member's loop, while the link's other
output waits), then each txn once the member applied it (INFORM), in zxid order. Its request pipeline
is a learner's (``server.learner.LearnerServerCore``): reads are answered from the replica;
writes, new sessions and syncs are forwarded (REQUEST), a session that moved to it is
revalidated (REVALIDATE), and the sessions its clients keep alive are reported (PING), as a
learner does to its leader. The member's pipeline takes them as a leader's takes its learners'
(``server.leader.LeaderServerCore``: ``learner_request``, ``touch``, ``revalidate``) on a
standalone server or an ensemble's leader; on a follower or an observer the member's pipeline
is a learner's, which relays them to the leader through its own link
(``server.learner.LearnerServerCore``: ``relay_request``, ``relay_revalidate``, ``touch``) and
hands back the leader's answers (its `Relayed` outputs, given to ``relayed``).

The member's end is driven by its term core (``member.term``: ``PublishApplied`` before a
batch's effects, the links' bytes after), or by the standalone shell (``runtime.server``).

The packets are Zab's ``QuorumPacket`` records with Zab's type numbers and payloads; only what
the member and its workers need of Zab is used (no epochs, no acks: the member is the only
writer and its own fsync decides durability).

Invariants owned here:
- a worker receives every txn the member applied after its SNAP, once, in zxid order, and only
  after the member applied it (so after its fsync): nothing a worker acknowledges is unlogged;
- a worker's sync is answered (SYNC) only after every txn the member had proposed when the sync
  arrived was sent to that worker (the worker's link is FIFO, so its forwarded writes came
  first): a read after a sync on a worker sees every write any process acknowledged before it;
  on a learner, only after the leader's SYNC for it arrived and every txn applied before that
  SYNC was sent to the worker (``take`` puts the answers after the txns);
- the member publishes the zxid it applied (``runtime.worker.SharedZxid``) before anything
  that tells of it (a reply, an INFORM) leaves, so a worker's read waits for it;
- session ids are partitioned: process ``index`` of ``count`` hands out ids with
  ``id % count == index`` (``SessionTracker.partition``), so no two processes choose the same id.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import assert_never

from zkpy.config import ServerConfig
from zkpy.errors import ProtocolError
from zkpy.server import outputs as out
from zkpy.server.connection import Connection
from zkpy.server.leader import LeaderServerCore
from zkpy.server.learner import LearnerServerCore
from zkpy.storage.snapshot import parse_snapshot_stream, snapshot_stream
from zkpy.storage.txnlog import decode_payload
from zkpy.tree.datatree import DataTree
from zkpy.wire.consts import OpCode
from zkpy.wire.proto import Id
from zkpy.wire.quorum import (
    PacketType,
    QuorumPacket,
    QuorumPacketReader,
    authinfo_end,
    read_authinfo,
    skip_length,
)

LINK_MAX_BUFFER = (1 << 31) - 1  # a link is between processes of one server: a SNAP may be large
_PACKET_HEAD = struct.Struct(">iqi")  # a QuorumPacket's type, zxid and data length
_NO_AUTH = b"\xff\xff\xff\xff"  # ... and its authinfo: null
_REQUEST_HEAD = struct.Struct(">qii")  # session, cxid, type (Zab's REQUEST)
_REVALIDATE_REQ = struct.Struct(">qi")  # session, timeout
_REVALIDATE_REP = struct.Struct(">q?")  # session, valid
_TOUCH = struct.Struct(">qi")  # session, timeout (a PING's entries)


class LinkError(ProtocolError):
    """The other end of a worker link sent something it never sends: the link is closed."""


@dataclass(slots=True)
class _Packet:
    """A packet read from a link: a QuorumPacket's fields, its authinfo as the tuple of Ids a
    request is prepped with (empty but on a worker's REQUEST). Not frozen: one is built per txn,
    and a frozen dataclass's ``__init__`` pays a call per field."""

    type: int
    zxid: int
    data: bytes
    auth: tuple[Id, ...]


class _LinkReader(QuorumPacketReader):
    """Reads a link's packets (Zab's QuorumPacket layout) straight from their lengths, which it
    checks as jute does (ProtocolError). A worker's REQUEST carries its session's identities:
    each distinct authinfo is parsed once (a link sees few; at most ``AUTH_CACHE_MAX`` kept), and
    one equal to the last is recognised by its bytes alone (the encoding is prefix-free: bytes
    that start with a whole authinfo vector hold that vector)."""

    AUTH_CACHE_MAX = 1024

    def __init__(self) -> None:
        super().__init__(LINK_MAX_BUFFER)
        self._auth: dict[bytes, tuple[Id, ...]] = {}
        self._last: tuple[bytes, tuple[Id, ...]] = (_NO_AUTH, ())  # the last authinfo parsed: its bytes, its Ids

    def packet(self) -> _Packet | None:
        """The next whole packet, or None until more bytes arrive."""
        buf, pos = self.buf, self.pos
        size = len(buf)
        if size - pos < _PACKET_HEAD.size:
            return None
        at = skip_length(buf, pos + 12, size, LINK_MAX_BUFFER)  # type, zxid, then data
        if at is None or size - at < 4:
            return None
        last_key, auth = self._last
        if buf.startswith(_NO_AUTH, at):  # every packet but a worker's REQUEST
            end, auth = at + 4, ()
        elif buf.startswith(last_key, at):
            end = at + len(last_key)
        else:
            found = authinfo_end(buf, at, size, LINK_MAX_BUFFER)
            if found is None:
                return None
            end, key = found, bytes(buf[at:found])
            cached = self._auth.get(key)
            if cached is None:
                cached = tuple(read_authinfo(key, 0))
                if len(self._auth) >= self.AUTH_CACHE_MAX:
                    self._auth.clear()
                self._auth[key] = cached
            auth = cached
            self._last = (key, cached)
        self.pos = end
        type_, zxid, _n = _PACKET_HEAD.unpack_from(buf, pos)
        return _Packet(type_, zxid, bytes(buf[pos + _PACKET_HEAD.size:at]), auth)


def _packet(type_: int, zxid: int, data: bytes) -> bytes:
    """A QuorumPacket without authinfo, as ``QuorumPacket(...).to_bytes()`` writes it."""
    return _PACKET_HEAD.pack(type_, zxid, len(data)) + data + _NO_AUTH


def snapshot_packet(tree: DataTree) -> bytes:
    """What a worker's link carries first: the tree as it is now, one SNAP packet."""
    return _packet(PacketType.SNAP, tree.last_processed_zxid, snapshot_stream(tree))


@dataclass(slots=True)
class _Link:
    reader: _LinkReader = field(default_factory=_LinkReader)
    out: list[bytes] = field(default_factory=list)
    syncs: deque[int] = field(default_factory=deque)  # zxids its pending syncs wait for, in order
    held: bool = False  # its SNAP is being written by the shell: its output waits
    held_bytes: int = 0  # the txns waiting meanwhile (its worker has no client yet: nothing else waits)


class WorkerHub:
    """The member's end of its workers' links (ids the shell picks): feed it the txns the
    pipeline proposes and the count (or the zxid) applied; take what each link is sent with
    ``take``."""

    def __init__(self, pipeline: LeaderServerCore | LearnerServerCore) -> None:
        self.pipeline = pipeline
        self._links: dict[int, _Link] = {}
        self._proposed: deque[tuple[int, bytes]] = deque()  # (zxid, payload) proposed, not applied, in order
        self._last_proposed = -1  # a learner's shell may hand a txn over twice (logged before it served)
        self._relayed: list[tuple[int, int | None, bool]] = []  # the leader's answers for workers, in order

    def attach(self, link: int, streamed: bool = False) -> None:
        """A worker's link opened: it is sent the tree as it is now, then every txn applied after.
        ``streamed``: the shell writes the tree on the link itself (``snapshot_packet`` of the
        tree as it is now, off the member's loop: in a forked child), and everything else for
        that link waits until it says ``snapshot_sent``."""
        state = self._links[link] = _Link(held=streamed)
        if not streamed:
            state.out.append(snapshot_packet(self.pipeline.tree))

    def snapshot_sent(self, link: int) -> None:
        """The shell wrote a streamed link's SNAP: what waited for it may go."""
        state = self._links.get(link)
        if state is not None:
            state.held, state.held_bytes = False, 0

    def held_over(self, limit: int) -> list[int]:
        """The links whose SNAP is still being written with more than ``limit`` bytes of txns
        waiting behind it (the shell bounds what it keeps for a worker that stopped reading)."""
        return [link for link, state in self._links.items() if state.held and state.held_bytes > limit]

    def detach(self, link: int) -> None:
        self._links.pop(link, None)
        self._relayed = [r for r in self._relayed if r[0] != link]
        if isinstance(self.pipeline, LearnerServerCore):
            self.pipeline.relay_lost(link)

    @property
    def links(self) -> int:
        return len(self._links)

    def proposed(self, zxids: Iterable[int], payloads: Iterable[bytes]) -> None:
        """The pipeline handed these txns over (its `out.Propose` outputs, serialized once for the log
        and the link: ``storage.txnlog.encode_payload``), in zxid order."""
        for zxid, payload in zip(zxids, payloads, strict=True):
            if zxid > self._last_proposed:
                self._proposed.append((zxid, payload))
                self._last_proposed = zxid

    def applied(self, count: int) -> None:
        """The pipeline applied its oldest ``count`` proposed txns: send them to every worker."""
        packets = []
        proposed, links = self._proposed, self._links
        for _ in range(count):
            zxid, payload = proposed.popleft()
            if links:
                packets.append(_PACKET_HEAD.pack(PacketType.INFORM, zxid, len(payload)) + payload + _NO_AUTH)
        if packets:
            size = 0
            for state in self._links.values():
                state.out.extend(packets)
                if state.held:
                    size = size or sum(map(len, packets))
                    state.held_bytes += size
        self._release_syncs()

    def applied_through(self, zxid: int) -> None:
        """The pipeline applied every txn it proposed up to ``zxid`` (the term core tells it after
        each batch of effects, for a leader's and a learner's pipeline alike)."""
        count = 0
        for proposed_zxid, _ in self._proposed:
            if proposed_zxid > zxid:
                break
            count += 1
        if count:
            self.applied(count)

    def receive(self, link: int, data: bytes) -> None:
        """Bytes from a worker: its forwarded requests go to the pipeline (the shell flushes it)."""
        state = self._links.get(link)
        if state is None:
            return
        state.reader.feed(data)
        pipeline = self.pipeline
        while (p := state.reader.packet()) is not None:
            body = p.data
            if p.type == PacketType.REQUEST:
                if len(body) < _REQUEST_HEAD.size:
                    raise LinkError(f"REQUEST of {len(body)} bytes")
                session, cxid, op = _REQUEST_HEAD.unpack_from(body, 0)
                auth = p.auth
                if isinstance(pipeline, LearnerServerCore):
                    pipeline.relay_request(link, session, cxid, op, body[_REQUEST_HEAD.size:], auth)
                elif op == OpCode.SYNC:
                    state.syncs.append(pipeline.next_zxid - 1)  # the last txn proposed before it
                else:
                    pipeline.learner_request(session, cxid, op, body[_REQUEST_HEAD.size:], auth)
            elif p.type == PacketType.PING:
                pipeline.touch(_TOUCH.unpack_from(body, at) for at in range(0, len(body) - len(body) % _TOUCH.size,
                                                                          _TOUCH.size))
            elif p.type == PacketType.REVALIDATE:
                session, timeout = _REVALIDATE_REQ.unpack_from(body, 0)
                if isinstance(pipeline, LearnerServerCore):
                    pipeline.relay_revalidate(link, session, timeout)
                else:
                    valid = pipeline.revalidate(session, timeout)
                    state.out.append(_packet(PacketType.REVALIDATE, -1, _REVALIDATE_REP.pack(session, valid)))
            else:
                raise LinkError(f"packet type {p.type} from a worker")
        self._release_syncs()

    def _release_syncs(self) -> None:
        applied = self.pipeline.tree.last_processed_zxid
        for state in self._links.values():
            while state.syncs and state.syncs[0] <= applied:
                state.syncs.popleft()
                state.out.append(_packet(PacketType.SYNC, -1, b""))

    def relayed(self, link: int, session: int | None, valid: bool) -> None:
        """A learner pipeline's `out.Relayed` output: the leader's answer for worker ``link``."""
        self._relayed.append((link, session, valid))

    def take(self) -> list[tuple[int, bytes]]:
        """What each link is sent now (links with nothing to send are left out). A learner's
        answers for its workers come after the txns applied before them."""
        for link, session, valid in self._relayed:
            state = self._links.get(link)
            if state is None:
                continue
            if session is None:
                state.out.append(_packet(PacketType.SYNC, -1, b""))
            else:
                state.out.append(_packet(PacketType.REVALIDATE, -1, _REVALIDATE_REP.pack(session, valid)))
        self._relayed.clear()
        out = []
        for link, state in self._links.items():
            if state.out and not state.held:
                out.append((link, b"".join(state.out)))
                state.out.clear()
        return out


class WorkerFeed:
    """A worker process's core: its end of the link to the member, and its request pipeline.

    The SNAP builds the replica and, over it, the pipeline: a learner's
    (``server.learner.LearnerServerCore``), handing out session ids ``id % count == index``.
    Packets from the member then drive it (INFORM: ``apply_committed``; SYNC: ``sync_done``;
    REVALIDATE: ``revalidated``). Before client input reaches the pipeline, ``before_input``
    gives it the zxid the member had applied by then (its ``read_barrier``). ``ready()`` turns
    the pipeline's outputs into packets for the member and hands back its client `out.Output`s."""

    def __init__(self, config: ServerConfig, index: int, count: int, now_ms: int, wall_ms: int,
                 log: Callable[[str], None] = lambda _m: None) -> None:
        self.config = config
        self.index = index
        self.count = count
        self.now_ms = now_ms
        self.wall_ms = wall_ms
        self.log = log
        self.reader = _LinkReader()
        self.pipeline: LearnerServerCore | None = None  # once the replica arrived
        self._out: list[bytes] = []

    def set_time(self, now_ms: int, wall_ms: int) -> None:
        self.now_ms, self.wall_ms = now_ms, wall_ms
        if self.pipeline is not None:
            self.pipeline.set_time(now_ms, wall_ms)

    def receive(self, data: bytes) -> bool:
        """Bytes from the member; True when the replica (and the pipeline) arrived with them.
        Raises LinkError on what a member never sends."""
        self.reader.feed(data)
        loaded = False
        while (p := self.reader.packet()) is not None:
            body = p.data
            pipeline = self.pipeline
            if pipeline is None:
                if p.type != PacketType.SNAP:
                    raise LinkError(f"packet type {p.type} before the SNAP")
                got = parse_snapshot_stream(body)
                if got is None:
                    raise LinkError("an unreadable SNAP")
                tree = got[0]
                tree.last_processed_zxid = p.zxid
                tree.drop_digest()  # the member keeps it
                self.pipeline = LearnerServerCore(self.config, self.now_ms, self.wall_ms, log=self.log, tree=tree)
                self.pipeline.sessions.partition(self.index, self.count)
                loaded = True
            elif p.type == PacketType.INFORM:
                hdr, txn = decode_payload(body)
                pipeline.apply_committed(hdr, txn)
            elif p.type == PacketType.SYNC:
                pipeline.sync_done()
            elif p.type == PacketType.REVALIDATE:
                session, valid = _REVALIDATE_REP.unpack_from(body, 0)
                pipeline.revalidated(session, valid)
            else:
                raise LinkError(f"packet type {p.type} from the member")
        return loaded

    def before_input(self, applied: int) -> None:
        """Client input arrives: its reads wait for what the member had applied by now."""
        pipeline = self.pipeline
        if pipeline is not None and applied > pipeline.read_barrier:
            pipeline.read_barrier = applied

    def tick(self) -> None:
        """The pipeline's timers, and the sessions it saw since the last tick reported (a PING)."""
        if self.pipeline is not None:
            self.pipeline.tick()
            self.pipeline.report_touches()

    def ready(self) -> tuple[bytes, list[Connection]]:
        """The bytes for the member's link, and the client connections with output to write."""
        conns: list[Connection] = []
        if self.pipeline is not None:
            for o in self.pipeline.ready():
                match o:
                    case out.Output():
                        conns.append(o.conn)
                    case out.Forward():
                        self._out.append(QuorumPacket(PacketType.REQUEST, -1, _REQUEST_HEAD.pack(
                            o.session, o.cxid, o.op) + o.body, list(o.auth)).to_bytes())
                    case out.Revalidate():
                        self._out.append(_packet(PacketType.REVALIDATE, -1,
                                                 _REVALIDATE_REQ.pack(o.session, o.timeout_ms)))
                    case out.Touches():
                        if o.sessions:
                            self._out.append(_packet(PacketType.PING, -1,
                                                     b"".join(_TOUCH.pack(s, t) for s, t in o.sessions)))
                    case out.Propose() | out.CheckQuorum() | out.Relayed() | out.TxnApplied():
                        raise AssertionError(f"a worker's pipeline produced {o!r}")
                    case _:
                        assert_never(o)
        data = b"".join(self._out)
        self._out.clear()
        return data, conns
