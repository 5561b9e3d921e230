"""Curator's recipes (Debian's libcurator-recipes-java 5.4, the Java client's recipe library) against
zkpy and Apache ZooKeeper 3.8: one scripted run (``tests/interop/curator/CuratorScript.java``: mutex,
leader latch, atomic long, shared count, semaphore, barrier, persistent node, a transaction with a
failing check) prints the same steps on both. The program is compiled by the test (javac)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.conftest import require, require_apache

from zkpy.testing.servers import ServerProcess, start_apache, start_zkpy

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]

SOURCE = Path(__file__).parent / "curator" / "CuratorScript.java"
JARS = [f"/usr/share/java/{name}.jar" for name in
        ("curator-client", "curator-framework", "curator-recipes", "guava", "zookeeper", "zookeeper-jute", "slf4j-api")]


def require_curator() -> None:
    missing = [j for j in JARS if not os.path.exists(j)]
    require(f"{', '.join(missing)} missing (apt-get install -y libcurator-recipes-java)" if missing
            else None if shutil.which("javac") else "javac is not installed")


def run(classes: Path, server: ServerProcess) -> list[str]:
    proc = subprocess.run(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", ":".join([str(classes), *JARS]),
                           "CuratorScript", server.hosts], capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.splitlines()


def test_curators_recipes_do_on_zkpy_what_they_do_on_apache(tmp_path: Path) -> None:
    require_curator()
    require_apache()
    subprocess.run(["javac", "-d", str(tmp_path), "-cp", ":".join(JARS), str(SOURCE)], check=True, timeout=120)
    answers = {}
    for kind, start in (("apache", start_apache), ("zkpy", start_zkpy)):
        server = start()
        try:
            answers[kind] = run(tmp_path, server)
        finally:
            server.cleanup()
    assert answers["zkpy"][-1].startswith("children of /cur: "), answers["zkpy"]
    assert answers["zkpy"] == answers["apache"]
