"""The JSON format of ``zkpy export`` / ``zkpy import`` (format "zkpy-export", version 1).

One document::

    {"format": "zkpy-export", "version": 1, "root": "/app",
     "skipped_ephemerals": ["/app/lock/n-0000000001"],
     "nodes": [
      {"path": "/app", "data": "text", "acl": [{"scheme": "world", "id": "anyone", "perms": "cdrwa"}],
       "stat": {"czxid": 2, "mzxid": 2, "ctime": 1700000000000, "mtime": 1700000000000,
                "version": 0, "cversion": 1, "aversion": 0}},
      {"path": "/app/blob", "data_base64": "AAEC", "acl": [...]}
     ]}

Invariants this module owns:
- ``nodes`` lists the subtree in pre-order, children in code point order of their names, each
  node after its parent; paths are absolute as exported (``root`` first); import relocates them
  under another root by replacing the ``root`` prefix.
- A node's data is ``data`` (text) when it is valid UTF-8, otherwise ``data_base64`` (standard
  base64, padded); exactly one of the two is present (``--base64`` writes base64 for all).
- ``perms`` are the letters of ZooKeeper's permission bits in zkCli.sh's order "cdrwa"
  (create, delete, read, write, admin); ACL ids are kept as the server shows them (digest
  ids hashed, never a password).
- ``stat`` (optional) is informational: import never restores it.
- Ephemeral nodes are not exported: their paths are listed in ``skipped_ephemerals``;
  ``/zookeeper`` (the system subtree) is never exported. Sequential names are plain names here.
- Reading checks everything (format, version, paths, parent-before-child, ACL entries) and
  raises ``FormatError`` naming the first fault, before anything is written anywhere.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

from zkpy.wire.proto import ACL, Id, Stat

FORMAT = "zkpy-export"
VERSION = 1
PERM_LETTERS = (("c", 4), ("d", 8), ("r", 1), ("w", 2), ("a", 16))  # zkCli.sh's order
ALL_PERMS = 31
STAT_FIELDS = ("czxid", "mzxid", "ctime", "mtime", "version", "cversion", "aversion")


class FormatError(ValueError):
    """The file is not a valid export: the message names what and where."""


@dataclass(slots=True)
class NodeRecord:
    path: str
    data: bytes
    acl: list[ACL]
    stat: dict[str, int] | None = None


@dataclass(slots=True)
class Export:
    root: str
    nodes: list[NodeRecord]
    skipped_ephemerals: list[str] = field(default_factory=list)


def perms_text(perms: int) -> str:
    if perms & ~ALL_PERMS:
        raise FormatError(f"unknown permission bits 0x{perms:x}")
    return "".join(letter for letter, bit in PERM_LETTERS if perms & bit)


def perms_value(text: str) -> int:
    value = 0
    bits = dict(PERM_LETTERS)
    for letter in text:
        if letter not in bits:
            raise FormatError(f"bad permission letter {letter!r} in {text!r} (use cdrwa)")
        value |= bits[letter]
    return value


def stat_fields(stat: Stat) -> dict[str, int]:
    return {name: int(getattr(stat, name)) for name in STAT_FIELDS}


def node_json(node: NodeRecord, force_base64: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"path": node.path}
    text = None
    if not force_base64:
        try:
            text = node.data.decode("utf-8")
        except UnicodeDecodeError:
            pass
    if text is not None:
        out["data"] = text
    else:
        out["data_base64"] = base64.b64encode(node.data).decode("ascii")
    out["acl"] = [{"scheme": a.id.scheme, "id": a.id.id, "perms": perms_text(a.perms)} for a in node.acl]
    if node.stat is not None:
        out["stat"] = node.stat
    return out


def write_export(out: TextIO, export: Export, force_base64: bool = False) -> None:
    """The document, one node a line (diffable; ``json.load`` reads it)."""
    head = {"format": FORMAT, "version": VERSION, "root": export.root,
            "skipped_ephemerals": export.skipped_ephemerals}
    out.write(json.dumps(head, ensure_ascii=False)[:-1] + ', "nodes": [')
    for i, node in enumerate(export.nodes):
        out.write(("\n " if i == 0 else ",\n ") + json.dumps(node_json(node, force_base64), ensure_ascii=False))
    out.write("\n]}\n")


def _fail(where: str, what: str) -> FormatError:
    return FormatError(f"{where}: {what}")


def _check_path(path: Any, where: str) -> str:
    if not isinstance(path, str) or not path.startswith("/") or (path != "/" and path.endswith("/")) \
            or "//" in path or "\0" in path or any(part in (".", "..") for part in path.split("/")[1:]):
        raise _fail(where, f"bad path {path!r}")
    return path


def _node(raw: Any, index: int) -> NodeRecord:
    where = f"nodes[{index}]"
    if not isinstance(raw, dict):
        raise _fail(where, "not an object")
    path = _check_path(raw.get("path"), where)
    where = f"nodes[{index}] ({path})"
    if ("data" in raw) == ("data_base64" in raw):
        raise _fail(where, "needs exactly one of data and data_base64")
    if "data" in raw:
        if not isinstance(raw["data"], str):
            raise _fail(where, "data is not a string")
        try:
            data = raw["data"].encode("utf-8")
        except UnicodeEncodeError:
            raise _fail(where, "data is not valid Unicode text (use data_base64)") from None
    else:
        try:
            data = base64.b64decode(raw["data_base64"], validate=True)
        except (binascii.Error, TypeError, ValueError):
            raise _fail(where, "data_base64 is not base64") from None
    acl_raw = raw.get("acl")
    if not isinstance(acl_raw, list) or not acl_raw:
        raise _fail(where, "acl must be a non-empty list")
    acl = []
    for entry in acl_raw:
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in ("scheme", "id", "perms")):
            raise _fail(where, f"bad ACL entry {entry!r} (scheme, id, perms: strings)")
        try:
            acl.append(ACL(perms_value(entry["perms"]), Id(entry["scheme"], entry["id"])))
        except FormatError as exc:
            raise _fail(where, str(exc)) from None
    stat = raw.get("stat")
    return NodeRecord(path, data, acl, stat if isinstance(stat, dict) else None)


def read_export(doc: Any) -> Export:
    """The export a parsed JSON document holds; FormatError if it is not a valid one."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise FormatError(f'not a zkpy export (no "format": "{FORMAT}")')
    if doc.get("version") != VERSION:
        raise FormatError(f"export format version {doc.get('version')!r}: this zkpy reads version {VERSION}")
    root = _check_path(doc.get("root"), "root")
    raw_nodes = doc.get("nodes")
    if not isinstance(raw_nodes, list):
        raise FormatError("nodes: not a list")
    nodes = [_node(raw, i) for i, raw in enumerate(raw_nodes)]
    seen: set[str] = set()
    for i, node in enumerate(nodes):
        if not within(node.path, root):
            raise _fail(f"nodes[{i}]", f"{node.path} is not under root {root}")
        if within(node.path, "/zookeeper"):
            raise _fail(f"nodes[{i}]", f"{node.path}: the /zookeeper subtree is the server's own")
        if node.path in seen:
            raise _fail(f"nodes[{i}]", f"{node.path} appears twice")
        if node.path != root and parent_of(node.path) not in seen:
            raise _fail(f"nodes[{i}]", f"{node.path} comes before its parent")
        seen.add(node.path)
    if nodes and nodes[0].path != root:
        raise FormatError(f"nodes[0] is {nodes[0].path}, not the root {root}")
    skipped = doc.get("skipped_ephemerals", [])
    if not isinstance(skipped, list) or not all(isinstance(p, str) for p in skipped):
        raise FormatError("skipped_ephemerals: not a list of paths")
    return Export(root, nodes, list(skipped))


def within(path: str, root: str) -> bool:
    return path == root or root == "/" or path.startswith(root + "/")


def parent_of(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def child_path(parent: str, name: str) -> str:
    return f"/{name}" if parent == "/" else f"{parent}/{name}"


def relocate(path: str, root: str, at: str) -> str:
    """``path`` (under ``root``) moved to the same place under ``at``."""
    rest = path[len(root):] if root != "/" else path
    if at == "/":
        return rest or "/"
    return at + (rest if rest != "/" else "")


def preorder(root: str, children: dict[str, list[str]]) -> Iterator[str]:
    """``root`` and the paths under it in ``children``, in pre-order, names in code point order."""
    stack = [root]
    while stack:
        path = stack.pop()
        yield path
        stack.extend(child_path(path, name) for name in sorted(children.get(path, ()), reverse=True))
