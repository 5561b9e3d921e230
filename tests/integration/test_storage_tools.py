"""``zkpy logdump``, ``zkpy snapdump`` and ``zkpy purge`` on the files a real server wrote."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from bench.client import RawSession, create_body, set_data_body

from zkpy.runtime.osdisk import OsDisk
from zkpy.storage.files import DataDirs
from zkpy.storage.recovery import recover
from zkpy.storage.snapshot import load_snapshot
from zkpy.storage.txnlog import scan_log
from zkpy.testing.servers import start_zkpy
from zkpy.wire.consts import OpCode


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A data dir with many snapshots and logs (snapCount 40, 300 txns), stopped cleanly."""
    server = start_zkpy({"snapCount": "40", "preAllocSize": "16"})

    async def write() -> None:
        s = await RawSession.connect("127.0.0.1", server.port)
        for i in range(150):
            assert (await s.call(OpCode.CREATE, create_body(f"/t{i}", b"caf\xc3\xa9")))[0] == 0
            assert (await s.call(OpCode.SET_DATA, set_data_body(f"/t{i}", bytes([0, 1, 2]))))[0] == 0
        await s.close()

    try:
        asyncio.run(write())
        assert server.stop() == 0
        path = tmp_path_factory.mktemp("tools") / "data"
        os.rename(os.path.join(server.workdir, "data"), path)
    finally:
        server.cleanup()
    yield path


def _zkpy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zkpy.cli.main", *args], capture_output=True, text=True,
                          timeout=60)


def test_logdump_prints_every_txn(data_dir: Path) -> None:
    for log in sorted((data_dir / "version-2").glob("log.*")):
        out = _zkpy("logdump", str(log))
        assert out.returncode == 0, out.stderr
        entries = scan_log(str(log), log.read_bytes()).entries
        lines = [line for line in out.stdout.splitlines() if " zxid 0x" in line]
        assert len(lines) == len(entries)
        assert f"EOF reached after {len(entries)} txns." in out.stdout
        for line, entry in zip(lines, entries, strict=True):
            assert f"zxid 0x{entry.hdr.zxid:x} " in line
    some = (data_dir / "version-2").glob("log.*")
    text = "".join(_zkpy("logdump", str(p)).stdout for p in some)
    assert '"café"' in text and "setData" in text and "0x000102" in text


def test_snapdump_prints_every_znode(data_dir: Path) -> None:
    snap = max((data_dir / "version-2").glob("snapshot.*"), key=lambda p: int(p.name[9:], 16))
    out = _zkpy("snapdump", str(snap))
    assert out.returncode == 0, out.stderr
    loaded = load_snapshot(snap.name, snap.read_bytes())
    for path in loaded.tree.nodes:
        assert f"{path}\n" in out.stdout or path == "/"


def test_a_bad_file_is_one_line_and_status_1(tmp_path: Path) -> None:
    bogus = tmp_path / "log.1"
    bogus.write_bytes(b"not a log at all")
    out = _zkpy("logdump", str(bogus))
    assert out.returncode == 1 and "not a ZooKeeper txn log" in out.stderr
    out = _zkpy("snapdump", str(bogus))
    assert out.returncode == 1 and out.stderr.count("\n") == 1


def test_purge_keeps_the_newest_snapshots_and_what_they_need(data_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "data"
    subprocess.run(["cp", "-r", str(data_dir), str(copy)], check=True)
    before = recover(OsDisk(), DataDirs.of(str(copy))).tree
    snapshots = sorted((copy / "version-2").glob("snapshot.*"))
    assert len(snapshots) > 3
    out = _zkpy("purge", str(copy), "-n", "3")
    assert out.returncode == 0, out.stderr
    assert len(list((copy / "version-2").glob("snapshot.*"))) == 3
    assert out.stdout.count("removed ") >= len(snapshots) - 3
    after = recover(OsDisk(), DataDirs.of(str(copy))).tree
    assert after.digest == before.digest and after.last_processed_zxid == before.last_processed_zxid
    assert _zkpy("purge", str(copy), "-n", "2").returncode == 2


def test_autopurge_runs_at_start_and_keeps_snap_retain_count(data_dir: Path, tmp_path: Path) -> None:
    """autopurge.purgeInterval > 0 purges at start and then every interval (DatadirCleanupManager)."""
    workdir = tmp_path / "server"
    workdir.mkdir()
    subprocess.run(["cp", "-r", str(data_dir), str(workdir / "data")], check=True)
    snapshots = sorted((workdir / "data" / "version-2").glob("snapshot.*"), key=lambda p: int(p.name[9:], 16))
    doomed = snapshots[:-3]
    assert doomed
    server = start_zkpy({"autopurge.purgeInterval": "1", "autopurge.snapRetainCount": "3"}, workdir=str(workdir))
    try:
        deadline = time.monotonic() + 15
        while any(p.exists() for p in doomed):
            assert time.monotonic() < deadline, "autopurge did not remove the old snapshots"
            time.sleep(0.05)
        assert snapshots[-1].exists()
        # three kept, and perhaps the snapshot the start itself took after replaying the logs
        assert 3 <= len(list((workdir / "data" / "version-2").glob("snapshot.*"))) <= 4
    finally:
        server.cleanup()
