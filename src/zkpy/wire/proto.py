"""Jute records of the 3.8 client protocol and data model (zookeeper.jute, modules data and proto).

Field names and order mirror zookeeper.jute; each class is the jute class of the same name.
"""

from __future__ import annotations

from typing import ClassVar

from .jute import Bool, Buffer, Int, Long, Record, UString, jute_record


@jute_record
class Id(Record):
    scheme: UString
    id: UString


@jute_record
class ACL(Record):
    perms: Int
    id: Id

    JUTE_VECTOR_MEMO: ClassVar[bool] = True  # ACL lists repeat from request to request (jute._vector_codec)


@jute_record
class Stat(Record):
    czxid: Long
    mzxid: Long
    ctime: Long
    mtime: Long
    version: Int
    cversion: Int
    aversion: Int
    ephemeralOwner: Long
    dataLength: Int
    numChildren: Int
    pzxid: Long


@jute_record
class StatPersisted(Record):
    czxid: Long
    mzxid: Long
    ctime: Long
    mtime: Long
    version: Int
    cversion: Int
    aversion: Int
    ephemeralOwner: Long
    pzxid: Long


@jute_record
class ClientInfo(Record):
    authScheme: UString
    user: UString


@jute_record
class ConnectRequest(Record):
    protocolVersion: Int
    lastZxidSeen: Long
    timeOut: Int
    sessionId: Long
    passwd: Buffer


@jute_record
class ConnectResponse(Record):
    protocolVersion: Int
    timeOut: Int
    sessionId: Long
    passwd: Buffer


@jute_record
class SetWatches(Record):
    relativeZxid: Long
    dataWatches: list[UString]
    existWatches: list[UString]
    childWatches: list[UString]


@jute_record
class SetWatches2(Record):
    relativeZxid: Long
    dataWatches: list[UString]
    existWatches: list[UString]
    childWatches: list[UString]
    persistentWatches: list[UString]
    persistentRecursiveWatches: list[UString]


@jute_record
class RequestHeader(Record):
    xid: Int
    type: Int


@jute_record
class MultiHeader(Record):
    type: Int
    done: Bool
    err: Int


@jute_record
class AuthPacket(Record):
    type: Int
    scheme: UString
    auth: Buffer


@jute_record
class ReplyHeader(Record):
    xid: Int
    zxid: Long
    err: Int


@jute_record
class GetDataRequest(Record):
    path: UString
    watch: Bool


@jute_record
class SetDataRequest(Record):
    path: UString
    data: Buffer
    version: Int


@jute_record
class ReconfigRequest(Record):
    joiningServers: UString
    leavingServers: UString
    newMembers: UString
    curConfigId: Long


@jute_record
class SetDataResponse(Record):
    stat: Stat


@jute_record
class GetSASLRequest(Record):
    token: Buffer


@jute_record
class SetSASLRequest(Record):
    token: Buffer


@jute_record
class SetSASLResponse(Record):
    token: Buffer


@jute_record
class CreateRequest(Record):
    path: UString
    data: Buffer
    acl: list[ACL]
    flags: Int


@jute_record
class CreateTTLRequest(Record):
    path: UString
    data: Buffer
    acl: list[ACL]
    flags: Int
    ttl: Long


@jute_record
class DeleteRequest(Record):
    path: UString
    version: Int


@jute_record
class GetChildrenRequest(Record):
    path: UString
    watch: Bool


@jute_record
class GetAllChildrenNumberRequest(Record):
    path: UString


@jute_record
class GetChildren2Request(Record):
    path: UString
    watch: Bool


@jute_record
class CheckVersionRequest(Record):
    path: UString
    version: Int


@jute_record
class GetMaxChildrenRequest(Record):
    path: UString


@jute_record
class GetMaxChildrenResponse(Record):
    max: Int


@jute_record
class SetMaxChildrenRequest(Record):
    path: UString
    max: Int


@jute_record
class SyncRequest(Record):
    path: UString


@jute_record
class SyncResponse(Record):
    path: UString


@jute_record
class GetACLRequest(Record):
    path: UString


@jute_record
class SetACLRequest(Record):
    path: UString
    acl: list[ACL]
    version: Int


@jute_record
class SetACLResponse(Record):
    stat: Stat


@jute_record
class AddWatchRequest(Record):
    path: UString
    mode: Int


@jute_record
class WatcherEvent(Record):
    type: Int
    state: Int
    path: UString


@jute_record
class ErrorResponse(Record):
    err: Int


@jute_record
class CreateResponse(Record):
    path: UString


@jute_record
class Create2Response(Record):
    path: UString
    stat: Stat


@jute_record
class ExistsRequest(Record):
    path: UString
    watch: Bool


@jute_record
class ExistsResponse(Record):
    stat: Stat


@jute_record
class GetDataResponse(Record):
    data: Buffer
    stat: Stat


@jute_record
class GetChildrenResponse(Record):
    children: list[UString]


@jute_record
class GetAllChildrenNumberResponse(Record):
    totalNumber: Int


@jute_record
class GetChildren2Response(Record):
    children: list[UString]
    stat: Stat


@jute_record
class GetACLResponse(Record):
    acl: list[ACL]
    stat: Stat


@jute_record
class CheckWatchesRequest(Record):
    path: UString
    type: Int


@jute_record
class RemoveWatchesRequest(Record):
    path: UString
    type: Int


@jute_record
class GetEphemeralsRequest(Record):
    prefixPath: UString


@jute_record
class GetEphemeralsResponse(Record):
    ephemerals: list[UString]


@jute_record
class WhoAmIResponse(Record):
    clientInfo: list[ClientInfo]


# deleteContainer carries its path as raw UTF-8 bytes, not as a jute record (PrepRequestProcessor).
