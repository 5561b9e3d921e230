"""The hierarchical quorum verifier (ZooKeeper 3.8's QuorumHierarchical): groups of weighted voters.

zoo.cfg's ``group.G=sid:sid:...`` lines split the servers into groups and ``weight.SID=W`` lines
weigh them (a participant without a weight line weighs 1). Invariants owned here:

- A set of acks is a quorum when more than half of the counted groups each hold more than half of
  their weight: group G has a majority when the weights of its acking voters sum to more than
  ``weight(G) // 2``, and the quorum needs more than ``counted // 2`` such groups, where
  ``counted`` is the number of group lines less the groups whose weight is 0. An empty set is never
  a quorum. Only voters ack: observers and strangers in ``acks`` are ignored, as ZooKeeper's
  SyncedLearnerTracker and election record only voting members.
- A group's weight is the sum of the weights of every sid its line names. ZooKeeper 3.8 also counts
  an observer or a sid without a ``server.N`` line when it has a weight line (such a member never
  acks, so it only makes its group harder to win); zkpy counts the same, and the config reader says
  so in a WARN.
- ``weight(sid)`` is the voter's weight (1 by default); a server of weight 0 never becomes leader
  (the election's total order refuses it). Non-voters weigh what their weight line says, or 0.
- Configurations ZooKeeper 3.8 refuses, or fails on at startup, are refused with ``HierarchyError``
  naming the offending line: a sid in two groups, a participant in no group (weight lines alone
  included), a group naming an observer or a stranger without a weight line (3.8 stops with a
  NullPointerException), a duplicate group or weight id. zkpy also refuses a negative weight and a
  configuration whose every group weighs 0 (3.8 would start, and never find a quorum).

``config_lines`` renders the group and weight part of QuorumHierarchical.toString, which follows the
``server.N`` lines of ``verifier.config_string``:

    groups  := { "group." gid "=" sid { ":" sid } "\\n" }   (gids in HashMap order; each group's sids
                                                          in the HashMap order of all grouped sids)
    weights := { "weight." sid "=" weight "\\n" }          (every weight line, plus 1 for each
                                                          participant without one; HashMap order)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from zkpy.config import QuorumConfig

from .java_order import java_hashmap_order


class HierarchyError(ValueError):
    """A group or weight configuration that ZooKeeper would not run; ``key`` is the line to blame."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message


