"""What the leader and learner terms of an ensemble member share: the history one term hands
the next, the quorum port's packet stream, the clock.

A ``History`` is the tree a term ends with, with every txn it logged applied (ZooKeeper's
fastForwardDataBase), and its recent txns (a new leader's committed log). Taking it instead of
recovering from disk is only right when the tree and the data dir agree: each term says
whether it does (``carry_over``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from zkpy.quorum.sync import LoggedTxn
from zkpy.storage.recovery import Recovered
from zkpy.storage.txnlog import encode_payload
from zkpy.tree.datatree import DataTree
from zkpy.wire.quorum import QuorumPacket, read_quorum_packet

log = logging.getLogger("zkpy.quorum")


def now_ms() -> int:
    return int(time.monotonic() * 1000)


def wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class History:
    """What one term hands the next: the tree (every logged txn applied) and its recent txns,
    a new leader's committed log."""

    tree: DataTree
    committed: list[LoggedTxn]

    @classmethod
    def of(cls, recovered: Recovered) -> History:
        return cls(recovered.tree, [LoggedTxn(h.zxid, encode_payload(h, t)) for h, t in recovered.replayed_tail])


class TermEnded(Exception):
    """The current term is over (the reason says why); the peer goes back to election."""


class PacketStream:
    """Incremental QuorumPacket reader for one quorum connection (records back to back)."""

    def __init__(self, max_buffer: int) -> None:
        self.buf = bytearray()
        self.pos = 0
        self.max_buffer = max_buffer

    def feed(self, data: bytes) -> None:
        if self.pos > 65536 and self.pos * 2 > len(self.buf):
            del self.buf[:self.pos]
            self.pos = 0
        self.buf += data

    def next(self) -> QuorumPacket | None:
        got = read_quorum_packet(self.buf, self.pos, self.max_buffer)
        if got is None:
            return None
        packet, self.pos = got
        return packet

    def take_rest(self) -> bytes:
        rest = bytes(self.buf[self.pos:])
        self.buf = bytearray()
        self.pos = 0
        return rest
