"""The data tree: znodes with ZooKeeper's Stat semantics, changed only by applying txns.

Invariants owned here:
- the tree changes only in ``apply``; every txn is idempotent against a fuzzy snapshot
  (parent cversion/pzxid move only forward, creates of existing nodes and deletes of
  missing ones are tolerated on replay);
- ``digest`` is the sum of ZooKeeper's per-node CRC32 digests (DigestCalculator), kept
  incrementally, nodes under ``/zookeeper/`` excluded (unless ``drop_digest`` was called: a
  worker's replica, whose member keeps the digest);
- firing a watch only queues ``WatchEvent``s in ``events``; the server delivers them;
- quota usage (``quota``): every create, delete and setData under a quota root moves that
  root's ``zookeeper_stats`` in the same apply, and loading a tree (``setup_quotas``) recounts
  them, so live and recovered trees agree.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from zkpy.errors import Code
from zkpy.ids import MASK64, to_signed64
from zkpy.wire.consts import CONTAINER_EPHEMERAL_OWNER, TTL_MASK, EventType, OpNum
from zkpy.wire.proto import ACL, Stat
from zkpy.wire.txn import CloseSessionTxn, ErrorTxn, MultiTxn, TxnHeader, decode_txn

from .acl import OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, is_open
from .paths import basename, parent_of
from .quota import (
    LIMIT_NODE,
    QUOTA_ROOT,
    STAT_NODE,
    QuotaRoots,
    format_stats,
    parse_stats,
    quota_target,
    stat_path,
)
from .watches import STANDARD, WatchTable

DIGEST_STAT = struct.Struct(">qqqqqiiiq")  # the stat fields a node's digest share covers, in DigestCalculator's order
_STAT = struct.Struct(">qqqqiiiqiiq")  # jute Stat, packed straight from a node on the read path
_PLAIN_CREATES = frozenset({OpNum.CREATE, OpNum.CREATE2})
_DEFER_DIGESTS_AT = 16  # ops in a multi from which its parents' digests are settled once, at its end
UNHASHED = -1
"""``Node.digest`` of a node whose share of the tree digest was counted elsewhere (a snapshot's
nodes, or a replay's, summed by another process while the tree was built): computed from the node
when it is first taken out of the total, which is before any of its fields changes. A CRC32 is
never < 0."""


NO_CHILDREN: Mapping[str, None] = MappingProxyType({})
"""The child names of every node that never had a child: one shared read-only empty mapping, so a
leaf costs no dict of its own (64 bytes each, a tenth of a 1M-leaf tree). ``add_child`` gives a
node its own dict at its first child."""


class Node:
    """One znode: data, ACL, the persisted stat fields and the child names (``NO_CHILDREN`` or
    a dict of its own; change them through ``add_child`` and ``remove_child``)."""

    __slots__ = ("data", "acl", "czxid", "mzxid", "ctime", "mtime", "version", "cversion",
                 "aversion", "ephemeral_owner", "pzxid", "children", "digest")

    def __init__(self, data: bytes | None, acl: tuple[ACL, ...], zxid: int, time: int, ephemeral_owner: int) -> None:
        self.data = data
        self.acl = acl
        self.czxid = self.mzxid = self.pzxid = zxid
        self.ctime = self.mtime = time
        self.version = self.cversion = self.aversion = 0
        self.ephemeral_owner = ephemeral_owner
        self.children: Mapping[str, None] = NO_CHILDREN
        self.digest = 0  # this node's share of the tree digest, kept so removing it costs no CRC (or UNHASHED)

    def stat(self) -> Stat:
        """The client's Stat. ``cversion`` is stored as the count of child creations (it names
        sequential children); clients see creations plus deletions, ``2 * cversion - children``,
        as ZooKeeper's DataNode.copyStat reports it."""
        n = len(self.children)
        return Stat(self.czxid, self.mzxid, self.ctime, self.mtime, self.version, self.cversion * 2 - n,
                    self.aversion, client_owner(self.ephemeral_owner), len(self.data) if self.data else 0, n,
                    self.pzxid)

    def stat_bytes(self) -> bytes:
        """``stat().to_bytes()`` without building the record (the hot read path)."""
        n = len(self.children)
        return _STAT.pack(self.czxid, self.mzxid, self.ctime, self.mtime, self.version, self.cversion * 2 - n,
                          self.aversion, client_owner(self.ephemeral_owner), len(self.data) if self.data else 0, n,
                          self.pzxid)


