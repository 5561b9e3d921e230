"""CPU per write in process: ``ServerCore`` driven as the standalone shell drives it, no sockets.

``PYTHONPATH=<src> python -m bench.writecpu [set|create|multi|get|member] [--runs N]``

32 connections each send 8 requests per turn (setData of 1 KiB on 1,000 znodes, or 4 creates of
1 KiB and their 4 deletes); the turn's txns are encoded for the log as the shell does
(``encode_entry``), then applied and answered (``apply_persisted``) and the replies joined. The
figure is ``time.process_time`` over 300 turns (74,400 writes) after 20 unmeasured ones. ``multi``
is the bulk load's shape instead (``bench.bulkload``): one connection sends a multi of 1,000
creates of 50 bytes per turn, the children of one of the 1,000 znodes, and the figure is per create, over
120 turns after 5 unmeasured ones. ``get`` measures reads the same way: 8 getData of the 1 KiB
znodes per connection and turn, the figure per read. With
``member`` is a dedicated member's share of the same setData load (``serverWorkers=2``): the 32
connections are on two in-process workers (``member.workers.WorkerFeed``) and the figure counts
only what the member does, as its shell does it: the workers' REQUEST bytes into its hub, prep,
the log's framing, apply, and the INFORM bytes out; the workers' CPU per write (their clients'
requests, the REQUESTs, applying the INFORMs, the replies) is printed apart. With
``--runs`` it is repeated and the minimum and median printed (on a shared machine the minimum is
the figure to compare: other jobs only add to it). The collector runs with a server process's
thresholds (``zkpy.runtime.gcpolicy``). Point PYTHONPATH at another checkout's src to
compare two versions; run them interleaved.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Sequence

from zkpy.config import ServerConfig
from zkpy.server.core import ServerCore
from zkpy.server.outputs import Output, Propose
from zkpy.storage.txnlog import encode_entry, encode_payload
from zkpy.wire.consts import OpCode
from zkpy.wire.jute import INT, Record
from zkpy.wire.multi import Op, write_multi_request
from zkpy.wire.proto import (
    ACL,
    ConnectRequest,
    CreateRequest,
    DeleteRequest,
    GetDataRequest,
    Id,
    RequestHeader,
    SetDataRequest,
)

try:
    from zkpy.storage.txnlog import frame_payloads
except ImportError:  # an older checkout
    from zkpy.storage.txnlog import frame_payload  # type: ignore[attr-defined]

    def frame_payloads(payloads: Sequence[bytes]) -> bytes:
        return b"".join([frame_payload(p) for p in payloads])

OPEN = [ACL(31, Id("world", "anyone"))]
CONNECTIONS = 32
TURNS = 300
VALUE = b"x" * 1024
MULTI_TURNS = 120
MULTI_OPS = 1000
MULTI_VALUE = b"v" * 50


def _frame(xid: int, op: int, record: Record) -> bytes:
    payload = RequestHeader(xid, op).to_bytes() + record.to_bytes()
    return INT.pack(len(payload)) + payload


def _encode(p: Propose) -> bytes:
    body: bytes | None = getattr(p, "body", None)  # (older checkouts' Propose has no body)
    return encode_entry(p.hdr, p.txn, None, body) if body is not None else encode_entry(p.hdr, p.txn, None)


class Driver:
    def __init__(self) -> None:
        self.core = ServerCore(ServerConfig(), 1_000_000, 1_700_000_000_000)
        self.conns = []
        for i in range(CONNECTIONS):
            conn = self.core.open(i + 1, "127.0.0.1", 40000 + i)
            payload = ConnectRequest(0, 0, 10000, 0, bytes(16)).to_bytes() + b"\x00"
            self.core.receive(conn, INT.pack(len(payload)) + payload)
            self.conns.append(conn)
        self.persist()
        self.core.receive(self.conns[0], _frame(1, OpCode.CREATE, CreateRequest("/bench", b"", OPEN, 0)))
        self.core.receive(self.conns[0], b"".join(
            _frame(2 + i, OpCode.CREATE, CreateRequest(f"/bench/n{i:06d}", VALUE, OPEN, 0)) for i in range(1000)))
        self.persist()
        for c in self.conns:
            c.take_output()
        rng = random.Random(1)
        self.set_frames = [_frame(100 + k, OpCode.SET_DATA, SetDataRequest(f"/bench/n{rng.randrange(1000):06d}", VALUE, -1))
                           for k in range(64)]
        self.get_frames = [_frame(100 + k, OpCode.GET_DATA, GetDataRequest(f"/bench/n{rng.randrange(1000):06d}", False))
                           for k in range(64)]

    @staticmethod
    def multi_frame(turn: int) -> bytes:
        """Turn ``turn``'s multi: 1,000 creates, the children of /bench/n<turn>."""
        out = bytearray()
        write_multi_request(out, [Op(OpCode.CREATE, CreateRequest(f"/bench/n{turn:06d}/m{i:05d}", MULTI_VALUE, OPEN, 0))
                                  for i in range(MULTI_OPS)])
        payload = RequestHeader(50_000 + turn, OpCode.MULTI).to_bytes() + bytes(out)
        return INT.pack(len(payload)) + payload

    def persist(self) -> int:
        """The shell's flush and fsync report: encode the turn's txns, apply them, join the replies."""
        n = 0
        while proposed := [o for o in self.core.ready() if isinstance(o, Propose)]:
            b"".join([_encode(p) for p in proposed])
            self.core.apply_persisted(len(proposed))
            n += len(proposed)
        return n

    def turn(self, mode: str, xid0: int | bytes) -> int:
        """One turn; in ``multi`` mode ``xid0`` is the turn's prebuilt frame."""
        core = self.core
        if isinstance(xid0, bytes):
            core.receive(self.conns[0], xid0)
        else:
            for ci, c in enumerate(self.conns):
                if mode == "set" or mode == "get":
                    frames = self.set_frames if mode == "set" else self.get_frames
                    data = b"".join(frames[(ci * 8 + j) % 64] for j in range(8))
                else:
                    parts = []
                    for j in range(4):
                        x = xid0 + ci * 8 + j
                        parts.append(_frame(x, OpCode.CREATE, CreateRequest(f"/bench/c{ci}_{x}", VALUE, OPEN, 0)))
                        parts.append(_frame(x + 4, OpCode.DELETE, DeleteRequest(f"/bench/c{ci}_{x}", -1)))
                    data = b"".join(parts)
                core.receive(c, data)
        outs = core.ready()
        txns = [o for o in outs if isinstance(o, Propose)]
        b"".join([_encode(p) for p in txns])
        core.apply_persisted(len(txns))
        for o in core.ready():
            if isinstance(o, Output):
                b"".join(o.conn.take_output())
        return len(txns) if mode != "get" else len(self.conns) * 8


