"""The load generator (``python -m bench``) runs against a real zkpy server and gets only successes.

No timing asserts: this checks the generator and its wire client work, not how fast anything is.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

from zkpy.testing.servers import ServerProcess

ROOT = Path(__file__).resolve().parents[2]


def _bench() -> Any:
    if str(ROOT) not in sys.path:  # bench/ lives at the repository root, outside the package
        sys.path.insert(0, str(ROOT))
    import bench.workload

    return bench.workload


def _log(msg: str) -> None:
    print(msg)


def test_generator_completes_reads_writes_and_creates_without_errors(zkpy_server: ServerProcess) -> None:
    w = _bench()
    target = w.Target.parse(zkpy_server.hosts, zkpy_server.proc.pid)
    root = f"/bench-smoke-{uuid.uuid4().hex[:8]}"
    w.prepare(target, nodes=50, root=root, create_root=root + "-create")
    try:
        spec = w.ThroughputSpec(write_ratio=0.1, processes=2, sessions=2, outstanding=4, nodes=50,
                                warmup_s=0.1, duration_s=1.0, root=root)
        result = w.run("throughput", target, spec)
        assert result.stats["read"].ops > 0
        assert result.stats["write"].ops > 0
        assert result.errors == 0 and result.error_codes == {}

        cspec = w.CreateSpec(workers=3, processes=2, warmup_s=0.1, duration_s=0.5, root=root + "-create")
        result = w.run("create", target, cspec)
        assert result.stats["create"].ops > 0
        assert result.errors == 0 and result.error_codes == {}
    finally:
        w.remove(target, nodes=50, root=root, create_root=root + "-create")


def test_write_run_reads_the_servers_fsync_counters_from_mntr(zkpy_server: ServerProcess) -> None:
    w = _bench()
    from bench.mntr import CommitRates, CommitSample

    target = w.Target.parse(zkpy_server.hosts, zkpy_server.proc.pid)
    root = f"/bench-smoke-{uuid.uuid4().hex[:8]}"
    w.prepare(target, nodes=20, root=root, create_root=root + "-create")
    try:
        spec = w.ThroughputSpec(write_ratio=1.0, processes=1, sessions=2, outstanding=4, nodes=20,
                                warmup_s=0.1, duration_s=0.5, root=root)
        result = w.run("throughput", target, spec, probe=lambda: CommitSample.take(target.host, target.port))
        assert result.errors == 0 and result.stats["write"].ops > 0
        rates = CommitRates.between(*result.probes)
        # every group commit is one fsync and covers at least one txn (give or take the commit
        # the worker thread is finishing while mntr reads the counters)
        assert rates.fsyncs > 0 and abs(rates.batches - rates.fsyncs) <= 1
        assert rates.txns >= rates.fsyncs - 1 and rates.batched >= rates.batches
    finally:
        w.remove(target, nodes=20, root=root, create_root=root + "-create")


def test_restart_and_snapshot_modes_run_on_a_small_tree() -> None:
    _bench()
    from bench import restart, snapload
    from bench.bigtree import TreeSpec

    tree = TreeSpec(znodes=600, value_size=10, fanout=100, batch=150, window=2)
    result, stopped = restart.measure("zkpy", tree, 1, None, _log)
    try:
        assert result.znodes >= 600 and len(result.restarts) == 1
        assert result.restarts[0].load_s is not None and result.snapshot_mb is not None
        spec = snapload.SnapLoadSpec(tree, readers=1, writers=2, outstanding=4, warmup_s=0.1, duration_s=1.0,
                                     snap_count=100)
        load = snapload.measure("zkpy", stopped, spec, None, _log)
        assert load.reads.latency_ns and load.writes.latency_ns
        assert load.reads.errors == 0 and load.writes.errors == 0
        assert load.snapshots and all(s.znodes and s.znodes >= 600 for s in load.snapshots)
        summary = load.summary()
        assert summary["read_during"]["n"] + summary["read_outside"]["n"] == len(load.reads.latency_ns)
    finally:
        stopped.cleanup()


def test_client_mode_runs_zkpy_and_kazoo_without_errors(zkpy_server: ServerProcess) -> None:
    _bench()
    from bench import clientbench

    spec = clientbench.ClientSpec(outstanding=8, nodes=3, value_size=64, warmup_s=0.1, duration_s=0.5,
                                  warmup_calls=10, calls=50, root=f"/bench-client-{uuid.uuid4().hex[:8]}")
    clientbench.prepare(zkpy_server.hosts, spec)
    results = clientbench.Results()
    clientbench.run_server("zkpy", zkpy_server.hosts, spec, list(clientbench.MODES), 1, results)
    assert {t.client for t in results.throughput} == {"zkpy", "kazoo"}
    assert all(t.ops > 0 and t.errors == 0 for t in results.throughput)
    assert sorted((x.client, len(x.latencies_ns)) for x in results.latency) == [("kazoo", 50), ("zkpy", 50)]
    assert "zkpy/kazoo" in clientbench.throughput_table(results, ["zkpy"])
    assert "kazoo p50 ms" in clientbench.latency_table(results, ["zkpy"])


def test_recipe_bench_runs_a_barrier_point_and_lock_handoffs(zkpy_server: ServerProcess) -> None:
    _bench()
    from bench import recipes

    row = recipes.barrier_run([zkpy_server], clients=3, barriers=2, processes=1)
    assert (row["clients"], row["barriers"]) == (3, 2) and 0 < row["avg_s"] <= row["max_s"]
    for client in ("zkpy", "kazoo"):
        handoff = recipes.handoff_run([zkpy_server], client, waiters=3, rounds=2)
        assert handoff["handoffs"] == 4 * 2 - 1 and 0 < handoff["p50_ms"] <= handoff["p99_ms"]
