"""Snapshot files: a snapshot loads back to the tree it was taken of; a fuzzy snapshot plus the
log after its zxid replays to the live tree; damage is detected; Apache ZooKeeper 3.8 reads
what zkpy writes and zkpy reads what ZooKeeper writes."""

from __future__ import annotations

import base64
import gzip
import random
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Any

import pytest

from helpers.txn_workload import (
    DIGEST_ACL,
    IP_ACL,
    Workload,
    apart_at_every_size,
    dump,
    full_digest,
    hdr,
    summed_apart,
)
from zkpy.ids import to_signed64
from zkpy.storage.snapshot import (
    LOCKED_ACL,
    SNAP_PREFIX,
    LoadedSnapshot,
    SnapshotError,
    SnapshotWriter,
    describe_snapshot,
    is_valid_snapshot,
    load_snapshot,
    snapshot_name,
    snapshot_zxid,
    write_snapshot,
)
from zkpy.tree.acl import OPEN_ACL_UNSAFE, READ_ACL_UNSAFE
from zkpy.tree.datatree import NO_CHILDREN, UNHASHED, DataTree
from zkpy.wire.consts import MAX_TTL_MS, TTL_MASK, OpCode, Perms
from zkpy.wire.proto import ACL, Id
from zkpy.wire.txn import (
    CreateContainerTxn,
    CreateSessionTxn,
    CreateTTLTxn,
    CreateTxn,
    DeleteTxn,
    SetACLTxn,
    SetDataTxn,
)


def sliced(writer: SnapshotWriter, rng: random.Random) -> bytes:
    chunks = [writer.step(0)]
    while not writer.done:
        chunks.append(writer.step(rng.randint(0, 7)))
    chunks.append(writer.finish())
    return b"".join(chunks)


def every_kind_tree() -> DataTree:
    """Persistent, sequential, ephemeral, container and TTL nodes; null, empty and binary
    data; world, digest and ip ACLs; two sessions; a deleted node and changed stats."""
    tree = DataTree()
    zxid = 0

    def apply(op: int, txn: Any, session: int = 0) -> None:
        nonlocal zxid
        zxid += 1
        tree.apply(hdr(zxid, op, session), txn)

    apply(OpCode.CREATE_SESSION, CreateSessionTxn(30000), 0x1234)
    apply(OpCode.CREATE_SESSION, CreateSessionTxn(4000), to_signed64(0x8100000000000005))
    apply(OpCode.CREATE, CreateTxn("/app", b"hello", list(OPEN_ACL_UNSAFE), False, -1))
    apply(OpCode.CREATE, CreateTxn("/app/null", None, list(DIGEST_ACL), False, -1))
    apply(OpCode.CREATE, CreateTxn("/app/empty", b"", list(IP_ACL), False, -1))
    apply(OpCode.CREATE, CreateTxn("/app/bin", bytes(range(256)), list(READ_ACL_UNSAFE), False, -1))
    apply(OpCode.CREATE, CreateTxn("/app/seq-0000000004", b"s", list(OPEN_ACL_UNSAFE), False, -1))
    apply(OpCode.CREATE, CreateTxn("/app/eph", b"\x00\x01\xff", list(OPEN_ACL_UNSAFE), True, -1), 0x1234)
    apply(OpCode.CREATE, CreateTxn("/app/eph-0000000006", None, list(OPEN_ACL_UNSAFE), True, -1),
          to_signed64(0x8100000000000005))
    apply(OpCode.CREATE_CONTAINER, CreateContainerTxn("/box", b"", list(DIGEST_ACL), -1))
    apply(OpCode.CREATE, CreateTxn("/box/item", b"i", list(OPEN_ACL_UNSAFE), False, -1))
    apply(OpCode.CREATE_TTL, CreateTTLTxn("/ttl", b"t", list(OPEN_ACL_UNSAFE), -1, 5000))
    apply(OpCode.CREATE_TTL, CreateTTLTxn("/ttl-max", None, list(OPEN_ACL_UNSAFE), -1, MAX_TTL_MS))
    apply(OpCode.CREATE, CreateTxn("/café-ü-日本", "ß".encode(), list(OPEN_ACL_UNSAFE), False, -1))
    apply(OpCode.SET_DATA, SetDataTxn("/app", b"world", 1))
    apply(OpCode.SET_ACL, SetACLTxn("/ttl", list(DIGEST_ACL), 1))
    apply(OpCode.CREATE, CreateTxn("/gone", None, list(OPEN_ACL_UNSAFE), False, -1))
    apply(OpCode.DELETE, DeleteTxn("/gone"))
    apply(OpCode.SET_DATA, SetDataTxn("/zookeeper/quota", b"q", 1))
    tree.events.clear()
    return tree


