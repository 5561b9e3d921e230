"""The C client (``cli_mt`` from Debian's zookeeper-bin, the library ZooKeeper ships) against zkpy and
Apache ZooKeeper 3.8: the same script prints the same lines (results, return codes, Stats and
sequence numbers) on both, session ids, times and dates aside."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time

import pytest
from tests.conftest import require, require_apache

from zkpy.testing.servers import ServerProcess, start_apache, start_zkpy

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

CLI_MT = "/usr/lib/zookeeper/bin/cli_mt"
SCRIPT = ["create /cmt", "create +e /cmt/eph", "create +s /cmt/seq-", "create +s /cmt/seq-", "set /cmt world",
          "get /cmt", "ls /cmt", "exists /cmt/none", "delete /cmt", "create /cmt", "ls2 /cmt", "delete /cmt/eph",
          "sync /cmt", "create /cmt-done"]
DONE = "name = /cmt-done"


def require_c_client() -> None:
    require(None if os.access(CLI_MT, os.X_OK) else f"{CLI_MT} is missing (apt-get install -y zookeeper-bin)")


def run_script(server: ServerProcess) -> list[str]:
    """``SCRIPT`` through cli_mt, its output once the last command's answer is in, normalised."""
    proc = subprocess.Popen([CLI_MT, server.hosts], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    lines: list[str] = []
    connected = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if "CONNECTED_STATE" in line:
                connected.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert connected.wait(30), lines
        proc.stdin.write("\n".join(SCRIPT) + "\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 30
        while not any(DONE in line for line in lines):
            assert time.monotonic() < deadline, "\n".join(lines)
            time.sleep(0.05)
        proc.stdin.write("quit\n")
        proc.stdin.flush()
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join(10)
    return normalised(lines)


def normalised(lines: list[str]) -> list[str]:
    """Sorted, without what differs by run (the session id, times, dates, blank lines): the client
    prints the commands it issues from one thread and their answers from another, a piece per
    fprintf, so the two interleave differently from run to run (a blank line once came out where a
    piece of another thread's line went), and a child list comes in a hash set's order on ZooKeeper."""
    out = []
    for line in lines:
        if not line.strip() or line.startswith("Got a new session id") or re.match(r"time = \d+ msec", line):
            continue
        out.append(re.sub(r"(ctime|mtime)( = |=).*", r"\1=DATE", line))
    return sorted(out)


def test_the_c_client_sees_what_it_sees_on_apache() -> None:
    require_c_client()
    require_apache()
    answers = {}
    for kind, start in (("apache", start_apache), ("zkpy", start_zkpy)):
        server = start()
        try:
            answers[kind] = run_script(server)
        finally:
            server.cleanup()
    assert any("seq-0000000002" in line for line in answers["zkpy"]), answers["zkpy"]
    assert answers["zkpy"] == answers["apache"]
