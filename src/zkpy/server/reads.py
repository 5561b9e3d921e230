"""The read ops of the request pipeline (FinalRequestProcessor's reads), over the tree alone.

A read runs against the tree as it is when its turn comes (``ServerCore`` queues it behind
its session's writes); it checks READ on the node it names, leaves the watch it asks for, and
answers with ZooKeeper's error codes. ``setWatches`` fires at once what changed since the
client's last zxid, through ``notify``, before its reply.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Collection
from typing import Any

from zkpy.errors import (
    BadArgumentsError,
    Code,
    MarshallingError,
    NoNodeError,
    NoWatcherError,
    ProtocolError,
    ZookeeperError,
)
from zkpy.server.connection import Connection
from zkpy.server.requests import OP_NAMES
from zkpy.tree.acl import check_acl, has_permission
from zkpy.tree.datatree import DataTree, Node
from zkpy.tree.watches import PERSISTENT, RECURSIVE
from zkpy.wire.consts import AddWatchMode, EventType, KeeperState, OpCode, PermNum, WatcherType, Xid
from zkpy.wire.jute import INT, read_ustring
from zkpy.wire.multi import OpResult, read_multi_request, write_multi_response
from zkpy.wire.proto import (
    ACL,
    AddWatchRequest,
    CheckWatchesRequest,
    ClientInfo,
    ErrorResponse,
    ExistsRequest,
    GetACLRequest,
    GetACLResponse,
    GetAllChildrenNumberRequest,
    GetAllChildrenNumberResponse,
    GetChildren2Request,
    GetChildren2Response,
    GetChildrenRequest,
    GetChildrenResponse,
    GetEphemeralsRequest,
    GetEphemeralsResponse,
    Id,
    RemoveWatchesRequest,
    ReplyHeader,
    SetWatches,
    SetWatches2,
    SyncRequest,
    SyncResponse,
    WatcherEvent,
    WhoAmIResponse,
)

Notify = Callable[[bytes], None]  # a watch notification (header and event) for the reading connection

_NOTIFY_HEADER = ReplyHeader(Xid.NOTIFICATION, -1, 0).to_bytes()


def event_payload(etype: int, path: str) -> bytes:
    """A watch notification as the client reads it: the NOTIFICATION reply header, then the event."""
    return _NOTIFY_HEADER + WatcherEvent(etype, KeeperState.SYNC_CONNECTED, path).to_bytes()


def refusal(conn: Connection, op: int, exc: Exception) -> tuple[int, tuple[str, str] | None]:
    """What a read that raised ``exc`` is answered with (ZooKeeper's error code), and the (kind,
    line) to log when it was refused with BadArguments or did not decode (MarshallingError);
    an exception of any other kind is a bug, raised again."""
    if isinstance(exc, ZookeeperError):
        err = int(exc.code)
        if err == Code.BADARGUMENTS:
            return err, ("refused", f"{OP_NAMES.get(op, op)} from {conn.ip}:{conn.port} refused with BADARGUMENTS")
        return err, None
    if isinstance(exc, (ProtocolError, ValueError, IndexError, struct.error)):
        return int(Code.MARSHALLINGERROR), (
            "undecodable", f"failed to process {OP_NAMES.get(op, op)} from {conn.ip}:{conn.port}: {exc}")
    raise exc


def run_read(tree: DataTree, conn: Connection, op: int, body: bytes, notify: Notify,
             unnamed: Collection[str] = ()) -> bytes:
    """The reply body of read ``op`` (raises the ZookeeperError to answer with, or ProtocolError
    for a malformed request); a watch it leaves is registered on ``tree`` for ``conn``.
    ``unnamed``: schemes no auth provider is registered for, whose ids whoAmI shows without a
    user name (AuthUtil.getUser: a sasl id without SASLAuthenticationProvider)."""
    if op == OpCode.GET_DATA:
        path, pos = read_ustring(body, 0)
        watch = body[pos]
        node = _readable(tree, path, conn)
        if watch:
            tree.add_watch(path, conn.conn_id, data=True)
        data = node.data
        if data is None:
            return b"\xff\xff\xff\xff" + node.stat_bytes()
        return b"".join((INT.pack(len(data)), data, node.stat_bytes()))  # (one copy of the data, not two)
    if op == OpCode.EXISTS:
        req2 = ExistsRequest.read(body, 0)[0]
        path = req2.path
        if path is not None and "\0" in path:
            raise BadArgumentsError()
        maybe = _node_at(tree, path)
        if maybe is not None:
            check_acl(maybe.acl, PermNum.READ, conn.auth)
        if req2.watch:
            tree.add_watch(path, conn.conn_id, data=True)
        if maybe is None:
            raise NoNodeError()
        return maybe.stat_bytes()
    if op in (OpCode.GET_CHILDREN, OpCode.GET_CHILDREN2):
        cls = GetChildrenRequest if op == OpCode.GET_CHILDREN else GetChildren2Request
        req3 = cls.read(body, 0)[0]
        node = _readable(tree, req3.path, conn)
        if req3.watch:
            tree.add_watch(req3.path, conn.conn_id, data=False)
        children = list(node.children)
        if op == OpCode.GET_CHILDREN:
            return GetChildrenResponse(children).to_bytes()
        return GetChildren2Response(children, node.stat()).to_bytes()
    if op == OpCode.GET_ALL_CHILDREN_NUMBER:
        path = GetAllChildrenNumberRequest.read(body, 0)[0].path
        _readable(tree, path, conn)
        return GetAllChildrenNumberResponse(tree.all_children_number(path)).to_bytes()
    if op == OpCode.GET_ACL:
        path = GetACLRequest.read(body, 0)[0].path
        acl_node = _node_at(tree, path)
        if acl_node is None:
            raise NoNodeError()
        check_acl(acl_node.acl, PermNum.READ | PermNum.ADMIN, conn.auth)
        acl = list(acl_node.acl)
        if not has_permission(acl_node.acl, PermNum.ADMIN, conn.auth):
            acl = [ACL(a.perms, Id(a.id.scheme, a.id.id.split(":", 1)[0] + ":x")) if a.id.scheme == "digest" else a
                   for a in acl]
        return GetACLResponse(acl, acl_node.stat()).to_bytes()
    if op == OpCode.SYNC:
        return SyncResponse(SyncRequest.read(body, 0)[0].path).to_bytes()
    if op in (OpCode.SET_WATCHES, OpCode.SET_WATCHES2):
        _set_watches(tree, conn, op, body, notify)
        return b""
    if op == OpCode.ADD_WATCH:
        req4 = AddWatchRequest.read(body, 0)[0]
        mode = RECURSIVE if req4.mode == AddWatchMode.PERSISTENT_RECURSIVE else PERSISTENT
        if req4.mode not in (AddWatchMode.PERSISTENT, AddWatchMode.PERSISTENT_RECURSIVE):
            raise ProtocolError(f"unsupported addWatch mode {req4.mode}")
        tree.add_watch(req4.path, conn.conn_id, True, mode)
        tree.add_watch(req4.path, conn.conn_id, False, mode)
        return ErrorResponse(0).to_bytes()
    if op in (OpCode.CHECK_WATCHES, OpCode.REMOVE_WATCHES):
        cls2 = CheckWatchesRequest if op == OpCode.CHECK_WATCHES else RemoveWatchesRequest
        req5 = cls2.read(body, 0)[0]
        try:
            wtype = WatcherType(req5.type)
        except ValueError:
            raise ProtocolError(f"unsupported watcher type {req5.type}") from None
        if op == OpCode.CHECK_WATCHES and (req5.path is None or (req5.path and "/" not in req5.path)):
            # ZooKeeper fails to walk the parents of such a path: a marshalling error
            raise ProtocolError("null path" if req5.path is None else f"checkWatches path {req5.path!r} has no parent")
        tables = {WatcherType.CHILDREN: (tree.child_watches,), WatcherType.DATA: (tree.data_watches,),
                  WatcherType.ANY: (tree.child_watches, tree.data_watches)}[wtype]
        if op == OpCode.CHECK_WATCHES:
            # 3.8's WatchManager.containsWatcher answers for the path, not the caller: found when
            # any session watches it in that table (3.9's ZOOKEEPER-4466 checks the caller only)
            found = any(t.by_path.get(req5.path) for t in tables)
        else:
            found = False
            for t in tables:
                found = t.remove(req5.path, conn.conn_id) or found
        if not found:
            raise NoWatcherError()
        return b""
    if op == OpCode.WHO_AM_I:
        infos = [ClientInfo(i.scheme, "" if i.scheme in unnamed else _user_name(i)) for i in conn.auth]
        return WhoAmIResponse(infos).to_bytes()
    if op == OpCode.GET_EPHEMERALS:
        prefix = GetEphemeralsRequest.read(body, 0)[0].prefixPath
        mine = sorted(tree.ephemerals.get(conn.session_id, ()))
        if prefix and prefix.strip() not in ("", "/"):
            mine = [p for p in mine if p.startswith(prefix)]
        return GetEphemeralsResponse(mine).to_bytes()
    if op == OpCode.MULTI_READ:
        return _multi_read(tree, conn, body)
    raise MarshallingError()


def _node_at(tree: DataTree, path: str | None) -> Node | None:
    """The node a read names. ZooKeeper fails a null path with a marshalling error, and finds
    the root under "" as well as "/" (its DataTree keys the root both ways)."""
    if path is None:
        raise ProtocolError("null path")
    return tree.get(path or "/")


def _readable(tree: DataTree, path: str, conn: Connection) -> Node:
    node = _node_at(tree, path)
    if node is None:
        raise NoNodeError()
    check_acl(node.acl, PermNum.READ, conn.auth)
    return node


def _multi_read(tree: DataTree, conn: Connection, body: bytes) -> bytes:
    ops = read_multi_request(body, 0)[0]
    results: list[OpResult] = []
    for o in ops:
        if o.type not in (OpCode.GET_DATA, OpCode.GET_CHILDREN):
            raise ProtocolError(f"invalid type of readOp {o.type}")
        try:
            node = _readable(tree, o.request.path, conn)
        except ZookeeperError as exc:
            results.append(OpResult(OpCode.ERROR, int(exc.code)))
            continue
        # the watch flag of a multiRead op is ignored: ZooKeeper rebuilds each op as
        # Op.getData/getChildren(path), which never watch
        if o.type == OpCode.GET_DATA:
            results.append(OpResult(o.type, 0, data=node.data, stat=node.stat()))
        else:
            results.append(OpResult(o.type, 0, children=list(node.children)))
    out = bytearray()
    write_multi_response(out, results)
    return bytes(out)


def _set_watches(tree: DataTree, conn: Connection, op: int, body: bytes, notify: Notify) -> None:
    """Re-register a reconnecting client's watches, firing what changed since relativeZxid."""
    if op == OpCode.SET_WATCHES:
        sw: Any = SetWatches.read(body, 0)[0]
        persistent: list[str] = []
        recursive: list[str] = []
    else:
        sw = SetWatches2.read(body, 0)[0]
        persistent, recursive = sw.persistentWatches, sw.persistentRecursiveWatches
    if None in (*sw.dataWatches, *sw.existWatches, *sw.childWatches, *persistent, *recursive):
        raise ProtocolError("null path in setWatches")
    rel = sw.relativeZxid
    wid = conn.conn_id

    def fire(etype: int, path: str, acl: tuple[ACL, ...] | None) -> None:
        if acl is not None and not has_permission(acl, PermNum.READ, conn.auth):
            return
        notify(event_payload(etype, path))

    for path in sw.dataWatches:
        node = tree.get(path)
        if node is None:
            fire(EventType.NODE_DELETED, path, None)
        elif node.mzxid > rel:
            fire(EventType.NODE_DATA_CHANGED, path, node.acl)
        else:
            tree.add_watch(path, wid, data=True)
    for path in sw.existWatches:
        node = tree.get(path)
        if node is not None:
            fire(EventType.NODE_CREATED, path, node.acl)
        else:
            tree.add_watch(path, wid, data=True)
    for path in sw.childWatches:
        node = tree.get(path)
        if node is None:
            fire(EventType.NODE_DELETED, path, None)
        elif node.pzxid > rel:
            fire(EventType.NODE_CHILDREN_CHANGED, path, node.acl)
        else:
            tree.add_watch(path, wid, data=False)
    for path in persistent:
        tree.add_watch(path, wid, True, PERSISTENT)
        tree.add_watch(path, wid, False, PERSISTENT)
    for path in recursive:
        tree.add_watch(path, wid, True, RECURSIVE)
        tree.add_watch(path, wid, False, RECURSIVE)


def _user_name(ident: Id) -> str:
    if ident.scheme == "digest":
        return ident.id.split(":")[0]
    if ident.scheme in ("ip", "x509", "sasl"):
        return ident.id
    return ""