class MemberDriver:
    """A dedicated member (a leader's pipeline and its hub) and two workers, in one process."""

    def __init__(self) -> None:
        from zkpy.member.workers import WorkerFeed, WorkerHub
        from zkpy.server.leader import LeaderServerCore

        config = ServerConfig(server_workers=2)
        now, wall = 1_000_000, 1_700_000_000_000
        self.member = LeaderServerCore(config, now, wall)
        self.member.sessions.partition(0, config.process_count)
        self.hub = WorkerHub(self.member)
        self.workers = [WorkerFeed(config, k, config.process_count, now, wall) for k in (1, 2)]
        for k in (1, 2):
            self.hub.attach(k)
        self.member_s = self.workers_s = 0.0
        self.exchange()  # the SNAPs
        self.conns = []
        for i in range(CONNECTIONS):
            pipeline = self.workers[i % 2].pipeline
            assert pipeline is not None
            conn = pipeline.open(i + 1, "127.0.0.1", 40000 + i)
            payload = ConnectRequest(0, 0, 10000, 0, bytes(16)).to_bytes() + b"\x00"
            pipeline.receive(conn, INT.pack(len(payload)) + payload)
            self.conns.append((pipeline, conn))
        self.settle()
        pipeline, conn = self.conns[0]
        pipeline.receive(conn, _frame(1, OpCode.CREATE, CreateRequest("/bench", b"", OPEN, 0)))
        pipeline.receive(conn, b"".join(
            _frame(2 + i, OpCode.CREATE, CreateRequest(f"/bench/n{i:06d}", VALUE, OPEN, 0)) for i in range(1000)))
        self.settle()
        rng = random.Random(1)
        self.set_frames = [_frame(100 + k, OpCode.SET_DATA, SetDataRequest(f"/bench/n{rng.randrange(1000):06d}", VALUE, -1))
                           for k in range(64)]

    def exchange(self) -> int:
        """The workers' bytes to the member, its whole turn (timed), its bytes back; the txns."""
        t0 = time.process_time()
        sent = [w.ready()[0] for w in self.workers]
        self.workers_s += time.process_time() - t0
        t0 = time.process_time()
        hub, member = self.hub, self.member
        for k, data in enumerate(sent, 1):
            if data:
                hub.receive(k, data)
        n = 0
        while proposed := [o for o in member.ready() if isinstance(o, Propose)]:
            payloads = [encode_payload(p.hdr, p.txn, p.body) for p in proposed]
            frame_payloads(payloads)  # the log's records
            hub.proposed([p.hdr.zxid for p in proposed], payloads)
            member.apply_persisted(len(proposed))
            hub.applied(len(proposed))
            n += len(proposed)
        back = hub.take()
        t1 = time.process_time()
        self.member_s += t1 - t0
        for k, data in back:
            self.workers[k - 1].receive(data)
        self.workers_s += time.process_time() - t1
        return n

    def settle(self) -> None:
        while self.exchange():
            pass
        for w in self.workers:
            for c in w.ready()[1]:
                c.take_output()

    def turn(self, _mode: str, _xid0: int | bytes) -> int:
        frames = [b"".join(self.set_frames[(ci * 8 + j) % 64] for j in range(8)) for ci in range(len(self.conns))]
        t0 = time.process_time()
        for (pipeline, conn), data in zip(self.conns, frames):
            pipeline.receive(conn, data)
        self.workers_s += time.process_time() - t0
        n = self.exchange()
        t0 = time.process_time()
        for w in self.workers:
            for c in w.ready()[1]:
                b"".join(c.take_output())
        self.workers_s += time.process_time() - t0
        return n


