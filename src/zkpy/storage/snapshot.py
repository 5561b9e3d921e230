"""Snapshot files in ZooKeeper 3.8's format (``version-2/snapshot.<zxid hex>``): a fuzzy,
sliced writer and a fast loader (pure: bytes in, bytes out; the shell does the file I/O).

Byte grammar (jute, big-endian; FileSnap, SerializeUtils.serializeSnapshot, DataTree.serialize,
ReferenceCountedACLCache.serialize, DataNode.serialize, SnapStream.sealStream)::

    file      := header sessions acls node* end seal [zxid_digest seal]
    header    := int magic ("ZKSN" = 0x5a4b534e), int version (2), long dbid (-1)
    sessions  := int count, count * (long session_id, int timeout_ms)
    acls      := int count, count * (long index, vector<ACL>)
                 ACL := int perms, ustring scheme, ustring id
                 index -1 is never listed: it means OPEN_ACL_UNSAFE; ZooKeeper numbers
                 the others from 1, zkpy also lists 0 = LOCKED_ACL (see SnapshotWriter)
    node      := ustring path (the root is ""), buffer data (-1 = null), long acl_index,
                 StatPersisted := long czxid, long mzxid, long ctime, long mtime, int version,
                                  int cversion, int aversion, long ephemeralOwner, long pzxid
    end       := ustring "/"
    seal      := long adler32, ustring "/"
    zxid_digest := long zxid, int digest_version (2), long digest
                   (digest_version < 2: ustring hex digest instead of the long)

Nodes come in preorder (a parent before its children); every node is written, the system
nodes ``/zookeeper``, ``/zookeeper/quota`` and ``/zookeeper/config`` included. The Adler-32
of a seal covers every byte of the file before that seal, so the second seal also covers the
first. The digest trailer is (last processed zxid, tree digest) when the writer finishes, or
(0, 2, 0) for a tree that never applied a txn; a file without it (before 3.6) ends after the
first seal. ``cversion`` is stored as ZooKeeper stores it (the count of child creations, like
``Node.cversion``), so no conversion happens either way. Strings are UTF-8: jute's own encoder
differs only for characters above U+FFFF, which no valid path holds.

Invariants: a loaded tree's digest is recomputed from its nodes, never taken from the file;
its nodes, children, ephemeral/container/TTL indexes and ACL cache are built as
``DataTree.create_node`` builds them.

Compression: ZooKeeper picks it from ``zookeeper.snapshot.compression.method`` (default none)
and names the file ``snapshot.<zxid>``, ``.gz`` or ``.snappy``. zkpy writes uncompressed files
only; it reads ``.gz`` and refuses ``.snappy``.
"""

from __future__ import annotations

import base64
import gzip
import re
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from zkpy.errors import ProtocolError
from zkpy.ids import MASK64, long_hex, to_signed64
from zkpy.storage.disk import Disk, join
from zkpy.tree.acl import OPEN_ACL_UNSAFE
from zkpy.tree.datatree import DIGEST_STAT, NO_CHILDREN, UNHASHED, DataTree, Node, node_share
from zkpy.wire.consts import CONTAINER_EPHEMERAL_OWNER, TTL_MASK
from zkpy.wire.jute import read_ustring
from zkpy.wire.proto import ACL, Id

