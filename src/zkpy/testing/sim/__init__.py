"""Deterministic simulation of a zkpy ensemble from one seed.

The production cores run unchanged: each server's member core (``member.peer.PeerCore``) with its
election (``quorum.election``) and its term cores (``member.leading``, ``member.learning``: the
Zab cores and the request pipelines), the serving processes' core (``member.workers.WorkerFeed``),
the clients' session logic (``client.core.ClientCore``), ``storage`` and ``tree``. This package
replaces the shells around them (``runtime.peer``, ``runtime.term``, ``runtime.workers``, the
client's sockets) with simulated ones: a clock that only moves from event to event
(``scheduler``), a network with TCP-like connections, delays, reordering across connections,
breaks and partitions (``network``), disks that lose, tear or keep what was not fsynced and an
fsync worker with group commit (``disk``), servers that crash, restart and pause and run their
member core's effects (``node``), leader and learner terms run as ``runtime.term`` runs them
(``terms``), the serving processes of a server with ``serverWorkers`` (``workers``), the
workload's writers (``workload``), real clients that read, write, sync, watch and move their
sessions between servers (``sessions``), and invariants checked as the run goes (``checker``,
and ``sessions.SessionChecker`` for what each client sees), put together in ``cluster``.

Ensembles have voters and observers (``SimConfig.observers``), majority or hierarchical quorums,
local sessions, read-only mode (a looking server serves read-only clients, and the clients ask
for it: ``SimConfig.read_only``) and reconfiguration (``SimConfig.reconfig``: scripted in
tests/sim/test_sim_reconfig.py, and asked for by the workload's clients when it is on). Every
random choice comes from one ``random.Random(seed)``: a failing seed replays exactly
(``ZKPY_SIM_SEED=<n> pytest tests/sim`` reruns one).

Each module imports only the ones below it (scheduler, disk, network, config, workload,
checker, workers, terms, sessions, node, cluster), so each can be read and tested without the
ones above; where a lower one works with a higher one's objects (a term with its server, the
clients with the cluster), it states what it uses of them in a small ``Protocol``.

Not modelled: fuzzy snapshots (a snapshot is taken whole, at once, when the log rolls or a SNAP
arrives), disk errors (ENOSPC/EIO: the simulated disk loses or tears unsynced bytes, it never
fails a call), and the security of the client and quorum ports (TLS, SASL).
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