def load(data: bytes, zxid: int, apart: bool = False) -> LoadedSnapshot:
    return load_snapshot(snapshot_name(zxid), data, digest_apart=summed_apart if apart else None)


# ---------------------------------------------------------------- names


def test_names_carry_the_zxid_in_hex() -> None:
    assert SNAP_PREFIX == "snapshot"
    assert snapshot_name(0x1A) == "snapshot.1a"
    assert snapshot_name(0) == "snapshot.0"
    assert snapshot_zxid("snapshot.1a") == 0x1A
    assert snapshot_zxid("snapshot.100000003.gz") == 0x100000003
    assert snapshot_zxid("snapshot.1A.snappy") == 0x1A
    for bad in ["snapshot", "snapshot.", "snapshot.xyz", "log.1a", "tmp.snapshot.1a", "snapshot.0x1a", "snapshot.1_0",
                "snapshot.-1", "snapshot.ffffffffffffffffff"]:
        assert snapshot_zxid(bad) is None, bad
        assert not is_valid_snapshot(bad, write_snapshot(DataTree()))


# ---------------------------------------------------------------- round trips


def test_every_node_kind_round_trips() -> None:
    tree = every_kind_tree()
    writer = SnapshotWriter(tree)
    data = sliced(writer, random.Random(1))
    assert writer.nodes_written == len(tree.nodes)
    assert writer.placeholder_acls == 0
    loaded = load(data, writer.zxid)
    assert loaded.zxid == tree.last_processed_zxid == writer.zxid
    assert loaded.tree.last_processed_zxid == writer.zxid
    assert dump(loaded.tree) == dump(tree)
    assert loaded.tree.digest == tree.digest == full_digest(loaded.tree)
    assert loaded.digest == (tree.last_processed_zxid, tree.digest)
    assert loaded.unknown_acl_paths == []
    # the loaded tree interns its ACLs: equal lists share one tuple
    assert loaded.tree.nodes["/box"].acl is loaded.tree.nodes["/app/null"].acl
    assert loaded.tree.nodes["/app"].acl is OPEN_ACL_UNSAFE
    # kinds are indexed as create_node indexes them
    assert loaded.tree.containers == {"/box"} and loaded.tree.ttls == {"/ttl", "/ttl-max"}
    assert loaded.tree.nodes["/ttl-max"].ephemeral_owner == to_signed64(TTL_MASK | MAX_TTL_MS)
    assert loaded.tree.ephemerals == {0x1234: {"/app/eph"}, to_signed64(0x8100000000000005): {"/app/eph-0000000006"}}


def test_slicing_does_not_change_the_bytes() -> None:
    tree = every_kind_tree()
    whole = write_snapshot(tree)
    for seed in range(5):
        assert sliced(SnapshotWriter(tree), random.Random(seed)) == whole


def test_fresh_tree_round_trips_with_an_empty_digest_trailer() -> None:
    tree = DataTree()
    data = write_snapshot(tree)
    assert data[-33:-13] == struct.pack(">qiq", 0, 2, 0)  # ZooKeeper's empty ZxidDigest: zxid 0, version 2
    loaded = load(data, 0)
    assert loaded.digest is None
    assert dump(loaded.tree) == dump(tree)
    assert loaded.tree.nodes["/zookeeper/config"].acl == READ_ACL_UNSAFE


@pytest.mark.parametrize("seed", range(6))
def test_random_trees_round_trip(seed: int) -> None:
    rng = random.Random(seed)
    work = Workload(rng, DataTree())
    work.run(400)
    writer = SnapshotWriter(work.tree)
    loaded = load(sliced(writer, rng), writer.zxid)
    assert writer.placeholder_acls == 0, f"seed {seed}"
    assert dump(loaded.tree) == dump(work.tree), f"seed {seed}"
    assert loaded.tree.digest == full_digest(work.tree), f"seed {seed}"


def test_a_loaded_tree_keeps_working() -> None:
    rng = random.Random(11)
    work = Workload(rng, DataTree())
    work.run(300)
    loaded = load(write_snapshot(work.tree), work.zxid).tree
    again = Workload(rng, loaded)
    again.run(300)
    assert loaded.digest == full_digest(loaded)
    assert dump(load(write_snapshot(loaded), again.zxid).tree) == dump(loaded)


# ---------------------------------------------------------------- fuzzy snapshots


