"""``python -m bench``'s table, without servers: the per-core cost beside the throughput.

No timing asserts and no processes: the figures are made up here, the bench is run by hand
(see BENCHMARKS.md).
"""

from __future__ import annotations

from array import array

import bench.__main__ as standalone
from bench.workload import OpStats, RunResult


def _row(server: str, ops: int, server_cpu: float | None) -> standalone.Row:
    stats = OpStats(ops, 0, array("q", [1_000_000, 2_000_000]))
    return standalone.Row("writes", server, RunResult(2.0, {"write": stats}, server_cpu=server_cpu), ("write",))


def test_the_table_gives_each_servers_cpu_per_op_and_their_ratio() -> None:
    rows = [_row("zkpy", 20_000, 1.0), _row("apache", 40_000, 1.5)]  # 10,000 and 20,000 ops/s
    assert rows[0].summary()["cpu_us_per_op"] == 100.0  # 1 core over 10,000 ops/s
    head, _, line = standalone.table(rows).splitlines()
    cells = dict(zip([c.strip() for c in head.split("|")], [c.strip() for c in line.split("|")], strict=True))
    assert cells["zkpy CPU-µs/op"] == "100.0" and cells["ZooKeeper CPU-µs/op"] == "75.0"
    assert cells["ops/s zkpy/ZK"] == "0.50x" and cells["CPU/op zkpy/ZK"] == "1.33x"


def test_without_the_servers_cpu_there_is_no_cost_per_op() -> None:
    rows = [_row("zkpy", 20_000, None), _row("apache", 40_000, 1.5)]
    assert rows[0].summary()["cpu_us_per_op"] is None
    head, _, line = standalone.table(rows).splitlines()
    cells = dict(zip([c.strip() for c in head.split("|")], [c.strip() for c in line.split("|")], strict=True))
    assert cells["zkpy CPU-µs/op"] == "-" and cells["CPU/op zkpy/ZK"] == "-"
