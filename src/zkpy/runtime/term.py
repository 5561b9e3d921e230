"""What the leader and the learner term shells share: running a member core's effects on the
operating system (``member.effects`` states the order they keep), the fsync worker's reports,
the end of the term.

A term shell knows its server only through ``TermHost`` (``runtime.peer.QuorumPeer`` is one),
so the shells and the peer do not import each other.
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
from zkpy.runtime.persistence import Persistence
from zkpy.server.connection import Connection
from zkpy.server.core import ServerCore
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
        if isinstance(effect, fx.AppendLog):
            self.persistence.log_payloads(effect.zxids, effect.payloads, self.core.tree)
        elif isinstance(effect, fx.WriteEpoch):
            self.host.write_epoch(effect.name, effect.value)
        elif isinstance(effect, fx.WriteSnapshot):
            self.persistence.write_initial_snapshot(effect.tree)
        elif isinstance(effect, fx.Serving):
            self.host.serving(effect.server, self.role, effect.epoch)
        elif isinstance(effect, fx.Output):
            self.host.write_client(effect.conn)
        elif isinstance(effect, fx.ActivateConfig):
            self.host.activate(effect.quorum)
        elif isinstance(effect, fx.EndTerm):
            self.end(effect.reason)
        else:
            raise AssertionError(f"{type(self).__name__} cannot run {effect!r}")

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
