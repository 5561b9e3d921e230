"""Golden bytes from kazoo: every request kazoo can build is byte-identical to zkpy's encoding,
zkpy decodes kazoo's bytes to the expected record, and kazoo's deserializers read zkpy's replies.

kazoo is an independent implementation of the same jute layouts, so agreement here is evidence
about the wire format, not about zkpy agreeing with itself. (kazoo writes "" as a null string,
which is why the samples below avoid empty strings where jute would keep them.)
"""

from __future__ import annotations

from typing import Any

import pytest
from kazoo.protocol import serialization as ks
from kazoo.security import ACL as KACL
from kazoo.security import Id as KId

from zkpy.wire.consts import OpCode
from zkpy.wire.jute import INT
from zkpy.wire.multi import Op, OpResult, read_multi_request, write_multi_request, write_multi_response
from zkpy.wire.proto import (
    ACL,
    AuthPacket,
    CheckVersionRequest,
    ConnectRequest,
    Create2Response,
    CreateRequest,
    DeleteRequest,
    ExistsRequest,
    GetACLRequest,
    GetACLResponse,
    GetChildren2Request,
    GetChildren2Response,
    GetChildrenRequest,
    GetChildrenResponse,
    GetDataRequest,
    GetDataResponse,
    GetSASLRequest,
    Id,
    ReconfigRequest,
    ReplyHeader,
    RequestHeader,
    SetACLRequest,
    SetDataRequest,
    SetSASLResponse,
    Stat,
    SyncRequest,
    SyncResponse,
    WatcherEvent,
)

K_OPEN = [KACL(31, KId("world", "anyone"))]
K_MIXED = [KACL(1, KId("digest", "user:hash=")), KACL(31, KId("ip", "10.0.0.0/8"))]
OPEN = [ACL(31, Id("world", "anyone"))]
MIXED = [ACL(1, Id("digest", "user:hash=")), ACL(31, Id("ip", "10.0.0.0/8"))]


def kazoo_frame(req: Any, xid: int) -> bytes:
    """The exact bytes kazoo's connection writes for ``req`` (ConnectionHandler._submit)."""
    body = bytearray()
    if req.type is not None:
        body += INT.pack(xid) + INT.pack(req.type)
    body += req.serialize()
    return INT.pack(len(body)) + bytes(body)


def zkpy_frame(op: int | None, record: Any, xid: int, extra: bytes = b"") -> bytes:
    body = b"" if op is None else RequestHeader(xid, op).to_bytes()
    body += (record.to_bytes() if record is not None else b"") + extra
    return INT.pack(len(body)) + body


# (kazoo request, opcode, zkpy record, bytes zkpy adds after the record)
CASES: dict[str, tuple[Any, int | None, Any, bytes]] = {
    "connect": (ks.Connect(0, 0x1234, 30000, 0, b"\0" * 16, False), None,
                ConnectRequest(0, 0x1234, 30000, 0, b"\0" * 16), b"\x00"),
    "connect_read_only_reconnect": (ks.Connect(0, 99, 10000, 0x0123456789ABCDEF, b"p" * 16, True), None,
                                    ConnectRequest(0, 99, 10000, 0x0123456789ABCDEF, b"p" * 16), b"\x01"),
    "close": (ks.Close(), OpCode.CLOSE_SESSION, None, b""),
    "ping": (ks.Ping(), OpCode.PING, None, b""),
    "create": (ks.Create("/a/b", b"data", K_OPEN, 0), OpCode.CREATE, CreateRequest("/a/b", b"data", OPEN, 0), b""),
    "create_ephemeral_sequential_mixed_acl": (ks.Create("/q/n-", b"\x00\xff", K_MIXED, 3), OpCode.CREATE,
                                              CreateRequest("/q/n-", b"\x00\xff", MIXED, 3), b""),
    "create_null_data": (ks.Create("/n", None, K_OPEN, 0), OpCode.CREATE, CreateRequest("/n", None, OPEN, 0), b""),
    "create2": (ks.Create2("/c2", b"x", K_OPEN, 4), OpCode.CREATE2, CreateRequest("/c2", b"x", OPEN, 4), b""),
    "delete": (ks.Delete("/a", 7), OpCode.DELETE, DeleteRequest("/a", 7), b""),
    "exists_watch": (ks.Exists("/a", True), OpCode.EXISTS, ExistsRequest("/a", True), b""),
    "get_data": (ks.GetData("/ünïcode/路径", False), OpCode.GET_DATA, GetDataRequest("/ünïcode/路径", False), b""),
    "set_data": (ks.SetData("/a", b"v" * 300, -1), OpCode.SET_DATA, SetDataRequest("/a", b"v" * 300, -1), b""),
    "get_acl": (ks.GetACL("/a"), OpCode.GET_ACL, GetACLRequest("/a"), b""),
    "set_acl": (ks.SetACL("/a", K_MIXED, 2), OpCode.SET_ACL, SetACLRequest("/a", MIXED, 2), b""),
    "get_children": (ks.GetChildren("/", True), OpCode.GET_CHILDREN, GetChildrenRequest("/", True), b""),
    "get_children2": (ks.GetChildren2("/x", False), OpCode.GET_CHILDREN2, GetChildren2Request("/x", False), b""),
    "sync": (ks.Sync("/s"), OpCode.SYNC, SyncRequest("/s"), b""),
    "reconfig": (ks.Reconfig("server.4=h:1:2", None, None, -1), OpCode.RECONFIG,
                 ReconfigRequest("server.4=h:1:2", None, None, -1), b""),
    "auth_digest": (ks.Auth(0, "digest", "user:secret"), OpCode.AUTH, AuthPacket(0, "digest", b"user:secret"), b""),
    "sasl": (ks.SASL(b"\x01token"), OpCode.SASL, GetSASLRequest(b"\x01token"), b""),
}


