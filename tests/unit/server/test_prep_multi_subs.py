"""Prep.last_subs: a multi's ops as prep built them equal decoding the bytes it logged, so applying
them (the server's fast path) leaves the same tree as applying the decoded txn (replay, learners)."""

from __future__ import annotations

from typing import Any

from zkpy.config import ServerConfig
from zkpy.server.prep import Prep
from zkpy.tree.acl import OPEN_ACL_UNSAFE
from zkpy.tree.datatree import DataTree
from zkpy.wire.consts import OpCode
from zkpy.wire.multi import Op, read_multi_request, write_multi_request
from zkpy.wire.proto import ACL, CheckVersionRequest, CreateRequest, DeleteRequest, Id, SetDataRequest
from zkpy.wire.txn import MultiTxn, decode_txn

OPEN = list(OPEN_ACL_UNSAFE)
AUTH = [Id("ip", "127.0.0.1")]
MULTIS: list[list[Op]] = [
    [Op(OpCode.CREATE, CreateRequest("/a", b"x", OPEN, 0)), Op(OpCode.CREATE, CreateRequest("/a/s", None, OPEN, 2)),
     Op(OpCode.CREATE, CreateRequest("/e", b"", [ACL(1, Id("world", "anyone"))], 1)),
     Op(OpCode.CREATE2, CreateRequest("/a/b", b"yy", OPEN, 0))],
    [Op(OpCode.SET_DATA, SetDataRequest("/a", b"z", 0)), Op(OpCode.CHECK, CheckVersionRequest("/a", 1)),
     Op(OpCode.DELETE, DeleteRequest("/a/b", -1))],
    # fails at its second op: every op becomes an error
    [Op(OpCode.CREATE, CreateRequest("/c", b"", OPEN, 0)), Op(OpCode.SET_DATA, SetDataRequest("/a", b"", 7)),
     Op(OpCode.DELETE, DeleteRequest("/a", -1))],
]


def _run(use_subs: bool) -> tuple[DataTree, list[Any]]:
    tree = DataTree()
    prep = Prep(tree, ServerConfig(), lambda _m: None)
    results = []
    for zxid, ops in enumerate(MULTIS, start=1):
        hdr, txn, error = prep.prep(OpCode.MULTI, ops, 5, zxid, AUTH, zxid, 1000 + zxid, True)
        assert error is None and isinstance(txn, MultiTxn)
        subs = prep.last_subs
        assert subs == [(t.type, decode_txn(t.type, t.data)) for t in txn.txns]
        rc = tree.apply(hdr, txn, subs if use_subs else None)
        prep.applied(zxid)
        results.append(rc)
    return tree, results


def test_applying_prepped_subs_equals_applying_the_decoded_multi() -> None:
    fast, fast_rc = _run(True)
    slow, slow_rc = _run(False)
    assert fast_rc == slow_rc
    assert fast.digest == slow.digest and sorted(fast.nodes) == sorted(slow.nodes)
    assert [r.err for r in fast_rc] != [0, 0, 0]  # the failed multi failed


def test_a_single_op_clears_last_subs() -> None:
    prep = Prep(DataTree(), ServerConfig(), lambda _m: None)
    prep.prep(OpCode.MULTI, MULTIS[0][:1], 5, 1, AUTH, 1, 1, True)
    assert prep.last_subs is not None
    prep.prep(OpCode.CREATE, CreateRequest("/x", b"", OPEN, 0), 5, 2, AUTH, 2, 2, True)
    assert prep.last_subs is None


def _wire_ops(ops: list[Op]) -> list[Op]:
    """The ops as a server reads them: each with its record's bytes."""
    out = bytearray()
    write_multi_request(out, ops)
    read, _ = read_multi_request(bytes(out), 0)
    assert [o.body for o in read] == [o.request.to_bytes() for o in ops]
    return read


def test_logged_sub_txns_equal_their_encoding_when_cut_from_the_request() -> None:
    prep = Prep(DataTree(), ServerConfig(), lambda _m: None)
    for zxid, ops in enumerate(MULTIS, start=1):
        hdr, txn, error = prep.prep(OpCode.MULTI, _wire_ops(ops), 5, zxid, AUTH, zxid, 1000 + zxid, True)
        assert error is None and isinstance(txn, MultiTxn)
        assert prep.last_subs is not None
        assert [t.data for t in txn.txns] == [sub.to_bytes() for _t, sub in prep.last_subs]
        prep.tree.apply(hdr, txn, prep.last_subs)
        prep.applied(zxid)


def test_a_failed_multi_leaves_the_outstanding_state_as_it_found_it() -> None:
    """Creates under one parent share the multi's change record for it; when a later op fails, the
    outstanding state is the one before the multi, and the next create numbers from it."""
    tree = DataTree()
    prep = Prep(tree, ServerConfig(), lambda _m: None)
    prep.prep(OpCode.CREATE, CreateRequest("/p", b"", OPEN, 0), 5, 1, AUTH, 1, 1, True)  # not applied
    before = {path: (r.cversion, r.child_count) for path, r in prep.outstanding.items()}
    ops = [Op(OpCode.CREATE, CreateRequest(f"/p/{i}", b"", OPEN, 0)) for i in range(20)]
    ops.append(Op(OpCode.SET_DATA, SetDataRequest("/p", b"", 9)))  # bad version
    _hdr, _txn, error = prep.prep(OpCode.MULTI, _wire_ops(ops), 5, 2, AUTH, 2, 2, True)
    assert error is None and prep.last_subs is not None
    assert all(t == OpCode.ERROR for t, _ in prep.last_subs)
    assert {path: (r.cversion, r.child_count) for path, r in prep.outstanding.items()} == before
    ok = [Op(OpCode.CREATE, CreateRequest(f"/p/{i}", b"", OPEN, 0)) for i in range(3)]
    _hdr, txn, error = prep.prep(OpCode.MULTI, _wire_ops(ok), 5, 3, AUTH, 3, 3, True)
    assert error is None and prep.last_subs is not None
    assert [sub.parentCVersion for _t, sub in prep.last_subs] == [1, 2, 3]
    parent = prep.outstanding["/p"]
    assert (parent.zxid, parent.cversion, parent.child_count) == (3, 3, 3)
    _hdr, txn, error = prep.prep(OpCode.CREATE, CreateRequest("/p/s", b"", OPEN, 2), 5, 4, AUTH, 4, 4, True)
    assert error is None and txn.path == "/p/s0000000003"
