"""``zkpy export`` / ``zkpy import``: round trips against zkpy and Apache ZooKeeper 3.8, the
differential (the same tree exported from both gives the same JSON but for stats), conflicts,
and a 20k-node tree (pipelined reads and multi batches; no timing asserts)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from zkpy.cli.export import ImportConflict, export_tree, import_tree
from zkpy.cli.export_format import read_export
from zkpy.client import AsyncClient
from zkpy.errors import NoNodeError
from zkpy.testing.servers import ServerProcess, start_zkpy
from zkpy.wire.proto import ACL, Id

USER = b"exporter:secret"
DIGEST_ID = "exporter:" + base64.b64encode(hashlib.sha1(USER).digest()).decode()
OPEN = [ACL(31, Id("world", "anyone"))]
BINARY = bytes(range(256)) + b"\xff\xfe\x00"


def _zkpy(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zkpy.cli.main", *args], capture_output=True, text=True,
                          input=stdin, timeout=120)


async def _connect(server: ServerProcess, auth: bool = True) -> AsyncClient:
    client = AsyncClient(server.hosts, auth=[("digest", USER)] if auth else (), session_timeout=30.0)
    await client.start()
    return client


async def _build(server: ServerProcess, root: str) -> None:
    """Text and binary data, unicode names, nested nodes, sequential names, digest/world/ip ACLs
    (some on parents that deny CREATE), and one ephemeral that stays for the session's life."""
    c = await _connect(server)
    try:
        await c.create(root, "root text ✓".encode())
        await c.create(f"{root}/bin", BINARY)
        await c.create(f"{root}/empty", b"")
        await c.create(f"{root}/ünïcode-名前", "日本語のデータ".encode())
        await c.create(f"{root}/ünïcode-名前/child", b"x" * 3000)
        await c.create(f"{root}/deep/a/b/c/d/e", b"leaf", make_parents=True)
        await c.create(f"{root}/q", b"")
        for _ in range(3):
            await c.create(f"{root}/q/item-", b"", sequence=True)
        await c.create(f"{root}/digest", b"private")
        await c.create(f"{root}/digest/inner", b"inner", [ACL(17, Id("digest", DIGEST_ID))])
        await c.set_acl(f"{root}/digest", [ACL(31, Id("digest", DIGEST_ID))])
        await c.create(f"{root}/ip", b"by address", [ACL(31, Id("ip", "127.0.0.1")),
                                                      ACL(1, Id("ip", "10.0.0.0/8"))])
        await c.create(f"{root}/readonly", b"ro")
        await c.create(f"{root}/readonly/kid", b"k")
        await c.set_acl(f"{root}/readonly", [ACL(1, Id("world", "anyone")), ACL(31, Id("digest", DIGEST_ID))])
        await c.create(f"{root}/mixed", b"m", [ACL(17, Id("world", "anyone")), ACL(14, Id("digest", DIGEST_ID))])
    finally:
        await c.close()


async def _export_holding_ephemeral(server: ServerProcess, root: str, out: Path) -> dict[str, Any]:
    """Export while another session owns an ephemeral node in the tree."""
    c = await _connect(server, auth=False)
    try:
        await c.create(f"{root}/session-owned", b"mine", ephemeral=True)
        return await asyncio.to_thread(_export_cli, server, root, out)
    finally:
        await c.close()


async def _walk(server: ServerProcess, root: str) -> dict[str, tuple[bytes, list[tuple[str, str, int]]]]:
    """Every node under ``root`` by relative path: (data, ACL), read one by one (independent of export)."""
    c = await _connect(server)
    out: dict[str, tuple[bytes, list[tuple[str, str, int]]]] = {}
    try:
        async def visit(path: str) -> None:
            data, _ = await c.get(path)
            acl, _ = await c.get_acl(path)
            out[path[len(root):] or "/"] = (data, [(a.id.scheme, a.id.id, a.perms) for a in acl])
            for name in sorted(await c.get_children(path)):
                await visit(f"{path}/{name}")
        await visit(root)
    finally:
        await c.close()
    return out


