"""The member-worker link (``member.workers``) driven without processes: a standalone member's
pipeline and a worker's, joined by the hub and the feed with bytes, and a fake clock."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkpy.config import ServerConfig
from zkpy.errors import ProtocolError
from zkpy.member.workers import WorkerFeed, WorkerHub, _LinkReader, snapshot_packet
from zkpy.server.connection import Connection
from zkpy.server.core import ServerCore
from zkpy.server.leader import LeaderServerCore
from zkpy.server.learner import LearnerServerCore
from zkpy.server.outputs import Propose
from zkpy.server.sessions import SessionTracker
from zkpy.storage.txnlog import encode_payload
from zkpy.wire.consts import CreateMode, OpCode
from zkpy.wire.jute import INT
from zkpy.wire.proto import (
    ACL,
    ConnectRequest,
    ConnectResponse,
    CreateRequest,
    GetDataRequest,
    GetDataResponse,
    Id,
    ReplyHeader,
    RequestHeader,
    SetDataRequest,
    SyncRequest,
)
from zkpy.wire.quorum import PacketType, QuorumPacket, read_quorum_packet

OPEN = [ACL(31, Id("world", "anyone"))]
WALL = 1_700_000_000_000
TICK = 100


class Pair:
    """A member and one worker (index 1 of 2); ``durable`` says whether the member's txns are
    persisted (applied) at once when ``pump`` runs, or held until ``persist``."""

    def __init__(self) -> None:
        config = ServerConfig(tick_ms=TICK, min_session_timeout_ms=400, max_session_timeout_ms=4000)
        self.now = 0
        self.member = LeaderServerCore(config, 0, WALL)
        self.member.sessions.partition(0, 2)
        self.hub = WorkerHub(self.member)
        self.feed = WorkerFeed(config, 1, 2, 0, WALL)
        self.hub.attach(1)
        self.unpersisted = 0
        self.durable = True
        for link, data in self.hub.take():
            assert link == 1 and self.feed.receive(data)
        assert self.feed.pipeline is not None
        self.worker: LearnerServerCore = self.feed.pipeline
        self.ids = 0

    def persist(self) -> None:
        self.member.apply_persisted(self.unpersisted)
        self.hub.applied(self.unpersisted)
        self.unpersisted = 0
        self.pump()

    def pump(self) -> None:
        for _ in range(20):
            txns = [(o.hdr, o.txn) for o in self.member.ready() if isinstance(o, Propose)]
            self.hub.proposed([h.zxid for h, _ in txns], [encode_payload(h, t) for h, t in txns])
            self.unpersisted += len(txns)
            if self.durable and self.unpersisted:
                self.member.apply_persisted(self.unpersisted)
                self.hub.applied(self.unpersisted)
                self.unpersisted = 0
            moved = False
            for _link, data in self.hub.take():
                self.feed.receive(data)
                moved = True
            self.worker.report_touches()
            out, _ = self.feed.ready()
            if out:
                self.hub.receive(1, out)
                moved = True
            if not moved and not txns:
                return
        raise AssertionError("the link does not settle")

    def connect(self, core: ServerCore, timeout: int = 1000) -> tuple[Connection, int]:
        self.ids += 1
        conn = core.open(self.ids, "127.0.0.1", 40000 + self.ids)
        payload = ConnectRequest(0, 0, timeout, 0, bytes(16)).to_bytes() + b"\x00"
        core.receive(conn, INT.pack(len(payload)) + payload)
        self.pump()
        frames = [f[4:] for f in conn.take_output()]
        return conn, ConnectResponse.from_bytes(frames[0]).sessionId

    def send(self, core: ServerCore, conn: Connection, xid: int, op: int, record: Any = None) -> None:
        payload = RequestHeader(xid, op).to_bytes() + (record.to_bytes() if record is not None else b"")
        core.receive(conn, INT.pack(len(payload)) + payload)

    def advance(self, ms: int) -> None:
        self.now += ms
        for core in (self.member, self.worker):
            core.set_time(self.now, WALL + self.now)
            core.tick()
        self.pump()


def frames(conn: Connection) -> list[tuple[int, int, bytes]]:
    out = []
    for f in conn.take_output():
        hdr, pos = ReplyHeader.read(f[4:], 0)
        out.append((hdr.xid, hdr.err, f[4 + pos:]))
    return out


def test_session_ids_of_the_processes_never_meet() -> None:
    trackers = [SessionTracker(TICK, 0, 5) for _ in range(3)]
    for index, t in enumerate(trackers):
        t.partition(index, 3)
    ids = [[t.new_session_id() for _ in range(50)] for t in trackers]
    for index, chosen in enumerate(ids):
        assert {(i & 0xFFFFFFFFFFFFFFFF) % 3 for i in chosen} == {index}
    assert len({i for chosen in ids for i in chosen}) == 150


def test_a_write_forwarded_by_a_worker_is_answered_in_order_before_the_sessions_read() -> None:
    pair = Pair()
    conn, sid = pair.connect(pair.worker)
    assert sid and (sid & 0xFFFFFFFFFFFFFFFF) % 2 == 1  # created by the worker, through the member
    assert sid in pair.member.sessions.sessions
    pair.send(pair.worker, conn, 1, OpCode.CREATE, CreateRequest("/a", b"1", OPEN, 0))
    pair.send(pair.worker, conn, 2, OpCode.GET_DATA, GetDataRequest("/a", False))
    pair.send(pair.worker, conn, 3, OpCode.SET_DATA, SetDataRequest("/a", b"2", -1))
    pair.send(pair.worker, conn, 4, OpCode.GET_DATA, GetDataRequest("/a", False))
    pair.pump()
    got = frames(conn)
    assert [(x, e) for x, e, _ in got] == [(1, 0), (2, 0), (3, 0), (4, 0)]
    assert GetDataResponse.from_bytes(got[1][2]).data == b"1"
    assert GetDataResponse.from_bytes(got[3][2]).data == b"2"
    member_node, worker_node = pair.member.tree.get("/a"), pair.worker.tree.get("/a")
    assert member_node is not None and worker_node is not None and member_node.data == worker_node.data == b"2"
    assert member_node.stat() == worker_node.stat()
    assert pair.member.tree.digest != 0 and pair.worker.tree.digest == 0  # the member keeps it, the replica none


def test_a_workers_sync_waits_for_the_txns_the_member_proposed_before_it() -> None:
    pair = Pair()
    writer, _ = pair.connect(pair.member)
    reader, _ = pair.connect(pair.worker)
    pair.send(pair.member, writer, 1, OpCode.CREATE, CreateRequest("/s", b"x", OPEN, 0))
    pair.durable = False
    pair.pump()  # proposed, not yet on disk
    pair.send(pair.worker, reader, 1, OpCode.SYNC, SyncRequest("/s"))
    pair.send(pair.worker, reader, 2, OpCode.GET_DATA, GetDataRequest("/s", False))
    pair.pump()
    assert frames(reader) == []  # the sync waits for the create the member proposed first
    pair.persist()
    got = frames(reader)
    assert [(x, e) for x, e, _ in got] == [(1, 0), (2, 0)]
    assert GetDataResponse.from_bytes(got[1][2]).data == b"x"


def test_a_workers_pings_keep_its_session_and_the_members_expiry_closes_it_there() -> None:
    pair = Pair()
    conn, sid = pair.connect(pair.worker, timeout=400)
    pair.send(pair.worker, conn, 1, OpCode.CREATE, CreateRequest("/e", b"", OPEN, int(CreateMode.EPHEMERAL)))
    pair.pump()
    assert frames(conn)[0][:2] == (1, 0)
    for _ in range(20):  # 2 s of pings, 5 timeouts
        pair.send(pair.worker, conn, -2, OpCode.PING)
        pair.advance(100)
    assert sid in pair.member.sessions.sessions and pair.worker.tree.get("/e") is not None
    for _ in range(10):  # silence: the member expires it; the worker applies the closeSession
        pair.advance(100)
    assert sid not in pair.member.sessions.sessions
    assert pair.worker.tree.get("/e") is None and conn.closing


def test_a_workers_read_waits_for_the_zxid_the_member_had_applied_when_it_arrived() -> None:
    pair = Pair()
    writer, _ = pair.connect(pair.member)
    reader, _ = pair.connect(pair.worker)
    pair.send(pair.member, writer, 1, OpCode.CREATE, CreateRequest("/b", b"y", OPEN, 0))
    txns = [(o.hdr, o.txn) for o in pair.member.ready() if isinstance(o, Propose)]
    pair.hub.proposed([h.zxid for h, _ in txns], [encode_payload(h, t) for h, t in txns])
    pair.member.apply_persisted(len(txns))  # applied and acknowledged on the member ...
    assert frames(writer)[0][:2] == (1, 0)
    pair.worker.read_barrier = pair.member.tree.last_processed_zxid  # ... which the shell tells the worker
    pair.send(pair.worker, reader, 1, OpCode.GET_DATA, GetDataRequest("/b", False))
    assert frames(reader) == []  # the txn is still on its way to the worker
    pair.hub.applied(len(txns))
    pair.pump()
    got = frames(reader)
    assert got[0][:2] == (1, 0) and GetDataResponse.from_bytes(got[0][2]).data == b"y"


def test_a_learner_member_relays_its_workers_syncs_and_revalidations_to_the_leader_in_order() -> None:
    """A follower's hub: the worker's requests leave as the member's pipeline's `Forward` and
    `Revalidate` outputs (for its learner link), interleaved with its own; the leader's SYNCs
    and revalidation answers go back to whoever asked, and none to a worker whose link closed."""
    from zkpy.member.workers import _REVALIDATE_REP
    from zkpy.server.outputs import Forward, Relayed, Revalidate, ServerOutput, Touches
    from zkpy.wire.quorum import PacketType

    config = ServerConfig(tick_ms=TICK, min_session_timeout_ms=400, max_session_timeout_ms=4000)
    member = LearnerServerCore(config, 0, WALL)
    hub = WorkerHub(member)
    hub.attach(1)
    feed = WorkerFeed(config, 1, 2, 0, WALL)
    assert feed.receive(b"".join(data for _, data in hub.take()))  # the SNAP
    assert feed.pipeline is not None

    def worker_sends(*outputs: ServerOutput) -> None:
        """The worker's pipeline produced these (as its clients' requests would): to the member."""
        feed.pipeline._out.extend(outputs)  # type: ignore[union-attr]
        hub.receive(1, feed.ready()[0])

    def relay() -> None:
        """The member's pipeline's answers for its workers go to the hub, as its term core hands them."""
        for o in member.ready():
            if isinstance(o, Relayed):
                hub.relayed(o.link, o.session, o.valid)

    worker_sends(Forward(0x11, 5, OpCode.SET_DATA, b"body", ()), Forward(0x11, 6, OpCode.SYNC, b"s", ()),
                 Revalidate(0x22, 3000))
    out = member.ready()
    assert [(type(o).__name__, getattr(o, "op", None)) for o in out] == [
        ("Forward", OpCode.SET_DATA), ("Forward", OpCode.SYNC), ("Revalidate", None)]
    member.touch([(0x11, 3000)])
    member.report_touches()
    assert Touches(-1, ((0x11, 3000),)) in member.ready()
    member.sync_done()
    member.revalidated(0x22, True)
    relay()
    reader = _LinkReader()
    reader.feed(b"".join(data for _, data in hub.take()))
    got = []
    while (p := reader.packet()) is not None:
        got.append((p.type, _REVALIDATE_REP.unpack_from(p.data, 0) if p.type == PacketType.REVALIDATE else None))
    assert got == [(PacketType.SYNC, None), (PacketType.REVALIDATE, (0x22, True))]
    # a worker's link closes with a sync and a revalidation due: their answers go nowhere
    worker_sends(Forward(0x11, 7, OpCode.SYNC, b"s", ()), Revalidate(0x33, 3000))
    member.ready()
    hub.detach(1)
    hub.attach(1)  # started again under the same id
    hub.take()
    member.sync_done()
    member.revalidated(0x33, True)
    relay()
    assert hub.take() == []


@given(st.lists(st.tuples(st.sampled_from([PacketType.REQUEST, PacketType.INFORM, PacketType.PING]),
                          st.integers(-(1 << 63), (1 << 63) - 1), st.one_of(st.none(), st.binary(max_size=40)),
                          st.one_of(st.none(), st.lists(st.tuples(st.one_of(st.none(), st.text(max_size=8)),
                                                                  st.one_of(st.none(), st.text(max_size=8))),
                                                        max_size=3))),
                max_size=5),
       st.integers(1, 7))
def test_the_link_reader_reads_what_zabs_reader_reads(packets: list[Any], chunk: int) -> None:
    """Packets in Zab's layout, any authinfo (null strings and vectors too), fed in chunks: the
    link's reader gives what Zab's own reader gives, and nothing of a packet cut short."""
    records = [QuorumPacket(t, z, d, None if a is None else [Id(s, i) for s, i in a]) for t, z, d, a in packets]
    stream = b"".join(r.to_bytes() for r in records)
    reader = _LinkReader()
    got = []
    for at in range(0, len(stream), chunk):
        reader.feed(stream[at:at + chunk])
        while (p := reader.packet()) is not None:
            got.append(p)
    assert reader.pos == len(reader.buf)
    want = []
    pos = 0
    while (res := read_quorum_packet(stream, pos, 1 << 20)) is not None:
        packet, pos = res
        want.append((packet.type, packet.zxid, packet.data or b"", tuple(packet.authinfo or ())))
    assert [(p.type, p.zxid, p.data, p.auth) for p in got] == want


def test_the_link_reader_refuses_lengths_jute_refuses() -> None:
    for bad in (struct.pack(">iqi", PacketType.INFORM, 1, -2),
                struct.pack(">iqi", PacketType.REQUEST, 1, 0) + struct.pack(">i", -2),
                struct.pack(">iqi", PacketType.REQUEST, 1, 0) + struct.pack(">ii", 1, -5)):
        reader = _LinkReader()
        reader.feed(bad + bytes(16))
        with pytest.raises(ProtocolError):
            reader.packet()


def test_the_link_reader_tells_an_authinfo_from_the_last_one_it_read() -> None:
    auths = [[Id("ip", "127.0.0.1")], [Id("ip", "127.0.0.1")], [Id("ip", "127.0.0.12")],
             [Id("ip", "127.0.0.1"), Id("digest", "u:x")], [Id("ip", "127.0.0.1")], []]
    reader = _LinkReader()
    reader.feed(b"".join(QuorumPacket(PacketType.REQUEST, i, b"r%d" % i, a).to_bytes() for i, a in enumerate(auths)))
    got = []
    while (p := reader.packet()) is not None:
        got.append((p.zxid, p.data, p.auth))
    assert got == [(i, b"r%d" % i, tuple(a)) for i, a in enumerate(auths)]


def test_a_streamed_snapshot_holds_the_links_txns_until_it_is_sent() -> None:
    """The shell writes a starting worker's SNAP itself (a forked child): the txns applied while
    it does wait, and reach the worker after the tree they follow."""
    pair = Pair()
    conn, _ = pair.connect(pair.worker)
    pair.send(pair.worker, conn, 1, OpCode.CREATE, CreateRequest("/s", b"0", OPEN, 0))
    pair.pump()
    late = WorkerFeed(ServerConfig(tick_ms=TICK), 2, 3, 0, WALL)
    pair.hub.attach(2, streamed=True)
    snap = snapshot_packet(pair.member.tree)  # the tree at the attach, as the child sees it
    for i in range(1, 4):  # writes go on meanwhile
        pair.send(pair.worker, conn, 1 + i, OpCode.SET_DATA, SetDataRequest("/s", str(i).encode(), -1))
        pair.pump()
        assert 2 not in dict(pair.hub.take())  # held while the child writes
    assert pair.hub.held_over(200) == [2] and pair.hub.held_over(201) == []  # three INFORMs of 67 bytes
    assert late.receive(snap) and late.pipeline is not None
    pair.hub.snapshot_sent(2)
    assert pair.hub.held_over(0) == []
    held = dict(pair.hub.take())[2]
    late.receive(held)
    assert late.pipeline.tree.get("/s").data == b"3"
    assert late.pipeline.tree.last_processed_zxid == pair.member.tree.last_processed_zxid