SNAP_PREFIX = "snapshot"
SNAP_MAGIC = 0x5A4B534E  # b"ZKSN" as a big-endian int (FileSnap.SNAP_MAGIC)
SNAP_VERSION = 2
SNAP_DBID = -1  # FileSnap writes -1; nothing reads it
DIGEST_VERSION = 2  # DigestCalculator.DIGEST_VERSION
OPEN_ACL_INDEX = -1  # ReferenceCountedACLCache.OPEN_UNSAFE_ACL_ID
PROGRESS_EVERY = 4096  # nodes between two calls of a load's progress callback
ParseProgress = Callable[[int, int], None]  # (offset, size) of the stream being parsed
DigestApart = Callable[[Callable[[], int]], Callable[[], "int | None"]]
"""``apart(work)`` starts a digest sum, ``work()``, somewhere else (another process, on this one's
state as it is now) and returns what waits for its result (None: it failed, and the loader sums
it itself)."""
SUM_APART_FROM = 4 << 20  # bytes of node records from which a load's digest is summed apart (a fork costs more below)
LOCKED_ACL_INDEX = 0  # ZooKeeper counts ACL indexes from 1; zkpy reserves 0 for LOCKED_ACL
LOCKED_ACL = (ACL(0, Id("world", "anyone")),)  # grants nothing (super still passes)
GZIP_MAGIC = b"\x1f\x8b"
SNAPPY_MAGIC = b"\x82SNAPPY\x00"  # snappy-java's SnappyCodec header

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_HEADER = struct.Struct(">iiq")
_SESSION = struct.Struct(">qi")
_NODE_TAIL = struct.Struct(">qqqqqiiiqq")  # acl index + StatPersisted
_NODE_TAIL_NEXT = struct.Struct(">qqqqqiiiqqi")  # ... and the next path's length (or the end's)
_ZXID_DIGEST = struct.Struct(">qiq")
_NULL = b"\xff\xff\xff\xff"
_END = b"\x00\x00\x00\x01/"  # ustring "/": the end of the nodes, and of each seal
_ZK_SUBTREE = b"/zookeeper/"
_SYSTEM_PATHS = ("/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config")
_HEX = re.compile(r"[+-]?[0-9a-fA-F]+")


class SnapshotError(Exception):
    """A snapshot file that cannot be loaded; the message names the file and what is wrong."""


class _Definite(SnapshotError):
    """A bad magic or a seal that does not match: nothing else to find out."""


def snapshot_name(zxid: int) -> str:
    """``snapshot.<zxid in lower-case hex>`` (Util.makeSnapshotName, uncompressed)."""
    return f"{SNAP_PREFIX}.{zxid:x}"


def snapshot_zxid(name: str) -> int | None:
    """The zxid a snapshot's file name carries, or None if it is not a snapshot name
    (Util.getZxidFromName: the second dot-separated part, parsed as a hex long)."""
    parts = name.split(".")
    if len(parts) < 2 or parts[0] != SNAP_PREFIX or not _HEX.fullmatch(parts[1]):
        return None
    zxid = int(parts[1], 16)
    return zxid if 0 <= zxid < 1 << 63 else None


def _stream_mode(name: str) -> str:
    """'gz', 'snappy' or '' from the name's last extension (SnapStream.getStreamMode)."""
    last = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    return last if last in ("gz", "snappy") else ""


# ---------------------------------------------------------------- writing


