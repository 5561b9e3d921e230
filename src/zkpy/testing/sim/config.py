"""What one simulated ensemble is: ``SimConfig``, apart from ``cluster`` so that the servers and
their terms, which read it, sit below the cluster that puts them together."""

from __future__ import annotations

from dataclasses import dataclass, field

from .network import DelayModel

# Deviations of the simulated shell from runtime.peer that step around core bugs found by the
# simulator, so random runs go on finding others. Each has a regression test that runs without
# it; remove it once the bug is fixed. (None at the moment.)
WORKAROUNDS: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class SimConfig:
    """One simulated ensemble: its size and quorum (groups and weights), zoo.cfg-like timing (tickTime, initLimit, syncLimit in
    ticks), the clients' session timeout, when the log rolls (snapCount), the latency of fsyncs
    and messages, the client load, and which workarounds the simulated shell applies."""

    nodes: int = 3
    observers: int = 0  # how many of the highest sids are observers (they never vote)
    # zoo.cfg's group.G / weight.SID lines as QuorumConfig holds them (empty: a majority quorum)
    groups: tuple[tuple[int, tuple[int, ...]], ...] = ()
    weights: tuple[tuple[int, int], ...] = ()
    tick_ms: int = 200
    init_limit: int = 10
    sync_limit: int = 5
    session_timeout_ms: int = 2000
    snap_count: int = 40
    prealloc_bytes: int = 16 * 1024
    fsync_ms: tuple[int, int] = (1, 12)
    delays: DelayModel = field(default_factory=DelayModel)
    clients: int = 3
    client_interval_ms: tuple[int, int] = (20, 200)
    session_clients: int = 0  # real clients (sessions.py) beside the workload's writers
    quorum_sync: bool = False  # zkpy.quorumSync
    local_sessions: bool = False  # localSessionsEnabled
    local_sessions_upgrading: bool = False  # localSessionsUpgradingEnabled
    read_only: bool = False  # readonlymode.enabled: a looking server serves read-only clients (and clients ask for it)
    reconfig: bool = False  # reconfigEnabled (scripts and the workload's clients ask for reconfigs as a super user)
    server_workers: int = 1  # serverWorkers: serving processes per server (``workers``)
    workarounds: frozenset[str] = WORKAROUNDS
