"""The link between a serving member and its worker processes (``serverWorkers``): both ends, pure.

A server may serve its client port from several processes (``runtime.workers``): the member
(it recovers the data dir, owns the txn log, prepares every txn) and workers, each with a
replica of the tree. A worker is fed exactly as an observer is: the tree as the member has it
(SNAP), then each txn once the member applied it (INFORM), in zxid order. Its request pipeline
is a learner's (``server.learner.LearnerServerCore``): reads are answered from the replica;
writes, new sessions and syncs are forwarded (REQUEST), a session that moved to it is
revalidated (REVALIDATE), and the sessions its clients keep alive are reported (PING), as a
learner does to its leader. The member's pipeline takes them as a leader's takes its learners'
(``server.leader.LeaderServerCore``: ``learner_request``, ``touch``, ``revalidate``) on a
standalone server or an ensemble's leader; on a follower or an observer the member's pipeline
is a learner's, which relays them to the leader through its own link
(``server.learner.LearnerServerCore``: ``relay_request``, ``relay_revalidate``, ``touch``) and
hands back the leader's answers (``take_relayed``).

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
- session ids are partitioned: process ``index`` of ``count`` hands out ids with
  ``id % count == index`` (``SessionTracker.partition``), so no two processes choose the same id.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from zkpy.errors import ProtocolError
from zkpy.server.leader import LeaderServerCore
from zkpy.server.learner import LearnerServerCore
from zkpy.server.outputs import Forward, Revalidate, ServerOutput
from zkpy.storage.snapshot import parse_snapshot_stream, snapshot_stream
from zkpy.storage.txnlog import decode_payload
from zkpy.tree.datatree import DataTree
from zkpy.wire.consts import OpCode
from zkpy.wire.quorum import PacketType, QuorumPacket, QuorumPacketReader

LINK_MAX_BUFFER = (1 << 31) - 1  # a link is between processes of one server: a SNAP may be large
_PACKET_HEAD = struct.Struct(">iqi")  # a QuorumPacket's type, zxid and data length
_NO_AUTH = b"\xff\xff\xff\xff"  # ... and its authinfo: null
_REQUEST_HEAD = struct.Struct(">qii")  # session, cxid, type (Zab's REQUEST)
_REVALIDATE_REQ = struct.Struct(">qi")  # session, timeout
_REVALIDATE_REP = struct.Struct(">q?")  # session, valid
_TOUCH = struct.Struct(">qi")  # session, timeout (a PING's entries)


class LinkError(ProtocolError):
    """The other end of a worker link sent something it never sends: the link is closed."""


class _LinkReader(QuorumPacketReader):
    """A QuorumPacketReader that reads a packet without authinfo (every INFORM) by its lengths
    alone, and any other the general way."""

    def next(self) -> QuorumPacket | None:
        buf, pos = self.buf, self.pos
        if len(buf) - pos >= _PACKET_HEAD.size:
            type_, zxid, n = _PACKET_HEAD.unpack_from(buf, pos)
            end = pos + _PACKET_HEAD.size + n
            if 0 <= n and len(buf) >= end + 4 and buf[end:end + 4] == _NO_AUTH:
                self.pos = end + 4
                return QuorumPacket(type_, zxid, bytes(buf[end - n:end]), None)
        return super().next()


def _packet(type_: int, zxid: int, data: bytes) -> bytes:
    """A QuorumPacket without authinfo, as ``QuorumPacket(...).to_bytes()`` writes it."""
    return _PACKET_HEAD.pack(type_, zxid, len(data)) + data + _NO_AUTH


@dataclass(slots=True)
class _Link:
    reader: _LinkReader = field(default_factory=lambda: _LinkReader(LINK_MAX_BUFFER))
    out: list[bytes] = field(default_factory=list)
    syncs: deque[int] = field(default_factory=deque)  # zxids its pending syncs wait for, in order


class WorkerHub:
    """The member's end of its workers' links (ids the shell picks): feed it the txns the
    pipeline proposes and the count (or the zxid) applied; take what each link is sent with
    ``take``."""

    def __init__(self, server: LeaderServerCore | LearnerServerCore) -> None:
        self.server = server
        self._links: dict[int, _Link] = {}
        self._proposed: deque[tuple[int, bytes]] = deque()  # (zxid, payload) proposed, not applied, in order
        self._last_proposed = -1  # a learner's shell may hand a txn over twice (logged before it served)

    def attach(self, link: int) -> None:
        """A worker's link opened: it is sent the tree as it is now, then every txn applied after."""
        tree = self.server.tree
        state = self._links[link] = _Link()
        state.out.append(_packet(PacketType.SNAP, tree.last_processed_zxid, snapshot_stream(tree)))

    def detach(self, link: int) -> None:
        self._links.pop(link, None)
        if isinstance(self.server, LearnerServerCore):
            self.server.relay_lost(link)

    @property
    def links(self) -> int:
        return len(self._links)

    def proposed(self, zxids: Iterable[int], payloads: Iterable[bytes]) -> None:
        """The pipeline handed these txns over (its `Propose` outputs, serialized once for the log
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
            for state in self._links.values():
                state.out.extend(packets)
        self._release_syncs()

    def applied_through(self, zxid: int) -> None:
        """The pipeline applied every txn it proposed up to ``zxid`` (a leader's pipeline, whose
        commits the member core runs: the shell compares the tree's zxid after each batch)."""
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
        server = self.server
        while (p := state.reader.next()) is not None:
            body = bytes(p.data or b"")
            if p.type == PacketType.REQUEST:
                if len(body) < _REQUEST_HEAD.size:
                    raise LinkError(f"REQUEST of {len(body)} bytes")
                session, cxid, op = _REQUEST_HEAD.unpack_from(body, 0)
                auth = tuple(p.authinfo or ())
                if isinstance(server, LearnerServerCore):
                    server.relay_request(link, session, cxid, op, body[_REQUEST_HEAD.size:], auth)
                elif op == OpCode.SYNC:
                    state.syncs.append(server.next_zxid - 1)  # the last txn proposed before it
                else:
                    server.learner_request(session, cxid, op, body[_REQUEST_HEAD.size:], auth)
            elif p.type == PacketType.PING:
                server.touch(_TOUCH.unpack_from(body, at) for at in range(0, len(body) - len(body) % _TOUCH.size,
                                                                          _TOUCH.size))
            elif p.type == PacketType.REVALIDATE:
                session, timeout = _REVALIDATE_REQ.unpack_from(body, 0)
                if isinstance(server, LearnerServerCore):
                    server.relay_revalidate(link, session, timeout)
                else:
                    valid = server.revalidate(session, timeout)
                    state.out.append(_packet(PacketType.REVALIDATE, -1, _REVALIDATE_REP.pack(session, valid)))
            else:
                raise LinkError(f"packet type {p.type} from a worker")
        self._release_syncs()

    def _release_syncs(self) -> None:
        applied = self.server.tree.last_processed_zxid
        for state in self._links.values():
            while state.syncs and state.syncs[0] <= applied:
                state.syncs.popleft()
                state.out.append(_packet(PacketType.SYNC, -1, b""))

    def take(self) -> list[tuple[int, bytes]]:
        """What each link is sent now (links with nothing to send are left out). A learner's
        answers for its workers come after the txns applied before them."""
        if isinstance(self.server, LearnerServerCore):
            for link, session, valid in self.server.take_relayed():
                state = self._links.get(link)
                if state is None:
                    continue
                if session is None:
                    state.out.append(_packet(PacketType.SYNC, -1, b""))
                else:
                    state.out.append(_packet(PacketType.REVALIDATE, -1, _REVALIDATE_REP.pack(session, valid)))
        out = []
        for link, state in self._links.items():
            if state.out:
                out.append((link, b"".join(state.out)))
                state.out.clear()
        return out


class WorkerFeed:
    """A worker's end of its link: the SNAP builds the replica (``tree``), after which
    ``pipeline`` is set by the shell; packets then drive it, and its outputs become packets."""

    def __init__(self) -> None:
        self.reader = _LinkReader(LINK_MAX_BUFFER)
        self.tree: DataTree | None = None
        self.pipeline: LearnerServerCore | None = None
        self._out: list[bytes] = []

    def receive(self, data: bytes) -> bool:
        """Bytes from the member; True when the replica arrived with them (the shell then builds
        the pipeline over ``tree`` and calls ``receive(b"")`` for what followed the SNAP)."""
        self.reader.feed(data)
        while (p := self.reader.next()) is not None:
            body = p.data or b""
            if self.tree is None:
                if p.type != PacketType.SNAP:
                    raise LinkError(f"packet type {p.type} before the SNAP")
                got = parse_snapshot_stream(body)
                if got is None:
                    raise LinkError("an unreadable SNAP")
                self.tree = got[0]
                self.tree.last_processed_zxid = p.zxid
                return True
            server = self.pipeline
            assert server is not None
            if p.type == PacketType.INFORM:
                hdr, txn = decode_payload(bytes(body))
                server.apply_committed(hdr, txn)
            elif p.type == PacketType.SYNC:
                server.sync_done()
            elif p.type == PacketType.REVALIDATE:
                session, valid = _REVALIDATE_REP.unpack_from(body, 0)
                server.revalidated(session, valid)
            else:
                raise LinkError(f"packet type {p.type} from the member")
        return False

    def outputs(self, outputs: list[ServerOutput]) -> None:
        """The pipeline's `Forward` and `Revalidate` outputs, as packets for the member."""
        for o in outputs:
            if isinstance(o, Forward):
                self._out.append(QuorumPacket(PacketType.REQUEST, -1, _REQUEST_HEAD.pack(o.session, o.cxid, o.op)
                                              + o.body, list(o.auth)).to_bytes())
            elif isinstance(o, Revalidate):
                self._out.append(_packet(PacketType.REVALIDATE, -1, _REVALIDATE_REQ.pack(o.session, o.timeout_ms)))

    def touches(self) -> None:
        """Report the sessions the pipeline saw since the last report (a PING)."""
        assert self.pipeline is not None
        touched = self.pipeline.take_touches()
        if touched:
            self._out.append(_packet(PacketType.PING, -1, b"".join(_TOUCH.pack(s, t) for s, t in touched)))

    def take(self) -> bytes:
        out = b"".join(self._out)
        self._out.clear()
        return out
