"""The serving processes of a simulated server (``serverWorkers``): what ``runtime.worker`` and
``runtime.workers`` do on the OS, over the simulated clock.

A term whose core asks for workers (`StartWorkers`) gets its N `SimWorker`s. Each runs the
production worker core (``member.workers.WorkerFeed``) and is linked to the term core's hub by an
in-memory link that keeps its order both ways, with a delay of a few ms; the member's applied
zxid (`PublishApplied`) is a number the workers read when client input reaches them, as they
read the shared map (``runtime.worker.SharedZxid``). Real clients (``sessions``) connect to any
of a server's serving processes, as the kernel spreads connections over SO_REUSEPORT listeners.
A worker lives as long as its term: when the term ends its links close and it is gone with
its clients, as a real worker exits when its link closes.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Protocol

from zkpy.config import ServerConfig
from zkpy.member.workers import WorkerFeed
from zkpy.server.connection import Connection
from zkpy.server.learner import LearnerServerCore

LINK_DELAY_MS = (0, 2)  # one way, between two processes of a server ...
LAG_P, LAG_MS = 0.1, (5, 40)  # ... unless the reading process lags (descheduled, busy with a burst)


class Host(Protocol):
    """What a worker uses of its server (``node.SimNode``)."""

    @property
    def config(self) -> ServerConfig: ...

    @property
    def now(self) -> int: ...

    @property
    def wall_ms(self) -> int: ...

    def post(self, delay_ms: int, fn: Callable[..., Any], *args: Any) -> None: ...

    def client_output(self, conn: Connection) -> None: ...


class FifoLink:
    """One direction of a link between two processes of a server: what is sent arrives in order."""

    def __init__(self, host: Host, rng: random.Random) -> None:
        self.host = host
        self.rng = rng
        self._last_ms = 0

    def send(self, fn: Callable[[bytes], None], data: bytes) -> None:
        now = self.host.now
        delay = self.rng.randint(*(LAG_MS if self.rng.random() < LAG_P else LINK_DELAY_MS))
        at = max(now + delay, self._last_ms)
        self._last_ms = at
        self.host.post(at - now, fn, data)


class SimWorker:
    """Worker ``index`` of ``count`` serving processes; ``to_member`` hands its bytes to the term
    (over the link), ``applied`` reads the zxid the member published."""

    def __init__(self, host: Host, index: int, count: int, rng: random.Random,
                 to_member: Callable[[int, bytes], None], applied: Callable[[], int]) -> None:
        self.host = host
        self.index = index
        self.core = WorkerFeed(host.config, index, count, host.now, host.wall_ms)
        self.alive = True
        self.flush_due = False
        self._applied = applied
        self._to_member = to_member
        self._up = FifoLink(host, rng)  # worker -> member
        self.down = FifoLink(host, rng)  # member -> worker

    @property
    def pipeline(self) -> LearnerServerCore | None:
        """Its request pipeline, once its replica arrived."""
        return self.core.pipeline if self.alive else None

    def from_member(self, data: bytes) -> None:
        """Bytes from the member (the link delivered them)."""
        if not self.alive:
            return
        self.core.set_time(self.host.now, self.host.wall_ms)
        self.core.receive(data)  # a LinkError is a bug the simulator reports
        self.flush()

    def before_input(self) -> None:
        """Client input reaches this process: its reads wait for what the member applied by now."""
        self.core.set_time(self.host.now, self.host.wall_ms)
        self.core.before_input(self._applied())

    def tick(self) -> None:
        if self.alive:
            self.core.set_time(self.host.now, self.host.wall_ms)
            self.core.tick()
            self.flush()

    def flush(self) -> None:
        """Its clients' output goes out, its requests to the member (once per event, as the real
        worker's call_soon)."""
        self.flush_due = False
        if not self.alive:
            return
        data, conns = self.core.ready()
        for conn in conns:
            self.host.client_output(conn)
        if data:
            self._up.send(lambda d: self._to_member(self.index, d), data)

    def stop(self) -> None:
        """Its link closed: it is gone (its clients' connections close with the term's)."""
        self.alive = False