def add_child(node: Node, name: str) -> None:
    """Name ``name`` among ``node``'s children, giving it a dict of its own at its first child."""
    children = node.children
    if isinstance(children, dict):
        children[name] = None
    else:  # its first child
        node.children = {name: None}


def remove_child(node: Node, name: str) -> None:
    """Drop ``name`` from ``node``'s children; a leaf (``NO_CHILDREN``) has none to drop."""
    children = node.children
    if isinstance(children, dict):
        children.pop(name, None)


def client_owner(owner: int) -> int:
    """The ephemeralOwner a client's Stat shows: only a session's; 0 for containers and TTL
    nodes, whose stored owner is a type marker (DataNode.getClientEphemeralOwner)."""
    if owner < 0 and (owner == CONTAINER_EPHEMERAL_OWNER or (owner & TTL_MASK) == TTL_MASK):
        return 0
    return owner


def ephemeral_kind(owner: int) -> str:
    """'void', 'normal' (session ephemeral), 'container' or 'ttl' (EphemeralType.get)."""
    if owner == 0:
        return "void"
    if owner == CONTAINER_EPHEMERAL_OWNER:
        return "container"
    if owner < 0 and (owner & TTL_MASK) == TTL_MASK:
        return "ttl"
    return "normal"


def ttl_of(owner: int) -> int:
    return owner & ~TTL_MASK & MASK64


@dataclass(slots=True)
class WatchEvent:
    """A fired watch: who, what, where, and the ACL that decides whether they may see it."""

    watchers: set[Any]
    type: int
    path: str
    acl: tuple[ACL, ...]


@dataclass(slots=True)
class TxnResult:
    """What applying a txn produced (ProcessTxnResult)."""

    type: int
    err: int = 0
    path: str | None = None
    stat: bytes | None = None  # the node's jute Stat as the reply carries it (``Node.stat_bytes``); none for a plain create
    multi: list[TxnResult] | None = None  # a multi's results (None otherwise: no list per txn)


def node_share(path: str, data: bytes | None, czxid: int, mzxid: int, pzxid: int, ctime: int, mtime: int,
               version: int, cversion: int, aversion: int, owner: int) -> int:
    """A node's share of the tree digest: ZooKeeper's DigestCalculator, CRC-32 over the path, the
    data and the persisted stat; 0 under /zookeeper/."""
    if path.startswith("/zookeeper/"):
        return 0
    crc = zlib.crc32(b"" if path == "/" else path.encode("utf-8"))
    if data:
        crc = zlib.crc32(data, crc)
    return zlib.crc32(DIGEST_STAT.pack(czxid, mzxid, pzxid, ctime, mtime, version, cversion, aversion, owner), crc)


def _no_digest(path: str, node: Node) -> None:
    """A tree's digest step once it keeps none (``DataTree.drop_digest``)."""


