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