class SnapshotWriter:
    """One fuzzy snapshot, produced in slices while the tree keeps changing.

    Built when the tree's ``last_processed_zxid`` is Z (the file is ``snapshot_name(Z)``); it
    captures the committed sessions and the ACL cache then, and those go into the first chunk.
    The caller calls ``step`` between event-loop turns, applying txns in between, then
    ``finish`` once ``done``. The file plus every logged txn after Z, replayed in order, gives
    the tree as it is at the end (``DataTree.apply`` is idempotent over such a file).

    Traversal rules:
    - preorder over an explicit stack, so it can stop after any node; a node's children are
      listed (their names, in order) when the node itself is written, and each path is made
      when it is popped, so a node with a million children costs no slice more than a copy
      of their names;
    - a popped path that no longer exists is skipped with its subtree (its delete is in the
      log; any later re-creation is too);
    - a node whose czxid > Z is skipped with its subtree (every node below it is newer still):
      its create is in the log after Z, and its ACL may be missing from the ACL section;
    - every other node is written as it is at that moment, including changes after Z;
    - a written node whose ACL is not in the captured ACL section got that ACL from a
      setACL after Z (every ACL a txn sets is interned in ``DataTree.acl_cache``, which only
      grows, so a node with czxid <= Z holds one interned by Z unless a later setACL
      changed it). It is written with LOCKED_ACL_INDEX, an entry of the
      section granting nothing. That is safe: the setACL is in the log after Z and replay
      overwrites both the ACL and the aversion (already the final one in the file), and the
      tree digest does not cover ACLs. Were the log ever not replayed, the node would be
      locked rather than opened.

    The running Adler-32 covers every byte handed out, as ZooKeeper's CheckedOutputStream
    covers everything the archive writes, seals included.
    """

    def __init__(self, tree: DataTree, dbid: int = SNAP_DBID) -> None:
        self._tree = tree
        self.zxid = tree.last_processed_zxid
        self.nodes_written = 0
        self.placeholder_acls = 0  # nodes written with LOCKED_ACL_INDEX (their setACL came after Z)
        self._finished = False
        self._adler = 1  # Adler-32 of nothing
        out = bytearray(_HEADER.pack(SNAP_MAGIC, SNAP_VERSION, dbid))
        sessions = list(tree.sessions.items())
        out += _INT.pack(len(sessions))
        for session, timeout in sessions:
            out += _SESSION.pack(session, timeout)
        # ACL section. The captured tuples stay referenced here, so an id() in _index_by_id
        # cannot be reused by another object while this writer lives.
        self._captured: list[tuple[ACL, ...]] = [OPEN_ACL_UNSAFE, LOCKED_ACL]
        self._index_by_value: dict[tuple[ACL, ...], int] = {OPEN_ACL_UNSAFE: OPEN_ACL_INDEX,
                                                             LOCKED_ACL: LOCKED_ACL_INDEX}
        entries: list[tuple[int, tuple[ACL, ...]]] = [(LOCKED_ACL_INDEX, LOCKED_ACL)]
        # Every ACL a txn gives a node is interned in tree.acl_cache; the system nodes a new
        # DataTree makes (/zookeeper/config: READ_ACL_UNSAFE) may hold ones that are not.
        system = [n.acl for n in map(tree.nodes.get, _SYSTEM_PATHS) if n is not None]
        for acl in [*tree.acl_cache.values(), *system]:
            self._captured.append(acl)
            key = tuple(acl)  # the same object for a tuple
            if key not in self._index_by_value:
                self._index_by_value[key] = len(entries)
                entries.append((len(entries), key))
        self._index_by_id = {id(a): self._index_by_value[tuple(a)] for a in self._captured}
        out += _INT.pack(len(entries))
        for index, acl in entries:
            out += _LONG.pack(index)
            out += _INT.pack(len(acl))
            for entry in acl:
                entry.write(out)
        self._pending = out
        # (prefix, names still to visit, last one first): a node's children are listed when
        # it is written, their paths made only when visited, so no slice pays for a wide node
        self._stack: list[tuple[str, list[str]]] = [("", ["/"])]

    @property
    def done(self) -> bool:
        """Every node has been visited; ``finish`` may be called."""
        return not self._stack

    def _acl_index(self, acl: tuple[ACL, ...]) -> int:
        index = self._index_by_value.get(tuple(acl))
        if index is None:
            self.placeholder_acls += 1
            return LOCKED_ACL_INDEX
        return index

    def step(self, max_nodes: int) -> bytes:
        """Serialize up to ``max_nodes`` more nodes; the bytes to append to the file (the
        first call also returns the header, sessions and ACLs, even with ``max_nodes`` 0)."""
        out = self._pending
        self._pending = bytearray()
        nodes = self._tree.nodes
        stack = self._stack
        z = self.zxid
        by_id = self._index_by_id
        int_pack = _INT.pack
        tail_pack = _NODE_TAIL.pack
        written = 0
        while stack and written < max_nodes:
            prefix, names = stack[-1]
            if not names:
                stack.pop()
                continue
            path = prefix + names.pop()
            node = nodes.get(path)
            if node is None or node.czxid > z:
                continue
            acl = node.acl
            index = by_id.get(id(acl))
            if index is None:
                index = self._acl_index(acl)
            if path == "/":
                out += b"\x00\x00\x00\x00"
                prefix = "/"
            else:
                pb = path.encode("utf-8")
                out += int_pack(len(pb))
                out += pb
                prefix = path + "/"
            data = node.data
            if data is None:
                out += _NULL
            else:
                out += int_pack(len(data))
                out += data
            out += tail_pack(index, node.czxid, node.mzxid, node.ctime, node.mtime, node.version, node.cversion,
                             node.aversion, node.ephemeral_owner, node.pzxid)
            if node.children:
                stack.append((prefix, list(node.children)[::-1]))
            written += 1
        while stack and not stack[-1][1]:
            stack.pop()
        self.nodes_written += written
        chunk = bytes(out)
        self._adler = zlib.adler32(chunk, self._adler)
        return chunk

    def finish(self) -> bytes:
        """The end marker, the first seal, the digest trailer (the tree's last processed zxid
        and digest now) and the second seal."""
        if self._stack:
            raise RuntimeError(f"snapshot 0x{self.zxid:x}: finish() before the traversal is done")
        if self._finished:
            raise RuntimeError(f"snapshot 0x{self.zxid:x}: finish() called twice")
        self._finished = True
        out = self._pending
        self._pending = bytearray()
        out += _END
        adler = zlib.adler32(out, self._adler)
        seal = _LONG.pack(adler) + _END
        out += seal
        adler = zlib.adler32(seal, adler)
        tree = self._tree
        if tree.last_processed_zxid > 0:
            trailer = _ZXID_DIGEST.pack(tree.last_processed_zxid, DIGEST_VERSION, to_signed64(tree.digest))
        else:
            trailer = _ZXID_DIGEST.pack(0, DIGEST_VERSION, 0)  # ZooKeeper's empty ZxidDigest
        out += trailer
        adler = zlib.adler32(trailer, adler)
        out += _LONG.pack(adler)
        out += _END
        self._adler = adler
        return bytes(out)


