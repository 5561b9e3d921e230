"""What the leading and the learning cores share: time, the fsync progress, the end of the term,
the serving processes, and the one place where effects are collected and ordered (`effects`
states the contract).

With ``serverWorkers`` = N > 1 a term serves its client port from N worker processes
(``member.workers``) and the member serves no client: once its pipeline serves, `StartWorkers`
asks the shell for the N workers, linked to the term's `WorkerHub`, and session ids are
partitioned over the N+1 processes (the member's share, ``id % (N+1) == 0``, stays unused). Every txn the term logs is handed to
the hub, which sends it on to the workers once the term applied it; each batch of effects that
applied txns opens with `PublishApplied` and ends with the links' `ToWorker` bytes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import assert_never

from zkpy.config import ServerConfig
from zkpy.server import outputs as out
from zkpy.server.core import ServerCore
from zkpy.server.leader import LeaderServerCore
from zkpy.server.learner import LearnerServerCore
from zkpy.server.metrics import ServerMetrics
from zkpy.storage.txnlog import encode_payload
from zkpy.tree.datatree import DataTree
from zkpy.wire.quorum import QuorumPacket

from .effects import (
    Applied,
    CloseLink,
    Effect,
    EndTerm,
    PacketOut,
    PublishApplied,
    Send,
    StartWorkers,
    ToWorker,
)
from .workers import WorkerHub

Log = Callable[[str], None]
ZabOutput = out.Propose | out.CheckQuorum | out.Forward | out.Revalidate | out.Touches  # the pipeline's outputs for the Zab core


class TermCore:
    """Base of the term cores. Subclasses turn their Zab core's actions into effects in
    ``_drain`` (returning False at a barrier) and report fsync progress in ``_logged``."""

    role = "?"
    tree: DataTree  # the subclass's
    config: ServerConfig

    def __init__(self, now_ms: int, wall_ms: int, *, trace: bool, log: Log) -> None:
        self.now_ms = now_ms
        self.wall_ms = wall_ms
        self.trace = trace
        self.log = log
        self.pipeline: ServerCore | None = None  # the request pipeline, once the term serves
        self.metrics = ServerMetrics()  # ZooKeeper's figures; the shell puts the process's registry here
        self.started_ms = now_ms
        self.ended: str | None = None
        self.designated: int | None = None  # a reconfig ended the term naming the next leader (no election)
        self.logging: deque[int] = deque()  # zxids handed to the log (AppendLog), oldest first
        self.hub: WorkerHub | None = None  # the serving processes' links, once the term serves with them
        self._published = -1  # the applied zxid last published to the workers
        self._effects: list[Effect] = []
        self._sends: dict[int, list[bytes]] = {}  # per link, in the order of each link's first send
        self._snapshot_links: set[int] = set()

    # ---- inputs shared by both roles

    def set_time(self, now_ms: int, wall_ms: int) -> None:
        """The clock, before any other input that needs it (``tick`` included)."""
        self.now_ms = now_ms
        self.wall_ms = wall_ms
        if self.pipeline is not None:
            self.pipeline.set_time(now_ms, wall_ms)

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
        `out.Output` effects."""
        while self._drain() and self._take_pipeline():
            pass
        self._flush_sends()
        out, self._effects = self._effects, []
        if self.hub is not None and self.ended is None:
            self._feed_workers(out)
        return out

    # ---- for subclasses

    def _drain(self) -> bool:
        """Turn pending actions into effects; False when stopped at a barrier."""
        raise NotImplementedError

    def _logged(self, zxid: int) -> None:
        raise NotImplementedError

    def _to_zab(self, outputs: list[ZabOutput]) -> None:
        """The pipeline's outputs for the Zab core, in order."""
        raise NotImplementedError

    def _take_pipeline(self) -> bool:
        """Take the pipeline's outputs; True when the Zab core got some (its actions then wait)."""
        pipeline = self.pipeline
        if pipeline is None:
            return False
        if self.ended is not None:  # what it produced goes nowhere, but what it applied is traced
            if self.trace:
                self._effects.extend(self._traced(o) for o in pipeline.ready() if isinstance(o, out.TxnApplied))
            return False
        to_zab: list[ZabOutput] = []
        for o in pipeline.ready():
            match o:
                case out.Output():
                    if self._sends:  # the COMMITs of what it answers leave first (Apache's order)
                        self._flush_sends()
                    self._effects.append(o)
                case out.Propose() | out.CheckQuorum() | out.Forward() | out.Revalidate() | out.Touches():
                    to_zab.append(o)
                case out.Relayed():
                    if self.hub is not None:
                        self.hub.relayed(o.link, o.session, o.valid)
                case out.TxnApplied():
                    self._effects.append(self._traced(o))
                case _:
                    assert_never(o)
        if to_zab:
            self._to_zab(to_zab)
        return bool(to_zab)

    def _stop_zab(self, reason: str) -> None:
        raise NotImplementedError

    @staticmethod
    def _traced(o: out.TxnApplied) -> Applied:
        return Applied(o.hdr.zxid, encode_payload(o.hdr, o.txn), o.hdr, o.digest)

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

    # ---- the serving processes

    def _start_workers(self, pipeline: LeaderServerCore | LearnerServerCore,
                       logged: Sequence[tuple[int, bytes]] = ()) -> None:
        """The pipeline serves: with a dedicated member its workers start over the tree as it
        is now; ``logged``: txns logged before it served and not applied yet (a learner's)."""
        if not self.config.dedicated_member:
            return
        count = self.config.process_count
        pipeline.sessions.partition(0, count)
        self.hub = WorkerHub(pipeline)
        self.hub.proposed([zxid for zxid, _ in logged], [data for _, data in logged])
        self._published = self.tree.last_processed_zxid
        self._effects.append(StartWorkers(count, self.hub))

    def _log_to_workers(self, zxids: Sequence[int], payloads: Sequence[bytes]) -> None:
        if self.hub is not None:
            self.hub.proposed(zxids, payloads)

    def _feed_workers(self, batch: list[Effect]) -> None:
        """The batch's applied zxid goes to the workers before its other effects, what they
        are sent after them."""
        hub = self.hub
        assert hub is not None
        zxid = self.tree.last_processed_zxid
        if zxid > self._published:
            self._published = zxid
            batch.insert(0, PublishApplied(zxid))
            hub.applied_through(zxid)
        batch.extend(ToWorker(link, data) for link, data in hub.take())
