"""The request pipeline's per-connection bounds (server.connection), driven with bytes: a
connection's requests wait in its decoder while its output is over the bound or a turn's batch
is taken, and are taken again, in order, once the output drained."""

from __future__ import annotations

from zkpy.config import ServerConfig
from zkpy.server.connection import (
    MAX_FRAMES_PER_TURN,
    MAX_QUEUED_OUTPUT,
    RESUME_QUEUED_OUTPUT,
    Connection,
)
from zkpy.server.core import ServerCore
from zkpy.server.outputs import Propose
from zkpy.wire.consts import OpCode
from zkpy.wire.jute import INT
from zkpy.wire.proto import (
    ACL,
    ConnectRequest,
    CreateRequest,
    GetDataRequest,
    Id,
    ReplyHeader,
    RequestHeader,
    SetDataRequest,
)

OPEN = [ACL(31, Id("world", "anyone"))]
BIG = 500 * 1024


class Harness:
    def __init__(self) -> None:
        self.core = ServerCore(ServerConfig(), 1_000_000, 1_700_000_000_000)

    def flush(self) -> None:
        """Persist every txn proposed, as a shell would."""
        while proposed := [o for o in self.core.ready() if isinstance(o, Propose)]:
            self.core.apply_persisted(len(proposed))

    def connect(self) -> Connection:
        conn = self.core.open(1, "127.0.0.1", 40001)
        payload = ConnectRequest(0, 0, 10000, 0, bytes(16)).to_bytes() + b"\x00"
        self.core.receive(conn, INT.pack(len(payload)) + payload)
        self.flush()
        conn.take_output()
        return conn

    def send(self, conn: Connection, xid: int, op: int, record: object) -> None:
        self.core.receive(conn, requests((xid, op, record)))

    @staticmethod
    def take(conn: Connection) -> list[bytes]:
        return [f[4:] for f in conn.take_output()]


def requests(*items: tuple[int, int, object]) -> bytes:
    out = b""
    for xid, op, record in items:
        payload = RequestHeader(xid, op).to_bytes() + record.to_bytes()  # type: ignore[attr-defined]
        out += INT.pack(len(payload)) + payload
    return out


def xids(frames: list[bytes]) -> list[int]:
    return [ReplyHeader.read(f, 0)[0].xid for f in frames]


def test_requests_wait_while_the_output_is_over_the_bound_and_resume_in_order() -> None:
    h = Harness()
    c = h.connect()
    h.send(c, 1, OpCode.CREATE, CreateRequest("/big", b"x" * BIG, OPEN, 0))
    h.flush()
    assert xids(h.take(c)) == [1]
    n = 40  # 20 MiB of replies asked for at once
    h.core.receive(c, requests(*((100 + i, OpCode.GET_DATA, GetDataRequest("/big", False)) for i in range(n))))
    first = MAX_QUEUED_OUTPUT // BIG + 1
    assert c.paused and c.queued >= MAX_QUEUED_OUTPUT
    assert c.out_bytes < MAX_QUEUED_OUTPUT + BIG + 1024  # one reply past the bound at most
    assert not h.core.wants_turn(c)
    c.unsent = RESUME_QUEUED_OUTPUT + 1  # the shell wrote it all; the socket took all but this
    got = xids(h.take(c))
    assert got == list(range(100, 100 + first))
    assert not h.core.wants_turn(c)  # not below the low-water mark yet
    c.unsent = RESUME_QUEUED_OUTPUT
    while h.core.wants_turn(c):
        h.core.resume(c)
        got += xids(h.take(c))
    assert got == list(range(100, 100 + n))  # all answered, in order


def test_one_turn_takes_a_bounded_batch() -> None:
    h = Harness()
    c = h.connect()
    n = 3 * MAX_FRAMES_PER_TURN + 5
    h.core.receive(c, requests(*((i, OpCode.EXISTS, GetDataRequest("/", False)) for i in range(n))))
    got = xids(h.take(c))
    assert got == list(range(MAX_FRAMES_PER_TURN))
    turns = 1
    while h.core.wants_turn(c):
        h.core.resume(c)
        got += xids(h.take(c))
        turns += 1
    assert got == list(range(n)) and turns == 4


def test_reads_queued_behind_a_write_count_their_expected_replies() -> None:
    h = Harness()
    c = h.connect()
    h.send(c, 1, OpCode.CREATE, CreateRequest("/big", b"x" * BIG, OPEN, 0))
    h.flush()
    h.take(c)
    n = 40
    h.core.receive(c, requests((2, OpCode.SET_DATA, SetDataRequest("/big", b"y" * BIG, -1)),
                               *((100 + i, OpCode.GET_DATA, GetDataRequest("/big", False)) for i in range(n))))
    # the write waits for its fsync; the reads behind it are queued up to the bound, no further
    assert c.paused and c.out_bytes == 0 and MAX_QUEUED_OUTPUT <= c.owed < MAX_QUEUED_OUTPUT + BIG + 1024
    queued = c.outstanding - 1
    assert queued < n
    h.flush()  # the write is applied: its reply, then the queued reads'
    got = xids(h.take(c))
    assert got == [2, *range(100, 100 + queued)] and c.owed == 0
    while h.core.wants_turn(c):
        h.core.resume(c)
        h.flush()
        got += xids(h.take(c))
    assert got == [2, *range(100, 100 + n)]
