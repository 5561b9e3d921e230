"""The export file format: what reading accepts and refuses, relocation, permissions, data encoding."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from zkpy.cli.export_format import (
    Export,
    FormatError,
    NodeRecord,
    perms_text,
    perms_value,
    read_export,
    relocate,
    write_export,
)
from zkpy.wire.proto import ACL, Id

OPEN = [{"scheme": "world", "id": "anyone", "perms": "cdrwa"}]


def _doc(*nodes: dict[str, Any], root: str = "/a") -> dict[str, Any]:
    return {"format": "zkpy-export", "version": 1, "root": root, "nodes": list(nodes)}


def test_write_then_read_is_identity() -> None:
    export = Export("/a", [NodeRecord("/a", "tëxt".encode(), [ACL(31, Id("world", "anyone"))], {"version": 3}),
                           NodeRecord("/a/b", b"\xff\x00", [ACL(1, Id("ip", "10.0.0.0/8")),
                                                           ACL(17, Id("digest", "u:AAAA"))])],
                    ["/a/e"])
    out = io.StringIO()
    write_export(out, export)
    doc = json.loads(out.getvalue())
    assert doc["nodes"][0]["data"] == "tëxt" and doc["nodes"][1]["data_base64"] == "/wA="
    assert doc["nodes"][1]["acl"][1] == {"scheme": "digest", "id": "u:AAAA", "perms": "ra"}
    assert read_export(doc) == export
    forced = io.StringIO()
    write_export(forced, export, force_base64=True)
    assert all("data_base64" in n for n in json.loads(forced.getvalue())["nodes"])
    assert read_export(json.loads(forced.getvalue())) == export


@pytest.mark.parametrize(("doc", "message"), [
    ({"version": 1}, "not a zkpy export"),
    ({**_doc(), "version": 2}, "version 2"),
    (_doc({"path": "/b", "data": "", "acl": OPEN}), "not under root /a"),
    (_doc({"path": "/a", "data": "", "acl": OPEN}, {"path": "/a/x/y", "data": "", "acl": OPEN}), "before its parent"),
    (_doc({"path": "/a", "data": "", "acl": OPEN}, {"path": "/a", "data": "", "acl": OPEN}), "appears twice"),
    (_doc({"path": "/a/", "data": "", "acl": OPEN}), "bad path"),
    (_doc({"path": "/a", "acl": OPEN}), "exactly one of data"),
    (_doc({"path": "/a", "data_base64": "!!", "acl": OPEN}), "not base64"),
    (_doc({"path": "/a", "data": "", "acl": []}), "non-empty list"),
    (_doc({"path": "/a", "data": "", "acl": [{"scheme": "world", "id": "anyone", "perms": "rx"}]}), "'x'"),
    (_doc({"path": "/zookeeper", "data": "", "acl": OPEN}, root="/zookeeper"), "server's own"),
])
def test_read_refuses(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(FormatError, match=message):
        read_export(doc)


def test_relocate_and_perms() -> None:
    assert relocate("/a/b/c", "/a", "/x/y") == "/x/y/b/c"
    assert relocate("/a", "/a", "/x") == "/x"
    assert relocate("/b", "/", "/x") == "/x/b"
    assert relocate("/", "/", "/x") == "/x"
    assert relocate("/a/b", "/a", "/") == "/b"
    assert perms_text(31) == "cdrwa" and perms_text(1 | 16) == "ra" and perms_value("cdrwa") == 31
    with pytest.raises(FormatError):
        perms_text(32)