@pytest.mark.parametrize("apart", [False, True], ids=["digest-here", "digest-apart"])
@pytest.mark.parametrize("seed", range(12))
def test_fuzzy_snapshot_plus_the_log_after_its_zxid_replays_to_the_live_tree(seed: int, apart: bool,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    apart_at_every_size(monkeypatch)
    rng = random.Random(seed)
    work = Workload(rng, DataTree())
    work.run(rng.randint(50, 400))
    writer = SnapshotWriter(work.tree)
    z = writer.zxid
    chunks = [writer.step(0)]
    while not writer.done:
        work.run(rng.randint(0, 6))
        chunks.append(writer.step(rng.randint(0, 5)))
    work.run(rng.randint(0, 3))
    chunks.append(writer.finish())
    final_zxid, final_digest = work.tree.last_processed_zxid, work.tree.digest
    work.run(rng.randint(0, 30))  # the log goes on after the snapshot is sealed

    loaded = load(b"".join(chunks), z, apart)
    assert loaded.digest == (final_zxid, final_digest) or final_zxid == z == 0, f"seed {seed}"
    tree = loaded.tree
    assert tree.digest == full_digest(tree), f"seed {seed}"
    for h, txn in work.log:
        if h.zxid > z:
            tree.apply(h, txn)
            if h.zxid == final_zxid:
                assert tree.digest == final_digest, f"seed {seed}: digest at the trailer's zxid 0x{final_zxid:x}"
    tree.events.clear()
    assert dump(tree) == dump(work.tree), f"seed {seed}"
    assert tree.digest == work.tree.digest == full_digest(work.tree), f"seed {seed}"
    assert tree.last_processed_zxid == work.tree.last_processed_zxid, f"seed {seed}"


@pytest.mark.parametrize("seed", range(6))
def test_a_digest_summed_apart_is_the_one_the_load_sums(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sum of the node records is the load's own digest, and a node left UNHASHED comes
    out of the total with the share it went in with: changing every node of a tree loaded
    with its digest apart keeps the same digest as changing the tree loaded without."""
    apart_at_every_size(monkeypatch)
    rng = random.Random(seed)
    print(f"seed {seed}")
    work = Workload(rng, every_kind_tree() if seed == 0 else DataTree())
    work.run(rng.randint(20, 300))
    data = write_snapshot(work.tree)
    here, apart = load(data, work.zxid).tree, load(data, work.zxid, apart=True).tree
    assert apart.digest == here.digest == full_digest(work.tree)
    assert all(n.digest == UNHASHED or p.startswith("/zookeeper/") for p, n in apart.nodes.items())
    for tree in (here, apart):
        Workload(random.Random(seed), tree).run(400)
    assert dump(apart) == dump(here)
    assert apart.digest == here.digest == full_digest(here)


def test_a_digest_apart_that_fails_is_summed_by_the_load(monkeypatch: pytest.MonkeyPatch) -> None:
    apart_at_every_size(monkeypatch)
    tree = every_kind_tree()
    loaded = load_snapshot(snapshot_name(1), write_snapshot(tree), digest_apart=lambda _work: lambda: None)
    assert loaded.tree.digest == tree.digest == full_digest(tree)


def test_a_small_snapshot_is_summed_by_the_load_itself() -> None:
    tree = every_kind_tree()
    loaded = load_snapshot(snapshot_name(1), write_snapshot(tree), digest_apart=lambda _work: pytest.fail("apart"))
    assert loaded.tree.digest == full_digest(tree)
    assert all(n.digest != UNHASHED for n in loaded.tree.nodes.values())


def test_a_load_that_fails_still_waits_for_its_digest_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    apart_at_every_size(monkeypatch)
    data = bytearray(write_snapshot(every_kind_tree()))
    data[-40] ^= 0xFF  # (a node's stat: the seal's checksum then disagrees)
    waited: list[int] = []

    def apart(_work: Any) -> Any:
        return lambda: waited.append(1)

    with pytest.raises(SnapshotError):
        load_snapshot(snapshot_name(1), bytes(data), digest_apart=apart)
    assert len(waited) == 1


def test_fuzzy_rules_for_deleted_recreated_and_re_acled_nodes() -> None:
    tree = every_kind_tree()
    work = Workload(random.Random(0), tree)
    writer = SnapshotWriter(tree)
    z = writer.zxid
    first = writer.step(1)  # the root only
    new_acl = [ACL(int(Perms.ALL), Id("digest", "carol:bmV3=")), *IP_ACL]
    work._apply(OpCode.SET_ACL, SetACLTxn("/app/bin", new_acl, 1))  # an ACL the section does not hold
    work._apply(OpCode.DELETE, DeleteTxn("/ttl"))  # gone before it is visited
    work._apply(OpCode.DELETE, DeleteTxn("/box/item"))
    work._apply(OpCode.DELETE, DeleteTxn("/box"))
    work._apply(OpCode.CREATE, CreateTxn("/box", b"new", list(OPEN_ACL_UNSAFE), False, tree.nodes["/"].cversion + 1))
    work._apply(OpCode.CREATE, CreateTxn("/app/late", b"", list(new_acl), False, tree.nodes["/app"].cversion + 1))
    work._apply(OpCode.SET_DATA, SetDataTxn("/app", b"changed", 2))
    data = first + writer.step(1 << 30) + writer.finish()
    assert writer.placeholder_acls == 1

    loaded = load(data, z)
    snap = loaded.tree
    assert "/ttl" not in snap.nodes and "/box" not in snap.nodes  # deleted; re-created after Z
    assert "/app/late" not in snap.nodes  # created after Z
    assert snap.nodes["/app/bin"].acl == LOCKED_ACL  # locked, not opened, until its setACL is replayed
    assert snap.nodes["/app/bin"].aversion == 1
    assert snap.nodes["/app"].data == b"changed"  # written as it was when visited
    for h, txn in work.log:
        if h.zxid > z:
            snap.apply(h, txn)
    snap.events.clear()
    assert dump(snap) == dump(tree)
    assert snap.nodes["/app/bin"].acl == tuple(new_acl)


def test_writer_protocol() -> None:
    tree = every_kind_tree()
    writer = SnapshotWriter(tree)
    assert writer.zxid == tree.last_processed_zxid and not writer.done
    head = writer.step(0)
    assert head[:16] == b"ZKSN" + struct.pack(">iq", 2, -1)
    assert writer.nodes_written == 0
    with pytest.raises(RuntimeError):
        writer.finish()
    body = writer.step(1 << 30)
    assert writer.done and writer.step(10) == b""
    tail = writer.finish()
    with pytest.raises(RuntimeError):
        writer.finish()
    assert is_valid_snapshot(snapshot_name(writer.zxid), head + body + tail)


# ---------------------------------------------------------------- damage


def test_layout_and_both_seals() -> None:
    tree = every_kind_tree()
    data = write_snapshot(tree)
    # the trailer: end marker, seal 1, ZxidDigest, seal 2
    end2 = len(data)
    seal2 = end2 - 13
    digest_at = seal2 - 20
    seal1 = digest_at - 13
    assert data[seal1 - 5:seal1] == b"\x00\x00\x00\x01/"
    assert struct.unpack(">q", data[seal1:seal1 + 8])[0] == zlib.adler32(data[:seal1])
    assert struct.unpack(">qiq", data[digest_at:seal2]) == (tree.last_processed_zxid, 2, to_signed64(tree.digest))
    assert struct.unpack(">q", data[seal2:seal2 + 8])[0] == zlib.adler32(data[:seal2])
    assert data[-5:] == b"\x00\x00\x00\x01/"


def test_every_flipped_byte_is_detected() -> None:
    data = write_snapshot(every_kind_tree())
    name = snapshot_name(every_kind_tree().last_processed_zxid)
    for i in range(len(data)):
        broken = bytearray(data)
        broken[i] ^= 0x40
        if not is_valid_snapshot(name, bytes(broken)):
            continue
        with pytest.raises(SnapshotError, match=re.escape(name) + ": (checksum mismatch|bad magic)"):
            load_snapshot(name, bytes(broken))


def test_checksum_mismatch_is_named() -> None:
    tree = every_kind_tree()
    data = bytearray(write_snapshot(tree))
    at = data.index(b"world")
    data[at] ^= 1
    with pytest.raises(SnapshotError, match=r"snapshot\.[0-9a-f]+: checksum mismatch"):
        load(bytes(data), tree.last_processed_zxid)


def test_truncated_files_are_invalid() -> None:
    tree = every_kind_tree()
    data = write_snapshot(tree)
    name = snapshot_name(tree.last_processed_zxid)
    first_seal_end = len(data) - 13 - 20
    assert is_valid_snapshot(name, data)
    for n in range(len(data)):
        cut = data[:n]
        if n == first_seal_end:  # exactly a pre-digest (3.5) snapshot: valid, without a digest
            assert load_snapshot(name, cut).digest is None
            continue
        if is_valid_snapshot(name, cut):
            with pytest.raises(SnapshotError, match=name):
                load_snapshot(name, cut)
    with pytest.raises(SnapshotError, match="truncated"):
        load_snapshot(name, data[:len(data) // 2])


def test_bad_magic_and_missing_parent_are_named() -> None:
    data = write_snapshot(DataTree())
    with pytest.raises(SnapshotError, match=r"snapshot\.0: bad magic"):
        load_snapshot("snapshot.0", b"ZKLG" + data[4:])

    def ustring(s: str) -> bytes:
        b = s.encode()
        return struct.pack(">i", len(b)) + b

    def node(path: str) -> bytes:
        return ustring(path) + struct.pack(">i", 0) + struct.pack(">qqqqqiiiqq", -1, 0, 0, 0, 0, 0, 0, 0, 0, 0)

    body = struct.pack(">iiqii", 0x5A4B534E, 2, -1, 0, 0) + node("") + node("/a/b") + ustring("/")
    body += struct.pack(">q", zlib.adler32(body)) + ustring("/")
    with pytest.raises(SnapshotError, match=r"snapshot\.5: the parent of /a/b is missing"):
        load_snapshot("snapshot.5", body)
    orphan_free = body.replace(node("/a/b"), node("/a"))
    orphan_free = orphan_free[:-13]
    orphan_free += struct.pack(">q", zlib.adler32(orphan_free)) + ustring("/")
    loaded = load_snapshot("snapshot.5", orphan_free)
    assert sorted(loaded.tree.nodes) == ["/", "/a"] and loaded.digest is None
    with pytest.raises(SnapshotError, match="not a snapshot file name"):
        load_snapshot("log.5", orphan_free)


def test_a_path_listed_twice_is_named() -> None:
    """Siblings share the parent the loader found last; a node listed again after its children
    (or a second root) is still refused, naming the path."""
    def ustring(s: str) -> bytes:
        b = s.encode()
        return struct.pack(">i", len(b)) + b

    def node(path: str, data: bytes = b"") -> bytes:
        return (ustring(path) + struct.pack(">i", len(data)) + data
                + struct.pack(">qqqqqiiiqq", -1, 0, 0, 0, 0, 0, 0, 0, 0, 0))

    def sealed(*nodes: bytes) -> bytes:
        body = struct.pack(">iiqii", 0x5A4B534E, 2, -1, 0, 0) + b"".join(nodes) + ustring("/")
        return body + struct.pack(">q", zlib.adler32(body)) + ustring("/")

    good = load_snapshot("snapshot.5", sealed(node(""), node("/a"), node("/a/x"), node("/a/y"), node("/b"),
                                              node("/b/x"), node("/a/z")))
    assert sorted(good.tree.nodes["/a"].children) == ["x", "y", "z"]
    assert list(good.tree.nodes["/b"].children) == ["x"]
    for nodes, twice in [((node(""), node("/a", b"v"), node("/a/x"), node("/a", b"w")), "/a"),
                         ((node(""), node("/a"), node(""), node("/b")), "/")]:
        with pytest.raises(SnapshotError, match=f"snapshot\\.5: {twice} appears twice"):
            load_snapshot("snapshot.5", sealed(*nodes))


def test_unknown_acl_index_loads_locked() -> None:
    """ZooKeeper's own fuzzy snapshots can name an ACL index created after the ACL section
    was written; the node is locked (not opened) until replay sets its ACL."""
    tree = every_kind_tree()
    data = bytearray(write_snapshot(tree))
    node_at = data.index(b"/app/bin") + len("/app/bin")
    acl_at = node_at + 4 + 256
    data[acl_at:acl_at + 8] = struct.pack(">q", 999)
    body_end = len(data) - 13 - 20 - 13
    data[body_end:body_end + 8] = struct.pack(">q", zlib.adler32(bytes(data[:body_end])))
    seal2 = len(data) - 13
    data[seal2:seal2 + 8] = struct.pack(">q", zlib.adler32(bytes(data[:seal2])))
    loaded = load(bytes(data), tree.last_processed_zxid)
    assert loaded.unknown_acl_paths == ["/app/bin"]
    assert loaded.tree.nodes["/app/bin"].acl == LOCKED_ACL


def test_gzip_is_read_and_snappy_refused() -> None:
    tree = every_kind_tree()
    data = write_snapshot(tree)
    name = snapshot_name(tree.last_processed_zxid)
    packed = gzip.compress(data)
    assert is_valid_snapshot(name + ".gz", packed)
    assert not is_valid_snapshot(name + ".gz", data)
    assert dump(load_snapshot(name + ".gz", packed).tree) == dump(tree)
    with pytest.raises(SnapshotError, match="gzip"):
        load_snapshot(name + ".gz", packed[:-20])
    assert is_valid_snapshot(name + ".snappy", b"\x82SNAPPY\x00" + data)
    with pytest.raises(SnapshotError, match="snappy"):
        load_snapshot(name + ".snappy", b"\x82SNAPPY\x00" + data)


# ---------------------------------------------------------------- describing


def test_describe_lists_nodes_sessions_and_digest() -> None:
    tree = every_kind_tree()
    loaded = load(write_snapshot(tree), tree.last_processed_zxid)
    lines = list(describe_snapshot(loaded))
    assert lines[0] == f"ZNode Details (count={len(tree.nodes)}):"
    listed = [lines[i + 1] for i, line in enumerate(lines[:-1]) if line == "----" and lines[i + 1].startswith("/")]
    assert sorted(listed) == sorted(tree.nodes) and listed[0] == "/"
    i = lines.index("/app")
    assert lines[i + 1:i + 11] == [
        "  cZxid = 0x00000000000003", "  ctime = Sun Sep 13 12:26:40 UTC 2020",
        "  mZxid = 0x0000000000000f", "  mtime = Sun Sep 13 12:26:40 UTC 2020",
        "  pZxid = 0x00000000000009", "  cversion = 6", "  dataVersion = 1", "  aclVersion = 0",
        "  ephemeralOwner = 0x00000000000000", "  dataLength = 5"]
    assert "0x00000000001234, 30000, 1" in lines and "  /app/eph" in lines
    assert "0x8100000000000005, 4000, 1" in lines
    assert f"Target zxid digest is: {tree.last_processed_zxid:x}, {to_signed64(tree.digest)}" in lines
    assert lines[-1] == f"Last zxid: 0x{tree.last_processed_zxid:x}"
    with_data = list(describe_snapshot(loaded, data=True))
    assert with_data[with_data.index("/app") + 10] == f"  data = {base64.b64encode(b'world').decode()}"


# ---------------------------------------------------------------- Apache ZooKeeper 3.8


def _java() -> list[str]:
    from tests.conftest import require_apache

    require_apache()
    from zkpy.testing.servers import ZK_JAR

    java = shutil.which("java")
    assert java is not None
    return [java, "-Dzookeeper.extendedTypesEnabled=true", "-Dsun.stdout.encoding=UTF-8", "-Dfile.encoding=UTF-8",
            "-cp", ZK_JAR]


# A small program over ZooKeeper's own classes: "read DIR" loads the newest snapshot with
# FileSnap.deserialize (both seals, the digest trailer compared against the loaded tree) and
# prints it; "write DIR" builds a tree through DataTree.processTxn and serializes it.
SNAP_TOOL = r"""
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.util.*;
import org.apache.jute.Record;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.Id;
import org.apache.zookeeper.data.StatPersisted;
import org.apache.zookeeper.server.DataNode;
import org.apache.zookeeper.server.DataTree;
import org.apache.zookeeper.server.persistence.FileSnap;
import org.apache.zookeeper.server.persistence.Util;
import org.apache.zookeeper.txn.*;

public class SnapTool {
    public static void main(String[] args) throws Exception {
        File dir = new File(args[1]);
        if (args[0].equals("read")) {
            DataTree dt = new DataTree();
            List<Long> mismatches = new ArrayList<>();
            dt.addDigestWatcher(mismatches::add);
            Map<Long, Integer> sessions = new TreeMap<>();
            long zxid = new FileSnap(dir).deserialize(dt, sessions);
            System.out.println("zxid " + zxid);
            System.out.println("digest " + Long.toUnsignedString(dt.getTreeDigest()));
            System.out.println("mismatches " + mismatches.size());
            for (Map.Entry<Long, Integer> e : sessions.entrySet()) {
                System.out.println("session " + e.getKey() + " " + e.getValue());
            }
            dump(dt, "/");
        } else {
            DataTree dt = new DataTree();
            List<ACL> open = ZooDefs.Ids.OPEN_ACL_UNSAFE;
            List<ACL> custom = Arrays.asList(
                new ACL(ZooDefs.Perms.READ, new Id("digest", "bob:VmIa4oQ7RPoFZr/2cHxaPmZ6mNs=")),
                new ACL(ZooDefs.Perms.ALL, new Id("ip", "10.1.0.0/16")));
            long z = 0;
            apply(dt, 0, ++z, ZooDefs.OpCode.create, new CreateTxn("/app", "hello".getBytes(), open, false, -1));
            apply(dt, 0, ++z, ZooDefs.OpCode.create, new CreateTxn("/app/null", null, custom, false, -1));
            apply(dt, 0, ++z, ZooDefs.OpCode.create, new CreateTxn("/app/seq0000000002", new byte[0], open, false, -1));
            apply(dt, 0x1234, ++z, ZooDefs.OpCode.create,
                  new CreateTxn("/app/eph", new byte[] {0, 1, (byte) 255}, open, true, -1));
            apply(dt, 0, ++z, ZooDefs.OpCode.createContainer, new CreateContainerTxn("/box", new byte[0], custom, -1));
            apply(dt, 0, ++z, ZooDefs.OpCode.createTTL, new CreateTTLTxn("/ttl", "t".getBytes(), open, -1, 5000));
            apply(dt, 0, ++z, ZooDefs.OpCode.create,
                  new CreateTxn("/caf\u00e9-\u65e5\u672c", null, open, false, -1));
            apply(dt, 0, ++z, ZooDefs.OpCode.setData, new SetDataTxn("/app", "world".getBytes(), 1));
            apply(dt, 0, ++z, ZooDefs.OpCode.setACL, new SetACLTxn("/ttl", custom, 1));
            apply(dt, 0, ++z, ZooDefs.OpCode.create, new CreateTxn("/gone", null, open, false, -1));
            apply(dt, 0, ++z, ZooDefs.OpCode.delete, new DeleteTxn("/gone"));
            Map<Long, Integer> sessions = new HashMap<>();
            sessions.put(0x1234L, 30000);
            sessions.put(-5L, 4000);
            new FileSnap(dir).serialize(dt, sessions, new File(dir, Util.makeSnapshotName(dt.lastProcessedZxid)), false);
        }
    }

    static void apply(DataTree dt, long session, long zxid, int type, Record txn) {
        dt.processTxn(new TxnHeader(session, 1, zxid, 1000 + zxid, type), txn);
    }

    static String b64(byte[] b) {
        return b == null ? "null" : "=" + Base64.getEncoder().encodeToString(b);
    }

    static void dump(DataTree dt, String path) {
        DataNode n = dt.getNode(path);
        StatPersisted s = n.stat;
        StringBuilder acl = new StringBuilder();
        for (ACL a : dt.getACL(n)) {
            acl.append(a.getPerms()).append(',').append(a.getId().getScheme()).append(',')
               .append(a.getId().getId()).append(';');
        }
        System.out.println("node " + b64(path.getBytes(StandardCharsets.UTF_8)) + " " + s.getCzxid() + " "
            + s.getMzxid() + " " + s.getCtime() + " " + s.getMtime() + " " + s.getVersion() + " " + s.getCversion()
            + " " + s.getAversion() + " " + s.getEphemeralOwner() + " " + s.getPzxid() + " " + b64(n.getData())
            + " " + acl);
        List<String> children = new ArrayList<>(n.getChildren());
        Collections.sort(children);
        for (String c : children) {
            dump(dt, path.equals("/") ? "/" + c : path + "/" + c);
        }
    }
}
"""


def _snap_tool(tmp_path: Path, *args: str) -> list[str]:
    source = tmp_path / "SnapTool.java"
    source.write_text(SNAP_TOOL)
    proc = subprocess.run([*_java(), str(source), *args], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout.decode().splitlines()


def _our_view(tree: DataTree) -> list[str]:
    """The lines SnapTool's dump prints, from a zkpy tree (preorder, children sorted)."""

    def b64(b: bytes | None) -> str:
        return "null" if b is None else "=" + base64.b64encode(b).decode()

    lines = []
    stack = ["/"]
    while stack:
        path = stack.pop()
        n = tree.nodes[path]
        acl = "".join(f"{a.perms},{a.id.scheme},{a.id.id};" for a in n.acl)
        lines.append(f"node {b64(path.encode())} {n.czxid} {n.mzxid} {n.ctime} {n.mtime} {n.version} {n.cversion} "
                     f"{n.aversion} {n.ephemeral_owner} {n.pzxid} {b64(n.data)} {acl}")
        prefix = "/" if path == "/" else path + "/"
        stack.extend(prefix + c for c in sorted(n.children, reverse=True))
    return lines


@pytest.mark.interop
def test_apache_snapshot_formatter_lists_every_path(tmp_path: Path) -> None:
    java = _java()
    tree = every_kind_tree()
    file = tmp_path / snapshot_name(tree.last_processed_zxid)
    file.write_bytes(write_snapshot(tree))
    proc = subprocess.run([*java, "org.apache.zookeeper.server.SnapshotFormatter", "-d", str(file)],
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    lines = proc.stdout.decode("utf-8", "replace").splitlines()
    paths = [lines[i + 1] for i, line in enumerate(lines[:-1]) if line == "----" and lines[i + 1].startswith("/")]
    assert sorted(paths) == sorted(tree.nodes)
    for path, node in tree.nodes.items():
        at = lines.index(path)
        assert lines[at + 10] == f"  data = {base64.b64encode(node.data or b'').decode()}", path
    assert "0x00000000001234, 30000, 1" in lines
    assert f"Last zxid: 0x{tree.last_processed_zxid:x}" in lines


@pytest.mark.interop
def test_apache_loads_what_zkpy_writes_checksums_and_digest_included(tmp_path: Path) -> None:
    tree = every_kind_tree()
    snap_dir = tmp_path / "snaps"
    snap_dir.mkdir()
    (snap_dir / snapshot_name(tree.last_processed_zxid)).write_bytes(write_snapshot(tree))
    out = _snap_tool(tmp_path, "read", str(snap_dir))
    assert out[0] == f"zxid {tree.last_processed_zxid}"
    assert out[1] == f"digest {tree.digest}"
    assert out[2] == "mismatches 0"  # ZooKeeper compared the trailer's digest with the tree it loaded
    sessions = [f"session {s} {t}" for s, t in sorted(tree.sessions.items())]
    assert out[3:3 + len(sessions)] == sessions
    assert out[3 + len(sessions):] == _our_view(tree)


@pytest.mark.interop
def test_apache_loads_a_fuzzy_zkpy_snapshot(tmp_path: Path) -> None:
    rng = random.Random(3)
    work = Workload(rng, DataTree())
    work.run(300)
    writer = SnapshotWriter(work.tree)
    chunks = [writer.step(0)]
    while not writer.done:
        work.run(3)
        chunks.append(writer.step(2))
    chunks.append(writer.finish())
    snap_dir = tmp_path / "snaps"
    snap_dir.mkdir()
    (snap_dir / snapshot_name(writer.zxid)).write_bytes(b"".join(chunks))
    out = _snap_tool(tmp_path, "read", str(snap_dir))
    ours = load(b"".join(chunks), writer.zxid).tree
    assert out[1] == f"digest {ours.digest}"
    assert out[3 + len(ours.sessions):] == _our_view(ours)


@pytest.mark.interop
def test_apache_rejects_a_damaged_zkpy_snapshot(tmp_path: Path) -> None:
    tree = every_kind_tree()
    data = bytearray(write_snapshot(tree))
    data[data.index(b"world")] ^= 1
    snap_dir = tmp_path / "snaps"
    snap_dir.mkdir()
    (snap_dir / snapshot_name(tree.last_processed_zxid)).write_bytes(bytes(data))
    source = tmp_path / "SnapTool.java"
    source.write_text(SNAP_TOOL)
    proc = subprocess.run([*_java(), str(source), "read", str(snap_dir)], capture_output=True, timeout=120)
    assert proc.returncode != 0
    assert b"Not able to find valid snapshots" in proc.stderr


@pytest.mark.interop
def test_zkpy_loads_what_apache_writes(tmp_path: Path) -> None:
    snap_dir = tmp_path / "snaps"
    snap_dir.mkdir()
    _snap_tool(tmp_path, "write", str(snap_dir))
    (file,) = snap_dir.iterdir()
    assert file.name == "snapshot.b"
    data = file.read_bytes()
    assert is_valid_snapshot(file.name, data)
    loaded = load_snapshot(file.name, data)
    apache = _snap_tool(tmp_path, "read", str(snap_dir))
    assert apache[0] == "zxid 11"
    assert apache[1] == f"digest {loaded.tree.digest}"  # the same digest, recomputed by zkpy
    assert loaded.digest == (11, loaded.tree.digest)
    assert loaded.tree.sessions == {0x1234: 30000, -5: 4000}
    assert apache[5:] == _our_view(loaded.tree)
    assert loaded.tree.containers == {"/box"} and loaded.tree.ttls == {"/ttl"}
    assert loaded.tree.ephemerals == {0x1234: {"/app/eph"}}
    assert loaded.unknown_acl_paths == []
    # written again by zkpy, it reads the same in ZooKeeper
    again = snap_dir / "again"
    again.mkdir()
    (again / file.name).write_bytes(write_snapshot(loaded.tree))
    assert _snap_tool(tmp_path, "read", str(again))[:2] == apache[:2]


def test_a_loaded_leaf_shares_the_empty_children_and_its_equal_stat_ints() -> None:
    """What keeps a loaded tree small: a leaf holds no dict of its own, and stat fields that are
    equal (a node never changed: czxid = mzxid = pzxid, ctime = mtime) hold one int."""
    tree = DataTree()
    tree.apply(hdr(0x100000001, OpCode.CREATE), CreateTxn("/a", b"x", list(OPEN_ACL_UNSAFE), False, -1))
    for i, name in enumerate(("b", "c"), start=2):
        tree.apply(hdr(0x100000000 + i, OpCode.CREATE), CreateTxn(f"/a/{name}", b"y", list(OPEN_ACL_UNSAFE), False, -1))
    loaded = load(write_snapshot(tree), tree.last_processed_zxid).tree
    leaf, parent = loaded.nodes["/a/b"], loaded.nodes["/a"]
    assert leaf.children is NO_CHILDREN and list(parent.children) == ["b", "c"]
    assert leaf.mzxid is leaf.czxid and leaf.pzxid is leaf.czxid and leaf.mtime is leaf.ctime
    assert parent.mzxid is parent.czxid and parent.pzxid is not parent.czxid  # its children moved pzxid
    loaded.apply(hdr(0x100000004, OpCode.CREATE), CreateTxn("/a/b/d", b"", list(OPEN_ACL_UNSAFE), False, -1))
    assert list(leaf.children) == ["d"] and len(NO_CHILDREN) == 0 and loaded.digest == full_digest(loaded)
