"""The majority quorum verifier (QuorumMaj): who votes, and when a set of acks is a quorum.

Invariants owned here:
- Only participants vote; observers are members but never count towards a quorum.
- A set of sids is a quorum when it holds more than half of the voting members (``half`` is
  ``len(voting) // 2``, so 3 voters need 2, 4 need 3, 5 need 3). Sids that are not voting
  members are ignored, as ZooKeeper's SyncedLearnerTracker only records acks from voters.
- Every voter weighs 1 (QuorumMaj.getWeight); hierarchical (weighted, grouped) quorums and
  the 2-node oracle (QuorumOracleMaj) are not implemented.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable


@dataclasses.dataclass(frozen=True, slots=True)
class QuorumMaj:
    """A majority quorum over ``voting`` sids; ``observers`` are members without a vote.

    ``version`` is the configuration version (zoo.cfg.dynamic's ``version=``, hex there)."""

    voting: frozenset[int]
    observers: frozenset[int] = frozenset()
    version: int = 0

    def __post_init__(self) -> None:
        if not self.voting:
            raise ValueError("a quorum needs at least one voting member")
        both = self.voting & self.observers
        if both:
            raise ValueError(f"sids {sorted(both)} are both voters and observers")

    @classmethod
    def of(cls, voting: Iterable[int], observers: Iterable[int] = (), version: int = 0) -> QuorumMaj:
        return cls(frozenset(voting), frozenset(observers), version)

    @property
    def half(self) -> int:
        return len(self.voting) // 2

    @property
    def members(self) -> frozenset[int]:
        return self.voting | self.observers

    def is_voter(self, sid: int) -> bool:
        return sid in self.voting

    def weight(self, sid: int) -> int:
        """QuorumMaj gives every server weight 1, voter or not."""
        return 1

    def contains_quorum(self, acks: Iterable[int]) -> bool:
        """Whether the voters among ``acks`` are more than half of the voting members."""
        return len(self.voting.intersection(acks)) > self.half
