"""What the leader and the learner term shells share: running a member core's effects on the
operating system (``member.effects`` states the order they keep), the fsync worker's reports,
the end of the term.

A term shell knows its server only through ``TermHost`` (``runtime.peer.QuorumPeer`` is one),
so the shells and the peer do not import each other.

With ``serverWorkers`` = N > 1 a term serves its client port from N processes
(``runtime.workers``, ``member.workers``): once the term serves (`Serving`) the pipeline hands
out session ids ``id % N == 0`` (the server id stays in the top byte, so ids never collide with
another member's) and N-1 workers are started, each sent the tree as it is then (SNAP: a term's
tree may have been truncated or replaced by a sync, so no worker outlives its term). Every txn
the term logs (`AppendLog`; a learner's also those it logged before it served) is sent to them
once the term applied it, and the shared applied zxid is written before any effect of the batch
that applied it runs (replies to clients included). When the term ends the workers' links are
closed: they drop their clients and exit, as the member's own clients are dropped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from zkpy.admin.tls import QuorumTls
from zkpy.config import QuorumConfig, ServerConfig
from zkpy.member import effects as fx
from zkpy.member.leading import LeadingCore
from zkpy.member.learning import LearningCore
from zkpy.member.workers import WorkerHub
from zkpy.runtime.persistence import Persistence
from zkpy.runtime.workers import WorkerPool
from zkpy.server.connection import Connection
from zkpy.server.core import ServerCore
from zkpy.server.leader import LeaderServerCore
from zkpy.server.learner import LearnerServerCore
from zkpy.storage.disk import Disk
from zkpy.storage.files import DataDirs

log = logging.getLogger("zkpy.quorum")


def now_ms() -> int:
    return int(time.monotonic() * 1000)


def wall_ms() -> int:
    return int(time.time() * 1000)


class TermEnded(Exception):
    """The current term is over (the reason says why); the peer goes back to election."""


class TermHost(Protocol):
    """What a term shell needs of its server."""

    @property
    def config(self) -> ServerConfig: ...
    @property
    def quorum(self) -> QuorumConfig: ...
    @property
    def sid(self) -> int: ...
    @property
    def disk(self) -> Disk: ...
    @property
    def quorum_tls(self) -> QuorumTls | None: ...
    @property
    def dirs(self) -> DataDirs: ...

    def write_epoch(self, name: str, value: int) -> None: ...
    def serving(self, server: ServerCore, role: str, epoch: int) -> None: ...
    def uses(self, persistence: Persistence | None) -> None: ...
    def disk_failed(self, exc: BaseException) -> None: ...
    def write_client(self, conn: Connection) -> None: ...
    def activate(self, quorum: QuorumConfig) -> None: ...
    def schedule_flush(self) -> None: ...
    def client_ports(self) -> tuple[int, int | None]: ...


class Term:
    """One term's shell: subclasses own the links and set ``core``."""

    core: LeadingCore | LearningCore
    role: str

    def __init__(self, host: TermHost) -> None:
        self.host = host
        self.persistence = Persistence(host.config, host.disk, host.dirs)
        self.ended: asyncio.Future[str] | None = None
        self.hub: WorkerHub | None = None  # serverWorkers > 1, once the term serves
        self.workers: WorkerPool | None = None

    def end(self, reason: str) -> None:
        if self.ended is not None and not self.ended.done():
            self.ended.set_result(reason)

    def _start_persistence(self) -> None:
        self.persistence.start(asyncio.get_running_loop(), self._durable, self.host.disk_failed)
        self.host.uses(self.persistence)

    def _time(self) -> None:
        self.core.set_time(now_ms(), wall_ms())

    def pump(self) -> None:
        """Run the core's effects, batch after batch, until it has none. With workers, the
        shared applied zxid is written before each batch runs (the batch's replies may tell of
        txns it applied), and what was applied is sent on to the workers after."""
        workers = self.workers if self.workers is not None and not self.workers.closing else None
        while effects := self.core.ready():
            if workers is not None:
                workers.applied_up_to(self.core.tree.last_processed_zxid)
            for effect in effects:
                self.execute(effect)
        if workers is not None and self.hub is not None:
            self.hub.applied_through(self.core.tree.last_processed_zxid)
            workers.send(self.hub.take())

    def execute(self, effect: fx.Effect) -> None:
        if isinstance(effect, fx.AppendLog):
            self.persistence.log_payloads(effect.zxids, effect.payloads, self.core.tree)
            if self.hub is not None:
                self.hub.proposed(effect.zxids, effect.payloads)
        elif isinstance(effect, fx.WriteEpoch):
            self.host.write_epoch(effect.name, effect.value)
        elif isinstance(effect, fx.WriteSnapshot):
            self.persistence.write_initial_snapshot(effect.tree)
        elif isinstance(effect, fx.Serving):
            if self.host.config.server_workers > 1 and isinstance(effect.server,
                                                                  (LeaderServerCore, LearnerServerCore)):
                self._start_workers(effect.server)
            self.host.serving(effect.server, self.role, effect.epoch)
        elif isinstance(effect, fx.Output):
            self.host.write_client(effect.conn)
        elif isinstance(effect, fx.ActivateConfig):
            self.host.activate(effect.quorum)
        elif isinstance(effect, fx.EndTerm):
            self.end(effect.reason)
        else:
            raise AssertionError(f"{type(self).__name__} cannot run {effect!r}")

    def _start_workers(self, server: LeaderServerCore | LearnerServerCore) -> None:
        """The term serves: start the workers over the tree as it is now."""
        count = self.host.config.server_workers
        server.sessions.partition(0, count)
        self.hub = WorkerHub(server)
        self.hub.proposed(*self._logged_unapplied())
        self.workers = WorkerPool(self.host.config, count, self.hub, self.host.schedule_flush, mode=self.role,
                                  leader_id=self._leader_id())
        self.workers.start(*self.host.client_ports())

    def _logged_unapplied(self) -> tuple[list[int], list[bytes]]:
        """The txns the term logged before it served and has not applied yet (a learner's)."""
        return [], []

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
