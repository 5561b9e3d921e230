"""What the leader and learner terms of an ensemble member share: the history one term hands
the next, the quorum port's packet stream, the clock.

A ``History`` is the tree a term ends with, with every txn it logged applied (ZooKeeper's
fastForwardDataBase), and its recent txns (a new leader's committed log). Taking it instead of
recovering from disk is only right when the tree and the data dir agree: each term says
whether it does (``carry_over``).

The quorum port's stream reader is ``zkpy.wire.quorum.QuorumPacketReader``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from zkpy.quorum.sync import LoggedTxn
from zkpy.storage.recovery import Recovered
from zkpy.storage.txnlog import encode_payload
from zkpy.tree.datatree import DataTree

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


class Term:
    """What a leader term and a learner term do alike: end once, with a reason, and turn the
    fsync worker's progress into the core's ``logged``. Subclasses set ``zab``, ``peer`` and
    ``run_actions``."""

    zab: Any
    peer: Any

    def __init__(self) -> None:
        self.logging: deque[int] = deque()  # zxids handed to the fsync worker, oldest first
        self.ended: asyncio.Future[str] | None = None

    def end(self, reason: str) -> None:
        if self.ended is not None and not self.ended.done():
            self.ended.set_result(reason)

    def run_actions(self) -> None:
        raise NotImplementedError

    def _durable(self, count: int) -> None:
        """The fsync worker made ``count`` more txns durable (a report may come after ``close``)."""
        last = -1
        for _ in range(min(count, len(self.logging))):
            last = self.logging.popleft()
        if last >= 0:
            self.zab.logged(last)
            self.run_actions()
            self.peer.write_clients()
