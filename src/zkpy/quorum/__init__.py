"""Replication between servers: fast leader election, then Zab, as pure state machines.

Every core here takes messages and ``now_ms`` in and hands decisions and messages to send out
through ``ready()``; sockets, clocks and randomness belong to ``zkpy.runtime``.
"""

from .election import (
    FINALIZE_WAIT_MS,
    MAX_NOTIFICATION_INTERVAL_MS,
    MIN_NOTIFICATION_INTERVAL_MS,
    NO_SID,
    Decision,
    Election,
    ElectionError,
    LearnerType,
    Ready,
    Send,
    Vote,
    better_vote,
)
from .hierarchical import QuorumHierarchical
from .verifier import QuorumMaj, QuorumVerifier

__all__ = [
    "FINALIZE_WAIT_MS",
    "MAX_NOTIFICATION_INTERVAL_MS",
    "MIN_NOTIFICATION_INTERVAL_MS",
    "NO_SID",
    "Decision",
    "Election",
    "ElectionError",
    "LearnerType",
    "QuorumHierarchical",
    "QuorumMaj",
    "QuorumVerifier",
    "Ready",
    "Send",
    "Vote",
    "better_vote",
]
