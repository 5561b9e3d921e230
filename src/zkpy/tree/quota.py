"""Quotas as ZooKeeper 3.8 keeps them: the ``/zookeeper/quota`` subtree, its text format, and the
set of quota roots the data tree consults on every write (pure).

A quota on ``/a/b`` is two znodes that clients (``zkCli.sh setquota``) create:
``/zookeeper/quota/a/b/zookeeper_limits`` holds the limits and ``.../zookeeper_stats`` the usage,
both in StatsTrack text: ``count=<n>,bytes=<n>`` first, and when there are other keys, an ``=``
after the bytes and then every other key sorted, each after a ``;``
(``count=3,bytes=-1=;byteHardLimit=-1;countHardLimit=4``). ``count`` and ``bytes`` are the soft
limits (a warning), ``countHardLimit`` and ``byteHardLimit`` the hard ones (QuotaExceeded when
``enforceQuota`` is on); -1 or an absent key means none.

Invariants owned here (the data tree applies them, see ``DataTree``):
- a path is a quota root while ``/zookeeper/quota<path>/zookeeper_limits`` exists (ZooKeeper's
  PathTrie); ``/`` never is one (getMaxPrefixWithQuota ignores it);
- a write under a quota root counts against the deepest root only: +1 / -1 node and the data
  length on create / delete, the data length difference on setData; the root itself counts
  (a quota on a node with no children has count 1);
- the stats znode's data is rewritten in place: its version, mzxid and mtime do not move;
- creating a stats znode, and loading a snapshot, recount the root's whole subtree
  (updateQuotaForPath / setupQuota), so after a restart the counts are what they were live
  (nested quotas aside: live, a write counts only against the deepest root, while a recount
  counts the whole subtree, in ZooKeeper as here);
- a stats text that cannot be parsed is recounted where ZooKeeper's apply would throw (and
  take the server down): deterministic, so every replica agrees.

The counts do not change the digest (nodes under /zookeeper/ are outside it), and the tree's
``data_size`` follows the stats text exactly (ZooKeeper's live figure ignores those rewrites
until its next restart).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

QUOTA_ROOT = "/zookeeper/quota"
LIMIT_NODE = "zookeeper_limits"
STAT_NODE = "zookeeper_stats"
_QUOTA_PREFIX = QUOTA_ROOT + "/"

COUNT = "count"
BYTES = "bytes"
COUNT_HARD = "countHardLimit"
BYTES_HARD = "byteHardLimit"

_PAIRS = re.compile(r"[,;]+")
_LONG = re.compile(r"[+-]?[0-9]+")
_MIN_LONG, _MAX_LONG = -(1 << 63), (1 << 63) - 1


def limit_path(path: str) -> str:
    return f"{QUOTA_ROOT}{path}/{LIMIT_NODE}"


def stat_path(path: str) -> str:
    return f"{QUOTA_ROOT}{path}/{STAT_NODE}"


def quota_target(quota_dir: str) -> str | None:
    """The path a directory under /zookeeper/quota is the quota of (``/zookeeper/quota/a/b`` ->
    ``/a/b``); None for /zookeeper/quota itself and for paths outside it."""
    if not quota_dir.startswith(_QUOTA_PREFIX):
        return None
    return quota_dir[len(QUOTA_ROOT):]


def top_namespace(path: str) -> str | None:
    """The first component of a path (PathUtils.getTopNamespace): ``/a/b`` -> ``a``."""
    parts = path.split("/")
    return parts[1] if len(parts) > 1 and parts[1] else None


# ---- StatsTrack text ----

def parse_stats(data: bytes | None) -> dict[str, int]:
    """StatsTrack's parser: ``key=long`` pairs separated by runs of ``,`` and ``;``; an empty
    value reads as -1. Raises ValueError where ZooKeeper's parser throws."""
    text = (data or b"").decode("utf-8", "replace")
    out: dict[str, int] = {}
    if not text:
        return out
    pairs = _PAIRS.split(text)
    while pairs and pairs[-1] == "":  # Java's split drops trailing empty strings
        pairs.pop()
    for pair in pairs:
        kv = pair.split("=")
        while kv and kv[-1] == "":
            kv.pop()
        if len(kv) < 2:
            raise ValueError(f"no value in {pair!r}")
        if kv[1] == "":
            out[kv[0]] = -1
            continue
        if not _LONG.fullmatch(kv[1]):
            raise ValueError(f"not a number in {pair!r}")
        value = int(kv[1])
        if not _MIN_LONG <= value <= _MAX_LONG:
            raise ValueError(f"out of range in {pair!r}")
        out[kv[0]] = value
    return out


def format_stats(stats: dict[str, int]) -> bytes:
    """StatsTrack.toString: count and bytes first (-1 when absent); if other keys exist, an ``=``
    after bytes (so 3.4's parser ignores them) and each other key, sorted, after a ``;``."""
    text = f"count={stats.get(COUNT, -1)},bytes={stats.get(BYTES, -1)}"
    others = sorted(k for k in stats if k not in (COUNT, BYTES))
    if others:
        text += "=" + "".join(f";{k}={stats[k]}" for k in others)
    return text.encode("utf-8")


# ---- quota roots (ZooKeeper's PathTrie of quota'd paths) ----

