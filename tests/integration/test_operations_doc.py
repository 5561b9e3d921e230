"""docs/operations.md's quick start, run as written: a newcomer's 3-member ensemble on one machine.

The ```sh block between the ``newcomer`` markers runs in bash in an empty directory, with every
port it names moved to a free one (the text is otherwise unchanged, ``zkpy`` being this checkout's
command). It must start three members, show a quorum, answer the AdminServer's ``ruok`` and
``leader`` and a Prometheus scrape; the test then checks those answers and stops the members
with the documented command.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from zkpy.testing.servers import free_ports

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
BLOCK = re.search(r"<!-- newcomer[^>]*-->\s*```sh\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
DOC_PORTS = (2181, 2182, 2183, 2888, 2889, 2890, 3888, 3889, 3890, 8081, 8082, 8083, 7001, 7002, 7003)


def test_the_quick_start_starts_an_ensemble_and_shows_its_health_metrics_and_leader(tmp_path: Path) -> None:
    assert BLOCK is not None, "docs/operations.md has no newcomer block"
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    script = BLOCK.group(1)
    ports = dict(zip(DOC_PORTS, free_ports(len(DOC_PORTS))))
    # the loop writes 218$i, 808$i, 700$i: move those families by their base, and the fixed ports
    for doc_port, port in ports.items():
        script = re.sub(rf"\b{doc_port}\b", str(port), script)
    arrays = []
    for family, first in (("218", 2181), ("808", 8081), ("700", 7001)):
        script = script.replace(f"{family}$i", f"${{P{family}[$i]}}")
        arrays.append(f"P{family}=(0 {ports[first]} {ports[first + 1]} {ports[first + 2]})")
    script = "\n".join(arrays) + "\n" + script
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "zkpy").write_text(f'#!/bin/sh\nexec {sys.executable} -m zkpy.cli.main "$@"\n')
    (bin_dir / "zkpy").chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    work = tmp_path / "work"
    work.mkdir()
    try:
        result = subprocess.run(["bash", "-e", "-c", script], cwd=work, env=env, capture_output=True, text=True,
                                timeout=180)
        out = result.stdout
        assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]
        lines = out.splitlines()
        assert sum(1 for line in lines if "leader" in line or "follower" in line) >= 3, out
        decoder = json.JSONDecoder()
        answers, at = [], out.find("{")
        while at >= 0:
            answer, end = decoder.raw_decode(out, at)
            answers.append(answer)
            at = out.find("{", end)
        ruok = next(a for a in answers if a.get("command") == "ruok")
        assert ruok["error"] is None
        leader = next(a for a in answers if a.get("command") in ("leader", "is_leader"))
        assert isinstance(leader["is_leader"], bool) and leader["leader_id"] in (1, 2, 3)
        assert re.search(rf"127\.0\.0\.1:{ports[2181 + leader['leader_id'] - 1]}\s+leader\b", out), out
        assert "sid and sessions: '-' where conf and mntr are not in 4lw.commands.whitelist" in out, out
        assert re.search(r"^znode_count \d", out, re.M), out
    finally:
        for i in (1, 2, 3):
            cfg = work / f"zk{i}" / "zoo.cfg"
            if cfg.exists():
                subprocess.run([sys.executable, "-m", "zkpy.cli.main", "server", "stop", str(cfg)], env=env,
                               capture_output=True, timeout=60)
