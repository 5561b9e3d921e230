"""A simulated ensemble: N servers, the network, the clock, the clients, the faults, the checker.

Everything random comes from one ``random.Random(seed)``: the configuration a seed picks, every
delay, every fault and every client request, so ``run_seed(seed)`` replays a run exactly.

Two ways to drive it:

- ``run_seed(seed)``: a random run. The seed chooses 3 or 5 voters and up to two observers, a
  mix of fault kinds (``FAULT_KINDS``), the timing, the workload's writers and 1-3 real clients
  (``sessions``), quorumSync and, in a third of the runs, read-only mode (the caller may add
  hierarchical quorums, local sessions, serving processes and reconfigs); servers boot at
  random times, clients write, read and watch, faults strike during the chaos window; then
  every fault heals, the clients stop, and the run goes on until the ensemble converges (one
  established leader, every other server serving its history) and every session has expired;
  ``Checker.final`` then checks the end state.
- a script (``tests/sim/test_sim_regressions.py``): ``Cluster(seed, SimConfig(...))``, then
  ``start``, ``crash``, ``restart``, ``partition``, ``heal``, ``pause``, ``resume``, ``submit``
  and ``run_until``; ``packet_hooks`` see every quorum packet a server receives (before its
  core does) and ``send_hooks`` every packet a server sends, so a script can crash servers at
  an exact protocol step (through ``defer``: the crash happens right after the current event).
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from zkpy.quorum.verifier import QuorumVerifier, quorum_verifier
from zkpy.wire.jute import Record
from zkpy.wire.quorum import PacketType, QuorumPacket

from .checker import Checker, InvariantViolation
from .config import SimConfig as SimConfig  # also importable from here, where it used to live
from .network import DelayModel, Network
from .node import SimNode
from .scheduler import Scheduler
from .sessions import Sessions
from .terms import Peer, SimLeaderTerm, SimLearnerTerm
from .workload import Client, Workload

FAULT_KINDS = ("delay", "reorder", "drop", "partition", "crash", "torn", "pause")

PacketHook = Callable[[Peer, int, QuorumPacket], None]


class LivenessFailure(AssertionError):
    """The healed ensemble did not converge in time (a stuck state: possibly a bug)."""


@dataclass(slots=True)
class RunResult:
    seed: int
    config: SimConfig
    faults: tuple[str, ...]
    end_ms: int
    steps: int
    stats: Counter[str]
    committed: int


class Cluster:
    def __init__(self, seed: int, config: SimConfig | None = None, rng: random.Random | None = None) -> None:
        self.seed = seed
        self.config = config or SimConfig()
        self.rng = rng or random.Random(seed)
        self.sched = Scheduler()
        self.stats: Counter[str] = Counter()
        self.trace: deque[tuple[int, int, str, Any]] = deque(maxlen=400)
        sids = list(range(1, self.config.nodes + 1))
        self.nodes = {sid: SimNode(self, sid) for sid in sids}
        self.verifier: QuorumVerifier = quorum_verifier(self.nodes[1].quorum)
        self.net = Network(self.sched, self.nodes, self.rng, self.config.delays)
        self.checker = Checker(seed, self.sched)
        self.workload = Workload(self, self.rng, self.config.clients, self.config.session_timeout_ms,
                                 self.config.client_interval_ms)
        self.sessions = Sessions(self, self.config.session_clients, self.config.session_timeout_ms)
        self.packet_hooks: list[PacketHook] = []
        self.send_hooks: list[PacketHook] = []
        self._deferred: list[Callable[[], None]] = []

    # ------------------------------------------------------------ plumbing for the nodes

    def trace_event(self, sid: int, what: str, detail: Any) -> None:
        self.trace.append((self.sched.now, sid, what, detail))

    def packet_received(self, node: Peer, peer: int, packet: QuorumPacket) -> None:
        for hook in self.packet_hooks:
            hook(node, peer, packet)

    def packet_sent(self, node: Peer, peer: int, packet: QuorumPacket) -> None:
        t = packet.type
        if t in (PacketType.DIFF, PacketType.TRUNC, PacketType.SNAP, PacketType.NEWLEADER):
            self.trace_event(node.sid, f"send {PacketType(t).name}->{peer}", hex(packet.zxid))
            self.stats[PacketType(t).name] += 1
        for hook in self.send_hooks:
            hook(node, peer, packet)

    def defer(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` right after the current event (before any other)."""
        self._deferred.append(fn)

    # ------------------------------------------------------------ driving

    def step(self) -> bool:
        if not self.sched.step():
            return False
        while self._deferred:
            fns, self._deferred = self._deferred, []
            for fn in fns:
                fn()
        return True

    def run_until(self, pred: Callable[[], bool], timeout_ms: int) -> bool:
        deadline = self.sched.now + timeout_ms
        while not pred():
            t = self.sched.next_time()
            if t is None or t > deadline:
                return False
            self.step()
        return True

    def run_for(self, ms: int) -> None:
        end = self.sched.now + ms
        while (t := self.sched.next_time()) is not None and t <= end:
            self.step()
        self.sched.now = max(self.sched.now, end)

    # ------------------------------------------------------------ faults and control

    def start(self, sid: int) -> None:
        self.nodes[sid].start()

    def start_all(self, spread_ms: int = 0) -> None:
        for sid in sorted(self.nodes):
            if spread_ms:
                self.sched.after(self.rng.randrange(spread_ms), self._start_if_down, sid)
            else:
                self.start(sid)

    def _start_if_down(self, sid: int) -> None:
        if not self.nodes[sid].alive:
            self.start(sid)

    def crash(self, sid: int, mode: str = "power") -> None:
        """Server ``sid`` dies: ``power`` (unsynced bytes lost), ``torn`` (a random prefix of them
        kept) or ``kill`` (kill -9: every written byte kept)."""
        node = self.nodes[sid]
        if node.alive:
            kept = node.crash(mode)
            self.stats["crash"] += 1
            if kept:
                self.stats[f"crash_{mode}_kept_unsynced"] += 1

    def restart(self, sid: int) -> None:
        self._start_if_down(sid)

    def pause(self, sid: int) -> None:
        node = self.nodes[sid]
        if node.alive and not node.paused:
            node.pause()
            self.stats["pause"] += 1

    def resume(self, sid: int) -> None:
        node = self.nodes[sid]
        if node.alive and node.paused:
            node.resume()

    def partition(self, *groups: Iterable[int], notify_p: float = 0.3) -> None:
        self.net.partition(groups, notify_p)
        self.stats["partition"] += 1
        self.trace_event(0, "partition", [sorted(g) for g in self.net.groups or []])

    def heal(self) -> None:
        if self.net.groups is not None:
            self.trace_event(0, "heal", None)
        self.net.heal()

    def heal_all(self) -> None:
        """Every fault ends: partitions heal, latency spikes stop, paused servers continue, crashed
        ones restart."""
        self.heal()
        self.net.delays = DelayModel(1, min(self.net.delays.high, 10))
        for sid, node in sorted(self.nodes.items()):
            if node.paused:
                self.resume(sid)
        for sid, node in sorted(self.nodes.items()):
            if not node.alive:
                self.restart(sid)

    # ------------------------------------------------------------ clients

    def submit(self, sid: int, op: int, path: str, req: Record | None, client: int = 0) -> bool:
        """One request of client ``client`` (its current session) to server ``sid`` (scripts);
        False if that server is not serving."""
        c = self.workload.clients[client]
        node = self.nodes[sid]
        if not node.serving:
            return False
        return self.workload.submit(c, node, op, path, req) is not None

    def open_session(self, sid: int, client: int = 0) -> bool:
        """Client ``client`` opens a new session on server ``sid`` (answered once it commits)."""
        c: Client = self.workload.clients[client]
        self.workload._new_session(c, self.nodes[sid])
        return c.state == "opening"

    # ------------------------------------------------------------ state

    def leader(self) -> SimNode | None:
        """The established leader every live server agrees on, if exactly one is established."""
        leaders = [n for n in self.nodes.values() if n.alive and isinstance(n.term, SimLeaderTerm)
                   and n.term.pipeline is not None and n.term.ended is None]
        return leaders[0] if len(leaders) == 1 else None

    def converged(self, sessions_gone: bool = False, only: Iterable[int] | None = None) -> bool:
        """One established leader, every other server (of ``only``, if given) serving its whole
        history, nothing in flight; with ``sessions_gone``, no session left either."""
        leader = self.leader()
        if leader is None or leader.paused:
            return False
        lt = leader.term
        assert isinstance(lt, SimLeaderTerm) and lt.pipeline is not None
        if lt.zab.outstanding or lt.pipeline.unapplied or lt.logging:
            return False
        h = leader.history
        members = set(only) if only is not None else set(self.nodes)
        for node in self.nodes.values():
            if node is leader or node.sid not in members:
                continue
            t = node.term
            if not node.alive or node.paused or not isinstance(t, SimLearnerTerm) or not t.serving \
                    or t.core.leader_sid != leader.sid or t.ended is not None or t.logging:
                return False
            if len(node.history) != len(h) or node.history[-1:] != h[-1:]:
                return False
        if sessions_gone and leader.tree is not None and leader.tree.sessions:
            return False
        return True

    def check_final(self, expect_no_sessions: bool) -> None:
        """``Checker.final`` on the ensemble as it is now (converged)."""
        self.checker.final(list(self.nodes.values()), self.leader(), self.workload.acked(), expect_no_sessions)

    def describe(self) -> str:
        lines = [f"seed {self.seed}: {self.config.nodes} servers, t={self.sched.now}ms, stats {dict(self.stats)}"]
        for sid, n in sorted(self.nodes.items()):
            z = n.tree.last_processed_zxid if n.tree is not None else -1
            lines.append(f"  server {sid}: {n.mode}{' paused' if n.paused else ''} inc {n.incarnation} "
                         f"zxid 0x{z:x} history {len(n.history)} epochs {n.epochs}")
        lines.append(f"  committed history: {len(self.checker.committed)} txns")
        lines.append("  last events:")
        for t, sid, what, detail in list(self.trace)[-120:]:
            lines.append(f"    {t:>7} s{sid} {what} {detail}")
        return "\n".join(lines)


