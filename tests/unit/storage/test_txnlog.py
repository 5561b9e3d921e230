"""The txn log file: ZooKeeper 3.8's bytes, every txn type round-trips, and damage is classified
(clean end, torn tail, or CorruptLogError) by the rule in zkpy.storage.txnlog's docstring."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.jute_strategies import record_strategy
from zkpy.storage.disk import MemoryDisk
from zkpy.storage.txnlog import (
    DEFAULT_PREALLOC_BYTES,
    HEADER_SIZE,
    LOG_PREFIX,
    CorruptLogError,
    LogEntry,
    TxnLogWriter,
    describe_entry,
    encode_entry,
    encode_payload,
    file_header,
    frame_payloads,
    log_name,
    padded_size,
    scan_log,
    zxid_from_name,
)
from zkpy.testing.servers import ZK_CONF_DIR, ZK_JAR
from zkpy.wire.consts import OpCode
from zkpy.wire.jute import Record
from zkpy.wire.proto import ACL, Id
from zkpy.wire.txn import (
    TXN_RECORDS,
    CheckVersionTxn,
    CloseSessionTxn,
    CreateContainerTxn,
    CreateSessionTxn,
    CreateTTLTxn,
    CreateTxn,
    CreateTxnV0,
    DeleteTxn,
    ErrorTxn,
    MultiTxn,
    SetACLTxn,
    SetDataTxn,
    Txn,
    TxnDigest,
    TxnHeader,
)

LOG_DIR = "/data/version-2"
OPEN = [ACL(31, Id("world", "anyone"))]
SESSION = 0x1000A2B3C4D0001
TIME_MS = 1_700_000_000_000

SAMPLES: dict[int, Record] = {
    OpCode.CREATE_SESSION: CreateSessionTxn(30000),
    OpCode.CREATE: CreateTxn("/app", b"hello", OPEN, False, 1),
    OpCode.CREATE2: CreateTxn("/app/eph", b"\x00\xff binary", OPEN, True, 2),
    OpCode.CREATE_CONTAINER: CreateContainerTxn("/box", None, OPEN, 3),
    OpCode.CREATE_TTL: CreateTTLTxn("/ttl", b"", [ACL(1, Id("digest", "u:x"))], 4, 60000),
    OpCode.SET_DATA: SetDataTxn("/app", "ünïcode".encode(), 1),
    OpCode.SET_ACL: SetACLTxn("/app", [ACL(17, Id("ip", "10.0.0.1"))], 0),
    OpCode.CHECK: CheckVersionTxn("/app", 2),
    OpCode.DELETE: DeleteTxn("/app/eph"),
    OpCode.DELETE_CONTAINER: DeleteTxn("/box"),
    OpCode.ERROR: ErrorTxn(-101),
    OpCode.MULTI: MultiTxn([
        Txn(OpCode.CREATE, CreateTxn("/m", b"1", OPEN, False, 5).to_bytes()),
        Txn(OpCode.SET_DATA, SetDataTxn("/m", b"2", 0).to_bytes()),
        Txn(OpCode.CHECK, CheckVersionTxn("/m", 1).to_bytes()),
        Txn(OpCode.DELETE, DeleteTxn("/m").to_bytes()),
    ]),
    OpCode.CLOSE_SESSION: CloseSessionTxn(["/app"]),
}


def test_samples_cover_every_txn_type() -> None:
    assert set(SAMPLES) == set(TXN_RECORDS)


def header(zxid: int, op: int) -> TxnHeader:
    return TxnHeader(SESSION, zxid & 0xFFFF, zxid, TIME_MS + zxid, int(op))


def digest_of(zxid: int) -> TxnDigest:
    return TxnDigest(2, 0x0123456789ABCDEF ^ zxid)


def records(ops: list[int], first_zxid: int = 1, digests: bool = True) -> list[bytes]:
    return [encode_entry(header(z, op), SAMPLES[op], digest_of(z) if digests else None)
            for z, op in enumerate(ops, first_zxid)]


def write_log(recs: list[bytes], first_zxid: int = 1, prealloc: int = 0) -> tuple[str, bytes]:
    disk = MemoryDisk()
    writer = TxnLogWriter(disk, LOG_DIR, prealloc_bytes=prealloc)
    writer.append(first_zxid, b"".join(recs))
    writer.roll()
    path = f"{LOG_DIR}/{log_name(first_zxid)}"
    return path, disk.read(path)


def offsets(recs: list[bytes]) -> list[int]:
    out, pos = [], HEADER_SIZE
    for r in recs:
        out.append(pos)
        pos += len(r)
    return out


MANY = [OpCode.CREATE_SESSION, OpCode.CREATE, OpCode.SET_DATA, OpCode.MULTI, OpCode.DELETE, OpCode.CLOSE_SESSION]


# --- format ---


def test_file_header_is_magic_version_dbid() -> None:
    assert file_header() == b"ZKLG" + bytes.fromhex("00000002") + bytes(8)
    assert file_header(7)[8:] == (7).to_bytes(8, "big")
    assert len(file_header()) == HEADER_SIZE


def test_record_is_adler32_length_payload_and_B() -> None:
    hdr, txn, dig = header(5, OpCode.DELETE), DeleteTxn("/a"), TxnDigest(2, 99)
    payload = hdr.to_bytes() + txn.to_bytes() + dig.to_bytes()
    rec = encode_entry(hdr, txn, dig)
    assert rec == struct.pack(">qi", zlib.adler32(payload), len(payload)) + payload + b"B"
    assert rec[:4] == bytes(4)  # the checksum is an unsigned 32-bit value in a long
    assert encode_entry(hdr, txn, None)[12:-1] == hdr.to_bytes() + txn.to_bytes()


@pytest.mark.parametrize(("zxid", "name"), [(0x1A, "log.1a"), (0, "log.0"), (0x100000001, "log.100000001"),
                                            (0x7FFFFFFFFFFFFFFF, "log.7fffffffffffffff")])
def test_log_name_is_lower_case_hex_without_padding(zxid: int, name: str) -> None:
    assert log_name(zxid) == name
    assert zxid_from_name(name, LOG_PREFIX) == zxid


@pytest.mark.parametrize(("name", "zxid"), [
    ("log.1a", 0x1A), ("log.1A", 0x1A), ("log.1a.bak", 0x1A),  # Java splits on '.' and reads part 1
    ("snapshot.1a", None), ("log", None), ("log.", None), ("log..1", None), ("logs.1", None),
    ("log.xyz", None), ("log.0x1a", None), ("log. 1a", None), ("log.1_0", None),
    ("log.ffffffffffffffff", None),  # past Long.MAX_VALUE: NumberFormatException in Java
])
def test_zxid_from_name_follows_util_get_zxid_from_name(name: str, zxid: int | None) -> None:
    assert zxid_from_name(name, LOG_PREFIX) == zxid


@pytest.mark.parametrize(("digests"), [True, False], ids=["digest", "no-digest"])
@pytest.mark.parametrize("op", list(SAMPLES), ids=lambda op: OpCode(op).name)
def test_every_txn_type_round_trips(op: int, digests: bool) -> None:
    recs = records([OpCode.CREATE_SESSION, op, OpCode.DELETE], first_zxid=0x500000001, digests=digests)
    path, data = write_log(recs, first_zxid=0x500000001)
    scan = scan_log(path, data)
    assert (scan.header_ok, scan.torn, scan.good_end) == (True, False, len(data))
    assert [(e.offset, e.end) for e in scan.entries] == [(o, o + len(r)) for o, r in zip(offsets(recs), recs)]
    entry = scan.entries[1]
    assert entry.hdr == header(0x500000002, op)
    assert entry.txn == SAMPLES[op]
    assert entry.digest == (digest_of(0x500000002) if digests else None)
    assert scan.last_zxid == 0x500000003


def test_all_types_in_one_log_round_trip() -> None:
    ops = list(SAMPLES)
    recs = records(ops)
    path, data = write_log(recs, prealloc=64 * 1024)
    scan = scan_log(path, data)
    assert [(e.hdr.type, e.txn) for e in scan.entries] == [(op, SAMPLES[op]) for op in ops]
    assert scan.good_end == HEADER_SIZE + sum(map(len, recs)) and not scan.torn


def test_old_create_without_parent_cversion_reads_as_create_txn_v0() -> None:
    """SerializeUtils: a create too short for CreateTxn is a CreateTxnV0 with parentCVersion -1."""
    hdr = header(1, OpCode.CREATE)
    payload = hdr.to_bytes() + CreateTxnV0("/old", b"x", OPEN, True).to_bytes()
    rec = struct.pack(">qi", zlib.adler32(payload), len(payload)) + payload + b"B"
    (entry,) = scan_log("log.1", file_header() + rec).entries
    assert entry.txn == CreateTxn("/old", b"x", OPEN, True, -1)
    assert entry.digest is None


def test_close_session_without_body_reads_as_empty_close_session_txn() -> None:
    """Before 3.6 a closeSession had no body (Java reads a null txn: delete every ephemeral)."""
    payload = header(1, OpCode.CLOSE_SESSION).to_bytes()
    rec = struct.pack(">qi", zlib.adler32(payload), len(payload)) + payload + b"B"
    (entry,) = scan_log("log.1", file_header() + rec).entries
    assert entry.txn == CloseSessionTxn([])


def test_digest_needs_twelve_bytes_after_the_txn() -> None:
    """deserializeTxn reads a digest if one is there; fewer bytes (EOF) mean no digest."""
    hdr = header(1, OpCode.DELETE)
    payload = hdr.to_bytes() + DeleteTxn("/a").to_bytes() + TxnDigest(2, 5).to_bytes()[:11]
    rec = struct.pack(">qi", zlib.adler32(payload), len(payload)) + payload + b"B"
    (entry,) = scan_log("log.1", file_header() + rec).entries
    assert entry.txn == DeleteTxn("/a") and entry.digest is None


def test_reconfig_reads_as_set_data_txn() -> None:
    hdr = header(1, OpCode.RECONFIG)
    txn = SetDataTxn("/zookeeper/config", b"server.1=a:1:2", 3)
    (entry,) = scan_log("log.1", file_header() + encode_entry(hdr, txn, None)).entries
    assert entry.txn == txn


def test_after_zxid_skips_decoding_earlier_entries() -> None:
    recs = records(MANY)
    path, data = write_log(recs)
    scan = scan_log(path, data, after_zxid=4)
    assert [e.hdr.zxid for e in scan.entries] == [5, 6]
    assert scan.last_zxid == 6 and scan.good_end == len(data)


_ACLS = st.sampled_from([OPEN, [ACL(1, Id("digest", "u:x"))], [ACL(31, Id("world", "anyone")), ACL(1, Id("ip", "1.2.3.4"))], []])
_CREATES = st.builds(CreateTxn, st.text(max_size=30).map(lambda s: "/" + s), st.none() | st.binary(max_size=40), _ACLS,
                     st.booleans(), st.integers(-1, 2**31 - 1))


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from([OpCode.CREATE, OpCode.CREATE2, OpCode.DELETE]), _CREATES, st.booleans()),
                min_size=1, max_size=12))
def test_the_replay_sink_reads_what_the_record_decoder_reads(ops: list[tuple[int, CreateTxn, bool]]) -> None:
    """A replay's sink gets plain creates as tuples read straight from the bytes: they must say
    what the generic decoder reads (path, data, ACL, ephemeral, parentCVersion), with or without
    a digest after them; other txns come as their records."""
    recs = [encode_entry(header(z, op), txn if op != OpCode.DELETE else DeleteTxn(txn.path),
                         digest_of(z) if digest else None)
            for z, (op, txn, digest) in enumerate(ops, 1)]
    path, data = write_log(recs, prealloc=4096)
    sunk: list[tuple[int, int, Record]] = []

    def sink(offset: int, head: tuple[int, int, int, int, int], txn: object, payload: memoryview) -> None:
        assert bytes(payload) == recs[len(sunk)][12:-1]
        if type(txn) is tuple:
            assert head[4] in (OpCode.CREATE, OpCode.CREATE2)
            txn = CreateTxn(txn[0], txn[1], list(txn[2]), txn[3], txn[4])
        assert isinstance(txn, Record)
        sunk.append((offset, head[2], txn))

    scan = scan_log(path, data, sink=sink)
    expected = scan_log(path, data).entries
    assert sunk == [(e.offset, e.hdr.zxid, e.txn) for e in expected]
    assert scan.good_end == expected[-1].end and not scan.torn


# --- writer ---


@pytest.mark.parametrize(("position", "size", "prealloc", "expected"), [
    # every expected value printed by FilePadding.calculateFileSizeWithPadding (ZooKeeper 3.8.0)
    (16, 16, 8192, 8208), (4000, 8208, 8192, 8208), (4111, 8208, 8192, 8208), (4112, 8208, 8192, 16400),
    (9000, 8208, 8192, 16384), (20000, 8208, 8192, 24576), (16, 16, 0, 16),
    (100, 16, 64 << 20, 64 << 20), (67104800, 67108880, 64 << 20, 134217744),
])
def test_padded_size_is_file_padding(position: int, size: int, prealloc: int, expected: int) -> None:
    assert padded_size(position, size, prealloc) == expected


def test_first_append_preallocates_64_mib_after_the_header() -> None:
    disk = MemoryDisk()
    writer = TxnLogWriter(disk, LOG_DIR)
    recs = records(MANY)
    writer.append(1, b"".join(recs))
    path = writer.current_path
    assert path == f"{LOG_DIR}/log.1" and writer.txns_in_current == len(MANY)
    data = disk.read(path)
    assert len(data) == HEADER_SIZE + DEFAULT_PREALLOC_BYTES  # what FileTxnLog makes (see the Apache test)
    assert data[:HEADER_SIZE] == file_header() and data[HEADER_SIZE:writer.position] == b"".join(recs)
    assert data[writer.position:].count(0) == len(data) - writer.position
    scan = scan_log(path, data)
    assert len(scan.entries) == len(MANY) and not scan.torn and scan.good_end == writer.position


def test_file_grows_by_prealloc_before_a_write_comes_within_4k_of_its_end() -> None:
    disk = MemoryDisk()
    prealloc = 16 * 1024
    writer = TxnLogWriter(disk, LOG_DIR, prealloc_bytes=prealloc)
    sizes, zxid = [], 1
    while zxid < 400:
        rec = encode_entry(header(zxid, OpCode.SET_DATA), SetDataTxn("/p", bytes(range(256)), zxid), None)
        writer.append(zxid, rec)
        path = writer.current_path
        assert path is not None
        size = disk.size(path)
        assert writer.position + 4096 < size  # every write lands well inside preallocated zeros
        sizes.append(size)
        zxid += 1
    grown = sorted(set(sizes))
    assert grown[0] == HEADER_SIZE + prealloc
    assert all(b - a == prealloc for a, b in zip(grown, grown[1:]))
    assert len(scan_log(path, disk.read(path)).entries) == 399


def test_a_batch_larger_than_prealloc_rounds_the_size_like_file_padding() -> None:
    disk = MemoryDisk()
    writer = TxnLogWriter(disk, LOG_DIR, prealloc_bytes=8192)
    big = encode_entry(header(1, OpCode.SET_DATA), SetDataTxn("/p", bytes(20000), 1), None)
    writer.append(1, big)
    assert disk.size(f"{LOG_DIR}/log.1") == padded_size(HEADER_SIZE + len(big), HEADER_SIZE + 8192, 8192)
    assert disk.size(f"{LOG_DIR}/log.1") % 8192 == 0


def test_roll_syncs_and_the_next_append_starts_a_file_named_after_its_first_zxid() -> None:
    disk = MemoryDisk()
    writer = TxnLogWriter(disk, LOG_DIR, prealloc_bytes=4096)
    writer.append(1, b"".join(records(MANY[:3], first_zxid=1)))
    writer.append(4, b"".join(records(MANY[3:4], first_zxid=4)))
    assert writer.txns_in_current == 4
    writer.roll()
    assert writer.current_path is None and writer.txns_in_current == 0
    assert disk.durable[f"{LOG_DIR}/log.1"] == disk.read(f"{LOG_DIR}/log.1")
    writer.append(0x1F, b"".join(records(MANY[4:], first_zxid=0x1F)))
    assert writer.current_path == f"{LOG_DIR}/log.1f" and writer.txns_in_current == 2
    writer.sync()
    writer.close()
    assert disk.listdir(LOG_DIR) == ["log.1", "log.1f"]
    assert [e.hdr.zxid for e in scan_log("log.1", disk.read(f"{LOG_DIR}/log.1")).entries] == [1, 2, 3, 4]
    assert [e.hdr.zxid for e in scan_log("log.1f", disk.read(f"{LOG_DIR}/log.1f")).entries] == [0x1F, 0x20]


def test_append_refuses_partial_records_and_a_wrong_first_zxid() -> None:
    disk = MemoryDisk()
    writer = TxnLogWriter(disk, LOG_DIR)
    rec = records([OpCode.CREATE_SESSION])[0]
    with pytest.raises(ValueError):
        writer.append(1, rec[:-1])
    with pytest.raises(ValueError):
        writer.append(2, rec)
    assert disk.listdir(LOG_DIR) == []
    writer.append(1, b"")
    assert writer.current_path is None


def test_only_synced_records_survive_a_crash_and_a_torn_write_is_a_torn_tail() -> None:
    recs = records(MANY)
    for keep in (0, 1, 5, 12, 20, 40, 10_000):
        disk = MemoryDisk()
        writer = TxnLogWriter(disk, LOG_DIR, prealloc_bytes=0)
        writer.append(1, b"".join(recs[:3]))
        writer.sync()
        writer.append(4, b"".join(recs[3:]))
        disk.crash(keep_unsynced=keep)
        data = disk.read(f"{LOG_DIR}/log.1")
        scan = scan_log("log.1", data)
        assert [e.hdr.zxid for e in scan.entries][:3] == [1, 2, 3]
        complete = [o + len(r) for o, r in zip(offsets(recs), recs)]
        assert scan.good_end in complete
        assert scan.torn == any(data[scan.good_end:])


# --- classification ---


def test_clean_file_without_a_tail() -> None:
    path, data = write_log(records(MANY))
    scan = scan_log(path, data)
    assert (scan.header_ok, scan.torn, scan.good_end, len(scan.entries)) == (True, False, len(data), 6)


def test_zero_filled_tail_is_a_clean_end() -> None:
    recs = records(MANY)
    path, data = write_log(recs, prealloc=1 << 20)
    assert len(data) == HEADER_SIZE + (1 << 20)
    scan = scan_log(path, data)
    assert not scan.torn and scan.good_end == HEADER_SIZE + sum(map(len, recs)) and len(scan.entries) == 6


def test_header_only_file() -> None:
    for data in (file_header(), file_header() + bytes(4096), file_header(dbid=0x4200)):
        scan = scan_log("log.1", data)
        assert (scan.header_ok, scan.entries, scan.good_end, scan.torn) == (True, [], HEADER_SIZE, False)


@pytest.mark.parametrize("data", [b"", b"ZKLG", file_header()[:15], b"ZKSN" + file_header()[4:],
                                  bytes(64), b"GLKZ" + file_header()[4:] + records(MANY)[0]])
def test_short_or_bad_header(data: bytes) -> None:
    scan = scan_log("log.1", data)
    assert (scan.header_ok, scan.entries, scan.good_end, scan.torn) == (False, [], 0, False)


@pytest.mark.parametrize("zeros", [0, 4096], ids=["no-tail", "zero-tail"])
def test_truncated_last_record_is_a_torn_tail(zeros: int) -> None:
    recs = records(MANY)
    path, data = write_log(recs)
    last = offsets(recs)[-1]
    for cut in (1, 4, 5, 8, 11, 12, 13, 20, 36, len(recs[-1]) // 2, len(recs[-1]) - 1):
        scan = scan_log(path, data[:last + cut] + bytes(zeros))
        assert [e.hdr.zxid for e in scan.entries] == [1, 2, 3, 4, 5]
        assert scan.good_end == last
        # the checksum's first four bytes are zeros: a cut inside them leaves only zeros behind
        assert scan.torn == (cut > 4)


def test_garbage_tail_is_a_torn_tail() -> None:
    recs = records(MANY)
    path, data = write_log(recs)
    for garbage in (b"\x01", b"B" * 100, bytes(range(1, 256)) * 3, b"\x00" * 12 + b"junk"):
        scan = scan_log(path, data + garbage + bytes(100))
        assert scan.torn and scan.good_end == len(data) and len(scan.entries) == 6


@pytest.mark.parametrize(("where", "reason"), [
    (0, "checksum mismatch"),  # inside the checksum
    (13, "checksum mismatch"),  # inside the TxnHeader
    (40, "checksum mismatch"),  # inside the txn
    (-1, "no end-of-record byte"),
])
def test_flipped_bit_in_a_middle_record_is_corruption(where: int, reason: str) -> None:
    recs = records(MANY)
    path, data = write_log(recs)
    bad = offsets(recs)[2]
    i = bad + (where if where >= 0 else len(recs[2]) + where)
    damaged = data[:i] + bytes([data[i] ^ 0x10]) + data[i + 1:]
    with pytest.raises(CorruptLogError) as info:
        scan_log(path, damaged)
    err = info.value
    assert (err.path, err.offset, err.reason, err.zxid, err.valid_at) == (path, bad, reason, 3, offsets(recs)[3])
    assert str(err).startswith(f"{path}: {reason} at offset {bad} (record of zxid 0x3)")


@pytest.mark.parametrize("bit", [0, 3, 7, 15, 20, 30])
def test_flipped_bit_in_the_length_of_a_middle_record_is_corruption(bit: int) -> None:
    recs = records(MANY)
    path, data = write_log(recs, prealloc=1 << 16)
    bad = offsets(recs)[1]
    length = struct.unpack_from(">i", data, bad + 8)[0]
    damaged = bytearray(data)
    struct.pack_into(">i", damaged, bad + 8, length ^ (1 << bit))
    with pytest.raises(CorruptLogError) as info:
        scan_log(path, bytes(damaged))
    assert info.value.offset == bad and info.value.valid_at == offsets(recs)[2]


def test_corrupt_first_record_is_found_through_the_zxid_in_the_file_name() -> None:
    recs = records(MANY, first_zxid=0x30)
    path, data = write_log(recs, first_zxid=0x30)
    damaged = bytearray(data)
    damaged[HEADER_SIZE + 8:HEADER_SIZE + 12] = b"\x7f\x00\x00\x00"  # length runs far past the end
    with pytest.raises(CorruptLogError) as info:
        scan_log(path, bytes(damaged))
    assert info.value.offset == HEADER_SIZE and info.value.valid_at == offsets(recs)[1]


@pytest.mark.parametrize("fill", [b"\x00", b"\xff", b"\x5a"], ids=["zeros", "ones", "pattern"])
def test_a_damaged_page_spanning_several_records_is_corruption(fill: bytes) -> None:
    """A 4 KiB page of small records overwritten: the next intact record is found by its boundary."""
    recs = records([OpCode.DELETE] * 200)
    path, data = write_log(recs, prealloc=1 << 16)
    page = 4096 * 2
    damaged = data[:page] + fill * 4096 + data[page + 4096:]
    first_bad = max(i for i, o in enumerate(offsets(recs)) if o <= page)
    first_intact = min(o for o in offsets(recs) if o >= page + 4096)
    with pytest.raises(CorruptLogError) as info:
        scan_log(path, damaged)
    assert info.value.offset == offsets(recs)[first_bad] and info.value.valid_at == first_intact


def test_corruption_before_an_epoch_change_is_found() -> None:
    """Zxids jump at a new epoch (0x1_0000000a -> 0x2_00000001), so no zxid+1 follows the bad record."""
    recs = records([OpCode.DELETE] * 3, first_zxid=0x100000008) + records([OpCode.DELETE] * 3, 0x200000001)
    path, data = write_log(recs, first_zxid=0x100000008)
    bad = offsets(recs)[2]
    damaged = bytearray(data)
    damaged[bad + 8] ^= 0x01  # the length of the last record of epoch 1
    with pytest.raises(CorruptLogError) as info:
        scan_log(path, bytes(damaged))
    assert info.value.offset == bad and info.value.valid_at == offsets(recs)[3]


def test_undecodable_record_with_a_valid_checksum_in_the_middle_is_corruption() -> None:
    recs = records(MANY)
    recs[2] = encode_entry(TxnHeader(SESSION, 3, 3, TIME_MS, 99), DeleteTxn("/x"), None)
    path, data = write_log(recs)
    with pytest.raises(CorruptLogError, match="unsupported txn type 99"):
        scan_log(path, data)


def test_corruption_in_a_64_mib_preallocated_log_is_found() -> None:
    recs = records(MANY * 50)
    disk = MemoryDisk()
    writer = TxnLogWriter(disk, LOG_DIR)
    writer.append(1, b"".join(recs))
    path = f"{LOG_DIR}/log.1"
    data = bytearray(disk.read(path))
    assert len(data) > DEFAULT_PREALLOC_BYTES
    bad = offsets(recs)[100]
    data[bad + 8] ^= 0x40  # the length now runs past the end of the data
    with pytest.raises(CorruptLogError) as info:
        scan_log(path, bytes(data))
    assert info.value.offset == bad and info.value.valid_at == offsets(recs)[101]
    original = disk.read(path)
    tail = offsets(recs)[-1]
    scan = scan_log(path, original[:tail + 30] + bytes(len(original) - tail - 30))
    assert scan.torn and scan.good_end == tail and len(scan.entries) == len(recs) - 1


# --- random logs, random damage ---

OPS = sorted(TXN_RECORDS)


@st.composite
def txn_logs(draw: st.DrawFn) -> tuple[int, list[bytes]]:
    first = draw(st.integers(1, 2**40))
    n = draw(st.integers(1, 8))
    recs = []
    for zxid in range(first, first + n):
        op = draw(st.sampled_from(OPS))
        txn = draw(record_strategy(TXN_RECORDS[op]))
        digest = draw(st.none() | st.builds(TxnDigest, st.integers(0, 3), st.integers(-(2**63), 2**63 - 1)))
        hdr = TxnHeader(draw(st.integers(0, 2**63 - 1)), draw(st.integers(-(2**31), 2**31 - 1)), zxid,
                        draw(st.integers(0, 2**45)), op)
        recs.append(encode_entry(hdr, txn, digest))
    return first, recs


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(txn_logs(), st.booleans(), st.data())
def test_damage_inside_the_last_record_is_torn_and_anywhere_earlier_is_corruption(
        log: tuple[int, list[bytes]], zero_tail: bool, data: st.DataObject) -> None:
    first, recs = log
    path = f"{LOG_DIR}/{log_name(first)}"
    full = file_header() + b"".join(recs)
    tail = bytes(1000) if zero_tail else b""
    clean = scan_log(path, full + tail)
    assert not clean.torn and [e.end for e in clean.entries] == [o + len(r) for o, r in zip(offsets(recs), recs)]
    k = data.draw(st.integers(0, len(recs) - 1), label="damaged record")
    start = offsets(recs)[k]
    if k == len(recs) - 1:
        cut = data.draw(st.integers(start, len(full) - 1), label="cut at")
        scan = scan_log(path, full[:cut] + tail)
        assert scan.entries == clean.entries[:-1]
        assert scan.good_end == start
        assert scan.torn == any(full[start:cut])
    else:
        i = data.draw(st.integers(start, start + len(recs[k]) - 1), label="flipped byte")
        bit = data.draw(st.integers(0, 7), label="bit")
        damaged = full[:i] + bytes([full[i] ^ (1 << bit)]) + full[i + 1:]
        with pytest.raises(CorruptLogError) as info:
            scan_log(path, damaged + tail)
        assert info.value.offset == start and path in str(info.value)


# --- describe_entry ---


def test_describe_entry_is_one_readable_line() -> None:
    recs = records(MANY)
    path, data = write_log(recs)
    lines = [describe_entry(e) for e in scan_log(path, data).entries]
    assert all("\n" not in line for line in lines)
    assert lines[0] == ("2023-11-14T22:13:20.001Z session 0x1000a2b3c4d0001 cxid 0x1 zxid 0x1 createSession "
                        "timeOut=30000 digest=2:0x123456789abcdee")
    assert 'create path=/app data="hello" acl=[world:anyone:cdrwa] ephemeral=false parentCVersion=1' in lines[1]
    assert 'setData path=/app data="ünïcode" version=1' in lines[2]
    assert '[create path=/m data="1"' in lines[3] and "; check path=/m version=1; delete path=/m]" in lines[3]
    assert "closeSession paths2Delete=[/app]" in lines[5]


def test_describe_entry_shows_binary_data_as_hex() -> None:
    entry = LogEntry(header(2, OpCode.CREATE2), SAMPLES[OpCode.CREATE2], None, 16, 100)
    assert "data=0x00ff2062696e617279" in describe_entry(entry)
    entry = LogEntry(header(2, OpCode.CREATE_CONTAINER), SAMPLES[OpCode.CREATE_CONTAINER], None, 16, 100)
    assert "data=null" in describe_entry(entry)


# --- against Apache ZooKeeper 3.8 ---

CLASSPATH = f"{ZK_CONF_DIR}:{ZK_JAR}"
# SerializeUtils.deserializeTxn has no case for a top-level check: checks only occur inside a multi
APACHE_OPS = [op for op in SAMPLES if op != OpCode.CHECK]

RELOG_JAVA = """
import java.io.File;
import org.apache.zookeeper.server.persistence.FileTxnLog;
import org.apache.zookeeper.server.persistence.TxnLog.TxnIterator;

