"""``python -m bench ensemble``'s plumbing, without servers: options, member configs, tables.

No timing asserts and no processes: the bench itself is exercised by running it (see BENCHMARKS.md).
"""

from __future__ import annotations

from array import array
from types import SimpleNamespace
from typing import Any

from bench import ensemble
from bench.workload import CREATE, READ, WRITE, OpStats, RunResult


def test_quick_shortens_the_defaults_and_explicit_flags_win() -> None:
    full = ensemble.parse_args([])
    assert (full.duration, full.failovers, full.nodes, full.workers) == (10.0, 5, 1000, [1, 10, 20])
    quick = ensemble.parse_args(["--quick", "--failovers", "3"])
    assert quick.duration < full.duration and quick.failovers == 3
    assert ensemble.parse_args(["--workers", "1,20"]).workers == [1, 20]


def test_both_implementations_get_the_same_config_and_bench_flags(tmp_path: Any) -> None:
    members = {"server.1": "127.0.0.1:1:2;127.0.0.1:3"}
    spec = ensemble.EnsembleSpec(tick_ms=1000)
    zkpy = ensemble.member_config("zkpy", str(tmp_path), 3, members, spec)
    apache = ensemble.member_config("apache", str(tmp_path), 3, members, spec)
    assert zkpy == apache and zkpy["tickTime"] == "1000" and "forceSync" not in zkpy  # fsync: both defaults
    assert "DEBUG" not in ensemble.member_command("zkpy", "zoo.cfg", spec)
    java = ensemble.member_command("apache", "zoo.cfg", spec)
    assert "-Xmx512m" in java and not any("TieredStopAtLevel" in a for a in java)


def test_followers_come_first() -> None:
    servers = [SimpleNamespace(extra={"myid": str(i)}) for i in (1, 2, 3)]
    ordered = ensemble.followers_first(servers, servers[0])  # type: ignore[arg-type]
    assert [ensemble.myid(s) for s in ordered] == [2, 3, 1]  # type: ignore[arg-type]


def _spread(kind: str, ops: int, latency_ms: float) -> ensemble.SpreadResult:
    stats = OpStats(ops, 0, array("q", [int(latency_ms * 1e6)] * ops))
    return ensemble.SpreadResult(RunResult(1.0, {kind: stats}, generator_cpu=0.1), [0.5, 0.2, 0.2], 0.0)


def test_tables_show_ratios_and_targets() -> None:
    results = {k: ensemble.ImplResult(k) for k in ("zkpy", "apache")}
    results["zkpy"].throughput["write"] = [_spread(WRITE, 400, 2.0)]
    results["apache"].throughput["write"] = [_spread(WRITE, 1000, 1.0)]
    results["zkpy"].throughput["read"] = [_spread(READ, 1000, 1.0), _spread(READ, 3000, 1.0), _spread(READ, 2000, 1.0)]
    results["apache"].throughput["read"] = [_spread(READ, 1000, 1.0)]
    table = ensemble.throughput_table(results)
    assert "| writes (100% setData) | 400 |" in table and "0.40x" in table and ">= 0.5x: missed" in table
    assert "| reads (100% getData) | 2,000 |" in table  # the median round
    results["zkpy"].create[1] = [_spread(CREATE, 10, 1.0)]
    results["apache"].create[1] = [_spread(CREATE, 20, 2.0)]
    assert "| 1 | 10 | 1.00 | 1.00 | 0.90 (0.00) | 20 | 2.00 | 2.00 | 0.90 (0.00) | 0.50x | 0.50x | 0 |" in ensemble.create_table(results)
    for kind, acks in (("zkpy", [1.0, 3.0, 2.0]), ("apache", [1.0, 1.0, 5.0])):
        results[kind].failovers = [ensemble.FailoverRun(3, 1, 2, ack_s=a, session_s=a) for a in acks]
    table = ensemble.failover_table(results)
    assert "| zkpy | 3 (3) | 2.000 | 3.000 | 1.000 |" in table
    assert "median 2.00x, max 0.60x" in table and "median: missed" in table
    assert ensemble.failover_detail(results).count("\n") == 1 + 6


def test_zkpy_phases_are_read_from_the_log_after_the_kill() -> None:
    import time

    log = "\n".join([
        "2026-11-21 06:17:00,100 INFO zkpy.election: 1 is LOOKING: zxid 0x0, epoch 0, round 1",  # before the kill
        "2026-11-21 06:17:01,615 INFO zkpy.quorum: server 1: synchronised with leader 2: serving as follower",
        "2026-11-21 06:17:04,108 WARNING zkpy.quorum: server 1: follower term ended: the leader closed the connection",
        "Traceback (most recent call last):",
        "2026-11-21 06:17:04,921 INFO zkpy.election: 1 is LOOKING: zxid 0x200000003, epoch 2, round 3",
        "2026-11-21 06:17:05,275 INFO zkpy.quorum: server 1: election decided: leader 3, I am FOLLOWING",
        "2026-11-21 06:17:05,280 INFO zkpy.quorum: server 1: synchronised with leader 3 in epoch 3: serving as follower",
    ])
    kill = time.mktime(time.strptime("2026-11-21 06:17:04", "%Y-%m-%d %H:%M:%S")) + 0.1
    phases = ensemble.zkpy_phases(log, kill)
    assert {k: round(v, 3) for k, v in phases.items()} == {"ended": 0.008, "looking": 0.821, "decided": 1.175,
                                                           "serving": 1.18}
