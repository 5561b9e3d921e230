"""Multi-op framing: MultiOperationRecord (request) and MultiResponse (reply).

    request  := (MultiHeader(type, done=false, err=-1) op-record)* MultiHeader(-1, true, -1)
    response := (MultiHeader(type, done=false, err) result-record?)* MultiHeader(-1, true, -1)

An error result has type -1 and carries ErrorResponse(err); delete and check results
have no record.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from zkpy.errors import ProtocolError

from .consts import OpCode
from .jute import Record
from .proto import (
    CheckVersionRequest,
    Create2Response,
    CreateRequest,
    CreateResponse,
    CreateTTLRequest,
    DeleteRequest,
    ErrorResponse,
    GetChildrenRequest,
    GetChildrenResponse,
    GetDataRequest,
    GetDataResponse,
    MultiHeader,
    SetDataRequest,
    SetDataResponse,
    Stat,
)

OP_RECORDS: dict[int, type[Record]] = {
    OpCode.CREATE: CreateRequest,
    OpCode.CREATE2: CreateRequest,
    OpCode.CREATE_CONTAINER: CreateRequest,
    OpCode.CREATE_TTL: CreateTTLRequest,
    OpCode.DELETE: DeleteRequest,
    OpCode.SET_DATA: SetDataRequest,
    OpCode.CHECK: CheckVersionRequest,
    OpCode.GET_CHILDREN: GetChildrenRequest,
    OpCode.GET_DATA: GetDataRequest,
}

_END = MultiHeader(-1, True, -1)
_HEADER = struct.Struct(">i?i")  # MultiHeader's fields, unpacked without the record on the read path


@dataclass(frozen=True, slots=True)
class Op:
    """One operation of a multi: its opcode and request record; ``body``, on a request read from
    the wire, is the record's bytes (a server logs some txns straight from them)."""

    type: int
    request: Any
    body: bytes | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class OpResult:
    """One result of a multi: opcode (-1 for an error), error code, and the result fields."""

    type: int
    err: int = 0
    path: str | None = None
    stat: Stat | None = None
    data: bytes | None = None
    children: list[str] | None = None


def read_multi_request(buf: bytes | memoryview, pos: int) -> tuple[list[Op], int]:
    """The ops up to the end marker, each with its record's bytes, and the position after it."""
    ops: list[Op] = []
    header = _HEADER.unpack_from
    records = OP_RECORDS
    while True:
        op_type, done, _err = header(buf, pos)
        pos += 9
        if done:
            return ops, pos
        cls = records.get(op_type)
        if cls is None:
            raise ProtocolError(f"invalid type of op {op_type} in multi")
        rec, end = cls.read(buf, pos)
        ops.append(Op(op_type, rec, bytes(buf[pos:end])))
        pos = end


def write_multi_request(out: bytearray, ops: list[Op]) -> None:
    for op in ops:
        MultiHeader(op.type, False, -1).write(out)
        op.request.write(out)
    _END.write(out)


def write_multi_response(out: bytearray, results: list[OpResult]) -> None:
    for r in results:
        t = r.type
        MultiHeader(t, False, r.err).write(out)
        if t == OpCode.CREATE:
            CreateResponse(r.path).write(out)  # type: ignore[arg-type]
        elif t in (OpCode.CREATE2, OpCode.CREATE_TTL, OpCode.CREATE_CONTAINER):
            Create2Response(r.path, r.stat).write(out)  # type: ignore[arg-type]
        elif t == OpCode.SET_DATA:
            SetDataResponse(r.stat).write(out)  # type: ignore[arg-type]
        elif t == OpCode.GET_DATA:
            GetDataResponse(r.data, r.stat).write(out)  # type: ignore[arg-type]
        elif t == OpCode.GET_CHILDREN:
            GetChildrenResponse(r.children or []).write(out)
        elif t == OpCode.ERROR:
            ErrorResponse(r.err).write(out)
    _END.write(out)


def read_multi_response(buf: bytes | memoryview, pos: int) -> tuple[list[OpResult], int]:
    results: list[OpResult] = []
    while True:
        h, pos = MultiHeader.read(buf, pos)
        if h.done:
            return results, pos
        t = h.type
        if t == OpCode.CREATE:
            r, pos = CreateResponse.read(buf, pos)
            results.append(OpResult(t, 0, path=r.path))
        elif t in (OpCode.CREATE2, OpCode.CREATE_TTL, OpCode.CREATE_CONTAINER):
            r2, pos = Create2Response.read(buf, pos)
            results.append(OpResult(t, 0, path=r2.path, stat=r2.stat))
        elif t == OpCode.SET_DATA:
            r3, pos = SetDataResponse.read(buf, pos)
            results.append(OpResult(t, 0, stat=r3.stat))
        elif t == OpCode.GET_DATA:
            r4, pos = GetDataResponse.read(buf, pos)
            results.append(OpResult(t, 0, data=r4.data, stat=r4.stat))
        elif t == OpCode.GET_CHILDREN:
            r5, pos = GetChildrenResponse.read(buf, pos)
            results.append(OpResult(t, 0, children=r5.children))
        elif t in (OpCode.DELETE, OpCode.CHECK):
            results.append(OpResult(t, 0))
        elif t == OpCode.ERROR:
            e, pos = ErrorResponse.read(buf, pos)
            results.append(OpResult(t, e.err))
        else:
            raise ProtocolError(f"invalid type of result {t} in multi response")
