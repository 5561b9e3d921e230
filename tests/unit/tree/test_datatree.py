"""The data tree as a state machine: Stat semantics, idempotent replay, digest, watch rules."""

from __future__ import annotations

import random
from typing import Any

from zkpy.tree.acl import OPEN_ACL_UNSAFE
from zkpy.tree.datatree import NO_CHILDREN, DataTree
from zkpy.tree.paths import path_error
from zkpy.tree.watches import PERSISTENT, RECURSIVE, STANDARD
from zkpy.wire.consts import EventType, OpCode
from zkpy.wire.txn import CreateTxn, DeleteTxn, ErrorTxn, MultiTxn, SetDataTxn, Txn, TxnHeader

ACL = list(OPEN_ACL_UNSAFE)


def hdr(zxid: int, op: int, session: int = 0) -> TxnHeader:
    return TxnHeader(session, zxid, zxid, 1000 + zxid, op)


def full_digest(tree: DataTree) -> int:
    return sum(tree.node_digest(p, n) for p, n in tree.nodes.items()) & ((1 << 64) - 1)


def test_system_nodes_exist() -> None:
    tree = DataTree()
    assert sorted(tree.nodes) == ["/", "/zookeeper", "/zookeeper/config", "/zookeeper/quota"]
    assert tree.get("/zookeeper/config").aversion == -1


def test_create_sets_stat_and_parent() -> None:
    tree = DataTree()
    tree.apply(hdr(5, OpCode.CREATE), CreateTxn("/a", b"xy", ACL, False, 1))
    stat = tree.get("/a").stat()
    assert (stat.czxid, stat.mzxid, stat.pzxid, stat.version, stat.dataLength) == (5, 5, 5, 0, 2)
    root = tree.get("/").stat()
    assert root.pzxid == 5 and root.numChildren == 2
    tree.apply(hdr(6, OpCode.DELETE), DeleteTxn("/a"))
    root = tree.get("/").stat()
    assert root.pzxid == 6 and root.cversion == 2 * tree.get("/").cversion - 1


def test_replaying_a_log_suffix_reaches_the_same_state() -> None:
    rng = random.Random(7)
    print("seed 7")
    txns = []
    zxid = 0
    live: list[str] = []
    root_cversion = 0  # prep settles the parent's cversion into each create, as ZooKeeper's does
    for i in range(300):
        zxid += 1
        if live and rng.random() < 0.3:
            path = live.pop(rng.randrange(len(live)))
            txns.append((hdr(zxid, OpCode.DELETE), DeleteTxn(path)))
        elif live and rng.random() < 0.5:
            txns.append((hdr(zxid, OpCode.SET_DATA), SetDataTxn(rng.choice(live), str(i).encode(), zxid)))
        else:
            path = f"/n{i}"
            live.append(path)
            root_cversion += 1
            txns.append((hdr(zxid, OpCode.CREATE), CreateTxn(path, b"", ACL, False, root_cversion)))
    reference = DataTree()
    for h, t in txns:
        reference.apply(h, t)
    # a "fuzzy snapshot" taken mid-way, then the whole log replayed from an earlier point
    replayed = DataTree()
    for h, t in txns[:200]:
        replayed.apply(h, t)
    for h, t in txns[150:]:
        replayed.apply(h, t)
    assert sorted(replayed.nodes) == sorted(reference.nodes)
    assert replayed.digest == reference.digest == full_digest(reference)


def test_digest_is_incremental_and_excludes_system_subtree() -> None:
    tree = DataTree()
    empty = tree.digest
    tree.apply(hdr(1, OpCode.CREATE), CreateTxn("/a", b"1", ACL, False, -1))
    tree.apply(hdr(2, OpCode.SET_DATA), SetDataTxn("/a", b"2", 1))
    assert tree.digest == full_digest(tree) != empty
    tree.apply(hdr(3, OpCode.SET_DATA), SetDataTxn("/zookeeper/quota", b"q", 1))
    assert tree.digest == full_digest(tree)


def test_watch_rules() -> None:
    tree = DataTree()
    tree.add_watch("/a", "one-time", data=True)
    tree.add_watch("/", "children", data=False)
    tree.add_watch("/", "recursive", True, RECURSIVE)
    tree.add_watch("/", "recursive", False, RECURSIVE)
    tree.add_watch("/a", "persistent", True, PERSISTENT)
    tree.add_watch("/a", "persistent", False, PERSISTENT)
    tree.apply(hdr(1, OpCode.CREATE), CreateTxn("/a", b"", ACL, False, -1))
    fired = [(e.type, e.path, sorted(e.watchers)) for e in tree.events]
    assert fired == [
        (EventType.NODE_CREATED, "/a", ["one-time", "persistent", "recursive"]),
        (EventType.NODE_CHILDREN_CHANGED, "/", ["children"]),  # recursive watches skip child events
    ]
    tree.events.clear()
    tree.apply(hdr(2, OpCode.SET_DATA), SetDataTxn("/a", b"x", 1))
    assert [sorted(e.watchers) for e in tree.events] == [["persistent", "recursive"]]  # one-time is gone


