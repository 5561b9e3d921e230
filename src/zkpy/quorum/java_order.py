"""The iteration order of a ``java.util.HashMap<Long, _>``: the order in which ZooKeeper 3.8 prints
the members, groups and weights of a quorum configuration (``QuorumVerifier.toString``).

Invariant owned here: a map built by ``put``s from empty (capacity 16, doubled whenever the size
passes three quarters of it) iterates bucket by bucket, the bucket being ``HashMap.hash`` of
``Long.hashCode`` masked by the capacity; keys sharing a bucket come in ascending order here,
where Java would keep the order they were put in (from zoo.cfg's properties, in no written order).
"""

from __future__ import annotations

from collections.abc import Iterable


def java_hashmap_order(keys: Iterable[int]) -> list[int]:
    """``keys`` in the iteration order of a java.util.HashMap<Long, _> holding them."""
    ordered = sorted(keys)
    capacity = 16
    while len(ordered) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: int) -> int:
        v = key & 0xFFFF_FFFF_FFFF_FFFF
        h = (v ^ (v >> 32)) & 0xFFFF_FFFF  # Long.hashCode
        return (h ^ (h >> 16)) & (capacity - 1)  # HashMap.hash, then the table index

    return sorted(ordered, key=bucket)  # stable: ascending within a bucket
