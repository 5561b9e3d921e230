"""ZooKeeper 3.8's transaction log file (FileTxnLog, Util, FilePadding): codec, scanner, writer.

Pure: the writer goes through a ``Disk``; the scanner takes the file's bytes.

Byte grammar (jute, big-endian)::

    file    := header record* tail
    header  := magic:int "ZKLG" (0x5A4B4C47)  version:int 2  dbid:long     -- FileHeader, 16 bytes
    record  := crc:long  length:int  payload[length]  0x42 ('B')
    crc     := Adler32 of payload, unsigned, in a long (its high 4 bytes are zero)
    payload := TxnHeader txn-record [TxnDigest]
    tail    := zero bytes (preallocation) | nothing

* ``TxnHeader`` is clientId:long cxid:int zxid:long time:long type:int (32 bytes), so a
  record's zxid sits 24 bytes after the record's start.
* The txn record's class follows the header's type (``TXN_RECORDS``, plus reconfig = SetDataTxn
  as SerializeUtils.deserializeTxn has it). Two old shapes are accepted as 3.8 accepts them: a
  create too short for ``CreateTxn`` is read as ``CreateTxnV0`` and given parentCVersion -1, and
  a closeSession without a body (before 3.6) becomes ``CloseSessionTxn([])`` (the tree then
  deletes every ephemeral of the session, as Java does for a null txn).
* ``TxnDigest`` (version:int treeDigest:long) follows when the writer had digests enabled
  (3.6+ default). A reader takes it if 12 or more bytes follow the txn record, else None.
* A log is named ``log.<zxid of its first txn, lower-case hex, no padding>``; dbid is 0.
* Preallocation (FilePadding): the file grows by ``prealloc_bytes`` (64 MiB) when a write
  would come within 4 KiB of its end; a new log is 16 + 64 MiB long, zeros past its records.

End of the log and damage. ZooKeeper ends a log at a zero length (preallocated space), and
also, silently, at a short read or a missing 'B'; only a checksum mismatch is an error there.
zkpy reads records until the first one that fails (zero or bad length, length past the data,
no 'B', checksum mismatch, undecodable payload) and then classifies what follows it:

* only zero bytes, or nothing: a clean end;
* other bytes, but no valid record among them: a torn tail (a write cut short by a crash),
  ``LogScan.torn``; the good records before it stand;
* a valid record later in the file: mid-log corruption, ``CorruptLogError``; never skipped.

"A valid record later" is searched for quickly, whatever the file's size: the zero tail is
stripped first, then (a) the offset just past the bad record's declared length is tried, then
(b) ``bytes.find`` looks for the 8-byte big-endian zxids last_good+1 and last_good+2 (and the
bad record's own zxid+1 when its header is readable; with no good record, last_good is the
zxid in the file name minus one) and tries a record 24 bytes before each hit, then (c) it
looks for record boundaries, ``'B'`` followed by four zero bytes (the high half of the next
record's checksum), which finds the next intact record after damage spanning several records
or a zxid gap. A candidate counts only if its length, 'B' and checksum all hold and it is
long enough for a TxnHeader.
"""

from __future__ import annotations

import posixpath
import re
import struct
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from zkpy.errors import ProtocolError
from zkpy.ids import long_hex
from zkpy.storage.disk import AppendFile, Disk, join
from zkpy.tree.acl import OPEN_ACL_UNSAFE
from zkpy.wire.consts import OpCode
from zkpy.wire.jute import Record, vector_codec
from zkpy.wire.proto import ACL
from zkpy.wire.txn import (
    TXN_RECORDS,
    TXNLOG_MAGIC,
    TXNLOG_VERSION,
    CloseSessionTxn,
    CreateTxn,
    CreateTxnV0,
    FileHeader,
    MultiTxn,
    SetDataTxn,
    TxnDigest,
    TxnHeader,
    decode_txn,
)