def test_standard_and_persistent_watch_coexist() -> None:
    tree = DataTree()
    tree.add_watch("/a", "w", True, PERSISTENT)
    tree.add_watch("/a", "w", True, STANDARD)
    tree.apply(hdr(1, OpCode.CREATE), CreateTxn("/a", b"", ACL, False, -1))
    tree.apply(hdr(2, OpCode.SET_DATA), SetDataTxn("/a", b"x", 1))
    assert [e.type for e in tree.events] == [EventType.NODE_CREATED, EventType.NODE_DATA_CHANGED]


def test_path_rules_match_zookeeper() -> None:
    good = ["/", "/a", "/a/b", "/a.b", "/..a", "/a..", "/\ud7ff", "/zookeeper"]
    bad = ["", "a", "/a/", "//a", "/a//b", "/.", "/./a", "/..", "/a/..", "/a\x00", "/a\x1f", "/a\x7f",
           "/\ue000", "/\ufff0", "/\U0001F600"]
    assert [p for p in good if path_error(p)] == []
    assert [p for p in bad if not path_error(p)] == []


def test_deferred_parent_digests_settle_to_the_live_digest() -> None:
    """Replay defers parent digests; a parent changed, deleted, created again and then given
    children of its own must still be counted once (by node, not by path)."""
    ops = [("c", "/a"), ("c", "/a/b"), ("s", "/a"), ("d", "/a/b"), ("d", "/a"), ("c", "/a"), ("c", "/a/c"),
           ("c", "/a/c/d"), ("s", "/a/c"), ("c", "/e"), ("d", "/a/c/d"), ("s", "/a")]
    live, deferred = DataTree(), DataTree()
    deferred.defer_parent_digests()
    for zxid, (op, path) in enumerate(ops, 1):
        for tree in (live, deferred):
            if op == "c":
                tree.create_node(path, b"x", OPEN_ACL_UNSAFE, 0, -1, zxid, zxid)
            elif op == "d":
                tree.delete_node(path, zxid)
            else:
                tree.set_data(path, b"y%d" % zxid, zxid, zxid, zxid)
        if zxid == 6:
            deferred.settle_digests()
            assert deferred.digest == live.digest
            deferred.defer_parent_digests()
    deferred.settle_digests()
    assert deferred.digest == live.digest
    assert live.digest == sum(DataTree.node_digest(p, n) for p, n in live.nodes.items()) & ((1 << 64) - 1)


def test_a_large_multi_leaves_the_digest_current() -> None:
    """A multi of many ops hashes each parent once, at its end; the digest after it is the one
    applying its ops one by one gives, deletes and a failed multi included."""
    def creates(parent: str, n: int) -> list[tuple[int, Any]]:
        return [(OpCode.CREATE, CreateTxn(f"{parent}/n{i}", b"v", ACL, False, -1)) for i in range(n)]

    multis: list[list[tuple[int, Any]]] = [
        creates("", 1) + [(OpCode.CREATE, CreateTxn("/p", b"", ACL, False, -1))] + creates("/p", 40),
        [(OpCode.DELETE, DeleteTxn(f"/p/n{i}")) for i in range(0, 40, 2)] + creates("/n0", 20),
        [(OpCode.ERROR, ErrorTxn(0))] * 17 + [(OpCode.ERROR, ErrorTxn(-110))],
    ]
    one_by_one, multi = DataTree(), DataTree()
    for zxid, subs in enumerate(multis, 1):
        for t, sub in subs:
            one_by_one.apply(hdr(zxid, t), sub)
        multi.apply(hdr(zxid, OpCode.MULTI), MultiTxn([Txn(t, sub.to_bytes()) for t, sub in subs]), subs)
        assert "_dirty" not in multi.__dict__  # not deferring after the multi
        assert multi.digest == one_by_one.digest == full_digest(multi)
    assert sorted(multi.nodes) == sorted(one_by_one.nodes)


