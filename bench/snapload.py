"""Request latency while a server snapshots a large tree under load, against while it does not.

The server runs on the data dir of ``restart`` (the whole tree in a snapshot) with ``snapCount``
set, and one generator process drives it for ``duration_s`` (after ``warmup_s`` unmeasured):
``writers`` sessions keep ``outstanding`` setData each in flight on random leaves (the load, and
the txns that make the log roll and a snapshot start), and ``readers`` sessions each keep one
getData in flight (the probes: one outstanding request measures the server's responsiveness, not
a queue). Every op's send time (wall clock) and latency is kept.

When did a snapshot run? zkpy logs "snapshotting 0x..." when it starts and "snapshot ... written:
N znodes in Xs, longest pause on the loop Y ms" when the file is in place, with millisecond
timestamps. ZooKeeper 3.8 (Debian's, without a logging backend) logs nothing, so its ``mntr`` is
polled every 100 ms: when ``zk_cnt_snapshottime`` goes up, a snapshot ended then and took the
``zk_sum_snapshottime`` increase. (zkpy's ``mntr`` is not polled: it walks the whole tree for
``zk_approximate_data_size``.) An op counts as "during a snapshot" when its send-to-reply
interval overlaps one.

The warmup is long on purpose: a zkpy that just loaded a big snapshot (with the garbage collector
off) has every loaded object in the young generations, and the first collections that walk them can
stop the loop once for a few hundred milliseconds (seen on a million znodes: a 230-250 ms collection
of generation 1, 2-5 s after the start). That is a cost of the restart, not of snapshots, so it is
kept out of the measured window.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import random
import re
import threading
import time
from array import array
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from zkpy.testing.servers import ServerProcess
from zkpy.wire.consts import OpCode

from .bigtree import TreeSpec, leaf_path
from .client import RawSession, get_data_body, set_data_body
from .launch import log_size, start, target
from .mntr import mntr
from .workload import Target, _drain, _run_loop, percentile_ms

_ZKPY_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \w+ zkpy\.persistence: (.*)$")
PATHS = 50_000  # random leaves the ops pick from (request bodies are encoded once)
_WRITTEN = re.compile(r"written: (\d+) znodes in ([\d.]+)s, longest pause on the loop ([\d.]+) ms")


@dataclass(frozen=True)
class SnapLoadSpec:
    tree: TreeSpec
    readers: int = 4  # sessions, one getData outstanding each
    writers: int = 8  # sessions
    outstanding: int = 8  # setData in flight per writer session
    warmup_s: float = 10.0  # past the first seconds after a start (see the module docstring)
    duration_s: float = 40.0
    snap_count: int = 100_000  # zoo.cfg snapCount for this run (both servers' default)


@dataclass
class Ops:
    """Ops of one kind: send times (wall clock, ns) and latencies (ns), in the same order."""

    sent_ns: array[int] = field(default_factory=lambda: array("q"))
    latency_ns: array[int] = field(default_factory=lambda: array("q"))
    errors: int = 0


@dataclass
class Snapshot:
    start_ns: int  # wall clock
    end_ns: int
    znodes: int | None = None
    longest_pause_ms: float | None = None  # zkpy: the longest slice of this snapshot on the loop


@dataclass
class SnapLoadResult:
    server: str
    reads: Ops
    writes: Ops
    snapshots: list[Snapshot]
    window_ns: tuple[int, int]  # the measured window, wall clock
    skipped: int = 0  # zkpy's "too busy to snapshot" (a roll while the previous snapshot still ran)

    def split(self, ops: Ops) -> tuple[array[int], array[int]]:
        """Latencies of the ops whose send-to-reply interval overlaps a snapshot, and of the others."""
        spans = sorted((s.start_ns, s.end_ns) for s in self.snapshots)
        during, outside = array("q"), array("q")
        for sent, lat in zip(ops.sent_ns, ops.latency_ns, strict=True):
            done = sent + lat
            hit = any(a <= done and sent <= b for a, b in spans)
            (during if hit else outside).append(lat)
        return during, outside

    def snapshot_seconds_in_window(self) -> float:
        lo, hi = self.window_ns
        return sum(max(0, min(s.end_ns, hi) - max(s.start_ns, lo)) for s in self.snapshots) / 1e9

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "server": self.server, "window_s": (self.window_ns[1] - self.window_ns[0]) / 1e9,
            "snapshots": [s.__dict__ for s in self.snapshots], "skipped": self.skipped,
            "snapshot_s_in_window": self.snapshot_seconds_in_window(),
            "read_errors": self.reads.errors, "write_errors": self.writes.errors,
        }
        for kind, ops in (("read", self.reads), ("write", self.writes)):
            during, outside = self.split(ops)
            for label, lat in (("during", during), ("outside", outside)):
                out[f"{kind}_{label}"] = latency_summary(lat)
        return out


def latency_summary(lat: array[int]) -> dict[str, float]:
    if not lat:
        return {"n": 0}
    return {"n": len(lat), "p50_ms": percentile_ms(lat, 50), "p99_ms": percentile_ms(lat, 99),
            "p999_ms": percentile_ms(lat, 99.9), "max_ms": max(lat) / 1e6}


# --- the generator process ---


async def _generate(t: Target, spec: SnapLoadSpec, barrier: Any) -> tuple[Ops, Ops, tuple[int, int]]:
    rnd = random.Random(7)
    value = rnd.randbytes(spec.tree.value_size)
    paths = [leaf_path(spec.tree, rnd.randrange(spec.tree.znodes)) for _ in range(PATHS)]
    read_bodies = [get_data_body(p) for p in paths]
    write_bodies = [set_data_body(p, value) for p in paths]
    reads, writes = Ops(), Ops()
    offset = time.time_ns() - time.monotonic_ns()  # monotonic -> wall clock
    start = end = 0

    def issue(s: RawSession, is_write: bool, now: int) -> None:
        i = int(rnd.random() * PATHS)
        if is_write:
            s.send(OpCode.SET_DATA, write_bodies[i], (s, True), now)
        else:
            s.send(OpCode.GET_DATA, read_bodies[i], (s, False), now)

    def on_reply(tag: tuple[RawSession, bool], err: int, sent: int, now: int) -> None:
        s, is_write = tag
        if start <= sent and now < end:
            ops = writes if is_write else reads
            ops.sent_ns.append(sent + offset)
            ops.latency_ns.append(now - sent)
            ops.errors += err != 0
        if now < end:
            issue(s, is_write, now)

    def connect() -> Coroutine[Any, Any, RawSession]:
        return RawSession.connect(t.host, t.port, on_reply=on_reply)

    readers = list(await asyncio.gather(*(connect() for _ in range(spec.readers))))
    writers = list(await asyncio.gather(*(connect() for _ in range(spec.writers))))
    await asyncio.get_running_loop().run_in_executor(None, barrier.wait, 60)
    now = time.monotonic_ns()
    start = now + int(spec.warmup_s * 1e9)
    end = start + int(spec.duration_s * 1e9)
    for s in writers:
        for _ in range(spec.outstanding):
            issue(s, True, now)
    for s in readers:
        issue(s, False, now)
    await asyncio.sleep((end - time.monotonic_ns()) / 1e9)
    await _drain(readers + writers)
    return reads, writes, (start + offset, end + offset)


def _child(t: Target, spec: SnapLoadSpec, barrier: Any, results: Any) -> None:
    try:
        results.put((_run_loop(_generate(t, spec, barrier)), None))
    except BaseException as exc:  # report, never hang the parent
        barrier.abort()
        results.put((None, f"{type(exc).__name__}: {exc}"))


# --- finding the snapshots ---


def _wall_ns(stamp: str) -> int:
    return int(datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp() * 1e9)


def zkpy_snapshots(log_text: str) -> tuple[list[Snapshot], int]:
    """Snapshots (start, end) from zkpy's log lines; also how many rolls skipped their snapshot."""
    snaps: list[Snapshot] = []
    started: int | None = None
    skipped = 0
    for line in log_text.splitlines():
        m = _ZKPY_LINE.match(line)
        if not m:
            continue
        at, msg = _wall_ns(m.group(1)), m.group(2)
        if msg.startswith("snapshotting "):
            started = at
        elif msg.startswith("too busy to snapshot"):
            skipped += 1
        elif started is not None and (w := _WRITTEN.search(msg)):
            snaps.append(Snapshot(started, at, int(w.group(1)), float(w.group(3))))
            started = None
    return snaps, skipped