def write_snapshot(tree: DataTree, dbid: int = SNAP_DBID) -> bytes:
    """A whole snapshot of a tree that does not change meanwhile."""
    writer = SnapshotWriter(tree, dbid)
    return writer.step(1 << 62) + writer.finish()


TMP_PREFIX = "tmp."  # a file being written: the next start removes it


def write_snapshot_file(disk: Disk, snap_dir: str, tree: DataTree) -> str:
    """Write ``tree`` (which does not change meanwhile) as ``snapshot.<its zxid>`` in ``snap_dir``
    at once: a tmp file, synced, then renamed into place, so a crash never leaves a half-written
    snapshot. Returns its path."""
    name = snapshot_name(tree.last_processed_zxid)
    path, tmp = join(snap_dir, name), join(snap_dir, TMP_PREFIX + name)
    disk.makedirs(snap_dir)
    f = disk.create(tmp)
    f.write(write_snapshot(tree))
    f.sync()
    f.close()
    disk.rename(tmp, path)
    return path


# ---------------------------------------------------------------- reading


@dataclass(slots=True)
class LoadedSnapshot:
    """A loaded snapshot. ``digest`` is None when the file has no trailer (before 3.6), an
    empty one (zxid 0), one older than the file's zxid or of another digest version: the
    cases ZooKeeper does not compare. ``unknown_acl_paths``: nodes whose ACL index the ACL
    section does not hold (possible in ZooKeeper's own fuzzy snapshots); they load as
    LOCKED_ACL until replay sets their ACL."""

    zxid: int  # from the file name
    tree: DataTree  # last_processed_zxid = zxid; sessions from the file; digest recomputed
    digest: tuple[int, int] | None  # (zxid, unsigned digest) of the trailer, to compare once replay reaches zxid
    unknown_acl_paths: list[str] = field(default_factory=list)  # ACL index not in the file: loaded as LOCKED_ACL


def is_valid_snapshot(name: str, data: bytes) -> bool:
    """ZooKeeper's cheap check (SnapStream.isValidSnapshot): a snapshot name, and for an
    uncompressed file at least 10 bytes ending in the ustring "/" of a seal; for .gz and
    .snappy only the compression magic. The checksums are verified by ``load_snapshot``."""
    if snapshot_zxid(name) is None:
        return False
    mode = _stream_mode(name)
    if mode == "gz":
        return data[:2] == GZIP_MAGIC
    if mode == "snappy":
        return data[:8] == SNAPPY_MAGIC
    return len(data) >= 10 and data[-5:] == _END


def load_snapshot(name: str, data: bytes, progress: ParseProgress | None = None,
                  digest_apart: DigestApart | None = None) -> LoadedSnapshot:
    """The tree, sessions and digest trailer a snapshot file holds; SnapshotError if it is
    damaged (bad magic, checksum mismatch, truncated, a node without its parent, ...).
    ``progress(offset, size)`` is called every ``PROGRESS_EVERY`` nodes and once at the end
    (offsets into the uncompressed stream). With ``digest_apart`` (and a snapshot worth it) the
    nodes' share of the tree digest is summed by it while the tree is built, and each node's own
    is left ``UNHASHED``."""
    zxid = snapshot_zxid(name)
    if zxid is None:
        raise SnapshotError(f"{name}: not a snapshot file name (snapshot.<zxid hex>)")
    mode = _stream_mode(name)
    if mode == "snappy":
        raise SnapshotError(f"{name}: snappy-compressed snapshots are not supported")
    if mode == "gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise SnapshotError(f"{name}: bad gzip stream: {exc}") from exc
    data = bytes(data)
    try:
        return _parse(name, zxid, data, progress, digest_apart)
    except (SnapshotError, struct.error, IndexError, ProtocolError) as exc:
        raise _diagnose(name, data, exc) from exc


