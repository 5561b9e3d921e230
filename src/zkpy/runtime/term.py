"""What the leader and the learner term shells share: running a term core's effects on the
operating system (``member.effects`` states the order they keep), the fsync worker's reports,
the end of the term.

Invariants kept here: an effect that persists (an epoch file, a truncation, a snapshot) is
complete before the next one runs; a learner's ACK of a proposal leaves only after the fsync
that covers it (the core emits it only once ``durable`` says so); the leader counts its own ack
only after its own fsync.

A term shell knows its server only through the ``TermHost`` it is given (``runtime.peer.QuorumPeer``
makes one per term), so the shells and the peer do not import each other.

With ``serverWorkers`` = N > 1 the core asks for the term's worker processes (`StartWorkers`:
``runtime.workers`` spawns N and links them to the core's hub, and the member stops taking
clients: ``TermHost.dedicate``), publishes the applied zxid they read (`PublishApplied`) and hands
out their links' bytes (`ToWorker`). When the term ends the workers' links are closed: they drop
their clients and exit, and the member listens again (four-letter words, read-only clients).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import assert_never

from zkpy.admin.tls import QuorumTls
from zkpy.config import QuorumConfig, ServerConfig
from zkpy.member import effects as fx
from zkpy.member.leading import LeadingCore
from zkpy.member.learning import LearningCore
from zkpy.runtime.clock import now_ms, wall_ms
from zkpy.runtime.persistence import Persistence
from zkpy.runtime.workers import WorkerPool
from zkpy.server.connection import Connection
from zkpy.server.core import ServerCore
from zkpy.storage.disk import Disk
from zkpy.storage.files import DataDirs

log = logging.getLogger("zkpy.quorum")


class TermEnded(Exception):
    """The current term is over (the reason says why); the member core decides what comes next
    (``PeerCore.term_ended``)."""


@dataclass(frozen=True, slots=True)
class TermHost:
    """What a term shell is given of its server (``runtime.peer.QuorumPeer`` makes one per term,
    so that the shells and the peer do not import each other): the config active when the term
    starts, the data dir, and what the term tells its server."""

    config: ServerConfig
    sid: int
    quorum: QuorumConfig  # the config's
    disk: Disk
    dirs: DataDirs
    quorum_tls: QuorumTls | None  # sslQuorum
    write_epoch: Callable[[str, int], None]  # (name, value): synchronously, as storage.epochs writes it
    serving: Callable[[ServerCore, str, int], None]  # (pipeline, role, epoch): the term serves
    uses: Callable[[Persistence | None], None]  # the term's log (mntr reads its fsync figures)
    disk_failed: Callable[[BaseException], None]  # the log could not be written: fail-stop
    write_client: Callable[[Connection], None]  # a client connection's output
    activate: Callable[[QuorumConfig], None]  # a config the term made active
    schedule_flush: Callable[[], None]  # client input arrived: flush at the end of the loop's turn
    client_ports: Callable[[], tuple[int, int | None]]  # where the term's workers listen
    dedicate: Callable[[], None]  # the workers serve the client port: the member takes no client


class Term:
    """One term's shell: subclasses own the links and set ``core``."""

    core: LeadingCore | LearningCore
    role: str

    def __init__(self, host: TermHost) -> None:
        self.host = host
        self.persistence = Persistence(host.config, host.disk, host.dirs)
        self.ended: asyncio.Future[str] | None = None
        self.workers: WorkerPool | None = None  # serverWorkers > 1, once the term serves

    def end(self, reason: str) -> None:
        if self.ended is not None and not self.ended.done():
            self.ended.set_result(reason)

    def _start_persistence(self) -> None:
        self.persistence.start(asyncio.get_running_loop(), self._durable, self.host.disk_failed)
        self.host.uses(self.persistence)

    def _time(self) -> None:
        self.core.set_time(now_ms(), wall_ms())

    def pump(self) -> None:
        """Run the core's effects, batch after batch, until it has none."""
        while effects := self.core.ready():
            for effect in effects:
                self.execute(effect)

    def execute(self, effect: fx.Effect) -> None:
        match effect:
            case fx.Output():
                self.host.write_client(effect.conn)
            case fx.Send():
                self._send(effect)
            case fx.AppendLog():
                self.persistence.log_payloads(effect.zxids, effect.payloads, self.core.tree)
            case fx.PublishApplied():
                if self.workers is not None:
                    self.workers.applied_up_to(effect.zxid)
            case fx.ToWorker():
                if self.workers is not None:
                    self.workers.send(effect.link, effect.data)
            case fx.WriteEpoch():
                self.host.write_epoch(effect.name, effect.value)
            case fx.WriteSnapshot():
                self.persistence.write_snapshot_now(effect.tree)
            case fx.Truncate():
                self._truncate(effect.zxid)
            case fx.CloseLink():
                self._close_link(effect.link, effect.reason)
            case fx.Serving():
                self.host.serving(effect.pipeline, self.role, effect.epoch)
            case fx.StartWorkers():
                self.workers = WorkerPool(self.host.config, effect.count, effect.hub, self.host.schedule_flush,
                                          mode=self.role, leader_id=self._leader_id())
                self.workers.start(*self.host.client_ports())
                self.host.dedicate()
            case fx.ActivateConfig():
                self.host.activate(effect.quorum)
            case fx.EndTerm():
                self.end(effect.reason)
            case fx.PacketIn() | fx.PacketOut() | fx.Proposed() | fx.Logged() | fx.Applied() | fx.SnapshotLoaded():
                raise AssertionError(f"a trace effect from a core made without trace: {effect!r}")
            case _:
                assert_never(effect)

    def _send(self, effect: fx.Send) -> None:
        raise NotImplementedError

    def _close_link(self, link: int, reason: str) -> None:
        raise NotImplementedError

    def _truncate(self, zxid: int) -> None:
        raise AssertionError(f"a {self.role} term truncates nothing (TRUNC to 0x{zxid:x})")

    def _leader_id(self) -> int:
        return self.host.sid

    def stop_workers(self) -> None:
        """The term ends: the workers drop their clients with the member's and exit."""
        if self.workers is not None:
            self.workers.stop()

    async def close_workers(self) -> None:
        """After ``close``: wait for the workers to exit (killed if they do not in time)."""
        if self.workers is not None:
            await self.workers.close()

    def _durable(self, count: int) -> None:
        """The fsync worker made ``count`` more txns durable (a report may come after ``close``)."""
        self._time()
        self.core.durable(count)
        self.pump()

    def flush(self) -> None:
        """After client input: what it produced goes to the log and the quorum, replies out."""
        self._time()
        self.pump()

    def close_persistence(self) -> None:
        self.persistence.close()
        self.host.uses(None)