@dataclasses.dataclass(frozen=True, slots=True)
class QuorumHierarchical:
    """Groups of weighted voters (see the module docstring). ``groups`` maps a group id to the sids
    its line names; ``weights`` holds the weight lines (participants not in it weigh 1)."""

    voting: frozenset[int]
    observers: frozenset[int]
    groups: Mapping[int, tuple[int, ...]]
    weights: Mapping[int, int]
    version: int = 0
    _group_of: dict[int, int] = dataclasses.field(init=False, repr=False, compare=False)
    _weight: dict[int, int] = dataclasses.field(init=False, repr=False, compare=False)
    _group_weight: dict[int, int] = dataclasses.field(init=False, repr=False, compare=False)
    _counted: int = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.voting:
            raise ValueError("a quorum needs at least one voting member")
        both = self.voting & self.observers
        if both:
            raise ValueError(f"sids {sorted(both)} are both voters and observers")
        group_of: dict[int, int] = {}
        for gid, sids in sorted(self.groups.items()):
            for sid in sids:
                if sid in group_of:
                    raise HierarchyError(f"group.{gid}", f"server {sid} is also in group.{group_of[sid]}: a "
                                         "server may be in one group only")
                group_of[sid] = gid
        for sid, w in sorted(self.weights.items()):
            if w < 0:
                raise HierarchyError(f"weight.{sid}", f"weight {w} is negative")
        if not self.groups:
            raise HierarchyError(f"weight.{min(self.weights)}", "weight lines without group lines: every "
                                 "participant must be in a group.N line (as ZooKeeper requires)")
        for sid in sorted(self.voting):
            if sid not in group_of:
                raise HierarchyError(f"server.{sid}", "is a participant in no group.N line: with group or weight "
                                     "lines, every participant must be in a group (as ZooKeeper requires)")
        weight = {sid: self.weights.get(sid, 1) for sid in self.voting} | dict(self.weights)
        for sid, gid in sorted(group_of.items()):
            if sid not in weight:
                what = "an observer" if sid in self.observers else "not a server.N of the ensemble"
                raise HierarchyError(f"group.{gid}", f"server {sid} is {what} and has no weight.{sid} line "
                                     "(ZooKeeper 3.8 fails at startup on this)")
        group_weight: dict[int, int] = {gid: 0 for gid in self.groups}
        for sid, gid in group_of.items():
            group_weight[gid] += weight[sid]
        counted = sum(1 for w in group_weight.values() if w != 0)
        if counted == 0:
            raise HierarchyError(f"group.{min(self.groups)}", "every group weighs 0: no set of servers would ever be a quorum")
        object.__setattr__(self, "_group_of", group_of)
        object.__setattr__(self, "_weight", weight)
        object.__setattr__(self, "_group_weight", group_weight)
        object.__setattr__(self, "_counted", counted)

    @classmethod
    def of_config(cls, quorum: QuorumConfig, version: int = 0) -> QuorumHierarchical:
        """The verifier of a zoo.cfg ensemble with group / weight lines (raises HierarchyError)."""
        for what, pairs in (("group", [g for g, _ in quorum.groups]), ("weight", [s for s, _ in quorum.weights])):
            dup = sorted({x for x in pairs if pairs.count(x) > 1})
            if dup:
                raise HierarchyError(f"{what}.{dup[0]}", f"two {what} lines name {what} id {dup[0]}")
        return cls(frozenset(s.sid for s in quorum.participants), frozenset(s.sid for s in quorum.observers),
                   dict(quorum.groups), dict(quorum.weights), version)

    @property
    def members(self) -> frozenset[int]:
        return self.voting | self.observers

    def is_voter(self, sid: int) -> bool:
        return sid in self.voting

    def weight(self, sid: int) -> int:
        """The server's weight: its weight line, 1 for a participant without one, 0 for others."""
        return self._weight.get(sid, 0)

    def group_of(self, sid: int) -> int | None:
        return self._group_of.get(sid)

    def contains_quorum(self, acks: Iterable[int]) -> bool:
        """Whether the voters among ``acks`` hold a weighted majority in a majority of the groups."""
        acked: dict[int, int] = {}
        for sid in self.voting.intersection(acks):
            gid = self._group_of[sid]
            acked[gid] = acked.get(gid, 0) + self._weight[sid]
        won = sum(1 for gid, w in acked.items() if w > self._group_weight[gid] // 2)
        return won > self._counted // 2

    def oddities(self) -> list[tuple[str, str]]:
        """Lines ZooKeeper 3.8 accepts that do not do what they seem to, as (key, why) for a WARN."""
        out = []
        for sid in sorted(self.weights):
            if sid not in self._group_of:
                out.append((f"weight.{sid}", f"has no effect: server {sid} is in no group"))
            elif sid not in self.voting:
                what = "an observer" if sid in self.observers else "not a server.N of the ensemble"
                out.append((f"weight.{sid}", f"server {sid} is {what}: it never acks, yet its weight counts in "
                            f"group.{self._group_of[sid]}'s (as in ZooKeeper 3.8)"))
        return out


def config_lines(quorum: QuorumConfig) -> str:
    """The group and weight lines of QuorumHierarchical.toString (see the module docstring), each
    ending in a newline; empty for a quorum without groups and weights."""
    if not quorum.hierarchical:
        return ""
    group_of = {sid: gid for gid, sids in quorum.groups for sid in sids}
    members: dict[int, list[int]] = {}
    for sid in java_hashmap_order(group_of):
        members.setdefault(group_of[sid], []).append(sid)
    weights = {s.sid: 1 for s in quorum.participants} | dict(quorum.weights)
    out = [f"group.{gid}={':'.join(map(str, members[gid]))}\n" for gid in java_hashmap_order(members)]
    out += [f"weight.{sid}={weights[sid]}\n" for sid in java_hashmap_order(weights)]
    return "".join(out)