def test_a_tree_without_a_digest_applies_the_same_changes() -> None:
    """A worker's replica keeps no digest (``drop_digest``): the same txns, multis of many ops
    included, leave the same nodes and Stats, and its digest stays 0."""
    seed = random.randrange(1 << 32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    kept, dropped = DataTree(), DataTree()
    dropped.drop_digest()
    paths = ["/a", "/a/b", "/c", "/c/d", "/e"]
    for zxid in range(1, 300):
        if rng.random() < 0.1:
            subs: list[tuple[int, Any]] = [(OpCode.CREATE, CreateTxn(f"/m{zxid}", b"", ACL, False, -1))]
            subs += [(OpCode.CREATE, CreateTxn(f"/m{zxid}/n{i}", b"v", ACL, False, -1)) for i in range(20)]
            txn: Any = MultiTxn([Txn(t, sub.to_bytes()) for t, sub in subs])
            for tree in (kept, dropped):
                tree.apply(hdr(zxid, OpCode.MULTI), txn, subs)
            continue
        path = rng.choice(paths)
        node = kept.nodes.get(path)
        if node is not None and node.children:  # what prep lets through: no delete of a parent
            op, sub = OpCode.SET_DATA, SetDataTxn(path, b"y%d" % zxid, zxid)
        elif node is None and path.rpartition("/")[0] not in ("", *kept.nodes):
            continue
        else:
            op, sub = rng.choice([(OpCode.CREATE, CreateTxn(path, b"x", ACL, False, -1)),
                                  (OpCode.SET_DATA, SetDataTxn(path, b"y%d" % zxid, zxid)),
                                  (OpCode.DELETE, DeleteTxn(path))])
        for tree in (kept, dropped):
            tree.apply(hdr(zxid, op), sub)
    assert sorted(dropped.nodes) == sorted(kept.nodes)
    assert all(dropped.get(p).stat() == kept.get(p).stat() for p in kept.nodes)
    assert dropped.digest == 0 and kept.digest == full_digest(kept) != 0


def test_a_leaf_has_no_dict_of_its_own_until_its_first_child() -> None:
    tree = DataTree()
    tree.apply(hdr(1, OpCode.CREATE), CreateTxn("/a", b"", ACL, False, -1))
    assert tree.nodes["/a"].children is NO_CHILDREN
    tree.apply(hdr(2, OpCode.CREATE), CreateTxn("/a/b", b"", ACL, False, -1))
    assert tree.nodes["/a"].children == {"b": None} and tree.nodes["/a/b"].children is NO_CHILDREN
    tree.apply(hdr(3, OpCode.DELETE), DeleteTxn("/a/b"))
    tree.apply(hdr(4, OpCode.DELETE), DeleteTxn("/a/missing"))  # a replayed delete: nothing to remove
    tree.apply(hdr(5, OpCode.CREATE), CreateTxn("/l", b"", ACL, False, -1))
    tree.apply(hdr(6, OpCode.DELETE), DeleteTxn("/l/x"))  # under a leaf: nothing to remove
    assert tree.nodes["/l"].children is NO_CHILDREN
    assert tree.nodes["/a"].children == {} and len(NO_CHILDREN) == 0 and tree.digest == full_digest(tree)


def test_apply_without_a_stat_changes_the_tree_alike() -> None:
    """``want_stat=False`` (a replay, a replica's txn of another process's client) packs no Stat
    and changes the tree exactly as an apply that does."""
    with_stat, without = DataTree(), DataTree()
    txns: list[tuple[int, Any]] = [(OpCode.CREATE2, CreateTxn("/a", b"1", ACL, False, -1)),
                                   (OpCode.SET_DATA, SetDataTxn("/a", b"2", 1)),
                                   (OpCode.CREATE, CreateTxn("/a/b", b"", ACL, False, -1))]
    for zxid, (op, txn) in enumerate(txns, 1):
        full = with_stat.apply(hdr(zxid, op), txn)
        bare = without.apply(hdr(zxid, op), txn, want_stat=False)
        assert bare.stat is None and bare.err == full.err == 0
        if op != OpCode.CREATE:
            assert full.stat == with_stat.get("/a").stat_bytes()
    multi = [(OpCode.SET_DATA, SetDataTxn("/a", b"3", 2)), (OpCode.DELETE, DeleteTxn("/a/b"))]
    txn = MultiTxn([Txn(t, sub.to_bytes()) for t, sub in multi])
    assert all(r.stat is None for r in without.apply(hdr(9, OpCode.MULTI), txn, multi, want_stat=False).multi or [])
    with_stat.apply(hdr(9, OpCode.MULTI), txn, multi)
    assert {p: n.stat() for p, n in without.nodes.items()} == {p: n.stat() for p, n in with_stat.nodes.items()}
    assert without.digest == with_stat.digest
