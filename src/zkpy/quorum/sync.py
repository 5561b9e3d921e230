"""How a leader brings a learner up to date: DIFF, TRUNC or SNAP (pure).

The leader keeps its most recent committed txns in a ``CommittedLog`` (ZooKeeper's in-memory
committedLog: the txns replayed at startup and every one committed since, up to a bound).
``plan_sync`` chooses, from the learner's last logged zxid, what LearnerHandler.syncFollower
and queueCommittedProposals choose in ZooKeeper 3.8:

1. the learner has exactly the leader's last zxid: an empty DIFF;
2. the learner is past the newest committed txn (and its zxid is not a fresh epoch's
   ``(e, 0)``): TRUNC to the newest committed zxid; it then gets nothing more from the log;
3. the learner's zxid lies within the log: walk the log; if the learner's zxid is in it, DIFF
   and every txn after it (each a PROPOSAL then a COMMIT); if it is not (the learner holds a
   txn the leader never committed), TRUNC to the txn before it, then the rest - unless that
   would cross an epoch boundary, in which case a SNAP;
4. a fresh-epoch zxid ``(e, 0)`` is never truncated: DIFF from the first txn after it;
5. anything else (older than the log, or an empty log that disagrees): SNAP of the tree.

The zxid to start forwarding from (``forward_from``) is what the learner holds after the plan:
the leader then queues every outstanding proposal after it.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from zkpy.ids import zxid_counter, zxid_epoch

DEFAULT_COMMITTED_LOG = 500  # ZKDatabase.commitLogCount default


@dataclass(frozen=True, slots=True)
class LoggedTxn:
    """One committed txn as it travels in a PROPOSAL: its zxid and the serialized header + txn."""

    zxid: int
    data: bytes


class CommittedLog:
    """The leader's recent committed txns, oldest first, at most ``limit`` of them."""

    def __init__(self, txns: Iterable[LoggedTxn] = (), limit: int = DEFAULT_COMMITTED_LOG) -> None:
        self.limit = limit
        self._txns: deque[LoggedTxn] = deque(txns, maxlen=limit)

    def add(self, txn: LoggedTxn) -> None:
        if self._txns and txn.zxid <= self._txns[-1].zxid:
            raise ValueError(f"committed log: zxid 0x{txn.zxid:x} after 0x{self._txns[-1].zxid:x}")
        self._txns.append(txn)

    def __iter__(self) -> Iterator[LoggedTxn]:
        return iter(self._txns)

    def __len__(self) -> int:
        return len(self._txns)

    @property
    def min_zxid(self) -> int:
        return self._txns[0].zxid if self._txns else 0

    @property
    def max_zxid(self) -> int:
        return self._txns[-1].zxid if self._txns else 0


class SyncKind(enum.Enum):
    DIFF = "DIFF"
    TRUNC = "TRUNC"
    SNAP = "SNAP"


@dataclass(slots=True)
class SyncPlan:
    """What to send a learner before NEWLEADER: ``kind`` with ``zxid`` (for SNAP the tree's
    last processed zxid), then ``txns`` (each as PROPOSAL + COMMIT)."""

    kind: SyncKind
    zxid: int
    txns: list[LoggedTxn] = field(default_factory=list)

    @property
    def forward_from(self) -> int:
        """The last zxid the learner will hold once the plan is sent."""
        return self.txns[-1].zxid if self.txns else self.zxid


def plan_sync(peer_last_zxid: int, log: CommittedLog, last_processed_zxid: int) -> SyncPlan:
    """See the module doc. ``last_processed_zxid`` is the leader tree's (the SNAP zxid)."""
    fresh_epoch = zxid_counter(peer_last_zxid) == 0
    max_c, min_c = log.max_zxid, log.min_zxid
    if not len(log):
        max_c = min_c = last_processed_zxid
    if peer_last_zxid == last_processed_zxid:
        return SyncPlan(SyncKind.DIFF, peer_last_zxid)
    if peer_last_zxid > max_c and not fresh_epoch:
        return SyncPlan(SyncKind.TRUNC, max_c)
    if min_c <= peer_last_zxid <= max_c and len(log):
        plan = _walk(peer_last_zxid, log, max_c, fresh_epoch)
        if plan is not None:
            return plan
    return SyncPlan(SyncKind.SNAP, last_processed_zxid)


def _walk(peer: int, log: CommittedLog, last_committed: int, fresh_epoch: bool) -> SyncPlan | None:
    plan: SyncPlan | None = None
    prev = -1
    for txn in log:
        z = txn.zxid
        if z < peer:
            prev = z
            continue
        if plan is None:
            if z == peer:
                plan = SyncPlan(SyncKind.DIFF, last_committed)
                continue
            if fresh_epoch:
                plan = SyncPlan(SyncKind.DIFF, last_committed)
            else:
                if zxid_epoch(z) != zxid_epoch(peer):
                    return None  # a TRUNC may not cross an epoch: send a snapshot
                plan = SyncPlan(SyncKind.TRUNC, prev)
        plan.txns.append(txn)
    if plan is None and fresh_epoch:
        plan = SyncPlan(SyncKind.DIFF, last_committed)
    return plan
