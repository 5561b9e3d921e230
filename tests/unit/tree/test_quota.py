"""Quota accounting in the data tree, as ZooKeeper 3.8's DataTree keeps it: the StatsTrack text,
the stats znode moved on every create, delete and setData under a quota root (the root counted,
the deepest root only, the stats znode's stat untouched), a stats znode counted when created, and
a loaded tree (a fuzzy snapshot plus the log after it) ending with the live tree's stats."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.txn_workload import Workload, dump
from zkpy.storage.snapshot import SnapshotWriter, load_snapshot, snapshot_name, write_snapshot
from zkpy.tree.acl import OPEN_ACL_UNSAFE
from zkpy.tree.datatree import DataTree
from zkpy.tree.quota import (
    QuotaRoots,
    check_limits,
    format_stats,
    limit_path,
    namespace_figures,
    parse_stats,
    stat_path,
)
from zkpy.wire.consts import OpCode
from zkpy.wire.proto import Stat
from zkpy.wire.txn import (
    CloseSessionTxn,
    CreateSessionTxn,
    CreateTxn,
    DeleteTxn,
    MultiTxn,
    SetDataTxn,
    Txn,
    TxnHeader,
)

ACL = list(OPEN_ACL_UNSAFE)


class Tree:
    """A DataTree driven by txns with increasing zxids."""

    def __init__(self, tree: DataTree | None = None) -> None:
        self.tree = tree or DataTree()
        self.zxid = self.tree.last_processed_zxid

    def apply(self, op: int, txn: Any, session: int = 0) -> Any:
        self.zxid += 1
        rc = self.tree.apply(TxnHeader(session, self.zxid, self.zxid, 1000 + self.zxid, op), txn)
        self.tree.events.clear()
        return rc

    def create(self, path: str, data: bytes | None = b"", session: int = 0) -> Any:
        """A create2 txn: its result carries the new node's Stat (a plain create's has none)."""
        return self.apply(OpCode.CREATE2, CreateTxn(path, data, ACL, session != 0, -1), session)

    def delete(self, path: str) -> Any:
        return self.apply(OpCode.DELETE, DeleteTxn(path))

    def set(self, path: str, data: bytes | None) -> Any:
        return self.apply(OpCode.SET_DATA, SetDataTxn(path, data, self.tree.nodes[path].version + 1))

    def setquota(self, path: str, limits: bytes = b"count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=-1") -> None:
        """What zkCli's setquota writes: the quota's directories, the limits, then stats at zero."""
        parts = [p for p in path.split("/") if p]
        prefix = "/zookeeper/quota"
        for part in parts:
            prefix += "/" + part
            if prefix not in self.tree.nodes:
                self.create(prefix, None)
        self.create(limit_path(path), limits)
        self.create(stat_path(path), b"count=0,bytes=0")

    def stats(self, path: str) -> bytes | None:
        return self.tree.nodes[stat_path(path)].data


def counted(tree: DataTree, root: str) -> bytes:
    """The stats a scan of ``root``'s subtree gives (updateQuotaForPath)."""
    count = size = 0
    for path, node in tree.nodes.items():
        if path == root or path.startswith(root + "/"):
            count += 1
            size += len(node.data) if node.data else 0
    return f"count={count},bytes={size}".encode()


# ---------------------------------------------------------------- the StatsTrack text


def test_stats_text_is_zookeepers() -> None:
    assert format_stats({"count": 3, "bytes": -1, "countHardLimit": 4, "byteHardLimit": -1}) == \
        b"count=3,bytes=-1=;byteHardLimit=-1;countHardLimit=4"
    assert format_stats({"count": 0, "bytes": 0}) == b"count=0,bytes=0"
    assert format_stats({}) == b"count=-1,bytes=-1"
    assert parse_stats(b"count=3,bytes=-1=;byteHardLimit=-1;countHardLimit=4") == \
        {"count": 3, "bytes": -1, "byteHardLimit": -1, "countHardLimit": 4}
    assert parse_stats(b"count=5;bytes=7,,") == {"count": 5, "bytes": 7}
    assert parse_stats(b"count==5") == {"count": -1}  # an empty value reads as -1, as StatsTrack reads it
    assert parse_stats(b"") == parse_stats(None) == {}
    for bad in (b"count", b"count=x", b",count=1", b"count=1 ", b"count=99999999999999999999"):
        with pytest.raises(ValueError):
            parse_stats(bad)


@given(st.dictionaries(st.text("abcdefghijklmnopqrstuvwxyzCHL", min_size=1, max_size=12),
                       st.integers(-(1 << 63), (1 << 63) - 1), max_size=5))
