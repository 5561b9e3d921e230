"""Damaged data dirs end as recovery's rules say (storage/recovery.py), never silently wrong.

The files come from a real zkpy server (several logs and snapshots); each test damages a copy
the way a crash or a bad disk would and recovers it: a torn or zero tail is cut off and only
the txns in it are missing; a bad record with valid data after it refuses to start, naming the
file and the offset; a broken newest snapshot falls back to an older one.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from bench.client import RawSession, create_body

from zkpy.runtime.osdisk import OsDisk
from zkpy.storage.files import DataDirs
from zkpy.storage.recovery import Recovered, recover
from zkpy.storage.txnlog import CorruptLogError, file_header, scan_log
from zkpy.testing.servers import start_zkpy
from zkpy.wire.consts import OpCode

CREATES = 400


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A data dir with several logs and snapshots, written by a real server and stopped cleanly."""
    server = start_zkpy({"snapCount": "120", "preAllocSize": "16"})

    async def write() -> None:
        s = await RawSession.connect("127.0.0.1", server.port)
        for i in range(CREATES):  # one at a time, so the logs roll between txns
            err, _ = await s.call(OpCode.CREATE, create_body(f"/n{i}", f"v{i}".encode()))
            assert err == 0
        await s.close()

    try:
        asyncio.run(write())
        assert server.stop() == 0
        path = tmp_path_factory.mktemp("template")
        shutil.copytree(os.path.join(server.workdir, "data"), path / "data")
    finally:
        server.cleanup()
    yield path / "data"


@pytest.fixture
def data(template: Path, tmp_path: Path) -> Path:
    shutil.copytree(template, tmp_path / "data")
    return tmp_path / "data"


def _recover(data: Path) -> Recovered:
    return recover(OsDisk(), DataDirs.of(str(data)))


def _logs(data: Path) -> list[Path]:
    return sorted((data / "version-2").glob("log.*"), key=lambda p: int(p.name[4:], 16))


def _snapshots(data: Path) -> list[Path]:
    return sorted((data / "version-2").glob("snapshot.*"), key=lambda p: int(p.name[9:], 16))


def _paths(rec: Recovered) -> set[str]:
    return {p for p in rec.tree.nodes if p.startswith("/n")}


def test_the_template_has_several_logs_and_snapshots(template: Path) -> None:
    assert len(_logs(template)) >= 3 and len(_snapshots(template)) >= 3
    rec = _recover(template)
    assert _paths(rec) == {f"/n{i}" for i in range(CREATES)}
    assert not rec.truncated and not rec.digest_mismatches


def test_truncated_last_record_is_cut_off(data: Path) -> None:
    last = _logs(data)[-1]
    original = last.read_bytes()
    entry = scan_log(str(last), original).entries[-1]
    last.write_bytes(original[:entry.offset])
    without_last = _recover(data).tree  # what the files hold without the last record
    assert without_last.last_processed_zxid == entry.hdr.zxid - 1
    for cut in (entry.offset + 1, entry.offset + 12, entry.offset + 40, entry.end - 1):
        raw = bytearray(original)
        raw[cut:] = bytes(len(raw) - cut)  # what was written of the record, then the preallocated zeros
        last.write_bytes(bytes(raw))
        rec = _recover(data)
        assert rec.tree.digest == without_last.digest and rec.tree.nodes.keys() == without_last.nodes.keys(), cut
        assert rec.tree.last_processed_zxid == entry.hdr.zxid - 1
        if cut >= entry.offset + 12:  # a few zero bytes after a record are only the end of the log
            assert rec.truncated == [f"{last}@{entry.offset}"], cut
            assert os.path.getsize(last) == entry.offset


def test_zero_filled_tail_is_the_end_of_the_log(data: Path) -> None:
    last = _logs(data)[-1]
    scan = scan_log(str(last), last.read_bytes())
    assert os.path.getsize(last) > scan.good_end, "the log is preallocated past its last record"
    rec = _recover(data)
    assert not rec.truncated and len(_paths(rec)) == CREATES


