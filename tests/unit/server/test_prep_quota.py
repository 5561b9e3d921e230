"""enforceQuota in prep, as ZooKeeperServer.checkQuota: create and setData (in a multi too) past a
hard limit get QuotaExceeded before a txn is made; a soft limit only logs, rate-limited; nothing
is checked without enforceQuota; the refusals are counted per top-level znode."""

from __future__ import annotations

from typing import Any

from zkpy.config import ServerConfig
from zkpy.errors import Code
from zkpy.server.prep import Prep
from zkpy.tree.acl import OPEN_ACL_UNSAFE
from zkpy.tree.datatree import DataTree
from zkpy.tree.quota import limit_path, stat_path
from zkpy.wire.consts import OpCode
from zkpy.wire.multi import Op
from zkpy.wire.proto import CreateRequest, Id, SetDataRequest
from zkpy.wire.txn import CreateTxn, DeleteTxn, MultiTxn, TxnHeader, decode_txn

ACL = list(OPEN_ACL_UNSAFE)
AUTH = [Id("ip", "127.0.0.1")]


class Server:
    """A tree and a prep; each prepped txn is applied at once (as a one-at-a-time client sees it)."""

    def __init__(self, enforce: bool, limits: bytes) -> None:
        self.tree = DataTree()
        self.lines: list[str] = []
        self.prep = Prep(self.tree, ServerConfig(enforce_quota=enforce), self.lines.append)
        self.zxid = 0
        for path, data in (("/q", b"x"), ("/q/a", b"abc"), ("/zookeeper/quota/q", None),
                           (limit_path("/q"), limits), (stat_path("/q"), b"count=0,bytes=0")):
            self._apply(OpCode.CREATE, CreateTxn(path, data, ACL, False, -1))

    def _apply(self, op: int, txn: Any) -> None:
        self.zxid += 1
        self.tree.apply(TxnHeader(0, 0, self.zxid, self.zxid, op), txn)
        self.tree.events.clear()
        self.prep.applied(self.zxid)

    def write(self, op: int, request: Any, apply: bool = True) -> int:
        hdr, txn, error = self.prep.prep(op, request, 0, 1, AUTH, self.zxid + 1, self.zxid, True)
        if apply:
            self._apply(hdr.type, txn)
        else:
            self.zxid += 1
        return int(error.code) if error is not None else 0

    def create(self, path: str, data: bytes = b"", apply: bool = True) -> int:
        return self.write(OpCode.CREATE, CreateRequest(path, data, ACL, 0), apply)

    def set(self, path: str, data: bytes) -> int:
        return self.write(OpCode.SET_DATA, SetDataRequest(path, data, -1))

    def stats(self) -> bytes | None:
        return self.tree.nodes[stat_path("/q")].data


def test_a_hard_count_limit_refuses_the_create_past_it() -> None:
    s = Server(True, b"count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=3")
    assert s.create("/q/b") == 0
    assert s.create("/q/c") == Code.QUOTAEXCEEDED
    assert s.stats() == b"count=3,bytes=4"
    assert "/q/c" not in s.tree.nodes
    assert s.lines == ["Quota exceeded: /q [current count=4, hardCountLimit=3]"]
    assert s.prep.quota_exceeded == {"q": 1}
    assert s.set("/q/b", b"more bytes are fine") == 0  # no byte limit
    s._apply(OpCode.DELETE, DeleteTxn("/q/b"))
    assert s.create("/q/c") == 0  # room again


def test_a_hard_byte_limit_refuses_create_and_set_and_checks_before_the_version() -> None:
    s = Server(True, b"count=-1,bytes=-1=;byteHardLimit=6;countHardLimit=-1")
    assert s.create("/q/b", b"12") == 0  # 6 bytes
    assert s.create("/q/c", b"1") == Code.QUOTAEXCEEDED
    assert s.create("/q/c", b"") == 0  # no bytes: the count alone, and it has no limit
    assert s.set("/q/a", b"abcd") == Code.QUOTAEXCEEDED
    assert s.set("/q/a", b"ab") == 0  # shrinking is always allowed
    assert s.set("/q/a", b"abc") == 0
    # quota first, then the version, as ZooKeeper orders its checks
    assert s.write(OpCode.SET_DATA, SetDataRequest("/q/a", b"abcdefgh", 99)) == Code.QUOTAEXCEEDED
    assert s.lines[0] == "Quota exceeded: /q [current bytes=7, hardByteLimit=6]"


