"""Deterministic simulation of a zkpy ensemble from one seed.

The pure cores (``quorum.election``, ``quorum.leader``, ``quorum.learner``, ``server.core``,
``storage.*``, ``tree``) run unchanged; this package replaces the shell around them
(``runtime.peer``) with a simulated one: a clock that only moves from event to event
(``scheduler``), a network with TCP-like connections, delays, reordering across connections,
breaks and partitions (``network``), disks that lose, tear or keep what was not fsynced and an
fsync worker with group commit (``disk``), servers that crash, restart and pause (``node``)
and run leader and learner terms as ``runtime.peer`` does (``terms``), and, with read-only mode,
serve read-only clients while looking (``member.read_only``, ``server.read_only``), clients (``workload``)
and invariants checked as the run goes (``checker``), put together in ``cluster``. Every random choice comes from one ``random.Random(seed)``: a failing seed
replays exactly (``ZKPY_SIM_SEED=<n> pytest tests/sim`` reruns one).

Each module imports only the ones below it (scheduler, disk, network, config, workload,
checker, terms, sessions, node, cluster), so each can be read and tested without the ones
above; where a lower one works with a higher one's objects (a term with its server, the
clients with the cluster), it states what it uses of them in a small ``Protocol``.

Not modelled: observers, reconfiguration, fuzzy snapshots (snapshots are taken whole, at the
log roll), disk errors (ENOSPC/EIO), clients' reads and watches, and session moves between
servers (revalidation).
"""

from .checker import InvariantViolation
from .cluster import FAULT_KINDS, Cluster, LivenessFailure, RunResult, run_seed
from .config import SimConfig
from .network import DelayModel

__all__ = [
    "FAULT_KINDS",
    "Cluster",
    "DelayModel",
    "InvariantViolation",
    "LivenessFailure",
    "RunResult",
    "SimConfig",
    "run_seed",
]