# ---------------------------------------------------------------- random runs


@dataclass(slots=True)
class Plan:
    faults: tuple[str, ...]
    chaos_start_ms: int
    chaos_end_ms: int
    work_until_ms: int


def choose(rng: random.Random, nodes: int | None = None, faults: Iterable[str] | None = None,
           chaos_ms: int | None = None) -> tuple[SimConfig, Plan]:
    n = nodes if nodes is not None else (3 if rng.random() < 0.7 else 5)
    observers = 0 if nodes is not None else rng.choice((0, 0, 0, 1, 1, 2))  # beside the n voters
    if faults is None:
        picked = [k for k in FAULT_KINDS if rng.random() < 0.5]
        if not picked:
            picked = [rng.choice(FAULT_KINDS)]
    else:
        picked = list(faults)
    delays = DelayModel(1, 6)
    if "reorder" in picked:
        delays = replace(delays, high=rng.randint(10, 60))
    if "delay" in picked:
        delays = replace(delays, spike_p=rng.choice((0.01, 0.03, 0.1)), spike_max=rng.choice((200, 800, 2500)))
    config = SimConfig(nodes=n + observers, observers=observers, session_clients=rng.randint(1, 3),
                       quorum_sync=rng.random() < 0.3, tick_ms=rng.choice((100, 200)), delays=delays, fsync_ms=rng.choice(((1, 3), (1, 12), (5, 40), (20, 120))),
                       snap_count=rng.choice((10, 40, 200)), clients=rng.randint(2, 4),
                       client_interval_ms=rng.choice(((5, 60), (20, 200))))
    chaos = chaos_ms if chaos_ms is not None else rng.randint(2000, 6000)
    return config, Plan(tuple(picked), 300, 300 + chaos, 300 + chaos + 1500)