LOG_PREFIX = "log"
DEFAULT_PREALLOC_BYTES = 64 * 1024 * 1024
PAD_THRESHOLD = 4096  # FilePadding grows the file when a write comes this close to its end
HEADER_SIZE = 16
TXN_HEADER_SIZE = 32
ZXID_OFFSET = 24  # of the TxnHeader's zxid, from the start of a record
END_OF_RECORD = 0x42  # 'B'

_MAGIC_BYTES = TXNLOG_MAGIC.to_bytes(4, "big")
_FRAME = struct.Struct(">qi")  # crc, length
_HEADER_PACK = struct.Struct(">qiqqi").pack  # a TxnHeader: clientId cxid zxid time type
_ZXID = struct.Struct(">q")
_BOUNDARY = b"B" + bytes(4)  # a record's 'B', then the high half of the next one's checksum
_HEX = re.compile(r"[+-]?[0-9a-fA-F]+")
_DECODE_ERRORS = (struct.error, ProtocolError, IndexError, ValueError, KeyError)
# SerializeUtils.deserializeTxn also reads reconfig txns, as SetDataTxn
_LOG_RECORDS: dict[int, type[Record]] = {**TXN_RECORDS, int(OpCode.RECONFIG): SetDataTxn}


# --- names and framing ---


def log_name(zxid: int) -> str:
    """Util.makeLogName: ``log.<zxid in lower-case hex>``."""
    return f"{LOG_PREFIX}.{long_hex(zxid)}"


def zxid_from_name(name: str, prefix: str) -> int | None:
    """Util.getZxidFromName: the hex after ``prefix.`` ("log.1a" -> 0x1a; "snapshot.1a.snappy"
    -> 0x1a), or None where Java returns -1 (other prefix, unparseable, out of range). Java
    would also return a negative value for a name such as "log.-5"; no file is named so, and
    this returns None for it."""
    parts = name.split(".")
    if len(parts) < 2 or parts[0] != prefix or not _HEX.fullmatch(parts[1]):
        return None
    zxid = int(parts[1], 16)
    return zxid if 0 <= zxid < 1 << 63 else None


def file_header(dbid: int = 0) -> bytes:
    """The 16-byte header every log starts with (FileTxnLog writes dbid 0)."""
    return FileHeader(TXNLOG_MAGIC, TXNLOG_VERSION, dbid).to_bytes()


def encode_entry(hdr: TxnHeader, txn: Record, digest: TxnDigest | None, body: bytes | None = None) -> bytes:
    """One complete record: checksum, length, payload (Util.marshallTxnEntry), 'B'. ``body``:
    ``txn.to_bytes()`` when the caller already has it (a setData's, cut from its request)."""
    if body is None or digest is not None:
        out = bytearray()
        hdr.write(out)
        txn.write(out)
        if digest is not None:
            digest.write(out)
        return _FRAME.pack(zlib.adler32(out), len(out)) + out + b"B"
    payload = _HEADER_PACK(hdr.clientId, hdr.cxid, hdr.zxid, hdr.time, hdr.type) + body
    return _FRAME.pack(zlib.adler32(payload), len(payload)) + payload + b"B"


def frame_payloads(payloads: Iterable[bytes]) -> bytes:
    """The records for already serialized headers + txns (+ digests), PROPOSALs' data as they
    came, one after another (each payload copied once, into the result)."""
    parts: list[bytes] = []
    pack, checksum = _FRAME.pack, zlib.adler32
    for payload in payloads:
        parts += (pack(checksum(payload), len(payload)), payload, b"B")
    return b"".join(parts)


def encode_payload(hdr: TxnHeader, txn: Record, body: bytes | None = None) -> bytes:
    """Header + txn as a PROPOSAL carries them (SerializeUtils.serializeRequest, no digest);
    ``body``: ``txn.to_bytes()`` when the caller already has it."""
    if body is not None:
        return _HEADER_PACK(hdr.clientId, hdr.cxid, hdr.zxid, hdr.time, hdr.type) + body
    out = bytearray()
    hdr.write(out)
    txn.write(out)
    return bytes(out)


