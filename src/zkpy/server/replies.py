"""The bytes of the pipeline's replies (pure): a ReplyHeader and the op's response record, packed
straight from what the tree's apply returned (``TxnResult``: its Stat is already the bytes
``Node.stat_bytes`` packed at apply time), as ZooKeeper's FinalRequestProcessor answers.

Byte grammar (zookeeper.jute)::

    reply      := ReplyHeader(xid:int, zxid:long, err:int) response?
    response   := create: path:ustring | create2, createTTL, createContainer: path:ustring Stat
                | setData, setACL: Stat | reconfig: data:buffer Stat | multi: MultiResponse
                | (nothing for delete, closeSession, check, an error)
    MultiResponse := (MultiHeader(type:int, done:bool, err:int) result)* MultiHeader(-1, true, -1)

A reply goes out framed: its length (an int) in front (``framed``).
"""

from __future__ import annotations

import struct
from typing import Any

from zkpy.tree.datatree import TxnResult
from zkpy.wire.consts import OpNum, Xid
from zkpy.wire.jute import INT

REPLY_HEADER = struct.Struct(">iqi")  # xid, zxid, err
FRAMED_REPLY_HEADER = struct.Struct(">iiqi")  # the frame's length, then the reply header: a read's reply is copied once
_MULTI_HEADER = struct.Struct(">i?i")  # MultiHeader: type, done, err
_MULTI_ERROR = struct.Struct(">i?ii")  # an ErrorResult: its MultiHeader and ErrorResponse
_MULTI_END = _MULTI_HEADER.pack(-1, True, -1)


def framed(payload: bytes) -> bytes:
    """A reply (or a notification) as it goes out: its length, then its bytes."""
    return INT.pack(len(payload)) + payload


def header(xid: int, zxid: int, err: int) -> bytes:
    """A reply of a header alone (an error, or an op with no response record)."""
    return REPLY_HEADER.pack(xid, zxid, err)


def pong(zxid: int) -> bytes:
    return REPLY_HEADER.pack(Xid.PING, zxid, 0)


def write_reply(xid: int, zxid: int, op: int, error: int, rc: TxnResult, txn: Any) -> bytes:
    """The reply to an applied write: ``error`` (non-zero) is the request's own failure (prep
    refused it, or a learner answers its client's error whatever the leader says); otherwise the
    result of applying the txn decides."""
    if error:
        return REPLY_HEADER.pack(xid, zxid, error)
    if op == OpNum.MULTI:
        out = bytearray(REPLY_HEADER.pack(xid, zxid, 0))
        multi_results(out, rc.multi or [])
        return bytes(out)
    if rc.err:
        return REPLY_HEADER.pack(xid, zxid, rc.err)
    head = REPLY_HEADER.pack(xid, zxid, 0)
    if op == OpNum.SET_DATA or op == OpNum.SET_ACL:
        return head + rc.stat  # type: ignore[operator]
    if op == OpNum.CREATE:
        path = rc.path.encode("utf-8")  # type: ignore[union-attr]
        return head + INT.pack(len(path)) + path
    if op in (OpNum.CREATE2, OpNum.CREATE_TTL, OpNum.CREATE_CONTAINER):
        path = rc.path.encode("utf-8")  # type: ignore[union-attr]
        return head + INT.pack(len(path)) + path + rc.stat  # type: ignore[operator]
    if op == OpNum.RECONFIG:  # the new config and its stat, as FinalRequestProcessor answers
        data: bytes = txn.data
        return head + INT.pack(len(data)) + data + rc.stat  # type: ignore[operator]
    return head


def multi_results(out: bytearray, results: list[TxnResult]) -> None:
    """A multi's results as MultiResponse carries them (``wire.multi.write_multi_response``'s
    layout, packed straight from the results: one header and at most a path and a Stat per op)."""
    for sub in results:
        t = sub.type
        if t == OpNum.ERROR:
            out += _MULTI_ERROR.pack(OpNum.ERROR, False, sub.err, sub.err)
            continue
        if t in (OpNum.CREATE_CONTAINER, OpNum.CREATE_TTL):
            t = OpNum.CREATE2  # ZooKeeper's CreateResult with a stat is always typed create2
        out += _MULTI_HEADER.pack(t, False, 0)
        if t == OpNum.CREATE or t == OpNum.CREATE2:
            path = sub.path.encode("utf-8")  # type: ignore[union-attr]
            out += INT.pack(len(path))
            out += path
            if t == OpNum.CREATE2:
                out += sub.stat  # type: ignore[arg-type]
        elif t == OpNum.SET_DATA:
            out += sub.stat  # type: ignore[arg-type]
    out += _MULTI_END
