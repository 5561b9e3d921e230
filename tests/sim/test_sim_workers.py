"""Simulated runs with serving processes (serverWorkers) and reconfiguration: the seeds of
``test_sim_seeds`` (servers, faults as each seed chooses them) with 2 to 4 serving processes per
server, reconfigEnabled with clients asking for reconfigs (a voter leaves, one comes back, an
observer becomes a voter, while faults strike), and 4 to 6 real client sessions, which the
simulated kernel spreads over each server's processes.

What must hold, besides every invariant of the simulator (``sim.checker``, ``sim.sessions``): a
read on any process of a server returns every write that server acknowledged before the read
was sent (the member publishes what it applied before any reply tells of it, and a worker's
read waits for it), and every process of every server ends with the committed history.

A failing seed replays exactly:

    ZKPY_SIM_SEED=<n> python -m pytest -q tests/sim/test_sim_workers.py
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

from zkpy.member import effects as fx
from zkpy.member.term import TermCore
from zkpy.testing.sim import run_seed

ONE = os.environ.get("ZKPY_SIM_SEED")
SEEDS = [int(ONE)] if ONE is not None else list(range(120))

_seen: Counter[str] = Counter()
_runs: list[int] = []


@pytest.mark.parametrize("seed", SEEDS)
def test_workers_and_reconfig_seed(seed: int) -> None:
    try:
        r = run_seed(seed, workers=2 + seed % 3, reconfig=True, session_clients=4 + seed % 3)
    except AssertionError as exc:  # InvariantViolation, LivenessFailure: the message names the seed
        pytest.fail(f"seed {seed}, serverWorkers={2 + seed % 3}, reconfig (replay: ZKPY_SIM_SEED={seed} "
                    f"python -m pytest tests/sim/test_sim_workers.py)\n{exc}", pytrace=False)
    _runs.append(seed)
    _seen.update({k: v for k, v in r.stats.items() if v})


def test_workers_served_clients_and_reconfigs_changed_the_ensemble() -> None:
    """Over the seeds, each thing the checks are about happened."""
    if len(_runs) < len(SEEDS) or ONE is not None:
        pytest.skip("needs every seed run of this module")
    for what in ("workers_started", "client_on_worker", "client_sync_read", "client_watch_fired", "reconfig_asked",
                 "configs_activated", "client_session_moved"):
        assert _seen[what] >= 20, (what, dict(_seen))


def test_a_member_that_publishes_nothing_to_its_workers_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The read check can fail: without `PublishApplied` a worker answers a read before the
    write its member acknowledged reached it, and some seed sees it."""
    def feed_without_publishing(self: TermCore, batch: list[fx.Effect]) -> None:
        hub = self.hub
        assert hub is not None
        hub.applied_through(self.tree.last_processed_zxid)
        batch.extend(fx.ToWorker(link, data) for link, data in hub.take())

    monkeypatch.setattr(TermCore, "_feed_workers", feed_without_publishing)
    caught = []
    for seed in range(60):
        try:
            run_seed(seed, workers=3, session_clients=6)
        except AssertionError as exc:
            if "acknowledged a write of it" in str(exc):
                caught.append(seed)
    assert caught, "no seed saw a worker answer a read before the write its member had acknowledged"