def decode_payload(data: bytes) -> tuple[TxnHeader, Record]:
    """A PROPOSAL's or INFORM's header and txn (a trailing TxnDigest is read and dropped);
    ProtocolError if it is not one."""
    if len(data) < TXN_HEADER_SIZE:
        raise ProtocolError(f"txn of {len(data)} bytes is shorter than a txn header")
    try:
        hdr, txn, _digest = _decode_payload(memoryview(data))
    except (_Bad, *_DECODE_ERRORS) as exc:
        raise ProtocolError(f"undecodable txn: {exc}") from exc
    return hdr, txn


def padded_size(position: int, file_size: int, prealloc_bytes: int) -> int:
    """FilePadding.calculateFileSizeWithPadding: the file's new size before writing at
    ``position`` (unchanged unless the position is within 4 KiB of ``file_size``)."""
    if prealloc_bytes > 0 and position + PAD_THRESHOLD >= file_size:
        if position > file_size:
            file_size = position + prealloc_bytes
            file_size -= file_size % prealloc_bytes
        else:
            file_size += prealloc_bytes
    return file_size


# --- reading ---


@dataclass(slots=True)
class LogEntry:
    hdr: TxnHeader
    txn: Record
    digest: TxnDigest | None
    offset: int  # where the record starts in the file
    end: int  # offset just past its 'B'


class CorruptLogError(Exception):
    """A record that fails with a valid record after it: damage inside the log, not a torn tail."""

    def __init__(self, path: str, offset: int, reason: str, zxid: int | None = None,
                 valid_at: int | None = None) -> None:
        self.path = path
        self.offset = offset
        self.reason = reason
        self.zxid = zxid  # as the bad record's header says, if readable
        self.valid_at = valid_at  # where the later valid record starts
        detail = f" (record of zxid 0x{long_hex(zxid)})" if zxid is not None else ""
        later = f"; a valid record follows at offset {valid_at}" if valid_at is not None else ""
        super().__init__(f"{path}: {reason} at offset {offset}{detail}{later}")


@dataclass(slots=True)
class LogScan:
    path: str
    entries: list[LogEntry]
    good_end: int  # offset just past the last good record (16 if header only)
    torn: bool  # bytes after good_end are not all zeros but hold no valid record
    header_ok: bool  # False: shorter than a header or wrong magic (entries == [], good_end == 0)
    last_zxid: int = -1  # of the last good record, skipped ones included; -1 if none


class _Bad(Exception):
    """Why the record at some offset is not valid (internal)."""


def _frame_at(view: memoryview, pos: int, limit: int) -> tuple[memoryview, int]:
    """The payload of the record at ``pos`` and the offset past its 'B', or _Bad."""
    if pos + 12 > limit:
        raise _Bad("truncated record")
    crc, length = _FRAME.unpack_from(view, pos)
    if length <= 0:
        raise _Bad(f"record length {length}")
    end = pos + 13 + length
    if end > limit:
        raise _Bad(f"record length {length} past the end of the data")
    if view[end - 1] != END_OF_RECORD:
        raise _Bad("no end-of-record byte")
    payload = view[pos + 12:end - 1]
    if zlib.adler32(payload) != crc:
        raise _Bad("checksum mismatch")
    if length < TXN_HEADER_SIZE:
        raise _Bad(f"record length {length} is shorter than a txn header")
    return payload, end


def _decode_payload(payload: memoryview) -> tuple[TxnHeader, Record, TxnDigest | None]:
    """SerializeUtils.deserializeTxn, with its fallbacks for old creates and closeSessions."""
    hdr, pos = TxnHeader.read(payload, 0)
    cls = _LOG_RECORDS.get(hdr.type)
    if cls is None:
        raise _Bad(f"unsupported txn type {hdr.type}")
    txn: Record
    try:
        txn, pos = cls.read(payload, pos)
    except _DECODE_ERRORS:
        if hdr.type == OpCode.CREATE:
            v0, pos = CreateTxnV0.read(payload, pos)
            txn = CreateTxn(v0.path, v0.data, v0.acl, v0.ephemeral, -1)
        elif hdr.type == OpCode.CLOSE_SESSION:
            txn, pos = CloseSessionTxn([]), len(payload)
        else:
            raise
    digest = TxnDigest.read(payload, pos)[0] if len(payload) - pos >= 12 else None
    return hdr, txn, digest