def _diagnose(name: str, data: bytes, exc: Exception) -> SnapshotError:
    """Say what is wrong with a file the parser gave up on. A file that ends in a seal whose
    checksum disagrees with the bytes before it was damaged after it was written, whatever
    the parser tripped over first; one that does not end in a seal was cut off."""
    if isinstance(exc, _Definite):
        return exc
    size = len(data)
    if size >= _HEADER.size + 13 and data[-5:] == _END:
        (stored,) = _LONG.unpack_from(data, size - 13)
        if stored != zlib.adler32(memoryview(data)[:size - 13]):
            return SnapshotError(f"{name}: checksum mismatch: the last seal does not match the bytes before it "
                                 f"(reading stopped at: {exc})")
    if isinstance(exc, SnapshotError):
        return exc
    return SnapshotError(f"{name}: truncated ({size} bytes): {exc}")


def _parse(name: str, zxid: int, data: bytes, progress: ParseProgress | None = None,
           digest_apart: DigestApart | None = None) -> LoadedSnapshot:
    magic, _version, _dbid = _HEADER.unpack_from(data, 0)
    if magic != SNAP_MAGIC:
        raise _Definite(f"{name}: bad magic 0x{magic & 0xFFFFFFFF:08x}, expected 0x{SNAP_MAGIC:08x} (ZKSN)")
    tree, unknown, pos = _parse_body(name, data, _HEADER.size, progress, digest_apart)
    size = len(data)

    def fail(pos: int, what: str) -> SnapshotError:
        return SnapshotError(f"{name}: {what} (offset {pos})")

    seal_at = pos
    pos, adler = _check_seal(name, data, pos)
    trailer: tuple[int, int] | None = None
    if pos < size:  # the digest trailer (older snapshots end after the first seal)
        dzxid, dversion = struct.unpack_from(">qi", data, pos)
        pos += 12
        if dversion < 2:
            text, pos = read_ustring(data, pos)
            try:
                dvalue = int(text, 16) if text is not None else 0
            except ValueError:
                raise fail(pos, f"bad hex digest {text!r}") from None
        else:
            (dvalue,) = _LONG.unpack_from(data, pos)
            pos += 8
        _check_seal(name, data, pos, seal_at, adler)  # the checksum goes on from the first seal's
        # ZooKeeper ignores an empty digest, one older than the snapshot, and another version's
        if dversion == DIGEST_VERSION and dzxid > 0 and dzxid >= zxid:
            trailer = (dzxid, dvalue & MASK64)
    tree.last_processed_zxid = zxid
    if progress is not None:
        progress(size, size)
    return LoadedSnapshot(zxid, tree, trailer, unknown)