public class Relog {  // reads a log with FileTxnLog and appends every entry to a new FileTxnLog
    public static void main(String[] args) throws Exception {
        FileTxnLog out = new FileTxnLog(new File(args[1]));
        try (TxnIterator it = new FileTxnLog(new File(args[0])).read(0)) {
            while (it.getHeader() != null) {
                System.out.println("zxid " + Long.toHexString(it.getHeader().getZxid())
                                   + " digest " + (it.getDigest() != null));
                out.append(it.getHeader(), it.getTxn(), it.getDigest());
                if (!it.next()) break;
            }
        }
        out.commit();
        out.close();
    }
}
"""


def _require_java() -> None:
    from tests.conftest import require_apache

    require_apache()


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    java = shutil.which("java")
    assert java
    return subprocess.run([java, "-cp", CLASSPATH, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.interop
def test_txn_log_toolkit_reads_every_txn_zkpy_writes(tmp_path: Path) -> None:
    _require_java()
    disk = MemoryDisk()
    writer = TxnLogWriter(disk, LOG_DIR)
    writer.append(1, b"".join(records(APACHE_OPS, digests=False)))
    writer.roll()
    writer.append(len(APACHE_OPS) + 1, b"".join(records(APACHE_OPS, first_zxid=len(APACHE_OPS) + 1)))
    writer.roll()
    for name in disk.listdir(LOG_DIR):
        (tmp_path / name).write_bytes(disk.read(f"{LOG_DIR}/{name}"))
        result = _run(["org.apache.zookeeper.server.persistence.TxnLogToolkit", name], tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        out = result.stdout
        assert out.startswith("ZooKeeper Transactional Log File with dbid 0 txnlog format version 2\n")
        assert out.count(" zxid 0x") == len(APACHE_OPS)
        assert out.rstrip().endswith(f"EOF reached after {len(APACHE_OPS)} txns.")
        first = zxid_from_name(name, LOG_PREFIX)
        assert first is not None
        for z, op in enumerate(APACHE_OPS, first):
            assert f"session 0x{SESSION:x} cxid 0x{z & 0xFFFF:x} zxid 0x{z:x} " in out, op
        assert "/app,hello," in out and " createTtl /ttl," in out and "multi create:" in out


@pytest.mark.interop
def test_apache_file_txn_log_rewrites_zkpy_logs_byte_for_byte(tmp_path: Path) -> None:
    """Apache reads our log (FileTxnIterator, digests on) and appends each entry to a log of its
    own: header, records, digests and the 64 MiB preallocation come out identical."""
    _require_java()
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "Relog.java").write_text(RELOG_JAVA)
    disk = MemoryDisk()
    writer = TxnLogWriter(disk, LOG_DIR)
    first = 0x200000001
    recs = records(APACHE_OPS, first_zxid=first) + records(APACHE_OPS, first + len(APACHE_OPS), digests=False)
    writer.append(first, b"".join(recs))
    writer.roll()
    ours = disk.read(f"{LOG_DIR}/{log_name(first)}")
    (tmp_path / "in" / log_name(first)).write_bytes(ours)
    result = _run(["Relog.java", "in", "out"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    n = len(APACHE_OPS)
    assert result.stdout.splitlines() == [f"zxid {z:x} digest {str(i < n).lower()}"
                                         for i, z in enumerate(range(first, first + 2 * n))]
    theirs = (tmp_path / "out" / log_name(first)).read_bytes()
    assert len(theirs) == len(ours) == HEADER_SIZE + DEFAULT_PREALLOC_BYTES
    assert theirs == ours


@given(st.lists(st.tuples(st.integers(0, 1 << 40), st.binary(max_size=64)), max_size=6))
def test_framed_payloads_are_the_records_encode_entry_writes(txns: list[tuple[int, bytes]]) -> None:
    """The log's records for txns serialized once (a PROPOSAL's data, a worker's INFORM) are the
    records ``encode_entry`` writes for the same header and txn, one after another."""
    entries = [(TxnHeader(7, 1, zxid, 1000, OpCode.SET_DATA), SetDataTxn("/p", data, 3)) for zxid, data in txns]
    assert frame_payloads([encode_payload(h, t) for h, t in entries]) == \
        b"".join(encode_entry(h, t, None) for h, t in entries)