def _zxid_in_header(view: memoryview, pos: int, limit: int) -> int | None:
    if pos + ZXID_OFFSET + 8 > limit:
        return None
    return int(_ZXID.unpack_from(view, pos + ZXID_OFFSET)[0])


def _valid_after(data: bytes, view: memoryview, bad: int, limit: int, zxids: set[int]) -> int | None:
    """Offset of a valid record that starts after ``bad``, found by the rule in the module doc."""

    def valid(pos: int) -> bool:
        try:
            _frame_at(view, pos, limit)
        except _Bad:
            return False
        return True

    if bad + 12 <= limit:
        length = int(_FRAME.unpack_from(view, bad)[1])
        nxt = bad + 13 + length
        if length > 0 and nxt < limit and valid(nxt):
            return nxt
    for zxid in sorted(z for z in zxids if 0 <= z < 1 << 63):
        needle = _ZXID.pack(zxid)
        hit = data.find(needle, bad + 1 + ZXID_OFFSET, limit)
        while hit != -1:
            if valid(hit - ZXID_OFFSET):
                return hit - ZXID_OFFSET
            hit = data.find(needle, hit + 1, limit)
    hit = data.find(_BOUNDARY, bad, limit)
    while hit != -1:
        if valid(hit + 1):
            return hit + 1
        hit = data.find(_BOUNDARY, hit + 1, limit)
    return None


# what a replay sink gets for the common creates, without building records:
# (path, data, acl, ephemeral, parentCVersion); acl is OPEN_ACL_UNSAFE itself when the record holds it
FastCreate = tuple[str, bytes | None, "tuple[ACL, ...] | list[ACL]", bool, int]
ReplaySink = Callable[[int, tuple[int, int, int, int, int], "FastCreate | Record", memoryview], None]
_TXN_HEADER = struct.Struct(">qiqqi")  # clientId cxid zxid time type
_LEN = struct.Struct(">i")
_CREATE_TAIL = struct.Struct(">?i")  # ephemeral, parentCVersion
_READ_ACLS = vector_codec(ACL)[0]
_FAST_CREATES = frozenset({int(OpCode.CREATE), int(OpCode.CREATE2)})
_OPEN_ACL_BYTES = b"".join((b"\0\0\0\x01", struct.pack(">i", 31), b"\0\0\0\x05world", b"\0\0\0\x06anyone"))


def _fast_create(data: bytes, pos: int, size: int) -> FastCreate | None:
    """The CreateTxn at offset ``pos`` of the log's bytes, whose record's payload ends at ``size``,
    read straight into a tuple (slices of ``data``: one copy each, no view in between); None when
    it is not one whose end falls where the payload ends (the generic decoder then reads it, with
    its fallbacks)."""
    (n,) = _LEN.unpack_from(data, pos)
    pos += 4
    end = pos + n
    if n < 0 or end > size:
        return None
    path = data[pos:end].decode("utf-8", "replace")
    (n,) = _LEN.unpack_from(data, end)
    pos = end + 4
    value: bytes | None
    if n >= 0:
        end = pos + n
        if end > size:
            return None
        value = data[pos:end]
    elif n == -1:
        value, end = None, pos
    else:
        return None
    acl: tuple[ACL, ...] | list[ACL]
    if data.startswith(_OPEN_ACL_BYTES, end):
        acl, pos = OPEN_ACL_UNSAFE, end + len(_OPEN_ACL_BYTES)
    else:  # (read within the payload: a vector may not run into the next record)
        acl, pos = _READ_ACLS(memoryview(data)[:size], end)
    if pos + 5 > size:
        return None
    ephemeral, pcv = _CREATE_TAIL.unpack_from(data, pos)
    pos += 5
    if pos != size and size - pos < 12:
        return None  # not a create of 3.8's shape followed by nothing or a digest
    return path, value, acl, ephemeral, pcv