def test_garbage_tail_is_truncated(data: Path) -> None:
    last = _logs(data)[-1]
    raw = bytearray(last.read_bytes())
    good_end = scan_log(str(last), bytes(raw)).good_end
    raw[good_end:good_end + 300] = random.Random(7).randbytes(300)
    last.write_bytes(bytes(raw))
    rec = _recover(data)
    assert rec.truncated == [f"{last}@{good_end}"]
    assert len(_paths(rec)) == CREATES
    assert os.path.getsize(last) == good_end
    assert not _recover(data).truncated, "the second recovery finds a clean log"


@pytest.mark.parametrize("where", ["payload", "length", "checksum"])
def test_flipped_bit_mid_log_refuses_to_start(data: Path, where: str) -> None:
    log = _logs(data)[-2]
    scan = scan_log(str(log), log.read_bytes())
    entry = scan.entries[len(scan.entries) // 2]
    offset = {"checksum": entry.offset + 3, "length": entry.offset + 10, "payload": entry.offset + 30}[where]
    raw = bytearray(log.read_bytes())
    raw[offset] ^= 0x10
    log.write_bytes(bytes(raw))
    with pytest.raises(CorruptLogError) as info:
        _recover(data)
    assert info.value.path == str(log) and info.value.offset == entry.offset
    assert log.name in str(info.value) and str(entry.offset) in str(info.value)
    assert log.read_bytes() == bytes(raw), "recovery changed nothing"


def test_flipped_bit_in_the_last_log_before_its_last_record_refuses(data: Path) -> None:
    last = _logs(data)[-1]
    scan = scan_log(str(last), last.read_bytes())
    assert len(scan.entries) >= 2
    entry = scan.entries[0]
    raw = bytearray(last.read_bytes())
    raw[entry.offset + 40] ^= 0x01
    last.write_bytes(bytes(raw))
    with pytest.raises(CorruptLogError):
        _recover(data)


@pytest.mark.parametrize("damage", ["empty", "missing", "truncated"])
def test_broken_newest_snapshot_falls_back_to_an_older_one(data: Path, damage: str) -> None:
    newest = _snapshots(data)[-1]
    if damage == "empty":
        newest.write_bytes(b"")
    elif damage == "missing":
        newest.unlink()
    else:
        newest.write_bytes(newest.read_bytes()[: os.path.getsize(newest) // 2])
    rec = _recover(data)
    assert rec.snapshot_path == str(_snapshots(data)[-2 if damage != "missing" else -1])
    assert len(_paths(rec)) == CREATES and not rec.digest_mismatches


def test_header_only_new_log_is_harmless(data: Path) -> None:
    reference = _recover(data)
    last_zxid = reference.tree.last_processed_zxid
    (data / "version-2" / f"log.{last_zxid + 1:x}").write_bytes(file_header() + bytes(4096))
    rec = _recover(data)
    assert rec.tree.digest == reference.tree.digest and len(_paths(rec)) == CREATES


def test_empty_new_log_is_removed(data: Path) -> None:
    reference = _recover(data)
    empty = data / "version-2" / f"log.{reference.tree.last_processed_zxid + 1:x}"
    empty.write_bytes(b"")
    rec = _recover(data)
    assert rec.removed == [str(empty)] and not empty.exists()
    assert rec.tree.digest == reference.tree.digest


def test_server_refuses_a_corrupt_log_naming_file_and_offset(data: Path, tmp_path: Path) -> None:
    log = _logs(data)[-2]
    entry = scan_log(str(log), log.read_bytes()).entries[3]
    raw = bytearray(log.read_bytes())
    raw[entry.offset + 30] ^= 0x04
    log.write_bytes(bytes(raw))
    workdir = tmp_path / "server"
    workdir.mkdir()
    shutil.move(str(data), workdir / "data")
    server = start_zkpy({}, workdir=str(workdir), wait=False)
    assert server.proc.wait(30) == 4
    out = server.log()
    assert f"{log.name}" in out and str(entry.offset) in out, out[-2000:]