def _parse_body(name: str, data: bytes, pos: int, progress: ParseProgress | None = None,
                digest_apart: DigestApart | None = None) -> tuple[DataTree, list[str], int]:
    """sessions acls node* end, from ``pos``: the tree (sessions set, digest recomputed), the
    paths whose ACL index was unknown, and the position after the end marker."""
    size = len(data)

    def fail(pos: int, what: str) -> SnapshotError:
        return SnapshotError(f"{name}: {what} (offset {pos})")

    (count,) = _INT.unpack_from(data, pos)
    pos += 4
    if count < 0 or count * _SESSION.size > size - pos:
        raise fail(pos - 4, f"bad session count {count}")
    sessions: dict[int, int] = {}
    for _ in range(count):
        session, timeout = _SESSION.unpack_from(data, pos)
        sessions[session] = timeout
        pos += _SESSION.size

    tree = DataTree.empty()
    cache = tree.acl_cache  # holds OPEN_ACL_UNSAFE
    acl_of: dict[int, tuple[ACL, ...]] = {OPEN_ACL_INDEX: OPEN_ACL_UNSAFE}
    (count,) = _INT.unpack_from(data, pos)
    pos += 4
    if count < 0 or count * 12 > size - pos:
        raise fail(pos - 4, f"bad ACL count {count}")
    for _ in range(count):
        index, n = struct.unpack_from(">qi", data, pos)
        pos += 12
        if n < 0 or n * 12 > size - pos:
            raise fail(pos - 4, f"bad ACL list length {n} for index {index}")
        acl = []
        for _ in range(n):
            (perms,) = _INT.unpack_from(data, pos)
            scheme, pos = read_ustring(data, pos + 4)
            ident, pos = read_ustring(data, pos)
            acl.append(ACL(perms, Id(scheme, ident)))
        key = tuple(acl)
        acl_of[index] = cache.setdefault(key, key)

    nodes = tree.nodes
    ephemerals = tree.ephemerals
    containers = tree.containers
    ttls = tree.ttls
    unknown: list[str] = []
    new_node = Node.__new__
    crc32 = zlib.crc32
    digest_pack = DIGEST_STAT.pack
    tail_unpack = _NODE_TAIL_NEXT.unpack_from
    tail_size = _NODE_TAIL_NEXT.size
    int_unpack = _INT.unpack_from
    container_owner = CONTAINER_EPHEMERAL_OWNER
    digest = 0
    data_size = 0
    count = 0
    # Preorder puts siblings next to each other: the parent found for one node is most often the
    # next one's too, so it is kept with its path and looked up again only when the path differs
    parent_path = "\0"  # no path: the first lookup always happens
    parent: Node | None = None
    nodes_start = pos
    waiting = None
    if digest_apart is not None and size - nodes_start >= SUM_APART_FROM:
        waiting = digest_apart(lambda: node_records_digest(data, nodes_start))
    hashing = waiting is None
    apart: int | None = None
    try:
        (plen,) = int_unpack(data, pos)
        pos += 4
        while True:
            end = pos + plen
            if end > size or plen < 0:
                raise fail(pos - 4, f"truncated: path length {plen} runs past the end" if plen >= 0
                           else f"bad path length {plen}")
            pb = data[pos:end]
            if pb == b"/":
                pos = end
                break
            (dlen,) = int_unpack(data, end)
            pos = end + 4
            if dlen > 0:
                end = pos + dlen
                if end > size:
                    raise fail(pos - 4, f"truncated: data length {dlen} runs past the end")
                d: bytes | None = data[pos:end]
                pos = end
            elif dlen == 0:
                d = b""
            elif dlen == -1:
                d = None
            else:
                raise fail(pos - 4, f"bad data length {dlen}")
            acl_index, czxid, mzxid, ctime, mtime, version, cversion, aversion, owner, pzxid, plen = (
                tail_unpack(data, pos))
            pos += tail_size
            # equal stat fields share one int, as a created node's do (a 1M-node tree: ~90 MiB less)
            if mzxid == czxid:
                mzxid = czxid
            if pzxid == mzxid:
                pzxid = mzxid
            if mtime == ctime:
                mtime = ctime
            node = new_node(Node)
            node.data = d
            node.czxid = czxid
            node.mzxid = mzxid
            node.ctime = ctime
            node.mtime = mtime
            node.version = version
            node.cversion = cversion
            node.aversion = aversion
            node.ephemeral_owner = owner
            node.pzxid = pzxid
            node.children = NO_CHILDREN
            node_acl = acl_of.get(acl_index)
            if pb:
                try:
                    path = pb.decode("utf-8")
                except UnicodeDecodeError:
                    raise fail(pos, f"path {pb!r} is not UTF-8") from None
                slash = path.rfind("/")
                if slash < 0:
                    raise fail(pos, f"path {path!r} does not start with /")
                if path[:slash] != parent_path:
                    parent_path = path[:slash]
                    parent = nodes.get(parent_path or "/")
                if parent is None:
                    raise fail(pos, f"the parent of {path} is missing")
                children = parent.children  # add_child, inlined: this runs once per node loaded
                if isinstance(children, dict):
                    children[path[slash + 1:]] = None
                else:
                    parent.children = {path[slash + 1:]: None}
                if owner:
                    if owner == container_owner:
                        containers.add(path)
                    elif owner < 0 and (owner & TTL_MASK) == TTL_MASK:
                        ttls.add(path)
                    else:
                        owned = ephemerals.get(owner)
                        if owned is None:
                            ephemerals[owner] = {path}
                        else:
                            owned.add(path)
                if pb.startswith(_ZK_SUBTREE):
                    node.digest = 0
                elif not hashing:
                    node.digest = UNHASHED
                else:  # node_share, inlined on the path's bytes: this runs once per node loaded
                    crc = crc32(pb)
                    if d:
                        crc = crc32(d, crc)
                    node.digest = crc = crc32(digest_pack(czxid, mzxid, pzxid, ctime, mtime, version, cversion, aversion,
                                                          owner), crc)
                    digest += crc
                data_size += len(path) + dlen if dlen > 0 else len(path)
            else:
                path = "/"
                if hashing:
                    crc = crc32(d) if d else 0
                    node.digest = crc = crc32(digest_pack(czxid, mzxid, pzxid, ctime, mtime, version, cversion,
                                                          aversion, owner), crc)
                    digest += crc
                else:
                    node.digest = UNHASHED
                data_size += 1 + dlen if dlen > 0 else 1
            if node_acl is None:
                node_acl = cache.setdefault(LOCKED_ACL, LOCKED_ACL)
                unknown.append(path)
            node.acl = node_acl
            nodes[path] = node
            count += 1
            if progress is not None and not count % PROGRESS_EVERY:
                progress(pos, size)
    finally:
        if waiting is not None:  # (also when the load failed: the other process is reaped)
            apart = waiting()
    if not hashing:
        digest = apart if apart is not None else node_records_digest(data, nodes_start)
    if len(nodes) != count:  # a path seen twice replaced its first node: say which (only on this error)
        raise fail(pos, f"{_first_duplicate(data, nodes_start)} appears twice")
    if "/" not in nodes:
        raise fail(pos, "no root node")
    tree.sessions = sessions
    tree.digest = digest & MASK64
    tree.data_size = data_size
    tree.setup_quotas()  # the quota roots and their counts, from the loaded nodes (DataTree.deserialize)
    return tree, unknown, pos