_ZERO_BLOCK = bytes(1 << 16)


def _content_end(data: bytes) -> int:
    """``len(data.rstrip(b"\\0"))`` without copying the content (a log is tens of MiB of records
    before its preallocated zeros): whole zero blocks are stepped over from the end first."""
    end, block = len(data), len(_ZERO_BLOCK)
    while end >= block and data[end - block:end] == _ZERO_BLOCK:
        end -= block
    start = max(0, end - block)
    return start + len(data[start:end].rstrip(b"\0"))


def scan_log(path: str, data: bytes, after_zxid: int = -1, sink: ReplaySink | None = None) -> LogScan:
    """Every record of the log file ``path`` whose bytes are ``data``; see the module doc for
    how the end is classified. Records with zxid <= ``after_zxid`` are checked (length, 'B',
    checksum, header) but their txn is not decoded and they are left out of ``entries``.

    With ``sink``, the records after ``after_zxid`` are not kept in ``entries``: each is handed
    to ``sink(offset, header, txn, payload)`` as soon as it is read, with the header as the tuple
    (clientId, cxid, zxid, time, type) and the txn as a ``FastCreate`` tuple for a plain create
    or create2, a Record otherwise; ``payload`` is the record's bytes (header, txn, digest), a
    view into ``data``. Whatever the sink raises propagates. Recovery replays this way, with no
    object per txn beyond what the tree keeps.

    Raises CorruptLogError if a bad record has a valid record after it."""
    if len(data) < HEADER_SIZE or data[:4] != _MAGIC_BYTES:
        return LogScan(path, [], 0, False, False)
    limit = max(_content_end(data), HEADER_SIZE)  # records end in 'B', never in the zero tail
    view = memoryview(data)
    entries: list[LogEntry] = []
    last_zxid = -1
    pos = HEADER_SIZE
    frame = _FRAME.unpack_from
    header = _TXN_HEADER.unpack_from
    adler32 = zlib.adler32
    while pos < limit:
        try:
            if sink is None:
                payload, end = _frame_at(view, pos, limit)
                zxid = _ZXID.unpack_from(payload, ZXID_OFFSET - 12)[0]
            else:  # _frame_at inlined, over the bytes themselves: this runs once per txn of a replay
                if pos + 12 > limit:
                    raise _Bad("truncated record")
                crc, length = frame(data, pos)
                end = pos + 13 + length
                if length < TXN_HEADER_SIZE or end > limit or data[end - 1] != END_OF_RECORD:
                    payload, end = _frame_at(view, pos, limit)  # says what is wrong
                payload = view[pos + 12:end - 1]
                if adler32(payload) != crc:
                    raise _Bad("checksum mismatch")
                head = header(data, pos + 12)
                zxid = head[2]
            if zxid > after_zxid:
                if sink is not None:
                    try:
                        fast = _fast_create(data, pos + 12 + TXN_HEADER_SIZE, end - 1) if head[4] in _FAST_CREATES else None
                        txn: FastCreate | Record = fast if fast is not None else _decode_payload(payload)[1]
                    except _DECODE_ERRORS as exc:
                        raise _Bad(f"undecodable txn ({exc})") from exc
                    sink(pos, head, txn, payload)
                else:
                    try:
                        hdr, txn, digest = _decode_payload(payload)
                    except _DECODE_ERRORS as exc:
                        raise _Bad(f"undecodable txn ({exc})") from exc
                    entries.append(LogEntry(hdr, txn, digest, pos, end))
            last_zxid = zxid
        except _Bad as exc:
            bad_zxid = _zxid_in_header(view, pos, limit)
            base = last_zxid
            if base < 0:
                named = zxid_from_name(posixpath.basename(path), LOG_PREFIX)
                base = named - 1 if named is not None else -1
            zxids = {base + 1, base + 2} | ({bad_zxid + 1} if bad_zxid is not None else set())
            later = _valid_after(data, view, pos, limit, zxids)
            if later is not None:
                raise CorruptLogError(path, pos, str(exc), bad_zxid, later) from None
            return LogScan(path, entries, pos, True, True, last_zxid)
        pos = end
    return LogScan(path, entries, pos, False, True, last_zxid)


