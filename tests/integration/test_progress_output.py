"""Progress: recovery tells its callback how far it got; bars are drawn on stderr and only on a
terminal; ``logdump``/``snapdump``/``export`` never draw into their own output."""

from __future__ import annotations

import asyncio
import io
import json
import os
import pty
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from zkpy.cli import progress as progress_mod
from zkpy.cli.progress import RecoveryBar, progress_wanted
from zkpy.client import AsyncClient
from zkpy.config import ServerConfig
from zkpy.runtime.osdisk import OsDisk
from zkpy.runtime.server import ZkServer
from zkpy.storage import recovery, snapshot
from zkpy.storage.files import DataDirs
from zkpy.storage.recovery import recover
from zkpy.testing.servers import start_zkpy

ZKPY = [sys.executable, "-m", "zkpy.cli.main"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A stopped server's data dir: snapshots every 40 txns, 300 txns in all."""
    server = start_zkpy({"snapCount": "40", "preAllocSize": "16"})

    async def write() -> None:
        c = AsyncClient(server.hosts)
        await c.start()
        try:
            for i in range(300):  # one at a time: each snapshot holds a few more nodes
                await c.create(f"/n{i:03d}", b"v" * 10)
        finally:
            await c.close()

    try:
        asyncio.run(write())
        assert server.stop() == 0
        path = tmp_path_factory.mktemp("progress") / "data"
        os.rename(os.path.join(server.workdir, "data"), path)
        # keep the newest snapshot at least 100 txns before the last one (the server may have
        # skipped some while one was still being written, and may have taken one at shutdown),
        # and remove every later one: recovery loads ~100 nodes and replays 100 txns or more
        snapshots = sorted((path / "version-2").glob("snapshot.*"), key=lambda p: int(p.suffix[1:], 16))
        end = 300 + 1  # the session, then 300 creates
        kept = [p for p in snapshots if int(p.suffix[1:], 16) <= end - 100]
        assert kept and int(kept[-1].suffix[1:], 16) >= 64, [p.name for p in snapshots]
        for later in snapshots[len(kept):]:
            later.unlink()
    finally:
        server.cleanup()
    yield path


def test_recovery_reports_progress(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot, "PROGRESS_EVERY", 16)
    monkeypatch.setattr(recovery, "PROGRESS_EVERY", 4)
    calls: list[tuple[str, int, int]] = []
    result = recover(OsDisk(), DataDirs.of(str(data_dir)), progress=lambda *a: calls.append(a))
    assert result.snapshot_zxid is not None and result.txns_replayed > 4
    snap = [c for c in calls if c[0] == "snapshot"]
    replay = [c for c in calls if c[0] == "replay"]
    assert len(snap) > 2 and snap[-1][1] == snap[-1][2] and [c[1] for c in snap] == sorted(c[1] for c in snap)
    assert len(replay) > 1 and replay[-1] == ("replay", result.txns_replayed, result.txns_replayed)
    assert calls.index(snap[-1]) < calls.index(replay[0])
    assert calls[-1] == ("done", 0, 0)
    # no callback: the same result
    again = recover(OsDisk(), DataDirs.of(str(data_dir)))
    assert again.tree.digest == result.tree.digest and again.txns_replayed == result.txns_replayed


def test_the_server_passes_its_recovery_progress_on(data_dir: Path, tmp_path: Path) -> None:
    """``zkpy server``'s shell hands recovery a callback (a RecoveryBar): ZkServer passes it through."""
    copy = tmp_path / "data"
    shutil.copytree(data_dir, copy)
    calls: list[tuple[str, int, int]] = []
    server = ZkServer(ServerConfig(data_dir=str(copy)), recovery_progress=lambda *a: calls.append(a))
    try:
        assert [c[0] for c in calls][-3:] == ["snapshot", "replay", "done"]
        assert calls[-2][1] == server.recovered.txns_replayed > 0
    finally:
        asyncio.run(server.close())


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_recovery_bar_draws_only_when_enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    monkeypatch.setattr(RecoveryBar, "DELAY_S", 0.0)
    monkeypatch.setattr(progress_mod, "MIN_UPDATE_S", 0.0)
    bar = RecoveryBar(enabled=True)
    bar("snapshot", 10, 100)
    bar("replay", 5, 10)
    bar("done", 0, 0)
    assert "replaying txn logs" in term.getvalue()
    quiet = _Terminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    off = RecoveryBar(enabled=False)
    off("snapshot", 10, 100)
    off("done", 0, 0)
    assert quiet.getvalue() == ""


def test_progress_wanted(monkeypatch: pytest.MonkeyPatch) -> None:
    pipe, term = io.StringIO(), _Terminal()
    for stderr, stdout, to_stdout, wanted in [(term, pipe, True, True), (term, term, True, False),
                                              (term, term, False, True), (pipe, pipe, False, False)]:
        monkeypatch.setattr(sys, "stderr", stderr)
        monkeypatch.setattr(sys, "stdout", stdout)
        assert progress_wanted(to_stdout) is wanted


def _run(args: list[str], stdout_on_terminal: bool) -> tuple[str, str]:
    """(stdout, what the terminal showed): stderr always on a pseudo-terminal, stdout on it too or a pipe."""
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"}
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=slave if stdout_on_terminal else subprocess.PIPE,
                            stderr=slave, env=env)
    os.close(slave)
    shown = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the last writer closed the terminal
                return
            if not chunk:
                return
            shown.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    out, _ = proc.communicate(timeout=60)
    reader.join(timeout=30)
    os.close(master)
    assert proc.returncode == 0, shown.decode(errors="replace")
    return (out or b"").decode(), shown.decode(errors="replace")


