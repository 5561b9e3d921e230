"""What the request pipeline (``ServerCore``) asks of whoever drives it: the output of ``ready()``.

One list, in the order the pipeline produced it. A standalone server logs each `Propose` and,
once its fsync worker reports them durable, calls ``apply_persisted(count)``; a leader also
proposes them to its voters and answers each `CheckQuorum`; a learner sends each `Forward` and
`Revalidate` to its leader. Every driver writes each `Output` connection's bytes (and closes it
when it is closing): a connection appears once per ``ready()``, after what produced its bytes.
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
class Output:
    """``conn`` has bytes in ``conn.out`` to write, or is closing: write them, then close it."""

    conn: Connection


ServerOutput = Propose | Forward | Revalidate | CheckQuorum | Output