def count_records(data: bytes, after_zxid: int = -1) -> int:
    """How many records with zxid > ``after_zxid`` the log ``data`` holds up to its first
    record whose frame does not hold (length and 'B' only; no checksum): for a progress total."""
    if len(data) < HEADER_SIZE or data[:4] != _MAGIC_BYTES:
        return 0
    limit = len(data)
    frame = _FRAME.unpack_from
    zxid_at = _ZXID.unpack_from
    count = 0
    pos = HEADER_SIZE
    while pos + 12 <= limit:
        length = frame(data, pos)[1]
        end = pos + 13 + length
        if length < TXN_HEADER_SIZE or end > limit or data[end - 1] != END_OF_RECORD:
            break
        if zxid_at(data, pos + ZXID_OFFSET)[0] > after_zxid:
            count += 1
        pos = end
    return count


# --- writing ---


def _count_records(records: bytes) -> tuple[int, int]:
    """(number of records, zxid of the first) in whole framed records; ValueError otherwise."""
    count, pos = 0, 0
    while pos < len(records):
        if pos + 12 > len(records):
            raise ValueError(f"records end inside a record frame at offset {pos}")
        length = _FRAME.unpack_from(records, pos)[1]
        end = pos + 13 + length
        if length < TXN_HEADER_SIZE or end > len(records) or records[end - 1] != END_OF_RECORD:
            raise ValueError(f"no whole record at offset {pos}")
        count, pos = count + 1, end
    return count, _ZXID.unpack_from(records, ZXID_OFFSET)[0]


class TxnLogWriter:
    """Appends framed records to ``log_dir/log.<zxid>`` files; used by one thread only.

    The first append to a file writes the header with it. Before every write the file is
    grown as FilePadding does: ``padded_size`` at the batch's first record (as Java pads
    before each record), then at its end, so the records land in zeros already allocated.
    ``txns_in_current`` counts the records the writer walked in each batch (no count argument).
    If append or sync raises, the current file may hold part of a batch: stop using the
    writer, as ZooKeeper stops the server on a log write error.
    """

    def __init__(self, disk: Disk, log_dir: str, prealloc_bytes: int = DEFAULT_PREALLOC_BYTES,
                 dbid: int = 0) -> None:
        self._disk = disk
        self._log_dir = log_dir
        self._prealloc = prealloc_bytes
        self._dbid = dbid
        self._file: AppendFile | None = None
        self._size = 0  # the file's size as far as the writer grew it
        self.txns_in_current = 0

    @property
    def current_path(self) -> str | None:
        return self._file.path if self._file is not None else None

    @property
    def current_file(self) -> AppendFile | None:
        return self._file

    @property
    def position(self) -> int:
        """Bytes written to the current file (0 if none): its length without the zero tail."""
        return self._file.position if self._file is not None else 0

    def append(self, first_zxid: int, records: bytes) -> None:
        """Write ``records`` (concatenated ``encode_entry`` outputs, first zxid ``first_zxid``),
        opening ``log.<first_zxid>`` if no file is open. Not durable until ``sync``."""
        if not records:
            return
        count, zxid = _count_records(records)
        if zxid != first_zxid:
            raise ValueError(f"first record has zxid 0x{zxid:x}, not 0x{first_zxid:x}")
        if self._file is None:
            self._disk.makedirs(self._log_dir)
            self._file = self._disk.create(join(self._log_dir, log_name(first_zxid)))
            self._size = HEADER_SIZE
            self.txns_in_current = 0
        f = self._file
        out = records if f.position else file_header(self._dbid) + records
        start = f.position + len(out) - len(records)
        size = padded_size(start, self._size, self._prealloc)
        size = padded_size(start + len(records), size, self._prealloc)
        if size != self._size:
            f.preallocate(size)
            self._size = size
        f.write(out)
        self.txns_in_current += count

    def sync(self) -> None:
        """Make everything appended so far durable (no-op without a file)."""
        if self._file is not None:
            self._file.sync()

    def roll(self) -> None:
        """Sync and close the current file; the next append starts a new one."""
        if self._file is not None:
            self._file.sync()
            self.close()

    def close(self) -> None:
        """Close the current file without syncing it."""
        if self._file is not None:
            f, self._file = self._file, None
            self.txns_in_current = 0
            f.close()


