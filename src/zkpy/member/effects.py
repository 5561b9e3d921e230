"""What a term core (``member.leading``, ``member.learning``) asks its shell to do: the output of
``ready()``. The member core's own effects, one floor up, are ``member.peer``'s.

**The ordering contract** (written here once, for every shell):

* Run the effects of one ``ready()`` in order; call ``ready()`` again until it returns nothing
  (a batch ends at a barrier, `Truncate` or `WriteSnapshot`, which must be complete before the
  core goes on).
* `WriteEpoch`, `WriteSnapshot` and `Truncate` are synchronous: complete (on disk) before the
  next effect runs. `AppendLog` is asynchronous: the shell's fsync worker reports the txns it
  made durable with ``durable(count)``, in order; only then does a core acknowledge them (an
  ACK, a commit counting its own vote, a reply to a client).
* `Send` effects come after every persisting effect of their batch (sends are batched per
  link at the end of the batch, or before a barrier), so nothing leaves before the state it
  acknowledges is on disk. A `CloseLink` drops what was still queued for that link.
* An `Output` (``server.outputs``: a client connection of the serving pipeline has bytes to
  write, or is closing) may run as soon as it comes: the pipeline writes a reply only after
  the txn it answers was applied, so after it was durable on a quorum.
* With serving processes (``serverWorkers``): `StartWorkers` comes right after `Serving`; a
  batch that applied txns opens with `PublishApplied` (the zxid is shared with the workers
  before any reply of the batch leaves, so a read on a worker waits for it), and ends with
  each worker link's `ToWorker` (the txns applied, after them the answers relayed for it).
* Trace effects (`Traced`) come only from a core made with ``trace=True`` (the simulator's
  checkers read them); a shell that does not trace never sees one.
"""

from __future__ import annotations

from dataclasses import dataclass

from zkpy.config import QuorumConfig
from zkpy.member.workers import WorkerHub
from zkpy.server.core import ServerCore
from zkpy.server.outputs import Output
from zkpy.tree.datatree import DataTree
from zkpy.wire.quorum import QuorumPacket
from zkpy.wire.txn import TxnHeader

LEADER_LINK = 0  # a learner's one link: its connection to the leader


@dataclass(frozen=True, slots=True)
class Send:
    """Write ``data`` to ``link`` (a learner's connection id on the leader; `LEADER_LINK` on a
    learner). With ``snapshot``, ``data`` ends with the tree's snapshot stream (SNAP)."""

    link: int
    data: bytes
    snapshot: bool = False


@dataclass(frozen=True, slots=True)
class CloseLink:
    link: int
    reason: str


@dataclass(frozen=True, slots=True)
class AppendLog:
    """Hand these serialized txns (header + record) to the fsync worker, in order."""

    zxids: tuple[int, ...]
    payloads: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class WriteEpoch:
    """Write ``acceptedEpoch`` or ``currentEpoch`` (``storage.epochs``), synchronously."""

    name: str
    value: int


@dataclass(frozen=True, slots=True)
class WriteSnapshot:
    """Write ``tree`` as ``snapshot.<its zxid>``, synchronously (a barrier: the tree does not
    change until it is written)."""

    tree: DataTree


@dataclass(frozen=True, slots=True)
class Truncate:
    """Cut the log after ``zxid`` and recover the data dir; then call the core's ``truncated``
    with what was recovered (a barrier: nothing more comes before that)."""

    zxid: int


@dataclass(frozen=True, slots=True)
class Serving:
    """The term serves clients from now on, through ``pipeline``."""

    epoch: int
    pipeline: ServerCore


@dataclass(frozen=True, slots=True)
class ActivateConfig:
    """A newer config is active (a committed reconfig, or the leader's config adopted at sync):
    the shell makes it the server's (election, next terms) and writes it as ZooKeeper does
    (``zoo.cfg.dynamic.<version>``, zoo.cfg's ``dynamicConfigFile``). Synchronous."""

    quorum: QuorumConfig


@dataclass(frozen=True, slots=True)
class StartWorkers:
    """The term serves with ``count`` processes (``ServerConfig.process_count``): start the other
    count-1, the workers, and link each to ``hub`` (``attach``, ``receive``, ``detach``, by link
    id 1..count-1). The member is dedicated from now on: it stops taking client connections and
    drops those it had (they reconnect to a worker)."""

    count: int
    hub: WorkerHub


@dataclass(frozen=True, slots=True)
class PublishApplied:
    """Write ``zxid``, the last txn applied, where the workers read it (before the batch's other effects)."""

    zxid: int


@dataclass(frozen=True, slots=True)
class ToWorker:
    """Write ``data`` to worker ``link``."""

    link: int
    data: bytes


@dataclass(frozen=True, slots=True)
class EndTerm:
    reason: str


# ---- traces (``trace=True`` only): what the simulator's checkers follow


@dataclass(frozen=True, slots=True)
class PacketIn:
    link: int
    packet: QuorumPacket


@dataclass(frozen=True, slots=True)
class PacketOut:
    link: int
    packet: QuorumPacket


@dataclass(frozen=True, slots=True)
class Proposed:
    """The leader proposed (and logs) this txn."""

    zxid: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class Logged:
    """A learner handed this txn to its log."""

    zxid: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class Applied:
    """This committed txn was applied to the term's tree (``payload`` as logged); ``digest`` is
    the tree's digest right after it."""

    zxid: int
    payload: bytes
    hdr: TxnHeader
    digest: int


@dataclass(frozen=True, slots=True)
class SnapshotLoaded:
    """A learner installed the leader's snapshot (SNAP) as its tree."""

    zxid: int
    tree: DataTree


Traced = PacketIn | PacketOut | Proposed | Logged | Applied | SnapshotLoaded
Effect = Send | CloseLink | AppendLog | WriteEpoch | WriteSnapshot | Truncate | Serving | ActivateConfig \
    | StartWorkers | PublishApplied | ToWorker | EndTerm | Output | Traced

__all__ = ["LEADER_LINK", "ActivateConfig", "AppendLog", "Applied", "CloseLink", "Effect", "EndTerm", "Logged", "PacketIn",
           "Output", "PacketOut", "Proposed", "PublishApplied", "Send", "Serving", "SnapshotLoaded", "StartWorkers",
           "ToWorker", "Traced", "Truncate", "WriteEpoch", "WriteSnapshot"]