def test_stats_text_round_trips(stats: dict[str, int]) -> None:
    full = {"count": -1, "bytes": -1, **stats}
    assert parse_stats(format_stats(stats)) == full


def test_deepest_root_wins_and_slash_is_never_one() -> None:
    roots = QuotaRoots()
    assert roots.deepest("/a/b") is None
    roots.add("/a")
    roots.add("/a/b/c")
    assert roots.deepest("/a") == "/a"
    assert roots.deepest("/a/b") == "/a"
    assert roots.deepest("/a/b/c/d") == "/a/b/c"
    assert roots.deepest("/ab") is None
    assert roots.deepest("/") is None


def test_limits_count_first_hard_over_soft() -> None:
    limits = {"count": 3, "bytes": -1, "countHardLimit": 4, "byteHardLimit": 5}
    usage = {"count": 4, "bytes": 5}
    found = list(check_limits("/q", limits, usage, 1, 1))
    assert [(e.message, e.hard) for e in found] == [
        ("Quota exceeded: /q [current count=5, hardCountLimit=4]", True),
        ("Quota exceeded: /q [current bytes=6, hardByteLimit=5]", True)]
    soft = list(check_limits("/q", {"count": 3, "bytes": 10}, {"count": 3, "bytes": 0}, 1, 0))
    assert [(e.message, e.hard) for e in soft] == [("Quota exceeded: /q [current count=4, softCountLimit=3]", False)]
    assert list(check_limits("/q", limits, usage, 0, 0)) == []  # nothing changes: nothing checked
    assert list(check_limits("/q", limits, usage, -1, -3)) == []


# ---------------------------------------------------------------- live accounting


def test_creates_deletes_and_sets_move_the_stats_of_the_root() -> None:
    t = Tree()
    t.create("/q", b"x")
    t.create("/q/a", b"abc")
    t.setquota("/q")
    assert t.stats("/q") == b"count=2,bytes=4"  # counted when the stats znode is created: the root too
    stats_node = t.tree.nodes[stat_path("/q")]
    before = (stats_node.version, stats_node.mzxid, stats_node.mtime)
    t.create("/q/b", b"12345")
    t.create("/q/b/c", None)
    assert t.stats("/q") == b"count=4,bytes=9"
    t.set("/q/a", b"")
    assert t.stats("/q") == b"count=4,bytes=6"
    t.set("/q", None)
    t.delete("/q/b/c")
    assert t.stats("/q") == b"count=3,bytes=5"
    t.create("/other", b"not counted")
    t.set("/other", b"nor this")
    assert t.stats("/q") == b"count=3,bytes=5"
    # rewritten in place, as updateQuotaStat does: no version, mzxid or mtime change (and, under
    # /zookeeper/, no share of the digest)
    assert (stats_node.version, stats_node.mzxid, stats_node.mtime) == before
    assert stats_node.digest == 0
    assert stats_node.stat().dataLength == len(b"count=3,bytes=5")
    assert t.tree.data_size == sum(len(p) + len(n.data or b"") for p, n in t.tree.nodes.items())


def test_the_stat_a_stats_znode_is_created_with_is_from_before_its_count() -> None:
    t = Tree()
    t.create("/q", b"12345")
    t.create("/zookeeper/quota/q", None)
    t.create(limit_path("/q"), b"count=5,bytes=-1")
    rc = t.create(stat_path("/q"), b"count=0,bytes=0")
    assert Stat.from_bytes(rc.stat).dataLength == len(b"count=0,bytes=0")  # DataTree.createNode copies the stat first
    assert t.stats("/q") == b"count=1,bytes=5"


def test_failed_txns_and_replays_count_nothing() -> None:
    t = Tree()
    t.create("/q")
    t.setquota("/q")
    t.create("/q/a", b"abc")
    assert t.create("/q/a", b"again").err != 0  # NodeExists (a replay over a fuzzy snapshot)
    assert t.delete("/q/missing") is not None
    assert t.stats("/q") == b"count=2,bytes=3"


def test_extra_keys_in_the_stats_are_kept_and_unreadable_stats_recounted() -> None:
    t = Tree()
    t.create("/q")
    t.setquota("/q")
    t.set(stat_path("/q"), b"count=10,bytes=0=;note=7")  # a client wrote its own figures
    t.create("/q/a", b"ab")
    assert t.stats("/q") == b"count=11,bytes=2=;note=7"
    t.set(stat_path("/q"), b"garbage")  # ZooKeeper would fail on this; zkpy recounts, the same on every replica
    t.create("/q/b", b"c")
    assert t.stats("/q") == counted(t.tree, "/q") == b"count=3,bytes=3"