# --- describing ---

_OP_NAMES = {  # Request.op2String for the types a log holds
    1: "create", 2: "delete", 5: "setData", 7: "setACL", 13: "check", 14: "multi", 15: "create2",
    16: "reconfig", 19: "createContainer", 20: "deleteContainer", 21: "createTtl",
    -10: "createSession", -11: "closeSession", -1: "error",
}
_PERMS = ((4, "c"), (8, "d"), (1, "r"), (2, "w"), (16, "a"))


def _show_bytes(data: bytes | None) -> str:
    if data is None:
        return "null"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and text.isprintable():
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return "0x" + data.hex()


def _show(value: Any) -> str:
    if isinstance(value, bytes) or value is None:
        return _show_bytes(value)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, ACL):
        perms = "".join(c for bit, c in _PERMS if value.perms & bit) or "-"
        return f"{value.id.scheme}:{value.id.id}:{perms}"
    if isinstance(value, list):
        return "[" + ",".join(_show(v) for v in value) + "]"
    if isinstance(value, Record):
        return "{" + " ".join(f"{n}={_show(getattr(value, n))}" for n, _ in value.JUTE_FIELDS) + "}"
    return str(value)


def _show_txn(op: int, txn: Record) -> str:
    if isinstance(txn, MultiTxn):
        parts = []
        for sub in txn.txns:
            try:
                body = _show_txn(sub.type, decode_txn(sub.type, sub.data))
            except _DECODE_ERRORS:
                body = _show_bytes(sub.data)
            parts.append(f"{_OP_NAMES.get(sub.type, str(sub.type))} {body}")
        return "[" + "; ".join(parts) + "]"
    return " ".join(f"{n}={_show(getattr(txn, n))}" for n, _ in txn.JUTE_FIELDS)


def describe_txn(txn_type: int, txn: Record) -> str:
    """A txn's type (as Request.op2String names it) and its fields."""
    return f"{_OP_NAMES.get(txn_type, f'unknown({txn_type})')} {_show_txn(txn_type, txn)}"


def describe_entry(entry: LogEntry) -> str:
    """One line per txn, in the spirit of TxnLogToolkit: time (UTC), session, cxid, zxid,
    type and the txn's fields; data as a quoted string when printable UTF-8, else hex."""
    hdr = entry.hdr
    try:
        when = datetime.fromtimestamp(hdr.time / 1000, UTC).isoformat(timespec="milliseconds")
        when = when.replace("+00:00", "Z")
    except (OverflowError, ValueError, OSError):
        when = f"time={hdr.time}"
    line = (f"{when} session 0x{long_hex(hdr.clientId)} cxid 0x{long_hex(hdr.cxid)}"
            f" zxid 0x{long_hex(hdr.zxid)} {describe_txn(hdr.type, entry.txn)}")
    if entry.digest is not None:
        line += f" digest={entry.digest.version}:0x{long_hex(entry.digest.treeDigest)}"
    return line