def _export_cli(server: ServerProcess, root: str, out: Path, *extra: str) -> dict[str, Any]:
    r = _zkpy("export", "--server", server.hosts, "--auth", f"digest:{USER.decode()}", root, "-o", str(out), *extra)
    assert r.returncode == 0, r.stderr
    assert "exported" in r.stderr
    doc: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return doc


@pytest.fixture(scope="module")
def target() -> Iterator[ServerProcess]:
    """A fresh zkpy server to import into."""
    server = start_zkpy()
    yield server
    server.cleanup()


def _check_round_trip(source: ServerProcess, target: ServerProcess, root: str, tmp_path: Path) -> dict[str, Any]:
    doc = asyncio.run(_export_holding_ephemeral(source, root, tmp_path / "tree.json"))
    by_path = {n["path"]: n for n in doc["nodes"]}
    assert doc["format"] == "zkpy-export" and doc["version"] == 1 and doc["root"] == root
    assert doc["skipped_ephemerals"] == [f"{root}/session-owned"]
    assert f"{root}/session-owned" not in by_path
    assert by_path[root]["data"] == "root text ✓"
    assert base64.b64decode(by_path[f"{root}/bin"]["data_base64"]) == BINARY
    assert {"czxid", "mtime", "version"} <= set(by_path[root]["stat"])
    assert [n["path"] for n in doc["nodes"]][:3] == [root, f"{root}/bin", f"{root}/deep"]
    assert sorted(by_path[f"{root}/q"] and [p for p in by_path if p.startswith(f"{root}/q/")]) == [
        f"{root}/q/item-000000000{i}" for i in range(3)]
    at = f"/restored-{uuid.uuid4().hex[:8]}"
    r = _zkpy("import", "--server", target.hosts, str(tmp_path / "tree.json"), "--at", at)
    assert r.returncode == 0, r.stderr
    assert f"{len(doc['nodes'])} created" in r.stderr
    assert asyncio.run(_walk(target, at)) == asyncio.run(_walk(source, root))  # the ephemeral is gone by now
    return doc


def test_round_trip_zkpy(zkpy_server: ServerProcess, target: ServerProcess, tmp_path: Path) -> None:
    root = f"/export-{uuid.uuid4().hex[:8]}"
    asyncio.run(_build(zkpy_server, root))
    _check_round_trip(zkpy_server, target, root, tmp_path)


@pytest.mark.interop
def test_round_trip_apache_and_differential(apache_server: ServerProcess, zkpy_server: ServerProcess,
                                            target: ServerProcess, tmp_path: Path) -> None:
    """The same tree built on Apache 3.8 and on zkpy exports to the same JSON but for stats;
    Apache's export imports into zkpy, and zkpy's into Apache, with equal trees."""
    root = f"/diff-{uuid.uuid4().hex[:8]}"
    asyncio.run(_build(apache_server, root))
    asyncio.run(_build(zkpy_server, root))
    from_apache = _check_round_trip(apache_server, target, root, tmp_path)
    from_zkpy = _export_cli(zkpy_server, root, tmp_path / "zkpy.json")

    def without_stats(doc: dict[str, Any]) -> dict[str, Any]:
        return {**doc, "nodes": [{k: v for k, v in n.items() if k != "stat"} for n in doc["nodes"]],
                "skipped_ephemerals": []}

    assert without_stats(from_apache) == without_stats(from_zkpy)
    at = f"/from-zkpy-{uuid.uuid4().hex[:8]}"
    r = _zkpy("import", "--server", apache_server.hosts, str(tmp_path / "zkpy.json"), "--at", at)
    assert r.returncode == 0, r.stderr
    assert asyncio.run(_walk(apache_server, at)) == asyncio.run(_walk(zkpy_server, root))