def _first_duplicate(data: bytes, pos: int) -> str:
    """The first path that the node section starting at ``pos`` lists twice (called only once
    the load found that one does, so the section is known to be readable up to it)."""
    seen: set[bytes] = set()
    while True:
        (plen,) = _INT.unpack_from(data, pos)
        pb = data[pos + 4:pos + 4 + plen]
        if pb in seen:
            return pb.decode("utf-8") or "/"
        seen.add(pb)
        (dlen,) = _INT.unpack_from(data, pos + 4 + plen)
        pos += 8 + plen + max(dlen, 0) + _NODE_TAIL.size


def node_records_digest(data: bytes, pos: int) -> int:
    """The tree digest of the node records from ``pos`` (the first one's path length) to the end
    marker, as the load sums it: what another process computes for a load given ``digest_apart``
    (the load checks these bytes; this only reads them, and raises on what it cannot read)."""
    int_unpack = _INT.unpack_from
    tail_unpack = _NODE_TAIL.unpack_from
    tail_size = _NODE_TAIL.size
    digest = 0
    while True:
        (plen,) = int_unpack(data, pos)
        if plen < 0:
            raise ValueError(f"bad path length {plen} at offset {pos}")
        pos += 4
        pb = data[pos:pos + plen]
        pos += plen
        if pb == b"/":
            return digest & MASK64
        (dlen,) = int_unpack(data, pos)
        pos += 4
        d = None
        if dlen > 0:
            d = data[pos:pos + dlen]
            pos += dlen
        elif dlen < -1:
            raise ValueError(f"bad data length {dlen} at offset {pos - 4}")
        _acl, czxid, mzxid, ctime, mtime, version, cversion, aversion, owner, pzxid = tail_unpack(data, pos)
        pos += tail_size
        digest += node_share(pb.decode("utf-8"), d, czxid, mzxid, pzxid, ctime, mtime, version, cversion, aversion,
                             owner)  # (the root's path is "" here, hashed as "/" is: no bytes)


# ---------------------------------------------------------------- the SNAP stream of the quorum port
#
# After a SNAP packet the leader writes the database without a file header, seals or digest
# (ZKDatabase.serializeSnapshot: sessions acls node* end), then the ustring "BenWasHere".

SNAP_SIGNATURE = b"\x00\x00\x00\x0aBenWasHere"
_STREAM_END = _END + SNAP_SIGNATURE


def snapshot_stream(tree: DataTree) -> bytes:
    """What a leader sends after SNAP: the tree as it is now, then the signature."""
    writer = SnapshotWriter(tree)
    body = writer.step(1 << 62)
    return body[_HEADER.size:] + _STREAM_END


