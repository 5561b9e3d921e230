"""Invariants of a simulated ensemble, checked as the run goes (every state change they are
about calls in here) and once more when the run has healed.

What is tracked:

- ``proposed``: every txn a leader proposed, by zxid. A zxid is proposed at most once in the
  whole run (one leader per epoch, each zxid once), so every txn any server logs, recovers or
  applies at zxid z must be exactly the txn proposed at z.
- ``committed`` (C): the global committed history, a list of zxids. A leader that establishes
  its epoch commits its whole history (the NEWLEADER quorum accepted it): C must be a prefix
  of that history, which then becomes C. (A leader may learn late that its epoch was
  established, after a newer one was: then its history must be a prefix of C.) Each COMMIT a leader applies extends C or repeats
  the txn C holds at that position; each txn a serving learner applies must be the one C
  holds at that position. So nothing committed is ever lost or reordered, and every serving
  replica's tree is a prefix of C.
- every server's history (the zxids its tree applied, in order, rebuilt at recovery from the
  snapshot it loaded and the logs it replayed): trees at the same ``last_processed_zxid``
  must have the same digest.
- one established leader per epoch; acceptedEpoch and currentEpoch never go back, and
  currentEpoch never passes acceptedEpoch.
- after a closeSession (or expiry) is applied, the session owns no ephemeral in that tree;
  a session that owns an ephemeral is a global session of that tree (its createSession was
  applied before: a local session must be upgraded, or fail, before it creates one).

``final`` (after the faults stop and the ensemble converges): every server is serving the
same history, which is C; every acknowledged write is in C and the persistent node it
created is on every server; once every session has expired, no server holds an ephemeral.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from zkpy.ids import zxid_counter, zxid_epoch
from zkpy.storage.epochs import ACCEPTED_EPOCH, CURRENT_EPOCH
from zkpy.tree.datatree import DataTree

from .scheduler import Scheduler
from .workload import Write


class InvariantViolation(AssertionError):
    """An invariant of the ensemble broke; the message says which, where and when."""


def zx(zxid: int) -> str:
    return f"0x{zxid_epoch(zxid):x}.{zxid_counter(zxid)}"


class Replica(Protocol):
    """What the checker reads of a server (``node.SimNode``)."""

    @property
    def sid(self) -> int: ...

    @property
    def history(self) -> list[int]: ...

    @property
    def tree(self) -> DataTree | None: ...


class Checker:
    def __init__(self, seed: int, sched: Scheduler) -> None:
        self.seed = seed
        self.sched = sched
        self.proposed: dict[int, bytes] = {}
        self.committed: list[int] = []
        self.committed_index: dict[int, int] = {}
        self.digests: dict[int, tuple[int, int]] = {}  # last_processed_zxid -> (digest, sid that had it first)
        self.leaders: dict[int, int] = {}  # epoch -> sid that established it
        self.epochs: dict[tuple[int, str], int] = {}
        self.checks = 0

    def fail(self, message: str) -> None:
        raise InvariantViolation(f"seed {self.seed} at t={self.sched.now}ms: {message}")

    # ------------------------------------------------------------ txns

    def on_propose(self, node: Replica, zxid: int, payload: bytes) -> None:
        self.checks += 1
        prev = self.proposed.get(zxid)
        if prev is not None and prev != payload:
            self.fail(f"server {node.sid} proposed zxid {zx(zxid)} again with a different txn")
        self.proposed[zxid] = payload

    def check_txn(self, node: Replica, zxid: int, payload: bytes, what: str) -> None:
        self.checks += 1
        prev = self.proposed.get(zxid)
        if prev is None:
            self.fail(f"server {node.sid} {what} zxid {zx(zxid)}, which no leader proposed")
        elif prev != payload:
            self.fail(f"server {node.sid} {what} zxid {zx(zxid)} with another txn than the one proposed")

    def on_tree(self, node: Replica, tree: DataTree) -> None:
        self.on_digest(node, tree.last_processed_zxid, tree.digest)

    def on_digest(self, node: Replica, z: int, digest: int) -> None:
        """A tree of ``node`` was at zxid ``z`` with ``digest``: every tree at ``z`` has it."""
        self.checks += 1
        seen = self.digests.get(z)
        if seen is None:
            self.digests[z] = (digest, node.sid)
        elif seen[0] != digest:
            self.fail(f"server {node.sid}'s tree at zxid {zx(z)} has digest 0x{digest:x}, server {seen[1]}'s "
                      f"had 0x{seen[0]:x} at the same zxid (diverged); history tail "
                      f"{[zx(h) for h in node.history[-6:]]}")

    def _extend(self, history: list[int]) -> None:
        for i in range(len(self.committed), len(history)):
            self.committed_index[history[i]] = i
        self.committed = list(history)

    def on_established(self, node: Replica, epoch: int, history: list[int]) -> None:
        self.checks += 1
        other = self.leaders.get(epoch)
        if other is not None and other != node.sid:
            self.fail(f"servers {other} and {node.sid} both established epoch {epoch}")
        newest = max(self.leaders, default=-1)
        self.leaders[epoch] = node.sid
        c = self.committed
        if epoch < newest:
            # A leader that learns late (it was paused with the NEWLEADER acks in its buffers) that a
            # quorum established its epoch, after a newer epoch was established: the newer one holds
            # its history, so that history must be part of the committed one. (It cannot commit
            # anything more: its followers have moved on; it steps down at its next tick.)
            if history != c[:len(history)]:
                self.fail(f"server {node.sid} established epoch {epoch} (after epoch {newest}) with a history "
                          f"that is not a prefix of the committed history")
            return
        if history[:len(c)] != c:
            missing = [zx(z) for z in c if z not in set(history)][:8]
            self.fail(f"server {node.sid} established epoch {epoch} with a history that lacks committed txns "
                      f"(committed {len(c)}, its history {len(history)}; first missing {missing}; "
                      f"its tail {[zx(h) for h in history[-4:]]}, committed tail {[zx(h) for h in c[-4:]]})")
        if len(history) > len(c):
            self._extend(history)

    def on_leader_commit(self, node: Replica, history: list[int]) -> None:
        self.checks += 1
        i = len(history) - 1
        z = history[i]
        c = self.committed
        if i < len(c):
            if c[i] != z:
                self.fail(f"leader {node.sid} committed {zx(z)} at position {i} where the committed history "
                          f"holds {zx(c[i])}")
        elif i == len(c):
            c.append(z)
            self.committed_index[z] = i
        else:
            self.fail(f"leader {node.sid} committed {zx(z)} at position {i}, past the committed history ({len(c)})")

    def on_learner_apply(self, node: Replica, history: list[int], serving: bool) -> None:
        if not serving:
            return  # applied while synchronising: committed once the leader establishes
        self.checks += 1
        i = len(history) - 1
        c = self.committed
        if i >= len(c) or c[i] != history[i]:
            held = zx(c[i]) if i < len(c) else "nothing"
            self.fail(f"serving learner {node.sid} applied {zx(history[i])} at position {i} where the committed "
                      f"history holds {held}")

    def on_serve(self, node: Replica, epoch: int, history: list[int]) -> None:
        self.checks += 1
        c = self.committed
        if history != c[:len(history)]:
            bad = next((i for i, z in enumerate(history) if i >= len(c) or c[i] != z), len(history))
            held = zx(c[bad]) if bad < len(c) else "nothing"
            got = zx(history[bad]) if bad < len(history) else "nothing"
            self.fail(f"learner {node.sid} serves epoch {epoch} with a tree that is not a prefix of the committed "
                      f"history: at position {bad} it has {got}, committed is {held}")

    def on_session_closed(self, node: Replica, tree: DataTree, session: int) -> None:
        self.checks += 1
        if tree.ephemerals.get(session):
            self.fail(f"server {node.sid}: session 0x{session:x} closed but still owns "
                      f"{sorted(tree.ephemerals[session])}")

    # ------------------------------------------------------------ epochs

    def on_ephemerals_created(self, node: Replica, tree: DataTree, session: int) -> None:
        """A create (or multi) of ``session`` was applied: if it owns ephemerals, it is a global session."""
        if tree.ephemerals.get(session) and session not in tree.sessions:
            self.fail(f"server {node.sid}: session 0x{session:x} owns ephemerals {sorted(tree.ephemerals[session])} "
                      "but is no session of that tree (a local session that was not upgraded?)")

    def on_epoch(self, node: Replica, name: str, value: int) -> None:
        self.checks += 1
        key = (node.sid, name)
        prev = self.epochs.get(key)
        if prev is not None and value < prev:
            self.fail(f"server {node.sid} wrote {name} {value}, down from {prev}")
        self.epochs[key] = value
        cur = self.epochs.get((node.sid, CURRENT_EPOCH))
        acc = self.epochs.get((node.sid, ACCEPTED_EPOCH))
        if cur is not None and acc is not None and cur > acc:
            self.fail(f"server {node.sid}: currentEpoch {cur} is past acceptedEpoch {acc}")

    # ------------------------------------------------------------ the end

    def final(self, nodes: Sequence[Replica], leader: Replica | None, acked: Iterable[Write],
              expect_no_sessions: bool) -> None:
        """The healed, converged ensemble: ``nodes``, with ``leader`` established, after the
        workload saw ``acked`` acknowledged."""
        if leader is None:
            self.fail("no established leader at the end")
        for node in nodes:
            if node.history != self.committed:
                bad = next((i for i, (a, b) in enumerate(zip(node.history, self.committed)) if a != b),
                           min(len(node.history), len(self.committed)))
                self.fail(f"server {node.sid} ends with a history of {len(node.history)} txns, the committed one has "
                          f"{len(self.committed)}; they part at position {bad}")
            assert node.tree is not None
            if node.tree.digest != leader.tree.digest:  # type: ignore[union-attr]
                self.fail(f"server {node.sid} ends with digest 0x{node.tree.digest:x}, the leader with "
                          f"0x{leader.tree.digest:x}")  # type: ignore[union-attr]
        for w in acked:
            assert w.zxid is not None
            if w.zxid not in self.committed_index:
                self.fail(f"acknowledged write {w.describe()} at {zx(w.zxid)} is not in the committed history")
            if w.ok and w.persistent_create:
                for node in nodes:
                    assert node.tree is not None
                    if node.tree.get(w.path) is None:
                        self.fail(f"acknowledged create of {w.path} ({zx(w.zxid)}) is missing on server {node.sid}")
        if expect_no_sessions:
            for node in nodes:
                assert node.tree is not None
                if node.tree.ephemerals or node.tree.sessions:
                    self.fail(f"server {node.sid} still holds sessions {sorted(node.tree.sessions)} / ephemerals "
                              f"{sorted(node.tree.ephemerals)} after every session expired")