class QuotaRoots:
    """The paths that have a limits znode; ``deepest`` finds the quota a write counts against."""

    __slots__ = ("paths",)

    def __init__(self) -> None:
        self.paths: set[str] = set()

    def __bool__(self) -> bool:
        return bool(self.paths)

    def add(self, path: str) -> None:
        self.paths.add(path)

    def discard(self, path: str) -> None:
        self.paths.discard(path)

    def clear(self) -> None:
        self.paths.clear()

    def deepest(self, path: str) -> str | None:
        """The deepest quota root that is ``path`` or one of its ancestors (getMaxPrefixWithQuota):
        O(depth) set lookups, nothing at all while there is no quota."""
        paths = self.paths
        if not paths:
            return None
        p = path
        while len(p) > 1:
            if p in paths:
                return p
            p = p[:p.rfind("/")]
        return None


# ---- enforcement (ZooKeeperServer.checkQuota) ----

@dataclass(frozen=True, slots=True)
class Exceeded:
    """A write that would pass a limit of the quota on ``root``: ``message`` is the line ZooKeeper
    logs; a hard limit refuses the write with QuotaExceeded, a soft one only logs."""

    root: str
    message: str
    hard: bool


def _counts(limits: dict[str, int], count_diff: int) -> bool:
    return count_diff != 0 and (limits.get(COUNT, -1) > -1 or limits.get(COUNT_HARD, -1) > -1)


def _bytes(limits: dict[str, int], bytes_diff: int) -> bool:
    return bytes_diff != 0 and (limits.get(BYTES, -1) > -1 or limits.get(BYTES_HARD, -1) > -1)


def limits_apply(limits: dict[str, int], count_diff: int, bytes_diff: int) -> bool:
    """Whether a write changing the count and bytes by these has a limit to check (else ZooKeeper
    does not even read the usage)."""
    return _counts(limits, count_diff) or _bytes(limits, bytes_diff)


def check_limits(root: str, limits: dict[str, int], usage: dict[str, int], count_diff: int,
                 bytes_diff: int) -> Iterator[Exceeded]:
    """The limits of ``root`` that ``count_diff`` more nodes and ``bytes_diff`` more bytes would
    pass, count first (the caller stops at the first hard one, as ZooKeeper throws there)."""
    if _counts(limits, count_diff):
        new = usage.get(COUNT, -1) + count_diff
        hard = limits.get(COUNT_HARD, -1) > -1
        limit = limits[COUNT_HARD] if hard else limits[COUNT]
        if new > limit:
            yield Exceeded(root, f"Quota exceeded: {root} [current count={new}, "
                                 f"{'hard' if hard else 'soft'}CountLimit={limit}]", hard)
    if _bytes(limits, bytes_diff):
        new = usage.get(BYTES, -1) + bytes_diff
        hard = limits.get(BYTES_HARD, -1) > -1
        limit = limits[BYTES_HARD] if hard else limits[BYTES]
        if new > limit:
            yield Exceeded(root, f"Quota exceeded: {root} [current bytes={new}, "
                                 f"{'hard' if hard else 'soft'}ByteLimit={limit}]", hard)


# ---- per-namespace figures (QuotaMetricsUtils) ----

class _NodeLike(Protocol):
    data: bytes | None
    children: Mapping[str, None]


PER_NAMESPACE_GAUGES = ("quota_count_limit_per_namespace", "quota_bytes_limit_per_namespace",
                        "quota_count_usage_per_namespace", "quota_bytes_usage_per_namespace")
EXCEEDED_PER_NAMESPACE = "quota_exceeded_error_per_namespace"


def namespace_figures(nodes: Mapping[str, _NodeLike]) -> dict[str, dict[str, int]]:
    """ZooKeeper's per-namespace quota gauges, name -> {namespace: figure}: the limits (the hard
    one where set, else the soft one, -1 for none) and the usage, summed over the quotas under each
    top-level znode. Walks /zookeeper/quota (its leaves, as ZooKeeper does) when asked: an mntr or
    a scrape, never a write."""
    out: dict[str, dict[str, int]] = {name: {} for name in PER_NAMESPACE_GAUGES}
    stack = [QUOTA_ROOT]
    while stack:
        path = stack.pop()
        node = nodes.get(path)
        if node is None:
            continue
        if node.children:
            stack.extend(f"{path}/{child}" for child in node.children)
            continue
        leaf = path.rsplit("/", 1)[1]
        if leaf not in (LIMIT_NODE, STAT_NODE) or node.data is None:
            continue
        namespace = top_namespace(path[len(QUOTA_ROOT):])
        if namespace is None:
            continue
        try:
            stats = parse_stats(node.data)
        except ValueError:
            continue
        if leaf == LIMIT_NODE:
            figures = (("quota_count_limit_per_namespace", _limit(stats, COUNT_HARD, COUNT)),
                       ("quota_bytes_limit_per_namespace", _limit(stats, BYTES_HARD, BYTES)))
        else:
            figures = (("quota_count_usage_per_namespace", stats.get(COUNT, -1)),
                       ("quota_bytes_usage_per_namespace", stats.get(BYTES, -1)))
        for name, value in figures:
            per = out[name]
            per[namespace] = per.get(namespace, 0) + value
    return out


def _limit(stats: dict[str, int], hard: str, soft: str) -> int:
    return stats[hard] if stats.get(hard, -1) > -1 else stats.get(soft, -1)
