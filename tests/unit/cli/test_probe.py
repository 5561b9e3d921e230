"""``zkpy probe``'s verdicts from ``srvr`` answers (the pure part; tests/interop/test_probe_servers.py runs
it against servers)."""

from __future__ import annotations

import pytest

from zkpy.admin.readiness import NO_ANSWER, NOT_READY, READY, verdict

SRVR = "Zookeeper version: 3.8.5-zkpy-0.1.0, built on x\nLatency min/avg/max: 0/0.0/0\nMode: {mode}\nNode count: 5\n"


@pytest.mark.parametrize(("kind", "answer", "expected"), [
    ("live", None, (NO_ANSWER, "no answer")),
    ("ready", None, (NO_ANSWER, "no answer")),
    ("live", "This ZooKeeper instance is not currently serving requests\n", (READY, "live")),
    ("ready", "This ZooKeeper instance is not currently serving requests\n",
     (NOT_READY, "not ready: not serving (starting, or no quorum)")),
    ("ready", SRVR.format(mode="leader"), (READY, "ready: leader")),
    ("ready", SRVR.format(mode="follower"), (READY, "ready: follower")),
    ("ready", SRVR.format(mode="observer"), (READY, "ready: observer")),
    ("ready", SRVR.format(mode="standalone"), (READY, "ready: standalone")),
    ("ready", SRVR.format(mode="read-only"), (NOT_READY, "not ready: read-only")),
    ("ready", "srvr is not executed because it is not in the whitelist.\n",
     (NOT_READY, "not ready: srvr is not in 4lw.commands.whitelist")),
    ("ready", "", (NOT_READY, "not ready: not serving (starting, or no quorum)")),
])
def test_verdicts(kind: str, answer: str | None, expected: tuple[int, str]) -> None:
    assert verdict(kind, answer) == expected
