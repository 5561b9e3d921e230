"""What the leading and the learning cores share: time, the fsync progress, the end of the term,
and the one place where effects are collected and ordered (`effects` states the contract)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from zkpy.server.core import ServerCore
from zkpy.server.metrics import ServerMetrics
from zkpy.server.outputs import Output, ServerOutput
from zkpy.wire.quorum import QuorumPacket

from .effects import CloseLink, Effect, EndTerm, PacketOut, Send

Log = Callable[[str], None]


class TermCore:
    """Base of the member cores. Subclasses turn their Zab core's actions into effects in
    ``_drain`` (returning False at a barrier) and report fsync progress in ``_logged``."""

    role = "?"

    def __init__(self, now_ms: int, wall_ms: int, *, trace: bool, log: Log) -> None:
        self.now_ms = now_ms
        self.wall_ms = wall_ms
        self.trace = trace
        self.log = log
        self.server: ServerCore | None = None  # the request pipeline, once the term serves
        self.metrics = ServerMetrics()  # ZooKeeper's figures; the shell puts the process's registry here
        self.started_ms = now_ms
        self.ended: str | None = None
        self.designated: int | None = None  # a reconfig ended the term naming the next leader (no election)
        self.logging: deque[int] = deque()  # zxids handed to the log (AppendLog), oldest first
        self._effects: list[Effect] = []
        self._sends: dict[int, list[bytes]] = {}  # per link, in the order of each link's first send
        self._snapshot_links: set[int] = set()

    # ---- inputs shared by both roles

    def set_time(self, now_ms: int, wall_ms: int) -> None:
        """The clock, before any other input that needs it (``tick`` included)."""
        self.now_ms = now_ms
        self.wall_ms = wall_ms
        if self.server is not None:
            self.server.set_time(now_ms, wall_ms)

    def stop(self, reason: str) -> None:
        """The shell ends the term: every later input is ignored. A late fsync report above all:
        the tree may already belong to the next term (``carry_over``), and applying what the
        report completes would apply those txns twice."""
        if self.ended is None:
            self.ended = reason
        self._stop_zab(reason)

    def durable(self, count: int) -> None:
        """The fsync worker made the next ``count`` txns of `AppendLog` durable (a report that
        arrives after the term ended changes nothing)."""
        last = -1
        for _ in range(min(count, len(self.logging))):
            last = self.logging.popleft()
        if last >= 0 and self.ended is None:
            self._logged(last)

    # ---- output

    def ready(self) -> list[Effect]:
        """The next batch of effects (empty: nothing to do until the next input). A batch ends
        at a barrier; call again after running it. What the serving pipeline produced since
        the last call (client input included) is taken here: its proposals, requests for the
        leader and quorum checks go to the Zab core, its client connections to write become
        `Output` effects."""
        while self._drain() and self._take_pipeline():
            pass
        self._flush_sends()
        out, self._effects = self._effects, []
        return out

    # ---- for subclasses

    def _drain(self) -> bool:
        """Turn pending actions into effects; False when stopped at a barrier."""
        raise NotImplementedError

    def _logged(self, zxid: int) -> None:
        raise NotImplementedError

    def _to_zab(self, outputs: list[ServerOutput]) -> None:
        """The pipeline's outputs other than `Output`, in order, for the Zab core."""
        raise NotImplementedError

    def _take_pipeline(self) -> bool:
        """Take the pipeline's outputs; True when the Zab core got some (its actions then wait)."""
        server = self.server
        if server is None or self.ended is not None:
            return False
        to_zab: list[ServerOutput] = []
        for o in server.ready():
            if isinstance(o, Output):
                self._effects.append(o)
            else:
                to_zab.append(o)
        if to_zab:
            self._to_zab(to_zab)
        return bool(to_zab)

    def _stop_zab(self, reason: str) -> None:
        raise NotImplementedError

    def _send(self, link: int, packet: QuorumPacket, data: bytes | None = None, snapshot: bool = False) -> None:
        """Queue ``packet`` (already encoded as ``data``, or encoded here) for ``link``."""
        if self.trace:
            self._effects.append(PacketOut(link, packet))
        self._sends.setdefault(link, []).append(data if data is not None else packet.to_bytes())
        if snapshot:
            self._snapshot_links.add(link)

    def _flush_sends(self) -> None:
        for link, parts in self._sends.items():
            self._effects.append(Send(link, b"".join(parts), link in self._snapshot_links))
        self._sends.clear()
        self._snapshot_links.clear()

    def _barrier(self, effect: Effect) -> None:
        """An effect the core must wait for: what was queued to send goes first."""
        self._flush_sends()
        self._effects.append(effect)

    def _close_link(self, link: int, reason: str) -> None:
        self._sends.pop(link, None)  # what was queued for it is dropped with the connection
        self._snapshot_links.discard(link)
        self._effects.append(CloseLink(link, reason))

    def _end(self, reason: str) -> None:
        if self.ended is None:
            self.ended = reason
            self._effects.append(EndTerm(reason))