def test_dumps_draw_no_progress_into_their_output(data_dir: Path) -> None:
    log = max((data_dir / "version-2").glob("log.*"), key=lambda p: int(p.suffix[1:], 16))
    snap = max((data_dir / "version-2").glob("snapshot.*"), key=lambda p: int(p.suffix[1:], 16))
    for args, label in ((["logdump", str(log)], "txns"), (["snapdump", str(snap)], "lines")):
        piped = subprocess.run([*ZKPY, *args], capture_output=True, text=True, timeout=60)
        assert piped.returncode == 0 and piped.stderr == "", piped.stderr
        assert "\x1b" not in piped.stdout and "\r" not in piped.stdout
        # stderr on a terminal, stdout to a file: the bar is drawn there, the output is unchanged
        out, shown = _run([*ZKPY, *args], stdout_on_terminal=False)
        assert out == piped.stdout
        assert label in shown and "\x1b[" in shown
        # both on the terminal: no bar at all (it would interleave with the lines)
        _, shown = _run([*ZKPY, *args], stdout_on_terminal=True)
        assert "\x1b[" not in shown
        assert shown.replace("\r\n", "\n") == piped.stdout


def test_export_json_has_no_progress(data_dir: Path) -> None:
    server = start_zkpy(workdir=None)
    try:
        async def build() -> None:
            c = AsyncClient(server.hosts)
            await c.start()
            try:
                await asyncio.gather(*(c.create(f"/t{i}", b"x", make_parents=False) for i in range(50)))
            finally:
                await c.close()

        asyncio.run(build())
        out, shown = _run([*ZKPY, "export", "--server", server.hosts, "/"], stdout_on_terminal=False)
        doc = json.loads(out)
        assert len(doc["nodes"]) == 51
        assert "exported 51 znode(s)" in shown and "\x1b[" in shown  # the bar went to the terminal
        dump = Path(server.workdir) / "root.json"
        dump.write_text(out, encoding="utf-8")
        _, shown = _run([*ZKPY, "import", "--server", server.hosts, str(dump), "--at", "/copy"],
                        stdout_on_terminal=True)
        assert "imported under /copy: 51 created" in shown and "\x1b[" in shown
    finally:
        server.cleanup()
