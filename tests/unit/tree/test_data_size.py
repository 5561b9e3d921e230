"""``DataTree.data_size`` (mntr's zk_approximate_data_size) is kept as txns apply, and equals a
scan of path and data lengths after any sequence of them, and after a snapshot round trip."""

from __future__ import annotations

import random

from zkpy.storage.snapshot import load_snapshot, snapshot_name, write_snapshot
from zkpy.tree.acl import OPEN_ACL_UNSAFE
from zkpy.tree.datatree import DataTree
from zkpy.wire.consts import OpCode
from zkpy.wire.txn import CloseSessionTxn, CreateTxn, DeleteTxn, SetDataTxn, TxnHeader

ACL = list(OPEN_ACL_UNSAFE)


def scanned(tree: DataTree) -> int:
    return sum(len(path) + (len(node.data) if node.data else 0) for path, node in tree.nodes.items())


def test_fresh_tree() -> None:
    tree = DataTree()
    assert tree.data_size == scanned(tree)
    assert DataTree.empty().data_size == 0


def test_random_txns_keep_the_figure() -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    tree = DataTree()
    paths: list[str] = []
    zxid = 0
    for _ in range(400):
        zxid += 1
        roll = rng.random()
        data = bytes(rng.randrange(40)) if rng.random() < 0.9 else None
        if roll < 0.5 or not paths:
            parent = rng.choice(["", *(p for p in paths if not tree.nodes[p].ephemeral_owner)])
            path = f"{parent}/n{zxid}"
            ephemeral = rng.random() < 0.3
            tree.apply(TxnHeader(7 if ephemeral else 0, zxid, zxid, zxid, OpCode.CREATE),
                       CreateTxn(path, data, ACL, ephemeral, -1))
            paths.append(path)
        elif roll < 0.8:
            tree.apply(TxnHeader(0, zxid, zxid, zxid, OpCode.SET_DATA), SetDataTxn(rng.choice(paths), data, 1))
        elif roll < 0.95:
            leaves = [p for p in paths if not tree.nodes[p].children]  # prep refuses the others (NOTEMPTY)
            tree.apply(TxnHeader(0, zxid, zxid, zxid, OpCode.DELETE), DeleteTxn(rng.choice(leaves)))
            paths = [p for p in paths if p in tree.nodes]
        else:
            owned = [p for p in paths if tree.nodes[p].ephemeral_owner == 7 and not tree.nodes[p].children]
            tree.apply(TxnHeader(7, zxid, zxid, zxid, OpCode.CLOSE_SESSION), CloseSessionTxn(owned))
            paths = [p for p in paths if p in tree.nodes]
        assert tree.data_size == scanned(tree), f"seed {seed}"
    tree.set_config_node(b"server.1=127.0.0.1:1:2", 0x100000000, 5)
    assert tree.data_size == scanned(tree), f"seed {seed}"
    loaded = load_snapshot(snapshot_name(zxid), write_snapshot(tree)).tree
    assert loaded.data_size == scanned(loaded) == tree.data_size, f"seed {seed}"