def parse_snapshot_stream(data: bytes | bytearray, search_from: int = 0) -> tuple[DataTree, int] | None:
    """The tree a SNAP stream at the start of ``data`` holds and the bytes it took, or None
    while it is incomplete (or unreadable: the caller's timeout ends the wait). The end is found
    by its marker; a marker inside node data fails to parse and the search goes on.
    ``search_from`` skips what an earlier call already searched."""
    at = data.find(_STREAM_END, max(0, search_from - len(_STREAM_END)))
    while at >= 0:
        try:
            tree, _unknown, pos = _parse_body("SNAP stream", bytes(data[:at + len(_END)]), 0)
        except (SnapshotError, struct.error, IndexError, ProtocolError):
            at = data.find(_STREAM_END, at + 1)
            continue
        if pos == at + len(_END):
            return tree, at + len(_STREAM_END)
        at = data.find(_STREAM_END, at + 1)
    return None


def _check_seal(name: str, data: bytes, pos: int, start: int = 0, adler: int = 1) -> tuple[int, int]:
    """Verify the seal at ``pos`` against the Adler-32 of every byte before it (``adler``: that of
    the bytes before ``start``, so a second seal does not checksum the file again); the end of the
    seal and the Adler-32 of the bytes before it."""
    expected = zlib.adler32(memoryview(data)[start:pos], adler)
    (stored,) = _LONG.unpack_from(data, pos)
    _marker, end = read_ustring(data, pos + 8)
    if end > len(data):
        raise SnapshotError(f"{name}: truncated seal (offset {pos})")
    if stored != expected:
        raise _Definite(f"{name}: checksum mismatch at offset {pos}: "
                            f"stored 0x{long_hex(stored)}, computed 0x{expected:08x}")
    return end, expected


# ---------------------------------------------------------------- describing

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _java_date(ms: int) -> str:
    """java.util.Date.toString() in UTC: ``Thu Jan 01 00:00:00 UTC 1970``."""
    try:
        t = datetime.fromtimestamp(ms / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms"
    return f"{_DAYS[t.weekday()]} {_MONTHS[t.month - 1]} {t.day:02d} {t:%H:%M:%S} UTC {t.year}"


def _hex(value: int) -> str:
    return format(value & MASK64, "#016x")  # Java's %#016x


def describe_snapshot(loaded: LoadedSnapshot, data: bool = False) -> Iterator[str]:
    """Lines in the manner of ZooKeeper's SnapshotFormatter (``data``: base64 data, its -d):
    every node in preorder with its stat, the sessions with their ephemerals, the digest."""
    tree = loaded.tree
    yield f"ZNode Details (count={len(tree.nodes)}):"
    last = 0
    stack = ["/"]
    while stack:
        path = stack.pop()
        node = tree.nodes[path]
        last = max(last, node.mzxid, node.pzxid)
        yield "----"
        yield path
        yield f"  cZxid = {_hex(node.czxid)}"
        yield f"  ctime = {_java_date(node.ctime)}"
        yield f"  mZxid = {_hex(node.mzxid)}"
        yield f"  mtime = {_java_date(node.mtime)}"
        yield f"  pZxid = {_hex(node.pzxid)}"
        yield f"  cversion = {node.cversion}"
        yield f"  dataVersion = {node.version}"
        yield f"  aclVersion = {node.aversion}"
        yield f"  ephemeralOwner = {_hex(node.ephemeral_owner)}"
        if data:
            yield f"  data = {base64.b64encode(node.data).decode('ascii') if node.data else ''}"
        else:
            yield f"  dataLength = {len(node.data) if node.data else 0}"
        prefix = "/" if path == "/" else path + "/"
        stack.extend(prefix + name for name in list(node.children)[::-1])
    yield "----"
    yield "Session Details (sid, timeout, ephemeralCount):"
    for session, timeout in tree.sessions.items():
        owned = sorted(tree.ephemerals.get(session, ()))
        yield f"{_hex(session)}, {timeout}, {len(owned)}"
        for path in owned:
            yield f"  {path}"
    if loaded.digest is not None:
        yield f"Target zxid digest is: {loaded.digest[0]:x}, {to_signed64(loaded.digest[1])}"
    yield "----"
    yield f"Last zxid: 0x{max(loaded.zxid, last):x}"
