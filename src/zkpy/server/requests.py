"""A client request as the pipeline takes it in: which ops a client may send, how a write's body
decodes, and the records a request becomes while it waits in its session's queue (pure).

A request's frame is a RequestHeader (xid, op) and the op's record. ``VALID_OPS`` is what 3.8's
Request.isValid accepts from a client (anything else is Unimplemented and closes the
connection); ``decode_write`` reads a write's record as ZooKeeper's PrepRequestProcessor reads
it (a malformed one is a MarshallingError for that request only). While in flight a request is
a `Proposal` (a txn this pipeline prepped), a `Forwarded` request (a learner's, answered when
the leader's txn commits) or a `QueuedRead` (a read or sync behind the session's writes).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from zkpy.errors import ProtocolError, ZookeeperError
from zkpy.server.connection import Connection
from zkpy.server.outputs import Propose
from zkpy.wire.consts import CreateMode, OpNum
from zkpy.wire.jute import INT
from zkpy.wire.multi import Op, read_multi_request
from zkpy.wire.proto import (
    CreateRequest,
    CreateTTLRequest,
    DeleteRequest,
    ReconfigRequest,
    SetACLRequest,
    SetDataRequest,
)

REQUEST_HEADER = struct.Struct(">ii")  # RequestHeader: xid, type

WRITE_RECORDS: dict[int, Any] = {  # the request record of each write with one (multi and the rest are read apart)
    OpNum.CREATE: CreateRequest,
    OpNum.CREATE2: CreateRequest,
    OpNum.CREATE_CONTAINER: CreateRequest,
    OpNum.CREATE_TTL: CreateTTLRequest,
    OpNum.DELETE: DeleteRequest,
    OpNum.SET_DATA: SetDataRequest,
    OpNum.SET_ACL: SetACLRequest,
    OpNum.RECONFIG: ReconfigRequest,
}

# Request.isValid of 3.8: what a client may send. Anything else is Unimplemented and closes.
VALID_OPS = frozenset({
    OpNum.CLOSE_SESSION, OpNum.CREATE, OpNum.CREATE2, OpNum.CREATE_TTL, OpNum.CREATE_CONTAINER,
    OpNum.CREATE_SESSION, OpNum.DELETE, OpNum.DELETE_CONTAINER, OpNum.EXISTS, OpNum.GET_ACL,
    OpNum.GET_CHILDREN, OpNum.GET_ALL_CHILDREN_NUMBER, OpNum.GET_CHILDREN2, OpNum.GET_DATA,
    OpNum.GET_EPHEMERALS, OpNum.MULTI, OpNum.MULTI_READ, OpNum.PING, OpNum.RECONFIG, OpNum.SET_ACL,
    OpNum.SET_DATA, OpNum.SET_WATCHES, OpNum.SET_WATCHES2, OpNum.SYNC, OpNum.CHECK_WATCHES,
    OpNum.REMOVE_WATCHES, OpNum.ADD_WATCH, OpNum.WHO_AM_I,
})

OP_NAMES: dict[int, str] = {  # as the cons four-letter word names a connection's last op
    OpNum.PING: "PING", OpNum.CREATE_SESSION: "SESS", OpNum.MULTI: "MULT", OpNum.MULTI_READ: "MLTR",
    OpNum.CREATE: "CREA", OpNum.CREATE2: "CREA", OpNum.CREATE_TTL: "CREA", OpNum.CREATE_CONTAINER: "CREA",
    OpNum.DELETE: "DELE", OpNum.DELETE_CONTAINER: "DELE", OpNum.SET_DATA: "SETD", OpNum.RECONFIG: "RECO",
    OpNum.SET_ACL: "SETA", OpNum.CLOSE_SESSION: "CLOS", OpNum.SYNC: "SYNC", OpNum.CHECK: "CHEC",
    OpNum.EXISTS: "EXIS", OpNum.GET_DATA: "GETD", OpNum.SET_WATCHES: "SETW", OpNum.SET_WATCHES2: "STW2",
    OpNum.ADD_WATCH: "ADDW", OpNum.GET_ACL: "GETA", OpNum.GET_CHILDREN: "GETC", OpNum.GET_CHILDREN2: "GETC",
    OpNum.GET_ALL_CHILDREN_NUMBER: "GETACN", OpNum.CHECK_WATCHES: "CHKW", OpNum.REMOVE_WATCHES: "REMW",
    OpNum.WHO_AM_I: "HOMI", OpNum.GET_EPHEMERALS: "GETE",
}

DECODE_ERRORS = (ProtocolError, ValueError, IndexError, struct.error, KeyError)  # what a malformed record raises


def decode_write(op: int, body: bytes) -> Any:
    """The request record of a write: the record itself, a multi's ops (as ZooKeeper reads them),
    a deleteContainer's path, a createSession's timeout, None for closeSession. Raises one of
    ``DECODE_ERRORS`` when the body does not decode."""
    if op == OpNum.MULTI:
        request: Any = _as_zookeeper_reads_multi(read_multi_request(body, 0)[0])
    elif op == OpNum.DELETE_CONTAINER:
        request = body.decode("utf-8", "replace")
    elif op == OpNum.CREATE_SESSION:
        request = INT.unpack_from(body, 0)[0]
    elif op == OpNum.CLOSE_SESSION:
        request = None
    else:
        request = WRITE_RECORDS[op].read(body, 0)[0]
    _check_null_paths(op, request)
    return request


_CREATES = frozenset({OpNum.CREATE, OpNum.CREATE2, OpNum.CREATE_CONTAINER, OpNum.CREATE_TTL})
_TTL_FLAGS = frozenset({int(CreateMode.PERSISTENT_WITH_TTL), int(CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL)})
_CONTAINER_FLAGS = int(CreateMode.CONTAINER)


def _as_zookeeper_reads_multi(ops: list[Op]) -> list[Op]:
    """A multi's create ops as ZooKeeper's MultiOperationRecord reads them: the op's type comes
    from its flags, not from its header (create2 is a plain create; flags 4 make a container
    whatever the header said). TTL flags need a createTTL header, else the multi is malformed.
    Without this, the txn type and the txn record of a sub-op could disagree. ``ops`` (just read,
    owned by the caller) is changed in place and returned."""
    for i, o in enumerate(ops):
        if o.type in _CREATES:
            flags = o.request.flags
            if flags in _TTL_FLAGS:
                if o.type != OpNum.CREATE_TTL:
                    raise ProtocolError(f"TTL flags {flags} on a multi op of type {o.type}")
                kind = OpNum.CREATE_TTL
            elif flags == _CONTAINER_FLAGS:
                kind = OpNum.CREATE_CONTAINER
            else:
                kind = OpNum.CREATE
            if kind != o.type:
                ops[i] = Op(kind, o.request, o.body)
    return ops


_NULL_PATH_FAILS = frozenset({OpNum.CREATE, OpNum.CREATE2, OpNum.CREATE_CONTAINER, OpNum.CREATE_TTL,
                              OpNum.DELETE})


def _check_null_paths(op: int, request: Any) -> None:
    """ZooKeeper fails these writes, and a multi with any null path, with a marshalling error
    (setData, setACL and check validate the path instead: BadArguments)."""
    if op == OpNum.MULTI:
        if any(o.request.path is None for o in request):
            raise ProtocolError("null path in multi")
    elif op in _NULL_PATH_FAILS and request.path is None:
        raise ProtocolError("null path")


# ---- what a request is while it waits


@dataclass(slots=True, eq=False)
class Proposal(Propose):
    """A txn waiting to be persisted and applied, and whom to answer once it is; handed over
    itself as the `Propose` output."""

    conn: Connection | None
    xid: int
    op: int
    error: ZookeeperError | None
    received_ms: int
    subs: list[tuple[int, Any]] | None = None  # a multi's ops as prep built them (Prep.last_subs)


@dataclass(slots=True)
class Forwarded:
    """A learner's client write (or sync) sent to the leader, answered when its txn commits."""

    conn: Connection
    xid: int
    op: int
    received_ms: int
    body: bytes = b""  # a sync's request (its path), read when it is answered
    done: bool = False  # a sync: the leader's SYNC arrived
    error: ZookeeperError | None = None  # what the client is answered whatever the leader says (not a multi)


@dataclass(slots=True)
class QueuedRead:
    conn: Connection
    xid: int
    op: int
    body: bytes
    received_ms: int
    after_zxid: int = 0  # a sync waits until every txn proposed before it is applied
    owed: int = 0  # bytes its reply is expected to take (counted in its connection's ``owed``)
    quorum_token: int = 0  # zkpy.quorumSync on a leader: ... and until a quorum confirmed the leadership
