"""One ensemble member's lifecycle (ZooKeeper's QuorumPeer run loop) as a pure core: the member
core, one floor above the term cores (``member.leading``, ``member.learning``).

    start -> Recover -> recovered -> Elect | Designate -> decided -> StartTerm -> term_ended -> Recover ...

Its shells (``runtime.peer`` on sockets, ``testing.sim.node`` in simulation) run its effects and
report back; every decision of the lifecycle is made here, once:

* recovery: a term that ends hands its tree on (``carry_over``: the txns it logged and never
  applied are applied first, as ZooKeeper's fastForwardDataBase does) unless it broke off with a
  failure, or a learner ended part-way through its synchronisation (a DIFF, TRUNC or SNAP began
  and the term ended before it served): then the data dir is recovered (`Recover` with no
  history; ``member.datadir`` says what that reads);
* the election: a committed reconfig that named the next leader is taken without a round
  (`Designate`), else a round opens with the history's last zxid and the current epoch
  (`Elect`); its decision makes me leader, or a follower or an observer (my role in the active
  config) of the leader it names (`StartTerm` with the term core);
* configs: one a term made active, or a newer one the election heard of (reconfigEnabled), is
  the member's from then on (`Reconfigure`: the election's voters, the dynamic config file);
* read-only service (readonlymode.enabled): while looking past ``member.read_only``'s delay, the
  member serves read-only clients from its tree (`ServeReadOnly`, their replies as `Output`
  effects) until the election decides (`StopReadOnly`).

Inputs (``set_time`` first): ``start``, ``recovered``, ``decided``, ``newer_config``,
``term_serving``, ``config_activated``, ``term_ended``, ``tick``, ``stop``. Effects come out of
``ready()``, in order. Each input but ``tick`` and ``stop`` belongs to one phase (``PeerPhase``,
moved along ``TRANSITIONS``); one that comes in another is a bug of the shell, and raises.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import assert_never

from zkpy.config import LearnerType, QuorumConfig, ServerConfig
from zkpy.quorum.dynconfig import activation, config_data, verifier_of
from zkpy.quorum.election import Decision
from zkpy.quorum.verifier import QuorumVerifier, quorum_verifier
from zkpy.server import outputs as out
from zkpy.server.metrics import ServerMetrics
from zkpy.server.read_only import ReadOnlyServerCore
from zkpy.tree.datatree import DataTree

from .datadir import DataDirState
from .history import History
from .leading import LeadingCore
from .learning import LearningCore
from .read_only import ReadOnlyGate

Log = Callable[[str], None]
TermCoreType = LeadingCore | LearningCore


# ---- effects


@dataclass(frozen=True, slots=True)
class Recover:
    """Read the data dir (``member.datadir.recover_data_dir``) with ``carried`` (None: recover it
    from disk), then call ``recovered``."""

    carried: History | None


@dataclass(frozen=True, slots=True)
class Elect:
    """Open an election round with my last zxid and current epoch; call ``decided`` with its decision."""

    last_zxid: int
    current_epoch: int


@dataclass(frozen=True, slots=True)
class Designate:
    """Take ``leader``, whom a committed reconfig named, without a round (the election's
    ``designate``); call ``decided`` with the decision it returns."""

    leader: int
    last_zxid: int


@dataclass(frozen=True, slots=True)
class StartTerm:
    """Run ``term`` (its role's shell over its links, its log and its timers) until it ends; then
    close it and call ``term_ended`` (a member that stops meanwhile calls ``stop`` instead)."""

    term: TermCoreType


@dataclass(frozen=True, slots=True)
class ServeReadOnly:
    """Serve clients from ``pipeline`` (read-only) until `StopReadOnly`."""

    pipeline: ReadOnlyServerCore


@dataclass(frozen=True, slots=True)
class StopReadOnly:
    """Read-only service ends: its clients are disconnected."""


@dataclass(frozen=True, slots=True)
class Reconfigure:
    """``quorum`` is my config from now on: the election takes its voters and config string, and
    it is written as ZooKeeper writes it (``zoo.cfg.dynamic.<version>``)."""

    quorum: QuorumConfig


@dataclass(frozen=True, slots=True)
class PeerEpoch:
    """The epoch Zab settled on: what the election tells looking peers from now on."""

    epoch: int


PeerEffect = Recover | Elect | Designate | StartTerm | ServeReadOnly | StopReadOnly | Reconfigure | PeerEpoch | out.Output


# ---- the core


class PeerPhase(Enum):
    IDLE = "idle"  # not started
    RECOVERING = "recovering"  # `Recover` is out
    LOOKING = "looking"  # `Elect` or `Designate` is out
    IN_TERM = "in-term"  # `StartTerm` is out
    STOPPED = "stopped"


TRANSITIONS: dict[PeerPhase, frozenset[PeerPhase]] = {
    PeerPhase.IDLE: frozenset({PeerPhase.RECOVERING, PeerPhase.STOPPED}),
    PeerPhase.RECOVERING: frozenset({PeerPhase.LOOKING, PeerPhase.STOPPED}),
    PeerPhase.LOOKING: frozenset({PeerPhase.IN_TERM, PeerPhase.STOPPED}),
    PeerPhase.IN_TERM: frozenset({PeerPhase.RECOVERING, PeerPhase.STOPPED}),
    PeerPhase.STOPPED: frozenset(),
}


class PeerCore:
    """One member's lifecycle (see the module doc). ``config`` and ``quorum`` are the active
    config; ``mode`` is what the four-letter words call the member (looking, read-only, leader,
    follower, observer); ``metrics`` is the process's registry (every term's core records into it)."""

    def __init__(self, config: ServerConfig, now_ms: int, wall_ms: int, *, metrics: ServerMetrics | None = None,
                 trace: bool = False, log: Log = lambda _m: None) -> None:
        quorum = config.quorum
        if quorum is None or quorum.my_id is None:
            raise ValueError("an ensemble member needs server.N lines and its own id (myid)")
        self.config = config
        self.quorum: QuorumConfig = quorum
        self.sid = int(quorum.my_id)
        self.verifier: QuorumVerifier = quorum_verifier(quorum)
        self.now_ms = now_ms
        self.wall_ms = wall_ms
        self.metrics = metrics if metrics is not None else ServerMetrics()
        self.trace = trace
        self.log = log
        self.phase = PeerPhase.IDLE
        self.mode = "looking"
        self.history: History | None = None  # the tree to elect with and to start the next term from
        self.state: DataDirState | None = None  # the last recovery's (the term's epochs)
        self.term: TermCoreType | None = None
        self.designated: int | None = None  # the leader a committed reconfig named for the next term
        self.read_only_gate = ReadOnlyGate(config.read_only_mode, config.tick_ms)
        self.read_only: ReadOnlyServerCore | None = None
        self._looking_since = now_ms
        self._effects: list[PeerEffect] = []

    @property
    def observer(self) -> bool:
        """My role in the active config is observer."""
        me = self.quorum.me
        return me is not None and me.role is LearnerType.OBSERVER

    @property
    def tree(self) -> DataTree | None:
        """The tree the member holds now (the term's, else the history's; None before recovery)."""
        if self.term is not None:
            return self.term.tree
        return self.history.tree if self.history is not None else None

    # ---- inputs

    def set_time(self, now_ms: int, wall_ms: int) -> None:
        self.now_ms, self.wall_ms = now_ms, wall_ms
        if self.read_only is not None:
            self.read_only.set_time(now_ms, wall_ms)

    def start(self) -> None:
        """The process starts: its data dir is recovered."""
        self._move(PeerPhase.RECOVERING)
        self._effects.append(Recover(None))

    def recovered(self, state: DataDirState) -> None:
        """The data dir was read (``Recover``): elect with its history."""
        self._expect(PeerPhase.RECOVERING, "recovered")
        self.history, self.state = state.history, state
        self._move(PeerPhase.LOOKING)
        self.mode = "looking"
        self.metrics.counters["looking_count"] += 1
        self._looking_since = self.now_ms
        last = state.history.tree.last_processed_zxid
        designated, self.designated = self.designated, None
        if designated is not None:
            self._effects.append(Designate(designated, last))
            return
        self.read_only_gate.looking(self.now_ms)
        self._effects.append(Elect(last, state.epochs.current))

    def decided(self, decision: Decision) -> None:
        """The election decided: read-only service ends, and my term as leader or learner starts."""
        self._expect(PeerPhase.LOOKING, "decided")
        assert self.history is not None and self.state is not None
        self._stop_read_only()
        self.metrics.record("election_time", self.now_ms - self._looking_since)
        self.log(f"election decided: leader {decision.leader}, I am {decision.state.name}")
        epochs = self.state.epochs
        term: TermCoreType
        if decision.leader == self.sid:
            term = LeadingCore(self.config, self.verifier, self.history, accepted_epoch=epochs.accepted,
                               current_epoch=epochs.current, config_data=config_data(self.quorum),
                               now_ms=self.now_ms, wall_ms=self.wall_ms, trace=self.trace, log=self.log)
        else:
            term = LearningCore(self.config, self.history, leader_sid=decision.leader, observer=self.observer,
                                accepted_epoch=epochs.accepted, current_epoch=epochs.current,
                                config_data=config_data(self.quorum), now_ms=self.now_ms, wall_ms=self.wall_ms,
                                trace=self.trace, log=self.log)
        term.metrics = self.metrics  # one registry across terms: what a term counts shows in mntr
        self.term = term
        self.history = None  # the term owns the tree now
        self._move(PeerPhase.IN_TERM)
        self._effects.append(StartTerm(term))

    def term_serving(self, epoch: int) -> None:
        """The term serves clients (its core's `Serving`)."""
        self._expect(PeerPhase.IN_TERM, "term_serving")
        assert self.term is not None
        self.mode = self.term.role
        unavailable_ms = self.now_ms - self._looking_since
        self.metrics.record("unavailable_time", unavailable_ms)  # from looking to serving, as ZooKeeper's
        if self.term.role == "leader":
            self.metrics.record("leader_unavailable_time", unavailable_ms)
        self._effects.append(PeerEpoch(epoch))

    def config_activated(self, quorum: QuorumConfig) -> None:
        """The term made ``quorum`` active (a committed reconfig, or the leader's at sync)."""
        self._expect(PeerPhase.IN_TERM, "config_activated")
        self._activate(quorum)

    def newer_config(self, data: bytes) -> None:
        """The election heard of a config newer than mine (QuorumPeer.processReconfig from
        FastLeaderElection): adopt it, and the round starts over with it."""
        self._expect(PeerPhase.LOOKING, "newer_config")
        try:
            act = activation(self.quorum, data, leader=-1, designated=None)
        except ValueError as exc:
            self.log(f"a peer's config cannot be read ({exc}): ignored")
            return
        if act is not None:
            self._activate(act.quorum)

    def term_ended(self, crashed: bool = False) -> None:
        """The term's shell closed the term (its log closed too: every txn it handed over is on
        disk). Its tree goes on to the next term, unless it ``crashed`` (a failure may have left
        the tree half-way) or it cannot hand one on: then the data dir is recovered."""
        self._expect(PeerPhase.IN_TERM, "term_ended")
        term = self.term
        assert term is not None
        self.designated = term.designated
        self.history = None if crashed else term.carry_over()
        self.term = None
        self.mode = "looking"
        self._move(PeerPhase.RECOVERING)
        self._effects.append(Recover(self.history))

    def tick(self) -> None:
        """Time passes: read-only service starts once due; its sessions expire."""
        if self.phase is PeerPhase.LOOKING and self.read_only_gate.tick(self.now_ms):
            assert self.history is not None
            self.read_only = ReadOnlyServerCore(self.config, self.now_ms, self.wall_ms, log=self.log,
                                                tree=self.history.tree)
            self.read_only.metrics = self.metrics
            self.mode = "read-only"
            self.log("no quorum: serving read-only clients")
            self._effects.append(ServeReadOnly(self.read_only))
        if self.read_only is not None:
            self.read_only.tick()

    def stop(self) -> None:
        """The process stops: read-only service ends with it."""
        if self.phase is not PeerPhase.STOPPED:
            self._stop_read_only()
            self._move(PeerPhase.STOPPED)

    # ---- output

    def ready(self) -> list[PeerEffect]:
        """The effects since the last call, in order; read-only clients' replies at the end."""
        if self.read_only is not None:
            for o in self.read_only.ready():
                match o:
                    case out.Output():
                        self._effects.append(o)
                    case (out.Propose() | out.Forward() | out.Revalidate() | out.CheckQuorum() | out.Touches()
                          | out.Relayed() | out.TxnApplied()):
                        raise AssertionError(f"the read-only pipeline produced {o!r}")
                    case _:
                        assert_never(o)
        effects, self._effects = self._effects, []
        return effects

    # ---- inside

    def _move(self, to: PeerPhase) -> None:
        if to not in TRANSITIONS[self.phase]:
            raise AssertionError(f"server {self.sid}: no transition from {self.phase.value} to {to.value}")
        self.phase = to

    def _expect(self, phase: PeerPhase, what: str) -> None:
        if self.phase is not phase:
            raise AssertionError(f"server {self.sid}: {what} while {self.phase.value}")

    def _stop_read_only(self) -> None:
        if self.read_only_gate.decided() and self.read_only is not None:
            self.read_only = None
            self.mode = "looking"
            self.log("read-only service ended")
            self._effects.append(StopReadOnly())

    def _activate(self, quorum: QuorumConfig) -> None:
        self.quorum = quorum
        self.config = dataclasses.replace(self.config, quorum=quorum)
        self.verifier = verifier_of(quorum)
        self._effects.append(Reconfigure(quorum))
