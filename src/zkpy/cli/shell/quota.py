"""``setquota``, ``listquota`` and ``delquota`` as zkCli.sh 3.8 does them, on the client side.

A quota on ``/a`` is ``/zookeeper/quota/a/zookeeper_limits`` (the limits) and
``.../zookeeper_stats`` (the usage, which the server keeps), in StatsTrack text
(``zkpy.tree.quota`` owns that format; this module only reads and writes it).

Invariants owned here (zkCli's rules):
- a quota goes only on an existing node, never under or above another quota;
- setting one limit keeps the others: a new limits node holds only the limits given, an
  existing one is rewritten with all four (``count``, ``bytes``, ``countHardLimit``,
  ``byteHardLimit``; -1 for none);
- ``delquota -n|-b|-N|-B`` sets that limit to -1; ``delquota`` alone deletes both nodes and
  then the empty directories up to ``/zookeeper/quota``.
"""

from __future__ import annotations

from typing import Any

from zkpy.client.sync import Client
from zkpy.errors import Code, ZookeeperError
from zkpy.tree.quota import (
    BYTES,
    BYTES_HARD,
    COUNT,
    COUNT_HARD,
    LIMIT_NODE,
    QUOTA_ROOT,
    STAT_NODE,
    format_stats,
    limit_path,
    parse_stats,
    stat_path,
)

from .output import Output
from .parse import CommandFailed

# the command-line letter of each limit
OPTIONS = (("n", COUNT), ("b", BYTES), ("N", COUNT_HARD), ("B", BYTES_HARD))


def _limits_data(client: Client, path: str, missing: str) -> bytes:
    try:
        data, _ = client.get(limit_path(path))
    except ZookeeperError as exc:
        if int(exc.code) == Code.NONODE:
            raise CommandFailed(missing, "NONODE") from None
        raise
    return data


def listquota(client: Client, out: Output, path: str) -> dict[str, Any]:
    out.line(f"absolute path is {limit_path(path)}")
    quota = parse_stats(_limits_data(client, path, f"quota for {path} does not exist."))
    usage = parse_stats(client.get(stat_path(path))[0])
    out.line(f"Output quota for {path} {format_stats(quota).decode()}")
    out.line(f"Output stat for {path} {format_stats(usage).decode()}")
    return {"quota": quota, "stat": usage}


def setquota(client: Client, path: str, limits: dict[str, int]) -> dict[str, Any]:
    if client.exists(path) is None:
        raise CommandFailed(f"{path} does not exist.", "NONODE")
    _check_no_nested_quota(client, path)
    try:
        old_data, _ = client.get(limit_path(path))
    except ZookeeperError as exc:
        if int(exc.code) != Code.NONODE:
            raise
        client.ensure_path(QUOTA_ROOT + path)
        client.create(limit_path(path), format_stats(limits))
        client.create(stat_path(path), b"count=0,bytes=0")  # the server counts the subtree
    else:
        old = parse_stats(old_data)
        client.set(limit_path(path), format_stats({key: limits.get(key, old.get(key, -1)) for _, key in OPTIONS}))
    return {"path": path, "quota": limits}


def _check_no_nested_quota(client: Client, path: str) -> None:
    parts = [s for s in path.split("/") if s]
    for i in range(1, len(parts)):
        ancestor = "/" + "/".join(parts[:i])
        if client.exists(limit_path(ancestor)) is not None:
            raise CommandFailed(f"{path} has a parent {ancestor} which has a quota", "BAD_ARGUMENT")
    base = QUOTA_ROOT + path
    if client.exists(base) is None:
        return
    todo = [base]
    while todo:
        node = todo.pop()
        for child in client.get_children(node):
            if child == LIMIT_NODE and node != base:
                raise CommandFailed(f"{path} has child {node[len(QUOTA_ROOT):]} which has a quota", "BAD_ARGUMENT")
            todo.append(f"{node}/{child}")


def delquota(client: Client, path: str, keys: list[str]) -> dict[str, Any]:
    old = parse_stats(_limits_data(client, path, f"Quota does not exist for {path}"))
    if keys:
        for key in keys:
            old[key] = -1
        client.set(limit_path(path), format_stats(old))
        return {"path": path, "removed": keys}
    base = QUOTA_ROOT + path
    for child in client.get_children(base):
        if child in (LIMIT_NODE, STAT_NODE):
            client.delete(f"{base}/{child}")
    node = base  # the directories left empty, up to /zookeeper/quota
    while node != QUOTA_ROOT and not client.get_children(node):
        client.delete(node)
        node = node.rsplit("/", 1)[0]
    return {"path": path, "removed": "all"}