def test_only_the_deepest_quota_counts_a_write() -> None:
    t = Tree()
    for p in ("/a", "/a/b", "/a/b/c"):
        t.create(p, b"1")
    t.setquota("/a")
    t.setquota("/a/b")  # zkCli refuses nested quotas; the server, like ZooKeeper's, does not
    assert t.stats("/a") == b"count=3,bytes=3" and t.stats("/a/b") == b"count=2,bytes=2"
    t.create("/a/b/c/d", b"22")
    t.create("/a/x", b"333")
    assert t.stats("/a") == b"count=4,bytes=6"
    assert t.stats("/a/b") == b"count=3,bytes=4"


def test_ephemerals_of_a_closed_session_and_multis_are_counted() -> None:
    t = Tree()
    t.create("/q")
    t.setquota("/q")
    t.apply(OpCode.CREATE_SESSION, CreateSessionTxn(30000), 0x42)
    t.create("/q/e1", b"eph", session=0x42)
    t.create("/q/e2", b"e", session=0x42)
    assert t.stats("/q") == b"count=3,bytes=4"
    t.apply(OpCode.CLOSE_SESSION, CloseSessionTxn(["/q/e1", "/q/e2"]), 0x42)
    assert t.stats("/q") == b"count=1,bytes=0"
    t.apply(OpCode.MULTI, MultiTxn([Txn(OpCode.CREATE, CreateTxn("/q/m", b"multi", ACL, False, -1).to_bytes()),
                                    Txn(OpCode.SET_DATA, SetDataTxn("/q", b"xy", 1).to_bytes())]))
    assert t.stats("/q") == b"count=2,bytes=7"


def test_delquota_stops_the_counting_and_a_new_quota_counts_afresh() -> None:
    t = Tree()
    t.create("/q", b"1")
    t.setquota("/q")
    t.delete(stat_path("/q"))
    t.delete(limit_path("/q"))
    assert not t.tree.quotas
    t.create("/q/a", b"22")  # no quota: nothing to count, nothing missing
    t.setquota("/q")
    assert t.stats("/q") == b"count=2,bytes=3"


def test_a_quota_created_before_its_stats_counts_once_they_exist() -> None:
    t = Tree()
    t.create("/q", b"1")
    t.create("/zookeeper/quota/q", None)
    t.create(limit_path("/q"), b"count=5,bytes=-1")
    t.create("/q/a", b"22")  # ZooKeeper: "Missing node for stat", the write goes on
    t.create(stat_path("/q"), b"count=0,bytes=0")
    assert t.stats("/q") == b"count=2,bytes=3"


def test_per_namespace_figures_sum_the_quotas_of_a_top_level_znode() -> None:
    t = Tree()
    for p in ("/q", "/r", "/r/s", "/r/t"):
        t.create(p, b"ab")
    t.setquota("/q", b"count=3,bytes=-1=;byteHardLimit=-1;countHardLimit=4")
    t.setquota("/r/s", b"count=-1,bytes=-1=;byteHardLimit=5;countHardLimit=-1")
    t.setquota("/r/t", b"count=2,bytes=10")
    figures = namespace_figures(t.tree.nodes)
    assert figures == {
        "quota_count_limit_per_namespace": {"q": 4, "r": 1},
        "quota_bytes_limit_per_namespace": {"q": -1, "r": 15},
        "quota_count_usage_per_namespace": {"q": 1, "r": 2},
        "quota_bytes_usage_per_namespace": {"q": 2, "r": 4},
    }


# ---------------------------------------------------------------- the live invariant


@settings(max_examples=60)
@given(st.lists(st.tuples(st.sampled_from(["create", "delete", "set", "quota", "unquota"]),
                          st.integers(0, 30), st.binary(max_size=12)), max_size=60))
