"""A large tree, built fast: ``znodes`` leaves of ``value_size`` bytes, created with multi ops.

Layout: ``/big`` holds ``ceil(znodes / fanout)`` parents ``/big/b00000`` ..., each with up to
``fanout`` leaves ``.../n00000``, so no znode has a million children (neither server handles
that well, and real trees do not look like it). Every multi carries ``batch`` creates and
``window`` multis are in flight at a time on one session, so the build costs about
``znodes / batch`` txns: 1,000,000 znodes are 1,000 log records, not a million.

The same paths serve the restart and snapshot benchmarks: ``leaf_path(i)`` is the i-th leaf.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

from zkpy.wire.consts import OpCode
from zkpy.wire.multi import Op, read_multi_response, write_multi_request
from zkpy.wire.proto import CreateRequest

from .client import OPEN_ACL_UNSAFE, RawSession, create_body
from .workload import NODE_EXISTS, Target

BIG_ROOT = "/big"
OP_ERROR = -1  # the type of a failed op's result in a MultiResponse


@dataclass(frozen=True)
class TreeSpec:
    znodes: int = 1_000_000  # leaves
    value_size: int = 50
    fanout: int = 1000  # leaves per parent
    batch: int = 1000  # creates per multi
    window: int = 8  # multis in flight

    @property
    def parents(self) -> int:
        return -(-self.znodes // self.fanout)


def parent_path(j: int) -> str:
    return f"{BIG_ROOT}/b{j:05d}"


def leaf_path(spec: TreeSpec, i: int) -> str:
    return f"{parent_path(i // spec.fanout)}/n{i % spec.fanout:05d}"


def _paths(spec: TreeSpec) -> Iterator[str]:
    """Every path to create, each parent before its children."""
    yield from (parent_path(j) for j in range(spec.parents))
    yield from (leaf_path(spec, i) for i in range(spec.znodes))


def multi_create_body(paths: list[str], value: bytes) -> bytes:
    out = bytearray()
    write_multi_request(out, [Op(int(OpCode.CREATE), CreateRequest(p, value, OPEN_ACL_UNSAFE, 0)) for p in paths])
    return bytes(out)


async def _build(target: Target, spec: TreeSpec) -> None:
    s = await RawSession.connect(target.host, target.port)
    try:
        err, _ = await s.call(OpCode.CREATE, create_body(BIG_ROOT, b""))
        if err not in (0, NODE_EXISTS):
            raise RuntimeError(f"create {BIG_ROOT}: error {err}")
        value = os.urandom(spec.value_size)
        in_flight: set[asyncio.Future[tuple[int, bytes]]] = set()
        batch: list[str] = []

        async def settle(return_when: str) -> None:
            done, _ = await asyncio.wait(in_flight, return_when=return_when)
            for fut in done:
                in_flight.discard(fut)
                err, body = fut.result()
                failed = [r.err for r in read_multi_response(body, 0)[0] if r.type == OP_ERROR and r.err]
                if err or failed:
                    raise RuntimeError(f"multi create failed: error {err or failed[0]}")

        def send(paths: list[str]) -> None:
            in_flight.add(s.call(OpCode.MULTI, multi_create_body(paths, value)))

        parents_left = spec.parents
        for path in _paths(spec):
            batch.append(path)
            if parents_left:
                parents_left -= 1
                if parents_left == 0:  # every parent exists before any leaf is sent
                    send(batch)
                    batch = []
                    await settle(asyncio.ALL_COMPLETED)
                    continue
            if len(batch) >= spec.batch:
                send(batch)
                batch = []
                if len(in_flight) >= spec.window:
                    await settle(asyncio.FIRST_COMPLETED)
        if batch:
            send(batch)
        if in_flight:
            await settle(asyncio.ALL_COMPLETED)
    finally:
        await s.close()


def build(target: Target, spec: TreeSpec) -> float:
    """Create the tree on a server that does not have it yet; return the seconds it took."""
    t0 = time.monotonic()
    asyncio.run(_build(target, spec))
    return time.monotonic() - t0