class DataTree:
    """The in-memory database every replica holds."""

    _dirty: dict[str, Node]  # only while deferring parent digests (see defer_parent_digests)

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.ephemerals: dict[int, set[str]] = {}
        self.sessions: dict[int, int] = {}  # committed sessions and their timeouts (ZKDatabase.sessionsWithTimeouts)
        self.containers: set[str] = set()
        self.ttls: set[str] = set()
        self.data_watches = WatchTable()
        self.child_watches = WatchTable()
        self.events: list[WatchEvent] = []
        self.last_processed_zxid = 0
        self.digest = 0
        self.data_size = 0  # path and data lengths over every node (approximateDataSize), kept as nodes change
        self.acl_cache: dict[tuple[ACL, ...], tuple[ACL, ...]] = {OPEN_ACL_UNSAFE: OPEN_ACL_UNSAFE}
        self.quotas = QuotaRoots()  # paths with a zookeeper_limits znode
        root = Node(b"", OPEN_ACL_UNSAFE, 0, 0, 0)
        root.pzxid = root.czxid = root.mzxid = 0
        self._put("/", root)
        for path, acl in (("/zookeeper", OPEN_ACL_UNSAFE), ("/zookeeper/quota", OPEN_ACL_UNSAFE),
                          ("/zookeeper/config", READ_ACL_UNSAFE)):
            node = Node(b"", self.intern_acl(acl), 0, 0, 0)
            self._put(path, node)
            add_child(self.nodes[parent_of(path)], basename(path))
        self.nodes["/zookeeper/config"].aversion = -1  # DataTree.addConfigNode sets the ACL with version -1

    def set_config_node(self, data: bytes, config_version: int, time_ms: int) -> None:
        """An ensemble's ``/zookeeper/config``: its config string, as ZooKeeper's
        initConfigInZKDatabase writes it (version -1, mzxid the config version). Outside the
        digest, like every node under /zookeeper."""
        node = self.nodes.get("/zookeeper/config")
        if node is None:
            return
        self.data_size += len(data) - (len(node.data) if node.data else 0)
        node.data = data
        node.version = -1
        node.mzxid = config_version
        node.mtime = time_ms

    @classmethod
    def empty(cls) -> DataTree:
        """A tree without a single node, not even the root, digest 0: what a snapshot loader fills."""
        tree = cls()
        tree.nodes.clear()
        tree.digest = 0
        tree.data_size = 0
        return tree

    # ---- digest bookkeeping ----

    @staticmethod
    def node_digest(path: str, node: Node) -> int:
        return node_share(path, node.data, node.czxid, node.mzxid, node.pzxid, node.ctime, node.mtime, node.version,
                          node.cversion, node.aversion, node.ephemeral_owner)

    def _put(self, path: str, node: Node) -> None:
        self.nodes[path] = node
        self.data_size += len(path) + (len(node.data) if node.data else 0)
        self._rehash(path, node)

    def _unhash(self, path: str, node: Node) -> None:
        share = node.digest
        if share < 0:  # UNHASHED: the node is as it was loaded
            share = self.node_digest(path, node)
        self.digest = (self.digest - share) & MASK64

    def _rehash(self, path: str, node: Node) -> None:
        node.digest = self.node_digest(path, node)
        self.digest = (self.digest + node.digest) & MASK64

    _rehash_parent = _rehash  # a parent after a child's create or delete (deferred while replaying)

    digest_kept = True  # False after drop_digest

    def drop_digest(self) -> None:
        """Keep no digest from now on: a dedicated member's worker reports none (the member
        keeps it), so its replica need not pay a CRC per change. ``digest`` stays 0."""
        self.digest_kept = False
        self.digest = 0
        self._unhash = self._rehash = self._rehash_parent = _no_digest  # type: ignore[method-assign]

    # ---- deferred parent digests (replay) ----
    # A replayed create rehashes its parent; a parent of a thousand children would be hashed a
    # thousand times. While deferring, a parent that changed leaves the total once (its digest
    # subtracted) and waits in ``_dirty`` until ``settle_digests`` hashes it once. Instance
    # attributes shadow the three methods meanwhile, so the live path pays nothing for this.

    def defer_parent_digests(self) -> None:
        """Until ``settle_digests``, hash changed parents once, not per child; ``digest`` is not
        current meanwhile."""
        if "_dirty" in self.__dict__ or not self.digest_kept:
            return
        dirty: dict[str, Node] = {}
        self._dirty = dirty
        mask = MASK64

        # by identity: a dirty node deleted and created again is another node, in the total
        def unhash(path: str, node: Node) -> None:
            if dirty.get(path) is not node:
                share = node.digest
                if share < 0:  # UNHASHED (see DataTree._unhash)
                    share = self.node_digest(path, node)
                self.digest = (self.digest - share) & mask

        def rehash(path: str, node: Node) -> None:
            if dirty.get(path) is not node:  # (a dirty one is out of the total: settled later)
                DataTree._rehash(self, path, node)

        def rehash_parent(path: str, node: Node) -> None:
            dirty[path] = node  # its unhash came first: out of the total until settled

        self._unhash = unhash  # type: ignore[method-assign]
        self._rehash = rehash  # type: ignore[method-assign]
        self._rehash_parent = rehash_parent  # type: ignore[method-assign]

    def settle_digests(self) -> None:
        """Hash every parent left waiting by ``defer_parent_digests`` and stop deferring:
        ``digest`` is current again."""
        dirty: dict[str, Node] | None = self.__dict__.pop("_dirty", None)
        if dirty is None:
            return
        del self._unhash, self._rehash, self._rehash_parent
        nodes = self.nodes
        for path, node in dirty.items():
            if nodes.get(path) is node:
                DataTree._rehash(self, path, node)

    # ---- shares counted apart (a replay's creates, summed by another process) ----

    @staticmethod
    def created_share(path: str, data: bytes | None, zxid: int, time: int, owner: int) -> int:
        """``node_digest`` of the node a create makes (``Node.__init__``'s stat), from the txn alone."""
        return node_share(path, data, zxid, zxid, zxid, time, time, 0, 0, 0, owner)

    def add_counted(self, share: int) -> None:
        """A sum of shares made elsewhere joins the total (a negative one leaves it)."""
        self.digest = (self.digest + share) & MASK64

    def recount_digest(self) -> None:
        """Hash every node afresh: the total when a sum made elsewhere was lost."""
        self.settle_digests()
        self.digest = 0
        for path, node in self.nodes.items():
            self._rehash(path, node)

    def intern_acl(self, acl: list[ACL] | tuple[ACL, ...]) -> tuple[ACL, ...]:
        """One shared tuple per distinct ACL (ZooKeeper's ReferenceCountedACLCache, minus the counts)."""
        if len(acl) == 1 and is_open(acl[0]):  # the common case, without hashing the records
            return OPEN_ACL_UNSAFE
        key = tuple(acl)
        return self.acl_cache.setdefault(key, key)

    # ---- reads ----

    def get(self, path: str) -> Node | None:
        return self.nodes.get(path)

    def node_count(self) -> int:
        return len(self.nodes)

    def all_children_number(self, path: str) -> int:
        if path == "/":
            return len(self.nodes) - 1  # every node but the root itself
        prefix = path + "/"
        return sum(1 for p in self.nodes if p.startswith(prefix))

    def add_watch(self, path: str, watcher: Any, data: bool, mode: int = STANDARD) -> None:
        (self.data_watches if data else self.child_watches).add(path, watcher, mode)

    # ---- applying txns ----

    def apply(self, hdr: TxnHeader, txn: Any, subs: list[tuple[int, Any]] | None = None,
              want_stat: bool = True) -> TxnResult:
        """Apply one txn; idempotent for replay. Watch events go to ``self.events``. ``subs``: a
        multi's inner txns already decoded (by whoever encoded them), else they are decoded here.
        ``want_stat``: False where no reply is built from the result (a replay, a replica's txn
        of another process's client): the changed node's Stat is not packed."""
        result = self._apply_one(hdr.type, txn, hdr.zxid, hdr.time, hdr.clientId, subs, want_stat)
        if hdr.zxid > self.last_processed_zxid:
            self.last_processed_zxid = hdr.zxid
        return result

    def _apply_one(self, op: int, txn: Any, zxid: int, time: int, session: int,
                   subs: list[tuple[int, Any]] | None = None, want_stat: bool = True) -> TxnResult:
        rc = TxnResult(op)
        try:
            if op in _PLAIN_CREATES:
                owner = session if txn.ephemeral else 0
                rc.path, rc.stat = txn.path, self.create_node(txn.path, txn.data, txn.acl, owner,
                                                              txn.parentCVersion, zxid, time,
                                                              want_stat and op == OpNum.CREATE2)  # create's reply has no Stat
            elif op == OpNum.CREATE_CONTAINER:
                rc.path, rc.stat = txn.path, self.create_node(txn.path, txn.data, txn.acl, CONTAINER_EPHEMERAL_OWNER,
                                                              txn.parentCVersion, zxid, time, want_stat)
            elif op == OpNum.CREATE_TTL:
                owner = to_signed64(TTL_MASK | txn.ttl)
                rc.path, rc.stat = txn.path, self.create_node(txn.path, txn.data, txn.acl, owner,
                                                              txn.parentCVersion, zxid, time, want_stat)
            elif op in (OpNum.DELETE, OpNum.DELETE_CONTAINER):
                rc.path = txn.path
                self.delete_node(txn.path, zxid)
            elif op == OpNum.SET_DATA or op == OpNum.RECONFIG:  # a reconfig sets /zookeeper/config
                rc.path, rc.stat = txn.path, self.set_data(txn.path, txn.data, txn.version, zxid, time, want_stat)
            elif op == OpNum.SET_ACL:
                rc.path, rc.stat = txn.path, self.set_acl(txn.path, txn.acl, txn.version, want_stat)
            elif op == OpNum.CHECK:
                rc.path = txn.path
                node = self.nodes.get(txn.path)
                rc.stat = node.stat_bytes() if node and want_stat else None
            elif op == OpNum.CLOSE_SESSION:
                paths = txn.paths2Delete if isinstance(txn, CloseSessionTxn) else None
                self.kill_session(session, zxid, paths)
                self.sessions.pop(session, None)
            elif op == OpNum.CREATE_SESSION:
                self.sessions[session] = txn.timeOut
            elif op == OpNum.ERROR:
                rc.err = txn.err
            elif op == OpNum.MULTI:
                self._apply_multi(rc, txn, zxid, time, session, subs, want_stat)
            else:
                rc.err = Code.UNIMPLEMENTED
        except TxnFailed as exc:
            rc.err = exc.code
        return rc

    def _apply_multi(self, rc: TxnResult, txn: MultiTxn, zxid: int, time: int, session: int,
                     subs: list[tuple[int, Any]] | None, want_stat: bool) -> None:
        if subs is None:
            subs = [(t.type, decode_txn(t.type, t.data)) for t in txn.txns]
        failed = any(t == OpNum.ERROR for t, _ in subs)
        post_failed = False
        results: list[TxnResult] = []
        rc.multi = results
        # a parent of many creates in one multi is hashed once, at its end (the digest is read
        # between txns only)
        defer = len(subs) >= _DEFER_DIGESTS_AT and "_dirty" not in self.__dict__ and self.digest_kept
        if defer:
            self.defer_parent_digests()
        try:
            for t, sub in subs:
                if isinstance(sub, ErrorTxn) and sub.err != 0:
                    post_failed = True
                if failed and t != OpNum.ERROR:
                    # a failed multi records its ops as errors; mirror ZooKeeper's layout
                    sub = ErrorTxn(int(Code.RUNTIMEINCONSISTENCY if post_failed else Code.OK))
                    t = OpNum.ERROR
                sub_rc = self._apply_one(t, sub, zxid, time, session, None, want_stat)
                results.append(sub_rc)
                if sub_rc.err and not rc.err:
                    rc.err = sub_rc.err
        finally:
            if defer:
                self.settle_digests()

    def create_node(self, path: str, data: bytes | None, acl: list[ACL] | tuple[ACL, ...], owner: int,
                    parent_cversion: int, zxid: int, time: int, want_stat: bool = True,
                    counted_apart: bool = False) -> bytes | None:
        """Create ``path``; its Stat, packed as the reply carries it (None with ``want_stat`` False:
        replay needs none). ``counted_apart``: the new node's share (``created_share``) is added to
        the total by whoever calls, from a sum made elsewhere; it is left UNHASHED here."""
        slash = path.rfind("/")
        parent_path = path[:slash] if slash > 0 else "/"
        parent = self.nodes.get(parent_path)
        if parent is None:
            raise TxnFailed(Code.NONODE)
        name = path[slash + 1:]
        if name in parent.children:
            # replay over a fuzzy snapshot: only move the parent's cversion forward, and give the
            # node this txn created its ACL (a fuzzy snapshot may name an ACL it lacks; ZOOKEEPER-4846)
            existing = self.nodes.get(path)
            if existing is not None and existing.czxid == zxid:
                existing.acl = self.intern_acl(acl)
            if parent_cversion > parent.cversion:
                self._unhash(parent_path, parent)
                parent.cversion, parent.pzxid = parent_cversion, zxid
                self._rehash_parent(parent_path, parent)
            raise TxnFailed(Code.NODEEXISTS)
        self._unhash(parent_path, parent)
        if parent_cversion == -1:
            parent_cversion = parent.cversion + 1
        if parent_cversion > parent.cversion:
            parent.cversion = parent_cversion
            parent.pzxid = zxid
        children = parent.children  # add_child, inlined: a replay runs this a million times
        if isinstance(children, dict):
            children[name] = None
        else:
            parent.children = {name: None}
        self._rehash_parent(parent_path, parent)
        node = Node(data, acl if acl is OPEN_ACL_UNSAFE else self.intern_acl(acl), zxid, time, owner)
        self.nodes[path] = node  # _put, inlined: a replay runs this a million times
        self.data_size += len(path) + (len(data) if data else 0)
        if counted_apart or not self.digest_kept:
            node.digest = UNHASHED
        else:
            node.digest = self.node_digest(path, node)
            self.digest = (self.digest + node.digest) & MASK64
        if owner:
            kind = ephemeral_kind(owner)
            if kind == "container":
                self.containers.add(path)
            elif kind == "ttl":
                self.ttls.add(path)
            else:
                self.ephemerals.setdefault(owner, set()).add(path)
        # before a stats znode is counted: ZooKeeper copies the stat first
        stat = node.stat_bytes() if want_stat else None
        if parent_path.startswith(QUOTA_ROOT):
            self._quota_node_created(parent_path, name)
        if self.quotas.paths:  # (no call on the hot path while no quota is set)
            root = self.quotas.deepest(path)
            if root is not None:
                self._count_quota(root, len(data) if data else 0, 1)
        if self.data_watches.by_path:
            self._fire(self.data_watches, path, EventType.NODE_CREATED, node.acl)
        if self.child_watches.by_path:
            self._fire(self.child_watches, parent_path, EventType.NODE_CHILDREN_CHANGED, parent.acl)
        return stat

    def delete_node(self, path: str, zxid: int) -> None:
        parent_path = parent_of(path)
        parent = self.nodes.get(parent_path)
        if parent is None:
            raise TxnFailed(Code.NONODE)
        self._unhash(parent_path, parent)
        remove_child(parent, basename(path))
        if zxid > parent.pzxid:
            parent.pzxid = zxid
        self._rehash_parent(parent_path, parent)
        node = self.nodes.pop(path, None)
        if node is None:
            raise TxnFailed(Code.NONODE)
        self._unhash(path, node)
        self.data_size -= len(path) + (len(node.data) if node.data else 0)
        kind = ephemeral_kind(node.ephemeral_owner)
        if kind == "container":
            self.containers.discard(path)
        elif kind == "ttl":
            self.ttls.discard(path)
        elif kind == "normal":
            owned = self.ephemerals.get(node.ephemeral_owner)
            if owned is not None:
                owned.discard(path)
                if not owned:
                    del self.ephemerals[node.ephemeral_owner]
        if parent_path.startswith(QUOTA_ROOT) and basename(path) == LIMIT_NODE:
            target = quota_target(parent_path)
            if target is not None:
                self.quotas.discard(target)
        if self.quotas.paths:
            root = self.quotas.deepest(path)
            if root is not None:
                self._count_quota(root, -(len(node.data) if node.data else 0), -1)
        processed = self._fire(self.data_watches, path, EventType.NODE_DELETED, node.acl)
        self._fire(self.child_watches, path, EventType.NODE_DELETED, node.acl, processed)
        self._fire(self.child_watches, parent_path, EventType.NODE_CHILDREN_CHANGED, parent.acl)

    def set_data(self, path: str, data: bytes | None, version: int, zxid: int, time: int,
                 want_stat: bool = True) -> bytes | None:
        node = self.nodes.get(path)
        if node is None:
            raise TxnFailed(Code.NONODE)
        self._unhash(path, node)
        diff = (len(data) if data else 0) - (len(node.data) if node.data else 0)
        self.data_size += diff
        node.data, node.version, node.mzxid, node.mtime = data, version, zxid, time
        self._rehash(path, node)
        if self.quotas.paths:
            root = self.quotas.deepest(path)
            if root is not None:
                self._count_quota(root, diff, 0)
        self._fire(self.data_watches, path, EventType.NODE_DATA_CHANGED, node.acl)
        return node.stat_bytes() if want_stat else None

    def set_acl(self, path: str, acl: list[ACL] | tuple[ACL, ...], version: int, want_stat: bool = True) -> bytes | None:
        node = self.nodes.get(path)
        if node is None:
            raise TxnFailed(Code.NONODE)
        self._unhash(path, node)
        node.acl, node.aversion = self.intern_acl(acl), version
        self._rehash(path, node)
        return node.stat_bytes() if want_stat else None

    # ---- quota bookkeeping (see quota.py) ----

    def _quota_node_created(self, parent_path: str, name: str) -> None:
        """A limits znode makes its path a quota root; a stats znode gets the root's counts."""
        target = quota_target(parent_path)
        if target is None:
            return
        if name == LIMIT_NODE:
            self.quotas.add(target)
        elif name == STAT_NODE:
            self.recount_quota(target)

    def _count_quota(self, root: str, bytes_diff: int, count_diff: int) -> None:
        """Move the usage in ``root``'s stats znode, in place (no version, mzxid or digest change,
        as DataTree.updateQuotaStat). A stats znode ZooKeeper could not parse is recounted."""
        node = self.nodes.get(stat_path(root))
        if node is None:
            return  # ZooKeeper logs "Missing node for stat" and goes on; so does the write here
        try:
            stats = parse_stats(node.data)
        except ValueError:
            self.recount_quota(root)
            return
        stats["count"] = stats.get("count", -1) + count_diff
        stats["bytes"] = stats.get("bytes", -1) + bytes_diff
        self._set_quota_data(node, format_stats(stats))

    def _set_quota_data(self, node: Node, data: bytes) -> None:
        self.data_size += len(data) - (len(node.data) if node.data else 0)
        node.data = data

    def recount_quota(self, root: str) -> None:
        """Count ``root``'s subtree (itself included) into its stats znode, replacing whatever it
        held with ``count=N,bytes=M`` (updateQuotaForPath)."""
        node = self.nodes.get(stat_path(root))
        if node is None:
            return
        count = size = 0
        stack = [root]
        nodes = self.nodes
        while stack:
            path = stack.pop()
            n = nodes.get(path)
            if n is None:
                continue
            count += 1
            size += len(n.data) if n.data else 0
            prefix = path if path != "/" else ""
            stack.extend(f"{prefix}/{child}" for child in n.children)
        self._set_quota_data(node, format_stats({"count": count, "bytes": size}))

    def setup_quotas(self) -> None:
        """After loading a tree: find every quota root (a leaf ``zookeeper_limits`` under
        /zookeeper/quota) and recount its stats (DataTree.setupQuota), so a fuzzy snapshot's
        stats never leak into the replayed ones."""
        self.quotas.clear()
        stack = [QUOTA_ROOT]
        while stack:
            path = stack.pop()
            node = self.nodes.get(path)
            if node is None:
                continue
            if node.children:
                stack.extend(f"{path}/{child}" for child in node.children)
            elif basename(path) == LIMIT_NODE:
                target = quota_target(parent_of(path))
                if target is not None:
                    self.recount_quota(target)
                    self.quotas.add(target)

    def kill_session(self, session: int, zxid: int, paths: list[str] | None = None) -> None:
        """Delete the session's ephemerals (those named by the txn, or all it owns)."""
        targets = list(paths) if paths is not None else sorted(self.ephemerals.get(session, ()))
        for path in targets:
            try:
                self.delete_node(path, zxid)
            except TxnFailed:
                pass
        self.ephemerals.pop(session, None)

    def _fire(self, table: WatchTable, path: str, etype: int, acl: tuple[ACL, ...],
              suppress: set[Any] | None = None) -> set[Any]:
        if not table.by_path:
            return set()
        fired = table.trigger(path, etype, suppress)
        if fired:
            self.events.append(WatchEvent(fired, etype, path, acl))
        return fired

    def drop_watcher(self, watcher: Any) -> None:
        self.data_watches.drop_watcher(watcher)
        self.child_watches.drop_watcher(watcher)


class TxnFailed(Exception):
    """A txn that cannot apply (its ZooKeeper error code): the tree is unchanged by it."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = int(code)