def test_each_root_holds_the_count_of_its_subtree_after_any_writes(ops: list[tuple[str, int, bytes]]) -> None:
    """Without nested quotas and without clients writing the stats, a root's stats always equal a
    scan of its subtree: the incremental bookkeeping is the recount's."""
    t = Tree()
    for kind, pick, data in ops:
        user = sorted(p for p in t.tree.nodes if p != "/" and not p.startswith("/zookeeper"))
        if kind == "create":
            parent = (["/"] + user)[pick % (len(user) + 1)]
            path = f"{'' if parent == '/' else parent}/n{t.zxid}"
            t.create(path, data or None)
        elif kind == "delete" and user:
            leaves = [p for p in user if not t.tree.nodes[p].children]
            t.delete(leaves[pick % len(leaves)])
        elif kind == "set" and user:
            t.set(user[pick % len(user)], data)
        elif kind == "quota" and user:
            path = user[pick % len(user)]
            roots = t.tree.quotas.paths
            if not any(r == path or r.startswith(path + "/") or path.startswith(r + "/") for r in roots):
                t.setquota(path)
        elif kind == "unquota" and t.tree.quotas:
            root = sorted(t.tree.quotas.paths)[pick % len(t.tree.quotas.paths)]
            t.delete(stat_path(root))
            t.delete(limit_path(root))
        for root in t.tree.quotas.paths:
            assert t.stats(root) == counted(t.tree, root), root


# ---------------------------------------------------------------- recovery


class QuotaWorkload(Workload):
    """The shared random workload, plus quotas set and removed as zkCli does (never nested)."""

    def one(self) -> None:
        r = self.rng.random()
        if r < 0.06:
            self._set_quota()
        elif r < 0.08 and self.tree.quotas:
            root = self.rng.choice(sorted(self.tree.quotas.paths))
            self._apply(OpCode.DELETE, DeleteTxn(stat_path(root)))
            self._apply(OpCode.DELETE, DeleteTxn(limit_path(root)))
        else:
            super().one()

    def _set_quota(self) -> None:
        paths = self._user_paths()
        if not paths:
            return
        path = self.rng.choice(paths)
        roots = self.tree.quotas.paths
        if any(r == path or r.startswith(path + "/") or path.startswith(r + "/") for r in roots):
            return
        prefix = "/zookeeper/quota"
        for part in path.split("/")[1:]:
            prefix += "/" + part
            if prefix not in self.tree.nodes:
                self._create_at(prefix, None)
        self._create_at(limit_path(path), b"count=5,bytes=-1")
        self._create_at(stat_path(path), b"count=0,bytes=0")

    def _create_at(self, path: str, data: bytes | None) -> None:
        parent = self.tree.nodes[path.rsplit("/", 1)[0]]  # prep settles the parent's cversion
        self._apply(OpCode.CREATE, CreateTxn(path, data, ACL, False, parent.cversion + 1))


@pytest.mark.parametrize("seed", range(16))
def test_a_fuzzy_snapshot_and_the_log_after_it_give_the_live_stats(seed: int) -> None:
    rng = random.Random(seed)
    work = QuotaWorkload(rng, DataTree())
    work.run(rng.randint(100, 400))
    writer = SnapshotWriter(work.tree)
    z = writer.zxid
    chunks = [writer.step(0)]
    while not writer.done:
        work.run(rng.randint(0, 8))
        chunks.append(writer.step(rng.randint(0, 5)))
    chunks.append(writer.finish())
    work.run(rng.randint(0, 60))
    tree = load_snapshot(snapshot_name(z), b"".join(chunks)).tree
    for h, txn in work.log:
        if h.zxid > z:
            tree.apply(h, txn)
    tree.events.clear()
    assert work.tree.quotas.paths, f"seed {seed}: the workload set no quota"
    assert tree.quotas.paths == work.tree.quotas.paths, f"seed {seed}"
    for root in work.tree.quotas.paths:
        assert tree.nodes[stat_path(root)].data == work.tree.nodes[stat_path(root)].data == \
            counted(work.tree, root), f"seed {seed}: {root}"
    assert dump(tree) == dump(work.tree), f"seed {seed}"
    assert tree.data_size == work.tree.data_size, f"seed {seed}"


def test_loading_recounts_the_stats_a_snapshot_holds() -> None:
    """A snapshot's stats text is not trusted (DataTree.setupQuota): whatever it says, the loaded
    tree holds the counts of the subtree."""
    t = Tree()
    t.create("/q", b"1")
    t.create("/q/a", b"22")
    t.setquota("/q")
    t.tree.nodes[stat_path("/q")].data = b"count=99,bytes=99"  # as a fuzzy snapshot may have caught it
    loaded = load_snapshot(snapshot_name(t.zxid), write_snapshot(t.tree)).tree
    assert loaded.quotas.paths == {"/q"}
    assert loaded.nodes[stat_path("/q")].data == b"count=2,bytes=3"
    loaded_t = Tree(loaded)
    loaded_t.create("/q/b", b"")
    assert loaded_t.stats("/q") == b"count=3,bytes=3"