def measure_member() -> tuple[float, float]:
    """The member's and the workers' µs of CPU per forwarded setData over ``TURNS`` turns, after
    20 unmeasured."""
    d = MemberDriver()
    for _ in range(20):
        d.turn("member", 0)
    d.member_s = d.workers_s = 0.0
    n = sum(d.turn("member", 0) for _ in range(TURNS))
    return d.member_s * 1e6 / n, d.workers_s * 1e6 / n


def measure(mode: str) -> float:
    """µs of CPU per write (per create of a multi) over ``TURNS`` (``MULTI_TURNS``) turns, after
    20 (5) unmeasured ones."""
    d = Driver()
    per_turn: Sequence[int | bytes]
    if mode == "multi":  # the frames are built before the clock starts
        per_turn = [Driver.multi_frame(t) for t in range(5 + MULTI_TURNS)]
        warmup, ops = 5, MULTI_TURNS * MULTI_OPS
    else:
        per_turn = [10_000 + i * 1000 for i in range(20)] + [1_000_000 + i * 1000 for i in range(TURNS)]
        warmup, ops = 20, 0
    for x in per_turn[:warmup]:
        d.turn(mode, x)
    t0 = time.process_time()
    n = sum(d.turn(mode, x) for x in per_turn[warmup:])
    return (time.process_time() - t0) * 1e6 / (ops or n)


def _tune_collector() -> None:
    """The collector's thresholds as a server process sets them (older checkouts: the defaults)."""
    try:
        from zkpy.runtime import gcpolicy
    except ImportError:
        return
    gcpolicy.tune()


def main() -> None:
    _tune_collector()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", nargs="?", choices=("set", "create", "multi", "get", "member"), default="set")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    if args.mode == "member":
        runs = [measure_member() for _ in range(args.runs)]
        workers = sorted(w for _, w in runs)
        print(f"workers: µs CPU per write, both together: min {workers[0]:.2f}, median {statistics.median(workers):.2f}")
        figures = sorted(m for m, _ in runs)
    else:
        figures = sorted(measure(args.mode) for _ in range(args.runs))
    print(f"{args.mode}: µs CPU per {'read' if args.mode == 'get' else 'write'}: min {figures[0]:.2f}, median {statistics.median(figures):.2f} "
          f"({', '.join(f'{f:.2f}' for f in figures)})")


if __name__ == "__main__":
    main()
