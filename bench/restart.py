"""Restart time on a large tree: process start to the client port answering ``srvr``.

For each server: start it on a fresh data dir, build the tree (``bigtree``), stop it cleanly
(SIGTERM), then start it once unmeasured so the tree lands in a snapshot (zkpy snapshots after
replaying a log, in the background: the start waits for its "snapshot ... written" line;
ZooKeeper takes a snapshot inside every start). Then ``restarts`` times: stop, start, and time
from ``Popen`` to the first ``srvr`` answer (polled every 50 ms), so every measured start loads
one snapshot of the whole tree and replays no txns. Also recorded: the server's own figure for
loading (zkpy's "recovered ... in S s" log line; ZooKeeper's ``zk_max_dbinittime`` and its startup
snapshot ``zk_max_snapshottime`` from ``mntr``), its resident memory and the snapshot's size.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from zkpy.testing.servers import ServerProcess

from .bigtree import TreeSpec, build
from .launch import log_size, newest_snapshot_mb, rss_mb, start, target, wait_for_log
from .mntr import four_letter, mntr

_RECOVERED = re.compile(r"recovered zxid 0x[0-9a-f]+, (\d+) znodes, .* in ([\d.]+)s")
SNAPSHOT_WRITTEN = "written: "  # zkpy's "snapshot <path> written: N znodes in Xs, longest pause ..."


@dataclass
class Restart:
    seconds: float  # Popen to srvr answering
    load_s: float | None  # the server's own figure for loading its data
    startup_snapshot_s: float | None  # ZooKeeper's snapshot during start (zkpy: none, it snapshots later)
    rss_mb: float | None


@dataclass
class RestartResult:
    server: str
    znodes: int  # as srvr counts them after the build
    build_s: float
    snapshot_mb: float | None = None
    restarts: list[Restart] = field(default_factory=list)

    def median(self, attr: str) -> float | None:
        values = [getattr(r, attr) for r in self.restarts if getattr(r, attr) is not None]
        return statistics.median(values) if values else None

    def as_dict(self) -> dict[str, Any]:
        return {"server": self.server, "znodes": self.znodes, "build_s": self.build_s,
                "snapshot_mb": self.snapshot_mb, "restarts": [r.__dict__ for r in self.restarts]}


def _node_count(server: ServerProcess) -> int:
    for line in four_letter("127.0.0.1", server.port, "srvr").splitlines():
        if line.startswith("Node count: "):
            return int(line.split()[2])
    return -1


def _timed_start(kind: str, like: ServerProcess, heap: str | None) -> tuple[ServerProcess, Restart]:
    since = log_size(like)
    t0 = time.monotonic()
    server = start(kind, like=like, heap=heap)
    seconds = time.monotonic() - t0
    load_s = snap_s = None
    try:
        if kind == "zkpy":
            m = _RECOVERED.search(wait_for_log(server, "recovered zxid", since, 10))
            load_s = float(m.group(2)) if m else None
        else:
            values = mntr("127.0.0.1", server.port)
            load_s = int(values.get("zk_max_dbinittime", "0")) / 1000
            snap_s = int(values.get("zk_max_snapshottime", "0")) / 1000
    except BaseException:
        server.stop()  # the caller only cleans up the data dir
        raise
    return server, Restart(seconds, load_s, snap_s, rss_mb(server.proc.pid))


def prepare_big(kind: str, spec: TreeSpec, heap: str | None,
                log: Callable[[str], None]) -> tuple[ServerProcess, float, int]:
    """A stopped server whose data dir holds the tree in a snapshot; also the build's seconds and znodes."""
    server = start(kind, heap=heap)
    try:
        log(f"{kind}: building {spec.znodes:,} znodes of {spec.value_size} B")
        build_s = build(target(server), spec)
        znodes = _node_count(server)
        log(f"{kind}: built {znodes:,} znodes in {build_s:.1f}s; stopping, then starting once to snapshot them")
        server.stop()
        since = log_size(server)
        server = start(kind, like=server, heap=heap)
        if kind == "zkpy":
            wait_for_log(server, SNAPSHOT_WRITTEN, since, 600)
        server.stop()
        return server, build_s, znodes
    except BaseException:
        server.cleanup()
        raise


def measure(kind: str, spec: TreeSpec, restarts: int, heap: str | None, log: Callable[[str], None],
            big: tuple[ServerProcess, float, int] | None = None) -> tuple[RestartResult, ServerProcess]:
    """Build (unless ``big`` is given), then time ``restarts`` starts; returns the stopped server too."""
    server, build_s, znodes = big or prepare_big(kind, spec, heap, log)
    result = RestartResult(kind, znodes, build_s, newest_snapshot_mb(server))
    for i in range(restarts):
        server, r = _timed_start(kind, server, heap)
        server.stop()
        result.restarts.append(r)
        extra = f", startup snapshot {r.startup_snapshot_s:.2f}s" if r.startup_snapshot_s is not None else ""
        rss = f"{r.rss_mb:.0f} MiB" if r.rss_mb is not None else "?"
        log(f"{kind}: restart {i + 1}: {r.seconds:.2f}s to srvr (load {r.load_s}s{extra}), RSS {rss}")
    return result, server