class _SnapshotPoller(threading.Thread):
    """Polls ZooKeeper's mntr for finished snapshots (count and total time of ``snapshottime``)."""

    def __init__(self, t: Target, interval_s: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.t = t
        self.interval_s = interval_s
        self.snapshots: list[Snapshot] = []
        self._done = threading.Event()

    def _read(self) -> tuple[int, int]:
        m = mntr(self.t.host, self.t.port)
        return int(m.get("zk_cnt_snapshottime", "0")), int(m.get("zk_sum_snapshottime", "0"))

    def run(self) -> None:
        count, total = self._read()
        while not self._done.wait(self.interval_s):
            try:
                c, s = self._read()
            except OSError:
                continue
            if c > count:
                now = time.time_ns()
                # several in one interval cannot happen (ZooKeeper snapshots one at a time, each > 100 ms here)
                self.snapshots.append(Snapshot(now - (s - total) * 1_000_000, now))
                count, total = c, s

    def stop(self) -> None:
        self._done.set()
        self.join(10)


# --- the parent ---


def measure(kind: str, stopped: ServerProcess, spec: SnapLoadSpec, heap: str | None,
            log: Callable[[str], None]) -> SnapLoadResult:
    """Start ``kind`` on ``stopped``'s data dir with ``spec.snap_count``, drive it, stop it."""
    server = start(kind, {"snapCount": str(spec.snap_count)}, like=stopped, heap=heap)
    since = log_size(server)
    t = target(server)
    poller = _SnapshotPoller(t) if kind == "apache" else None
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(2)
    results = ctx.Queue()
    proc = ctx.Process(target=_child, args=(t, spec, barrier, results), daemon=True)
    try:
        proc.start()
        barrier.wait(60)
        if poller is not None:
            poller.start()
        log(f"{kind}: {spec.writers}x{spec.outstanding} setData + {spec.readers} getData probes on "
            f"{spec.tree.znodes:,} znodes, snapCount {spec.snap_count}, {spec.warmup_s:g}+{spec.duration_s:g}s")
        out, error = results.get(timeout=spec.warmup_s + spec.duration_s + 120)
        proc.join(10)
        if error is not None:
            raise RuntimeError(f"generator failed: {error}")
        reads, writes, window = out
    finally:
        try:
            if poller is not None and poller.is_alive():
                poller.stop()
        finally:
            server.stop()  # whatever failed: never leave the server running
    if poller is not None:
        snaps, skipped = poller.snapshots, 0
    else:
        with open(server.log_path, "rb") as f:
            f.seek(since)
            snaps, skipped = zkpy_snapshots(f.read().decode("utf-8", "replace"))
    result = SnapLoadResult(kind, reads, writes, snaps, window, skipped)
    log(f"{kind}: {len(reads.latency_ns):,} reads, {len(writes.latency_ns):,} writes, {len(snaps)} snapshots "
        f"({result.snapshot_seconds_in_window():.1f}s of the window), {skipped} skipped")
    return result