def test_a_soft_limit_logs_and_lets_the_write_through() -> None:
    s = Server(True, b"count=2,bytes=-1")
    for i in range(40):
        assert s.create(f"/q/n{i}") == 0
    assert s.lines[0] == "Quota exceeded: /q [current count=3, softCountLimit=2]"
    assert 1 <= len(s.lines) <= 25  # rate-limited: 40 lines in 40 ms
    assert s.prep.quota_exceeded == {}


def test_without_enforce_quota_nothing_is_checked_or_logged() -> None:
    s = Server(False, b"count=1,bytes=1=;byteHardLimit=1;countHardLimit=1")
    assert s.create("/q/b", b"lots of data") == 0
    assert s.set("/q/a", b"even more data") == 0
    assert s.lines == []
    assert s.stats() == b"count=3,bytes=27"  # counted all the same


def test_the_setdata_check_counts_the_outstanding_data_of_the_node() -> None:
    """The bytes a setData adds are measured against the node's data once its outstanding txns are
    applied (ZooKeeper's ChangeRecord data), while the usage is the applied tree's."""
    s = Server(True, b"count=-1,bytes=-1=;byteHardLimit=10;countHardLimit=-1")
    assert s.write(OpCode.SET_DATA, SetDataRequest("/q/a", b"abcdefghi", -1), apply=False) == 0  # +6: 10
    # from the outstanding 9 bytes to 3: -6; from the tree's 3 bytes it would be 0, and still pass
    assert s.write(OpCode.SET_DATA, SetDataRequest("/q/a", b"abc", -1), apply=False) == 0
    # the outstanding data is 3 bytes again: +7 on top of the applied usage 4 is 11 > 10
    assert s.write(OpCode.SET_DATA, SetDataRequest("/q/a", b"abcdefghij", -1), apply=False) == Code.QUOTAEXCEEDED


def test_a_multi_is_checked_op_by_op_against_the_applied_usage() -> None:
    s = Server(True, b"count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=3")
    # each create alone fits (2 + 1 <= 3): the multi passes, as in ZooKeeper, whose check reads the applied tree
    ops = [Op(OpCode.CREATE, CreateRequest(f"/q/m{i}", b"", ACL, 0)) for i in range(2)]
    hdr, txn, error = s.prep.prep(OpCode.MULTI, ops, 0, 1, AUTH, s.zxid + 1, 0, True)
    assert error is None and isinstance(txn, MultiTxn)
    s._apply(hdr.type, txn)
    assert s.stats() == b"count=4,bytes=4"
    ops = [Op(OpCode.SET_DATA, SetDataRequest("/q", b"y", -1)), Op(OpCode.CREATE, CreateRequest("/q/m9", b"", ACL, 0))]
    hdr, txn, error = s.prep.prep(OpCode.MULTI, ops, 0, 1, AUTH, s.zxid + 1, 0, True)
    assert isinstance(txn, MultiTxn)  # a failed multi is a multi of errors, the failing op's code in its place
    assert [t.type for t in txn.txns] == [OpCode.ERROR, OpCode.ERROR]
    assert [decode_txn(t.type, t.data).err for t in txn.txns] == [0, Code.QUOTAEXCEEDED]


def test_an_unreadable_quota_text_fails_the_write_as_zookeeper_fails_it() -> None:
    s = Server(True, b"count=many")
    assert s.create("/q/b") == Code.MARSHALLINGERROR
    s = Server(True, b"count=-1,bytes=-1")  # no limit at all: the stats are not even read
    s.tree.nodes[stat_path("/q")].data = b"garbage"
    assert s.create("/q/b") == 0
    s = Server(True, b"count=5,bytes=-1")
    s.tree.nodes[stat_path("/q")].data = b"garbage"
    assert s.create("/q/c") == Code.MARSHALLINGERROR
    assert Server(False, b"count=many").create("/q/b") == 0


def test_a_missing_stats_node_lets_the_write_through_with_a_line() -> None:
    s = Server(True, b"count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=1")
    s._apply(OpCode.DELETE, DeleteTxn(stat_path("/q")))
    assert s.create("/q/b") == 0
    assert s.lines == ["Missing node for stat /zookeeper/quota/q/zookeeper_stats"]