@pytest.mark.parametrize("name", list(CASES))
def test_kazoo_request_bytes_equal_zkpy_encoding(name: str) -> None:
    kreq, op, record, extra = CASES[name]
    xid = -4 if op == OpCode.AUTH else (-2 if op == OpCode.PING else 17)
    kbytes = kazoo_frame(kreq, xid)
    assert zkpy_frame(op, record, xid, extra) == kbytes
    # and zkpy decodes kazoo's bytes to the record, re-encoding them identically
    payload = kbytes[4:]
    if op is not None:
        hdr, pos = RequestHeader.read(payload, 0)
        assert (hdr.xid, hdr.type) == (xid, op)
        payload = payload[pos:]
    if record is not None:
        decoded, end = type(record).read(payload, 0)
        assert decoded == record
        assert payload[end:] == extra
        assert decoded.to_bytes() + extra == payload


def test_kazoo_transaction_equals_zkpy_multi() -> None:
    ops = [ks.Create("/t", b"1", K_OPEN, 0), ks.CheckVersion("/t", 0), ks.SetData("/t", b"2", -1),
           ks.Delete("/t", -1), ks.Create2("/t2", None, K_MIXED, 2)]
    kbytes = kazoo_frame(ks.Transaction(ops), 5)
    zops = [Op(OpCode.CREATE, CreateRequest("/t", b"1", OPEN, 0)), Op(OpCode.CHECK, CheckVersionRequest("/t", 0)),
            Op(OpCode.SET_DATA, SetDataRequest("/t", b"2", -1)), Op(OpCode.DELETE, DeleteRequest("/t", -1)),
            Op(OpCode.CREATE2, CreateRequest("/t2", None, MIXED, 2))]
    body = bytearray(RequestHeader(5, OpCode.MULTI).to_bytes())
    write_multi_request(body, zops)
    assert INT.pack(len(body)) + bytes(body) == kbytes
    assert read_multi_request(kbytes[12:], 0) == (zops, len(kbytes) - 12)


# ---- zkpy's replies through kazoo's deserializers ----

STAT = Stat(0x100000001, 0x100000005, 1_700_000_000_000, 1_700_000_000_123, 3, 2, 1, 0x0123456789ABCDEF, 5, 2,
            0x100000004)


def _kstat(stat: Stat) -> tuple[int, ...]:
    return (stat.czxid, stat.mzxid, stat.ctime, stat.mtime, stat.version, stat.cversion, stat.aversion,
            stat.ephemeralOwner, stat.dataLength, stat.numChildren, stat.pzxid)


def test_kazoo_reads_zkpy_replies() -> None:
    assert ks.ReplyHeader.deserialize(ReplyHeader(9, 0x100000005, -101).to_bytes(), 0) == ((9, 0x100000005, -101), 16)
    assert ks.Watch.deserialize(WatcherEvent(3, 3, "/w").to_bytes(), 0) == ((3, 3, "/w"), 14)
    data, stat = ks.GetData.deserialize(GetDataResponse(b"hello", STAT).to_bytes(), 0)
    assert (data, tuple(stat)) == (b"hello", _kstat(STAT))
    assert tuple(ks.Exists.deserialize(STAT.to_bytes(), 0)) == _kstat(STAT)
    assert tuple(ks.SetData.deserialize(STAT.to_bytes(), 0)) == _kstat(STAT)
    assert ks.GetChildren.deserialize(GetChildrenResponse(["a", "b"]).to_bytes(), 0) == ["a", "b"]
    children, stat = ks.GetChildren2.deserialize(GetChildren2Response(["c"], STAT).to_bytes(), 0)
    assert (children, tuple(stat)) == (["c"], _kstat(STAT))
    acls, stat = ks.GetACL.deserialize(GetACLResponse(MIXED, STAT).to_bytes(), 0)
    assert [(a.perms, a.id.scheme, a.id.id) for a in acls] == [(1, "digest", "user:hash="), (31, "ip", "10.0.0.0/8")]
    path, stat = ks.Create2.deserialize(Create2Response("/p", STAT).to_bytes(), 0)
    assert (path, tuple(stat)) == ("/p", _kstat(STAT))
    assert ks.Sync.deserialize(SyncResponse("/s").to_bytes(), 0) == "/s"
    assert ks.SASL.deserialize(SetSASLResponse(b"tok").to_bytes(), 0) == (b"tok", 7)


def test_kazoo_reads_a_zkpy_multi_response() -> None:
    out = bytearray()
    write_multi_response(out, [OpResult(OpCode.CREATE, 0, path="/t"), OpResult(OpCode.CHECK),
                               OpResult(OpCode.SET_DATA, 0, stat=STAT), OpResult(OpCode.DELETE)])
    results = ks.Transaction.deserialize(bytes(out), 0)
    assert results[0] == "/t" and results[1] is True and tuple(results[2]) == _kstat(STAT) and results[3] is True
    out = bytearray()
    write_multi_response(out, [OpResult(OpCode.ERROR, 0), OpResult(OpCode.ERROR, -101)])
    errors = ks.Transaction.deserialize(bytes(out), 0)
    assert [type(e).__name__ for e in errors] == ["RolledBackError", "NoNodeError"]
