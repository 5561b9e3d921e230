"""Random txns valid against a tree, as prep would settle them, and a full dump of a tree:
shared by the snapshot and recovery tests."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import zkpy.storage.recovery as recovery
import zkpy.storage.snapshot as snapshot
from zkpy.tree.acl import OPEN_ACL_UNSAFE, READ_ACL_UNSAFE
from zkpy.tree.datatree import DataTree
from zkpy.wire.consts import CONTAINER_EPHEMERAL_OWNER, MAX_TTL_MS, OpCode, Perms
from zkpy.wire.proto import ACL, Id
from zkpy.wire.txn import (
    CloseSessionTxn,
    CreateContainerTxn,
    CreateSessionTxn,
    CreateTTLTxn,
    CreateTxn,
    DeleteTxn,
    MultiTxn,
    SetACLTxn,
    SetDataTxn,
    Txn,
    TxnHeader,
)

MASK64 = (1 << 64) - 1
DIGEST_ACL = (ACL(int(Perms.READ), Id("digest", "bob:VmIa4oQ7RPoFZr/2cHxaPmZ6mNs=")),
              ACL(int(Perms.ALL), Id("ip", "10.1.0.0/16")))
IP_ACL = (ACL(int(Perms.READ | Perms.WRITE), Id("ip", "192.168.0.1")),)
ACL_POOL = [OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, DIGEST_ACL, IP_ACL]


# ---------------------------------------------------------------- helpers


def hdr(zxid: int, op: int, session: int = 0) -> TxnHeader:
    return TxnHeader(session, zxid & 0x7FFFFFFF, zxid, 1_600_000_000_000 + zxid, op)


def summed_apart(work: Callable[[], int]) -> Callable[[], int | None]:
    """A ``digest_apart`` for loading trees that sums at once, here, on the tree as it is when
    asked (the runtime's sums in a forked child, on the tree as it was at the fork)."""
    value = work()
    return lambda: value


def apart_at_every_size(monkeypatch: Any) -> None:
    """Sum digests apart however small the snapshot or the logs (the runtime's threshold is for
    trees of a million nodes)."""
    monkeypatch.setattr(snapshot, "SUM_APART_FROM", 0)
    monkeypatch.setattr(recovery, "SUM_APART_FROM", 0)


def full_digest(tree: DataTree) -> int:
    return sum(tree.node_digest(p, n) for p, n in tree.nodes.items()) & MASK64


def dump(tree: DataTree) -> dict[str, Any]:
    """Everything a snapshot plus replay must reproduce (child order is not part of it)."""
    nodes = {
        path: (n.data, tuple(n.acl), n.czxid, n.mzxid, n.ctime, n.mtime, n.version, n.cversion, n.aversion,
               n.ephemeral_owner, n.pzxid, sorted(n.children))
        for path, n in tree.nodes.items()
    }
    return {
        "nodes": nodes,
        "ephemerals": {s: sorted(p) for s, p in tree.ephemerals.items() if p},
        "containers": sorted(tree.containers),
        "ttls": sorted(tree.ttls),
        "sessions": dict(tree.sessions),
        "digest": tree.digest,
    }


class Workload:
    """Random txns, each valid against the tree's current state (as prep would settle them),
    applied to the tree as they are made and kept in ``log``."""

    def __init__(self, rng: random.Random, tree: DataTree) -> None:
        self.rng = rng
        self.tree = tree
        self.zxid = tree.last_processed_zxid
        self.log: list[tuple[TxnHeader, Any]] = []
        self.next_session = 0x100
        self.fresh_acls = 0

    def _data(self) -> bytes | None:
        r = self.rng.random()
        if r < 0.1:
            return None
        if r < 0.2:
            return b""
        return self.rng.randbytes(self.rng.randint(1, 40))

    def _acl(self) -> tuple[ACL, ...]:
        if self.rng.random() < 0.2:  # an ACL the tree has never seen
            self.fresh_acls += 1
            return (ACL(int(Perms.ALL), Id("digest", f"u{self.fresh_acls}:{self.fresh_acls:x}=")),)
        return self.rng.choice(ACL_POOL)

    def _user_paths(self) -> list[str]:
        return [p for p in self.tree.nodes if p != "/" and not p.startswith("/zookeeper")]

    def _apply(self, op: int, txn: Any, session: int = 0) -> None:
        self.zxid += 1
        h = hdr(self.zxid, op, session)
        self.tree.apply(h, txn)
        self.tree.events.clear()
        self.log.append((h, txn))

    def _create(self) -> tuple[int, Any, int] | None:
        rng, tree = self.rng, self.tree
        parents = ["/"] + [p for p in self._user_paths() if tree.nodes[p].ephemeral_owner == 0]
        parent_path = rng.choice(parents)
        parent = tree.nodes[parent_path]
        cversion = parent.cversion + 1
        name = rng.choice(["a", "b", "node", "lock-", "q", "ü-日本"])
        kind = rng.choice(["persistent", "persistent", "sequential", "ephemeral", "container", "ttl"])
        if kind == "sequential" or (kind == "ephemeral" and rng.random() < 0.5):
            name += f"{parent.cversion:010d}"
        path = ("" if parent_path == "/" else parent_path) + "/" + name
        if name in parent.children:
            return None
        data, acl = self._data(), list(self._acl())
        if kind == "ephemeral":
            if not tree.sessions:
                return None
            session = rng.choice(sorted(tree.sessions))
            return OpCode.CREATE, CreateTxn(path, data, acl, True, cversion), session
        if kind == "container":
            return OpCode.CREATE_CONTAINER, CreateContainerTxn(path, data, acl, cversion), 0
        if kind == "ttl":
            return OpCode.CREATE_TTL, CreateTTLTxn(path, data, acl, cversion, rng.randint(1, MAX_TTL_MS)), 0
        return rng.choice([OpCode.CREATE, OpCode.CREATE2]), CreateTxn(path, data, acl, False, cversion), 0

    def one(self) -> None:
        rng, tree = self.rng, self.tree
        paths = self._user_paths()
        r = rng.random()
        if r < 0.05 or not tree.sessions:
            session = self.next_session
            self.next_session += 1
            self._apply(OpCode.CREATE_SESSION, CreateSessionTxn(rng.choice([4000, 30000, 40000])), session)
        elif r < 0.09:
            session = rng.choice(sorted(tree.sessions))
            self._apply(OpCode.CLOSE_SESSION, CloseSessionTxn(sorted(tree.ephemerals.get(session, ()))), session)
        elif r < 0.45 or not paths:
            made = self._create()
            if made is not None:
                self._apply(made[0], made[1], made[2])
        elif r < 0.62:
            leaves = [p for p in paths if not tree.nodes[p].children]
            if leaves:
                path = rng.choice(leaves)
                owner = tree.nodes[path].ephemeral_owner
                op = OpCode.DELETE_CONTAINER if owner == CONTAINER_EPHEMERAL_OWNER and rng.random() < 0.5 \
                    else OpCode.DELETE
                self._apply(op, DeleteTxn(path))
        elif r < 0.8:
            path = rng.choice(paths)
            self._apply(OpCode.SET_DATA, SetDataTxn(path, self._data(), tree.nodes[path].version + 1))
        elif r < 0.93:
            path = rng.choice(paths)
            self._apply(OpCode.SET_ACL, SetACLTxn(path, list(self._acl()), tree.nodes[path].aversion + 1))
        else:  # a multi: a create and a setData
            made = self._create()
            if made is None or made[0] != OpCode.CREATE or made[1].ephemeral:
                return
            target = rng.choice(paths)
            sub = [Txn(OpCode.CREATE, made[1].to_bytes()),
                   Txn(OpCode.SET_DATA, SetDataTxn(target, b"multi", tree.nodes[target].version + 1).to_bytes())]
            self._apply(OpCode.MULTI, MultiTxn(sub))

    def run(self, n: int) -> None:
        for _ in range(n):
            self.one()