def test_import_conflicts(target: ServerProcess, tmp_path: Path) -> None:
    """fail: nothing written, the conflicts named; skip: existing nodes kept; overwrite: data and ACL
    replaced, nodes the file does not name kept."""
    root = f"/conflict-{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        c = await _connect(target)
        try:
            await c.create(root, b"old root")
            await c.create(f"{root}/a", b"a")
            await c.create(f"{root}/a/a1", b"a1")
            await c.create(f"{root}/b", b"b", [ACL(31, Id("digest", DIGEST_ID))])
            export = await export_tree(c, root)
            (tmp_path / "c.json").write_text(json.dumps({"format": "zkpy-export", "version": 1, "root": root,
                                                         "nodes": []}))
            await c.set(f"{root}/a", b"changed")
            await c.set_acl(f"{root}/a", [ACL(1, Id("world", "anyone")), ACL(31, Id("digest", DIGEST_ID))])
            await c.delete(f"{root}/a/a1")
            await c.create(f"{root}/extra", b"not in the file")
            # fail (the default): a conflict anywhere writes nothing, not even the missing a1
            with pytest.raises(ImportConflict) as info:
                await import_tree(c, export)
            assert info.value.paths == sorted([root, f"{root}/a", f"{root}/b"])
            assert await c.exists(f"{root}/a/a1") is None
            # skip: a1 comes back, a keeps its changed data and ACL
            report = await import_tree(c, export, existing="skip")
            assert (report.created, report.overwritten) == (1, 0)
            assert sorted(report.skipped) == sorted([root, f"{root}/a", f"{root}/b"])
            assert (await c.get(f"{root}/a"))[0] == b"changed"
            assert (await c.get(f"{root}/a/a1"))[0] == b"a1"
            # overwrite: a gets the file's data and ACL back; extra stays
            report = await import_tree(c, export, existing="overwrite")
            assert (report.created, report.overwritten) == (0, 4)
            assert (await c.get(f"{root}/a"))[0] == b"a"
            assert (await c.get_acl(f"{root}/a"))[0] == OPEN
            assert (await c.get(f"{root}/extra"))[0] == b"not in the file"
        finally:
            await c.close()

    asyncio.run(scenario())
    # the command: exit 1, the conflicts named, nothing written
    doc = {"format": "zkpy-export", "version": 1, "root": root, "nodes": [
        {"path": root, "data": "r", "acl": [{"scheme": "world", "id": "anyone", "perms": "cdrwa"}]},
        {"path": f"{root}/new", "data": "n", "acl": [{"scheme": "world", "id": "anyone", "perms": "cdrwa"}]}]}
    r = _zkpy("import", "--server", target.hosts, "-", stdin=json.dumps(doc))
    assert r.returncode == 1
    assert f"1 node(s) exist already: {root} " in r.stderr and "nothing was written" in r.stderr

    async def absent() -> None:
        c = await _connect(target)
        try:
            with pytest.raises(NoNodeError):
                await c.get(f"{root}/new")
        finally:
            await c.close()

    asyncio.run(absent())
    bad = _zkpy("import", "--server", target.hosts, "-", stdin=json.dumps({**doc, "version": 9}))
    assert bad.returncode == 2 and "version 9" in bad.stderr
    system = {"format": "zkpy-export", "version": 1, "root": "/a", "nodes": [
        {"path": "/a", "data": "", "acl": [{"scheme": "world", "id": "anyone", "perms": "cdrwa"}]},
        {"path": "/a/zookeeper", "data": "", "acl": [{"scheme": "world", "id": "anyone", "perms": "cdrwa"}]}]}
    refused = _zkpy("import", "--server", target.hosts, "-", "--at", "/", stdin=json.dumps(system))
    assert refused.returncode == 1 and "/zookeeper: the /zookeeper subtree is the server's own" in refused.stderr


def test_export_of_root_leaves_out_zookeeper(target: ServerProcess) -> None:
    r = _zkpy("export", "--server", target.hosts, "--auth", f"digest:{USER.decode()}", "/", "--no-stat")
    assert r.returncode == 0, r.stderr
    doc = read_export(json.loads(r.stdout))
    assert doc.nodes[0].path == "/"
    assert not any(n.path.startswith("/zookeeper") for n in doc.nodes)
    assert "stat" not in json.loads(r.stdout)["nodes"][0]


