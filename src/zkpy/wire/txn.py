"""Jute records of transactions (zookeeper.jute, module txn): what the log stores and replicas apply.

Also ``FileHeader`` (module persistence), the 16-byte header of txn log and snapshot files,
and the magic numbers those files start with.
"""

from __future__ import annotations

from .jute import Bool, Buffer, Int, Long, Record, UString, jute_record
from .proto import ACL


@jute_record
class TxnDigest(Record):
    version: Int
    treeDigest: Long


@jute_record
class TxnHeader(Record):
    clientId: Long
    cxid: Int
    zxid: Long
    time: Long
    type: Int


@jute_record
class CreateTxnV0(Record):
    path: UString
    data: Buffer
    acl: list[ACL]
    ephemeral: Bool


@jute_record
class CreateTxn(Record):
    path: UString
    data: Buffer
    acl: list[ACL]
    ephemeral: Bool
    parentCVersion: Int


@jute_record
class CreateTTLTxn(Record):
    path: UString
    data: Buffer
    acl: list[ACL]
    parentCVersion: Int
    ttl: Long


@jute_record
class CreateContainerTxn(Record):
    path: UString
    data: Buffer
    acl: list[ACL]
    parentCVersion: Int


@jute_record
class DeleteTxn(Record):
    path: UString


@jute_record
class SetDataTxn(Record):
    path: UString
    data: Buffer
    version: Int


@jute_record
class CheckVersionTxn(Record):
    path: UString
    version: Int


@jute_record
class SetACLTxn(Record):
    path: UString
    acl: list[ACL]
    version: Int


@jute_record
class SetMaxChildrenTxn(Record):
    path: UString
    max: Int


@jute_record
class CreateSessionTxn(Record):
    timeOut: Int


@jute_record
class CloseSessionTxn(Record):
    paths2Delete: list[UString]


@jute_record
class ErrorTxn(Record):
    err: Int


@jute_record
class Txn(Record):
    type: Int
    data: Buffer


@jute_record
class MultiTxn(Record):
    txns: list[Txn]


@jute_record
class FileHeader(Record):
    """zookeeper.jute, module org.apache.zookeeper.server.persistence."""

    magic: Int
    version: Int
    dbid: Long


TXNLOG_MAGIC = int.from_bytes(b"ZKLG", "big")  # FileTxnLog.TXNLOG_MAGIC, 0x5A4B4C47
SNAP_MAGIC = int.from_bytes(b"ZKSN", "big")  # FileSnap.SNAP_MAGIC, 0x5A4B534E
TXNLOG_VERSION = 2  # FileTxnLog.VERSION
SNAP_VERSION = 2  # FileSnap.VERSION


TXN_RECORDS: dict[int, type[Record]] = {
    1: CreateTxn,  # create
    15: CreateTxn,  # create2
    19: CreateContainerTxn,
    21: CreateTTLTxn,
    2: DeleteTxn,
    20: DeleteTxn,  # deleteContainer
    5: SetDataTxn,
    7: SetACLTxn,
    13: CheckVersionTxn,
    -1: ErrorTxn,
    -10: CreateSessionTxn,
    -11: CloseSessionTxn,
    14: MultiTxn,
}


def decode_txn(op: int, data: bytes | None) -> Record:
    """The txn record of type ``op`` from its serialized bytes (a multi's inner Txn)."""
    return TXN_RECORDS[op].from_bytes(data or b"")
