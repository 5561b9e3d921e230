"""Prep: a write request becomes an idempotent txn, checked against the outstanding state.

Versions, ACLs, sequence numbers and time are settled here (PrepRequestProcessor), so
applying the txn is deterministic. ``outstanding`` holds a ChangeRecord per path touched
by txns not yet applied; the tree itself is never mutated here. A failed request still
becomes a txn (ErrorTxn) with its own zxid, as in ZooKeeper.

Quotas (``enforceQuota``) are checked as ZooKeeperServer.checkQuota checks them: on create and
setData (in a multi too), after the ACL check, against the usage the *applied* tree's stats
znode shows (outstanding txns are not counted, as in ZooKeeper) and the data length the node has
once its outstanding txns are applied. A hard limit refuses the request with QuotaExceeded; a
soft one only logs ZooKeeper's "Quota exceeded: ..." line, rate-limited.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from zkpy.config import ServerConfig
from zkpy.errors import (
    BadArgumentsError,
    BadVersionError,
    Code,
    MarshallingError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    QuotaExceededError,
    ReconfigDisabledError,
    SessionExpiredError,
    UnimplementedError,
    ZookeeperError,
)
from zkpy.ids import to_signed64
from zkpy.ratelimit import LogLimiter
from zkpy.tree.acl import OPEN_ACL_UNSAFE, check_acl, fixup_acl
from zkpy.tree.datatree import DataTree, ephemeral_kind
from zkpy.tree.paths import parent_of, path_error
from zkpy.tree.quota import check_limits, limit_path, limits_apply, parse_stats, stat_path, top_namespace
from zkpy.wire.consts import (
    CONTAINER_EPHEMERAL_OWNER,
    MAX_TTL_MS,
    TTL_MASK,
    CreateMode,
    OpNum,
    PermNum,
)
from zkpy.wire.jute import INT
from zkpy.wire.multi import Op
from zkpy.wire.proto import ACL, Id, ReconfigRequest
from zkpy.wire.txn import (
    CheckVersionTxn,
    CloseSessionTxn,
    CreateContainerTxn,
    CreateSessionTxn,
    CreateTTLTxn,
    CreateTxn,
    DeleteTxn,
    ErrorTxn,
    MultiTxn,
    SetACLTxn,
    SetDataTxn,
    Txn,
    TxnHeader,
)

WRITE_OPS = frozenset({
    OpNum.CREATE, OpNum.CREATE2, OpNum.CREATE_CONTAINER, OpNum.CREATE_TTL, OpNum.DELETE,
    OpNum.DELETE_CONTAINER, OpNum.SET_DATA, OpNum.SET_ACL, OpNum.MULTI, OpNum.RECONFIG,
    OpNum.CLOSE_SESSION, OpNum.CREATE_SESSION,
})


@dataclass(slots=True)
class ChangeRecord:
    """The state of one path once every outstanding txn is applied (None fields: deleted)."""

    zxid: int
    path: str
    exists: bool
    version: int = 0
    cversion: int = 0
    aversion: int = 0
    ephemeral_owner: int = 0
    child_count: int = 0
    acl: tuple[ACL, ...] = ()
    data_length: int = 0  # what a quota check counts as the node's current bytes

    def changed(self, zxid: int, **fields: int) -> ChangeRecord:
        """A copy after the txn ``zxid`` (dataclasses.replace, without its cost on the write path)."""
        rec = ChangeRecord(zxid, self.path, self.exists, self.version, self.cversion, self.aversion,
                           self.ephemeral_owner, self.child_count, self.acl, self.data_length)
        for name, value in fields.items():
            setattr(rec, name, value)
        return rec


CONFIG_NODE = "/zookeeper/config"

# create flags -> (ttl, ephemeral, sequential), CreateMode's properties looked up once per create
_MODES = {int(m): (m.is_ttl, m.is_ephemeral, m.is_sequential) for m in CreateMode}
_CREATE_OPS = frozenset({OpNum.CREATE, OpNum.CREATE2, OpNum.CREATE_CONTAINER, OpNum.CREATE_TTL})
_MULTI_OPS = _CREATE_OPS | {OpNum.DELETE, OpNum.SET_DATA, OpNum.CHECK}  # what a multi may hold


_OPEN_ENTRY = OPEN_ACL_UNSAFE[0]  # fixup_acl answers a request of the open ACL alone with this very entry
_OPEN_ACL_BYTES = 27  # OPEN_ACL_UNSAFE as a jute vector: count, perms, "world", "anyone"
_CREATE_TAIL = struct.Struct(">?i")  # CreateTxn's last fields: ephemeral, parentCVersion


def txn_body(op: int, request: bytes, txn: Any) -> bytes | None:
    """A txn's bytes cut from its request's, or None where that would not be exact (the txn is
    then encoded from its record). Each is the request with its last field replaced:
    - setData: path, data, the expected version → path, data, the new version;
    - delete: path, version → path;
    - create and create2: path, data, ACL, flags → path, data, ACL, ephemeral, the parent's
      cversion; only with the open ACL as ``fixup_acl`` gives it back for a request that holds
      just that ACL (its bytes are the one encoding that decodes to it), and the request's own
      path (a sequential create's is longer, so the lengths disagree).
    Exact only where the fields encode back to the request's bytes: an ASCII path (a path decoded
    with replacement characters would not) and no bytes after the record."""
    if op == OpNum.SET_DATA:
        data = txn.data
        if txn.path.isascii() and len(request) == 12 + len(txn.path) + (len(data) if data is not None else 0):
            return request[:-4] + INT.pack(txn.version)
    elif op == OpNum.DELETE:
        if txn.path.isascii() and len(request) == 8 + len(txn.path):
            return request[:-4]
    elif op == OpNum.CREATE or op == OpNum.CREATE2:
        data, acl = txn.data, txn.acl
        if (len(acl) == 1 and acl[0] is _OPEN_ENTRY and txn.path.isascii()
                and len(request) == 12 + _OPEN_ACL_BYTES + len(txn.path) + (len(data) if data is not None else 0)):
            return request[:-4] + _CREATE_TAIL.pack(txn.ephemeral, txn.parentCVersion)
    return None


class Reconfigurer(Protocol):
    """What prep needs of a leader to prep a reconfig (its term core, ``LeadingCore``, implements it)."""

    def next_config(self, request: ReconfigRequest, zxid: int) -> bytes:
        """The config string the request asks for, at version ``zxid``; raises the ZooKeeper error
        3.8 answers (ReconfigInProgress, BadVersion, BadArguments, NewConfigNoQuorum)."""
        ...

    def proposed(self, zxid: int, data: bytes) -> None:
        """The reconfig txn ``zxid`` setting ``data`` passed every check: it is being proposed."""
        ...


class Prep:
    """Turns write requests into txns against the tree plus the outstanding changes."""

    def __init__(self, tree: DataTree, config: ServerConfig, log: Callable[[str], None] = lambda _m: None) -> None:
        self.tree = tree
        self.config = config
        self.log = log  # the server's log, for quota lines
        self.quota_exceeded: dict[str, int] = {}  # refusals by top-level znode (quota_exceeded_error_per_namespace)
        self._quota_lines = LogLimiter(burst=5, peer_burst=20, peer_per_s=1)
        self.reconfigurer: Reconfigurer | None = None  # a leader's: reconfig is a leader's op
        # ACL schemes registered beside digest and ip (authProvider.N): sasl ids are valid, and "auth" names them
        self.providers = frozenset({"sasl"} if config.sasl_auth else ())
        self.outstanding: dict[str, ChangeRecord] = {}
        self._order: deque[ChangeRecord] = deque()
        # the last prep's multi as records, each equal to decoding its Txn's bytes (None after any
        # other op): the server applies these rather than decoding what it has just encoded
        self.last_subs: list[tuple[int, Any]] | None = None

    # ---- outstanding state ----

    def record(self, path: str) -> ChangeRecord:
        rec = self.outstanding.get(path)
        if rec is None:
            node = self.tree.get(path)
            if node is not None:
                rec = ChangeRecord(-1, path, True, node.version, node.cversion, node.aversion,
                                   node.ephemeral_owner, len(node.children), node.acl,
                                   len(node.data) if node.data else 0)
        if rec is None or not rec.exists:
            raise NoNodeError(path, path)
        return rec

    def _add(self, rec: ChangeRecord) -> None:
        self.outstanding[rec.path] = rec
        self._order.append(rec)

    def applied(self, zxid: int) -> None:
        """Forget change records made by txns up to ``zxid``, now visible in the tree."""
        order = self._order
        while order and order[0].zxid <= zxid:
            rec = order.popleft()
            if self.outstanding.get(rec.path) is rec:
                del self.outstanding[rec.path]

    # ---- entry point ----

    def prep(self, op: int, request: Any, session: int, cxid: int, auth: Sequence[Id],
             zxid: int, time: int, live: bool,
             ephemeral_error: ZookeeperError | None = None) -> tuple[TxnHeader, Any, ZookeeperError | None]:
        """The txn for one write request; on failure an ErrorTxn and the error to report.
        ``live``: the session may write; ``ephemeral_error``: what an ephemeral create of it fails
        with (a local session's: ZooKeeper's checkGlobalSession, or the failed upgrade's error)."""
        hdr = TxnHeader(session, cxid, zxid, time, op)
        self.last_subs = None
        try:
            if op == OpNum.MULTI:
                return hdr, self._multi(request, session, auth, zxid, time, live, ephemeral_error), None
            txn = self._one(op, request, session, auth, zxid, time, live, ephemeral_error)
            return hdr, txn, None
        except ZookeeperError as exc:
            return replace(hdr, type=OpNum.ERROR), ErrorTxn(int(exc.code)), exc

    def _multi(self, ops: list[Op], session: int, auth: Sequence[Id], zxid: int, time: int, live: bool,
               ephemeral_error: ZookeeperError | None) -> MultiTxn:
        saved_len = len(self._order)
        txns: list[Txn] = []
        subs: list[tuple[int, Any]] = []
        failed: ZookeeperError | None = None
        for op in ops:
            if failed is not None:
                error = ErrorTxn(int(Code.RUNTIMEINCONSISTENCY))
                txns.append(Txn(OpNum.ERROR, error.to_bytes()))
                subs.append((OpNum.ERROR, error))
                continue
            try:
                if op.type not in _MULTI_OPS:
                    raise UnimplementedError()
                txn = self._one(op.type, op.request, session, auth, zxid, time, live, ephemeral_error)
                body = txn_body(op.type, op.body, txn) if op.body is not None else None
                txns.append(Txn(op.type, body if body is not None else txn.to_bytes()))
                subs.append((op.type, txn))
            except ZookeeperError as exc:
                failed = exc
                error = ErrorTxn(int(exc.code))
                txns.append(Txn(OpNum.ERROR, error.to_bytes()))
                subs.append((OpNum.ERROR, error))
                self._roll_back(saved_len)
        if failed is not None:
            # earlier ops are reported as OK-but-not-applied errors, as ZooKeeper's log shows them
            for i, t in enumerate(txns):
                if t.type != OpNum.ERROR:
                    txns[i] = Txn(OpNum.ERROR, ErrorTxn(0).to_bytes())
                    subs[i] = (OpNum.ERROR, ErrorTxn(0))
        self.last_subs = subs
        return MultiTxn(txns)

    def _roll_back(self, order_len: int) -> None:
        """Forget the change records made after the first ``order_len`` (a failed multi's). The
        outstanding state is rebuilt from those left: each path's is its last record in order
        (the invariant ``_add`` and ``applied`` keep), so a multi copies nothing up front."""
        order = self._order
        while len(order) > order_len:
            order.pop()
        self.outstanding = {rec.path: rec for rec in order}

    def _one(self, op: int, req: Any, session: int, auth: Sequence[Id], zxid: int, time: int, live: bool,
             ephemeral_error: ZookeeperError | None = None) -> Any:
        if op in _CREATE_OPS:
            return self._create(op, req, session, auth, zxid, time, live, ephemeral_error)
        if op == OpNum.DELETE:
            _check_live(live)
            path = _parent_checked(req.path)
            parent = self.record(parent_of(path))
            check_acl(parent.acl, PermNum.DELETE, auth)
            node = self.record(path)
            _check_version(node.version, req.version, path)
            if node.child_count > 0:
                raise NotEmptyError(path, path)
            return self._delete(path, parent, zxid)
        if op == OpNum.DELETE_CONTAINER:
            path = _parent_checked(req)
            parent = self.record(parent_of(path))
            check_acl(parent.acl, PermNum.DELETE, auth)  # zkpy also checks clients' deleteContainer
            node = self.record(path)
            if node.child_count > 0:
                raise NotEmptyError(path, path)
            if ephemeral_kind(node.ephemeral_owner) not in ("container", "ttl"):
                raise BadVersionError(path, path)
            return self._delete(path, parent, zxid)
        if op == OpNum.SET_DATA:
            _check_live(live)
            path = _valid(req.path)
            node = self.record(path)
            check_acl(node.acl, PermNum.WRITE, auth)
            length = len(req.data) if req.data else 0
            if self.config.enforce_quota:
                self._check_quota(path, 0, length - node.data_length, time)
            version = _check_version(node.version, req.version, path)
            # node.changed(zxid, version=version, data_length=length), without the keyword dict
            self._add(ChangeRecord(zxid, path, True, version, node.cversion, node.aversion, node.ephemeral_owner,
                                   node.child_count, node.acl, length))
            return SetDataTxn(path, req.data, version)
        if op == OpNum.SET_ACL:
            _check_live(live)
            path = _valid(req.path)
            acl = fixup_acl(path, auth, req.acl, self.providers)
            node = self.record(path)
            check_acl(node.acl, PermNum.ADMIN, auth)
            version = _check_version(node.aversion, req.version, path)
            # the change record keeps the old ACL, as ZooKeeper's does (it only bumps aversion):
            # requests prepped before this txn is applied are still checked against the old ACL
            self._add(node.changed(zxid, aversion=version))
            return SetACLTxn(path, list(acl), version)
        if op == OpNum.CHECK:
            _check_live(live)
            path = _valid(req.path)
            node = self.record(path)
            check_acl(node.acl, PermNum.READ, auth)
            return CheckVersionTxn(path, _check_version(node.version, req.version, path))
        if op == OpNum.CREATE_SESSION:
            return CreateSessionTxn(req)
        if op == OpNum.CLOSE_SESSION:
            return CloseSessionTxn(self._closing_ephemerals(session, zxid))
        if op == OpNum.RECONFIG:
            return self._reconfig(req, auth, zxid, live)
        raise UnimplementedError()

    def _reconfig(self, req: ReconfigRequest, auth: Sequence[Id], zxid: int, live: bool) -> SetDataTxn:
        """PrepRequestProcessor's reconfig, checks in its order: enabled, the session, a leader,
        the new config (the reconfigurer's checks), then WRITE on /zookeeper/config. The txn sets
        the config node with version -1, as 3.8 logs it (a SetDataTxn under the reconfig type)."""
        if not self.config.reconfig_enabled:
            raise ReconfigDisabledError()
        _check_live(live)
        if self.reconfigurer is None:
            raise UnimplementedError()
        data = self.reconfigurer.next_config(req, zxid)
        node = self.record(CONFIG_NODE)
        check_acl(node.acl, PermNum.WRITE, auth)
        self._add(node.changed(zxid, version=-1))
        self.reconfigurer.proposed(zxid, data)
        return SetDataTxn(CONFIG_NODE, data, -1)

    def _create(self, op: int, req: Any, session: int, auth: Sequence[Id], zxid: int, time: int, live: bool,
                ephemeral_error: ZookeeperError | None) -> Any:
        path = req.path
        ttl = req.ttl if op == OpNum.CREATE_TTL else -1
        try:
            is_ttl, is_ephemeral, is_sequential = _MODES[req.flags]
        except (KeyError, TypeError):
            raise BadArgumentsError(str(path), path) from None
        if is_ttl and not self.config.extended_types:
            raise UnimplementedError()
        if is_ttl:
            if ttl > MAX_TTL_MS or ttl <= 0:
                raise BadArgumentsError(str(path), path)
        elif ttl >= 0 or op == OpNum.CREATE_TTL:
            # createTTL without TTL flags: ZooKeeper 3.8.0 takes it when ttl is -1 and then dies
            # applying a TTL txn without a TTL (the server process exits); zkpy refuses it
            raise BadArgumentsError(str(path), path)
        if ephemeral_error is not None and is_ephemeral:
            raise ephemeral_error
        _check_live(live)
        if not isinstance(path, str) or "/" not in path or "\0" in path:
            raise BadArgumentsError(str(path), path)
        parent_path = parent_of(path)
        acl = fixup_acl(path, auth, req.acl, self.providers)
        parent = self.record(parent_path)
        check_acl(parent.acl, PermNum.CREATE, auth)
        if is_sequential:
            path = f"{path}{parent.cversion:010d}"
        _valid(path)
        existing = self.outstanding.get(path)
        if (existing.exists if existing is not None else path in self.tree.nodes):
            raise NodeExistsError(path, path)
        if ephemeral_kind(parent.ephemeral_owner) == "normal":
            raise NoChildrenForEphemeralsError(path, path)
        new_cversion = parent.cversion + 1
        length = len(req.data) if req.data else 0
        if self.config.enforce_quota:
            self._check_quota(path, 1, length, time)
        # the opcode, not the flags, picks the txn (its type is the opcode): createContainer makes a
        # container whatever its flags, and create/create2 with container flags a persistent node,
        # as in ZooKeeper
        if op == OpNum.CREATE_CONTAINER:
            txn: Any = CreateContainerTxn(path, req.data, list(acl), new_cversion)
            owner = CONTAINER_EPHEMERAL_OWNER
        elif op == OpNum.CREATE_TTL:
            txn = CreateTTLTxn(path, req.data, list(acl), new_cversion, ttl)
            owner = to_signed64(TTL_MASK | ttl)
        else:
            txn = CreateTxn(path, req.data, list(acl), is_ephemeral, new_cversion)
            owner = session if is_ephemeral else 0
        if parent.zxid == zxid:  # made by an earlier op of this multi, which owns it: move it on
            parent.cversion = new_cversion
            parent.child_count += 1
        else:
            self._add(ChangeRecord(zxid, parent.path, parent.exists, parent.version, new_cversion, parent.aversion,
                                   parent.ephemeral_owner, parent.child_count + 1, parent.acl, parent.data_length))
        self._add(ChangeRecord(zxid, path, True, 0, 0, 0, owner, 0, acl, length))
        return txn

    def _check_quota(self, path: str, count_diff: int, bytes_diff: int, time: int) -> None:
        """ZooKeeperServer.checkQuota: the limits of the deepest quota over ``path`` against the
        applied usage plus this write. Raises QuotaExceeded past a hard limit."""
        tree = self.tree
        root = tree.quotas.deepest(path)
        if root is None:
            return
        limits_node = tree.get(limit_path(root))
        if limits_node is None:  # (the root would be gone with it)
            return
        try:
            limits = parse_stats(limits_node.data)
        except ValueError:
            raise MarshallingError() from None  # ZooKeeper fails the request on a quota text it cannot read
        if not limits_apply(limits, count_diff, bytes_diff):
            return
        stats_node = tree.get(stat_path(root))
        if stats_node is None:
            self._quota_lines.log(self.log, "quota", root, time, f"Missing node for stat {stat_path(root)}")
            return  # as ZooKeeper: the write goes through
        try:
            usage = parse_stats(stats_node.data)
        except ValueError:
            raise MarshallingError() from None
        for exceeded in check_limits(root, limits, usage, count_diff, bytes_diff):
            self._quota_lines.log(self.log, "quota", root, time, exceeded.message)
            if exceeded.hard:
                namespace = top_namespace(path)
                if namespace is not None:
                    self.quota_exceeded[namespace] = self.quota_exceeded.get(namespace, 0) + 1
                raise QuotaExceededError(path, path)

    def _delete(self, path: str, parent: ChangeRecord, zxid: int) -> DeleteTxn:
        self._add(parent.changed(zxid, child_count=parent.child_count - 1))
        self._add(ChangeRecord(zxid, path, False))
        return DeleteTxn(path)

    def _closing_ephemerals(self, session: int, zxid: int) -> list[str]:
        paths = set(self.tree.ephemerals.get(session, ()))
        for rec in self._order:
            if not rec.exists:
                paths.discard(rec.path)
            elif rec.ephemeral_owner == session:
                paths.add(rec.path)
        out = sorted(paths)
        for p in out:
            self._add(ChangeRecord(zxid, p, False))
        return out


def _check_live(live: bool) -> None:
    if not live:
        raise SessionExpiredError()


def _valid(path: Any) -> str:
    if path_error(path) is not None:
        raise BadArgumentsError(str(path), path if isinstance(path, str) else None)
    return path  # type: ignore[no-any-return]


# ZooKeeper's own nodes (DataTree.isSpecialPath): no client may delete them
_SPECIAL_PATHS = frozenset({"/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"})


def _parent_checked(path: Any) -> str:
    """getParentPathAndValidate: a deleted path has a '/', no NUL and is not one of ZooKeeper's own
    nodes. It is not otherwise validated: a malformed path is simply not found (NoNode)."""
    if not isinstance(path, str) or "/" not in path or "\0" in path or path in _SPECIAL_PATHS:
        raise BadArgumentsError(str(path), path if isinstance(path, str) else None)
    return path


def _check_version(current: int, expected: int, path: str) -> int:
    if expected != -1 and expected != current:
        raise BadVersionError(path, path)
    return current + 1