def test_the_doc_example_runs(target: ServerProcess, tmp_path: Path) -> None:
    """docs/export.md's first sh block, as written, against a fresh server."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "export.md").read_text(encoding="utf-8")
    block = re.search(r"```sh\n(.*?)```", doc, re.S)
    assert block is not None
    script = block.group(1).replace("127.0.0.1:2181", target.hosts)
    shim = f'zkpy() {{ "{sys.executable}" -m zkpy.cli.main "$@"; }}\nset -e\n'
    r = subprocess.run(["bash", "-c", shim + script], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={**os.environ})
    assert r.returncode == 0, r.stderr
    copy = json.loads(r.stdout)
    assert [n["path"] for n in copy["nodes"]] == ["/staging", "/staging/app", "/staging/app/db"]
    assert copy["nodes"][2]["data"] == "postgres://db:5432"


def test_big_tree_is_pipelined(zkpy_server: ServerProcess, target: ServerProcess) -> None:
    """20,000 nodes out and back in: reads thousands in flight, writes in multi batches (a round
    trip per node would not fit the test's budget; no timing is asserted)."""
    root = f"/big-{uuid.uuid4().hex[:8]}"
    fanout, per = 20, 1000

    async def scenario() -> None:
        src = await _connect(zkpy_server, auth=False)
        dst = None
        try:
            await src.create(root, b"")
            for i in range(fanout):
                tx = src.transaction()
                tx.create(f"{root}/p{i:02d}", b"")
                for j in range(per):
                    tx.create(f"{root}/p{i:02d}/n{j:04d}", f"{i}.{j}".encode())
                assert all(isinstance(r, str) for r in await tx.commit())
            seen: list[tuple[int, int | None]] = []
            export = await export_tree(src, root, progress=lambda d, t: seen.append((d, t)))
            assert len(export.nodes) == 1 + fanout + fanout * per
            assert seen[-1] == (len(export.nodes), len(export.nodes))
            dst = await _connect(target, auth=False)
            report = await import_tree(dst, export, at=root)
            assert report.created == len(export.nodes)
            assert await dst.get_all_children_number(root) == fanout + fanout * per
            assert (await dst.get(f"{root}/p13/n0777"))[0] == b"13.777"
            again = await export_tree(dst, root, stats=False)
            assert [(n.path, n.data) for n in again.nodes] == [(n.path, n.data) for n in export.nodes]
        finally:
            await src.close()
            if dst is not None:
                await dst.close()

    asyncio.run(scenario())


def test_export_refuses_the_system_subtree_and_a_missing_root(zkpy_server: ServerProcess) -> None:
    r = _zkpy("export", "--server", zkpy_server.hosts, "/zookeeper")
    assert r.returncode == 1 and "the server's own" in r.stderr and r.stdout == ""
    r = _zkpy("export", "--server", zkpy_server.hosts, f"/missing-{uuid.uuid4().hex}")
    assert r.returncode == 1 and "NoNode" in r.stderr and r.stdout == ""


def test_export_stops_where_the_server_hides_a_digest(zkpy_server: ServerProcess) -> None:
    """ZooKeeper shows "user:x" for a digest id to a session without ADMIN: export says so and
    writes nothing rather than a file whose import would lock the node."""
    root = f"/hidden-{uuid.uuid4().hex[:8]}"

    async def build() -> None:
        c = await _connect(zkpy_server)
        try:
            await c.create(root, b"", [ACL(1, Id("digest", DIGEST_ID))])
        finally:
            await c.close()

    asyncio.run(build())
    r = _zkpy("export", "--server", zkpy_server.hosts, "--auth", f"digest:{USER.decode()}", root)
    assert r.returncode == 1 and f"{root}: the server hid the digest hash" in r.stderr and r.stdout == ""
