"""node-zookeeper-client (npm, the JavaScript client) against zkpy and Apache ZooKeeper 3.8: one scripted
session (``tests/interop/node/script.js``: creates of every mode, a watch, versions, multi with a
failing check, error codes) prints the same steps on both. ``.ci/run`` installs the client with
``npm ci --prefix tests/interop/node``."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.conftest import require, require_apache

from zkpy.testing.servers import ServerProcess, start_apache, start_zkpy

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

HERE = Path(__file__).parent / "node"


def require_node_client() -> None:
    if shutil.which("node") is None:
        require("node is not installed")
    elif not (HERE / "node_modules" / "node-zookeeper-client").is_dir():
        require(f"node-zookeeper-client is not installed (npm ci --prefix {HERE})")


def steps(server: ServerProcess) -> list[dict[str, object]]:
    proc = subprocess.run(["node", str(HERE / "script.js"), server.hosts], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def test_the_javascript_client_sees_what_it_sees_on_apache() -> None:
    require_node_client()
    require_apache()
    answers = {}
    for kind, start in (("apache", start_apache), ("zkpy", start_zkpy)):
        server = start()
        try:
            answers[kind] = steps(server)
        finally:
            server.cleanup()
    assert [s["step"] for s in answers["zkpy"]][-1] == "root children", answers["zkpy"]
    assert answers["zkpy"] == answers["apache"]