def _victim(cluster: Cluster, candidates: list[int]) -> int:
    """Half the time the server that leads (or believes it does), else any."""
    rng = cluster.rng
    leaders = [s for s in candidates if isinstance(cluster.nodes[s].term, SimLeaderTerm)]
    if leaders and rng.random() < 0.5:
        return rng.choice(leaders)
    return rng.choice(candidates)


def _chaos(cluster: Cluster, plan: Plan) -> None:
    """One fault now, the next one scheduled, until the chaos window closes."""
    rng = cluster.rng
    now = cluster.sched.now
    if now >= plan.chaos_end_ms:
        return
    cluster.sched.after(rng.randint(100, 600), _chaos, cluster, plan)
    kinds = [k for k in plan.faults if k not in ("delay", "reorder")]
    if not kinds:
        return
    kind = rng.choice(kinds)
    sids = sorted(cluster.nodes)
    alive = [s for s in sids if cluster.nodes[s].alive]
    if kind in ("crash", "torn") and alive:
        mode = "torn" if kind == "torn" else rng.choice(("power", "power", "kill"))
        if rng.random() < 0.15:  # a correlated failure: a majority goes down at once
            victims = rng.sample(alive, min(len(alive), len(sids) // 2 + 1))
        else:
            victims = [_victim(cluster, alive)]
        for sid in victims:
            cluster.crash(sid, mode)
            cluster.sched.after(rng.choice((rng.randint(20, 400), rng.randint(400, 3000))), cluster.restart, sid)
    elif kind == "pause":
        running = [s for s in alive if not cluster.nodes[s].paused]
        if running:
            sid = _victim(cluster, running)
            cluster.pause(sid)
            cluster.sched.after(rng.choice((rng.randint(50, 800), rng.randint(800, 4000))), cluster.resume, sid)
    elif kind == "partition" and cluster.net.groups is None:
        shuffled = sids[:]
        rng.shuffle(shuffled)
        if alive and rng.random() < 0.5:  # cut the leader off, alone or with a minority
            lead = _victim(cluster, alive)
            shuffled.remove(lead)
            shuffled.insert(0, lead)
            cut = rng.randint(1, (len(sids) - 1) // 2)
        else:
            cut = rng.randint(1, len(sids) - 1)
        cluster.partition(shuffled[:cut], shuffled[cut:])
        cluster.sched.after(rng.randint(100, 3000), cluster.heal)
    elif kind == "drop":
        conns = cluster.net.open_conns()
        if conns and rng.random() < 0.7:
            cluster.net.break_conn(rng.choice(conns))
        else:
            a, b = rng.sample(sids, 2)
            cluster.net.drop_channel(a, b, rng.randint(0, 500))
        cluster.stats["drop"] += 1


_SYNC_PACKETS = frozenset({PacketType.DIFF, PacketType.TRUNC, PacketType.SNAP, PacketType.NEWLEADER,
                           PacketType.UPTODATE, PacketType.ACKEPOCH, PacketType.LEADERINFO})


def _sync_crashes(cluster: Cluster, plan: Plan, p: float) -> PacketHook:
    """During the chaos window, now and then crash a server at a synchronisation step: right
    after it received (or its peer sent) a sync packet or the ack of a NEWLEADER."""

    def hook(node: Peer, peer: int, packet: QuorumPacket) -> None:
        rng = cluster.rng
        if cluster.sched.now >= plan.chaos_end_ms:
            return
        t = packet.type
        if t not in _SYNC_PACKETS and not (t == PacketType.ACK and packet.zxid & 0xFFFFFFFF == 0):
            return
        if rng.random() >= p:
            return
        victim = node.sid if rng.random() < 0.5 else peer
        modes = ("power", "kill", "torn") if "torn" in plan.faults else ("power", "kill")
        mode = rng.choice(modes)

        def crash() -> None:
            cluster.crash(victim, mode)
            cluster.stats["sync_crash"] += 1
            cluster.sched.after(rng.randint(20, 1500), cluster.restart, victim)

        cluster.defer(crash)

    return hook


Hierarchy = tuple[tuple[tuple[int, tuple[int, ...]], ...], tuple[tuple[int, int], ...]]


def run_seed(seed: int, *, nodes: int | None = None, faults: Iterable[str] | None = None,
             chaos_ms: int | None = None, converge_ms: int = 40_000, hierarchy: Hierarchy | None = None,
             local_sessions: bool = False, local_sessions_upgrading: bool = False, workers: int = 1,
             reconfig: bool = False, session_clients: int | None = None) -> RunResult:
    """One random run; raises InvariantViolation or LivenessFailure (with the seed) on failure.
    ``hierarchy``: the ensemble's (groups, weights) as QuorumConfig holds them (with ``nodes``);
    ``local_sessions``: the members run with localSessionsEnabled (and
    ``local_sessions_upgrading``: localSessionsUpgradingEnabled); ``workers``: serverWorkers,
    the serving processes of each server; ``reconfig``: reconfigEnabled, and the clients also
    ask for reconfigs (``workload``); ``session_clients``: how many real clients (else the
    seed's choice). The seed's other choices are the same."""
    rng = random.Random(seed)
    config, plan = choose(rng, nodes, faults, chaos_ms)
    if hierarchy is not None:
        config = replace(config, groups=hierarchy[0], weights=hierarchy[1])
    if local_sessions:
        config = replace(config, local_sessions=True, local_sessions_upgrading=local_sessions_upgrading)
    config = replace(config, server_workers=workers, reconfig=reconfig)
    if session_clients is not None:
        config = replace(config, session_clients=session_clients)
    # readonlymode.enabled in a third of the runs, drawn apart from the run's RNG so that every
    # other choice of a seed stays what it was
    config = replace(config, read_only=random.Random(f"read-only {seed}").random() < 1 / 3)
    cluster = Cluster(seed, config, rng)
    if "crash" in plan.faults or "torn" in plan.faults:
        cluster.packet_hooks.append(_sync_crashes(cluster, plan, 0.04))
    try:
        cluster.start_all(spread_ms=300)
        cluster.workload.start(plan.work_until_ms)
        cluster.sessions.start(plan.work_until_ms)
        cluster.sched.at(plan.chaos_start_ms, _chaos, cluster, plan)
        cluster.run_for(plan.chaos_end_ms)
        cluster.heal_all()
        cluster.run_for(plan.work_until_ms - plan.chaos_end_ms)
        cluster.heal_all()  # faults scheduled during the window may have struck since
        cluster.workload.stop()
        cluster.sessions.stop()
        if not cluster.run_until(lambda: cluster.converged(sessions_gone=True), converge_ms):
            raise LivenessFailure(f"seed {seed}: the healed ensemble did not converge within {converge_ms} ms\n"
                                  + cluster.describe())
        cluster.check_final(expect_no_sessions=True)
    except InvariantViolation as exc:
        raise InvariantViolation(f"{exc}\n{cluster.describe()}") from None
    return RunResult(seed, config, plan.faults, cluster.sched.now, cluster.sched.steps, cluster.stats,
                     len(cluster.checker.committed))
