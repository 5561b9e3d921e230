"""Simulated runs with local sessions (localSessionsEnabled): the seeds of ``test_sim_seeds``
(servers, clients and faults as each seed chooses them), with every member's new sessions
local, upgrading them on an ephemeral create on even seeds and refusing the create
(EphemeralOnLocalSession) on odd ones.

What must hold, besides every invariant of the simulator (``sim.checker``, ``sim.sessions``):
a session that owns an ephemeral is a global session of every tree that applied the create;
ephemerals go when their (upgraded) session closes or expires, and none is left once every
session expired; a local session is never taken by another server (the client finds it expired
and starts a new one); an upgraded one moves with its ephemerals; an ephemeral create never
succeeds on a local session without upgrading, and never fails with EphemeralOnLocalSession
with it.

A failing seed replays exactly:

    ZKPY_SIM_SEED=<n> python -m pytest -q tests/sim/test_sim_local_sessions.py
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

from zkpy.testing.sim import run_seed

ONE = os.environ.get("ZKPY_SIM_SEED")
SEEDS = [int(ONE)] if ONE is not None else list(range(32))

_seen: Counter[str] = Counter()
_runs: list[int] = []


@pytest.mark.parametrize("seed", SEEDS)
def test_local_sessions_seed(seed: int) -> None:
    upgrading = seed % 2 == 0
    try:
        r = run_seed(seed, local_sessions=True, local_sessions_upgrading=upgrading)
    except AssertionError as exc:  # InvariantViolation, LivenessFailure: the message names the seed
        pytest.fail(f"seed {seed}, local sessions, upgrading={upgrading} (replay: ZKPY_SIM_SEED={seed} "
                    f"python -m pytest tests/sim/test_sim_local_sessions.py)\n{exc}", pytrace=False)
    _runs.append(seed)
    _seen.update({k: v for k, v in r.stats.items() if k.startswith("client_")})


def test_local_sessions_were_created_upgraded_refused_and_expired() -> None:
    """Over the seeds, each thing the checks are about happened."""
    if len(_runs) < len(SEEDS) or ONE is not None:
        pytest.skip("needs every seed run of this module")
    for what in ("client_local_session_upgraded", "client_ephemeral_on_local_session",
                 "client_local_session_expired_elsewhere", "client_session_moved", "client_expired"):
        assert _seen[what] >= 3, (what, dict(_seen))
