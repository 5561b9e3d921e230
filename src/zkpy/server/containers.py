"""Which nodes the container sweep deletes (ZooKeeper's ContainerManager), as a pure function of
the tree and the wall clock: empty containers that once had a child, and childless TTL nodes
past their TTL. Only a standalone server or the leader sweeps (a deleteContainer txn each);
learners hear of it through those txns."""

from __future__ import annotations

from zkpy.tree.datatree import DataTree, ephemeral_kind, ttl_of


def container_candidates(tree: DataTree, wall_ms: int) -> list[str]:
    """The paths to delete now, containers first, each kind in path order."""
    out = []
    for path in sorted(tree.containers):
        node = tree.get(path)
        if node is not None and node.cversion > 0 and not node.children:
            out.append(path)
    for path in sorted(tree.ttls):
        node = tree.get(path)
        if node is None or node.children:
            continue
        if ephemeral_kind(node.ephemeral_owner) == "ttl" and wall_ms - node.mtime > ttl_of(node.ephemeral_owner):
            out.append(path)
    return out
