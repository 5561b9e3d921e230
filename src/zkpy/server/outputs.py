"""What the request pipeline (``ServerCore``) asks of whoever drives it: the output of ``ready()``.

One list, in the order the pipeline produced it; every driver dispatches it with one ``match``
that ends in ``assert_never``, so a new output type fails mypy until every driver handles it.

* `Propose` (standalone, leader): log the txn; once the fsync worker reports it durable, call
  ``apply_persisted(count)``; a leader also proposes it to its voters.
* `CheckQuorum` (leader with zkpy.quorumSync): confirm the leadership, answered by
  ``quorum_confirmed(token)``.
* `Forward`, `Revalidate` (learner): send to the leader; its answers come back through
  ``apply_committed``, ``sync_done`` and ``revalidated``.
* `Touches` (learner, after ``report_touches(ping)``): the sessions its clients kept alive,
  for the leader (in the reply to its PING).
* `Relayed` (a learner member with serving processes): the leader's answer to a worker's
  request, for that worker's link.
* `TxnApplied` (a pipeline made with ``trace=True``): a txn was applied, for the simulator's checkers.
* `Output`: write ``conn``'s bytes (and close it when it is closing); a connection appears
  once per ``ready()``, after what produced its bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zkpy.server.connection import Connection
from zkpy.wire.proto import Id
from zkpy.wire.txn import TxnHeader


@dataclass(slots=True, eq=False)
class Propose:
    """A prepped txn (standalone or leader), in zxid order: log it; it is applied, and its
    client answered, only by ``apply_persisted``. ``body``: ``txn.to_bytes()`` where the core
    had those bytes at hand (a setData's or delete's txn, cut from its request), else None.

    Not frozen, and the core hands over its own record of the txn (a subclass that also names
    whom to answer) rather than a copy: one object per txn, not two. Drivers only read it."""

    hdr: TxnHeader
    txn: Any
    body: bytes | None


@dataclass(frozen=True, slots=True)
class Forward:
    """Learner: a client's write, new session or sync for the leader (Zab's REQUEST)."""

    session: int
    cxid: int
    op: int
    body: bytes
    auth: tuple[Id, ...]


@dataclass(frozen=True, slots=True)
class Revalidate:
    """Learner: a session moved here; ask the leader whether it lives (``revalidated`` answers)."""

    session: int
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class CheckQuorum:
    """Leader with zkpy.quorumSync: a sync waits until a quorum confirms the leadership
    (``quorum_confirmed(token)`` answers)."""

    token: int


@dataclass(frozen=True, slots=True)
class Touches:
    """Learner: the sessions seen alive since the last report, with their timeouts: the answer to
    ``report_touches(ping)`` (ZooKeeper's touch table), for the reply to the leader's PING
    ``ping`` (its zxid; -1 for a worker's own report)."""

    ping: int
    sessions: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class Relayed:
    """Learner member with serving processes: the leader's answer to a request worker ``link``
    relayed (``relay_request``, ``relay_revalidate``): a sync's SYNC (``session`` None) or
    whether a moved session lives."""

    link: int
    session: int | None
    valid: bool


@dataclass(frozen=True, slots=True)
class TxnApplied:
    """Only from a pipeline made with ``trace=True``: this txn was applied; ``digest`` is the
    tree's digest right after it."""

    hdr: TxnHeader
    txn: Any
    digest: int


@dataclass(frozen=True, slots=True)
class Output:
    """``conn`` has bytes in ``conn.out`` to write, or is closing: write them, then close it."""

    conn: Connection


ServerOutput = Propose | Forward | Revalidate | CheckQuorum | Touches | Relayed | TxnApplied | Output
