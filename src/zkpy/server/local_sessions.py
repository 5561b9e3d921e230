"""Local sessions (``localSessionsEnabled``): sessions known only to the member that created them.

ZooKeeper 3.8's UpgradeableSessionTracker, LocalSessionTracker and the local-session parts of
LeaderSessionTracker / LearnerSessionTracker, as one pure object that a member's request
pipeline (``server.core``) owns; a read-only server can own one too (every session it creates is
local). Time is always passed in.

Invariants owned here:
- a local session is created without a txn, touched, expired and closed by its member alone
  (its own expiry buckets, ``server.sessions.SessionTracker``); no other member knows it, so
  moving it elsewhere finds it expired. Its id comes from the member's session id generator,
  the one global sessions use (``myid`` in the top byte), so it never collides with another
  member's session and keeps its id when upgraded;
- a session is in at most one of: local, upgrading (its createSession was sent to the quorum,
  not yet applied here), global (tracked by the pipeline's tracker). ``upgrade`` moves it from
  local to upgrading, ``committed`` ends the upgrade when the createSession txn is applied;
- which requests need a global session (``needs_global``): a create or create2 with an
  ephemeral mode, or a multi holding one (QuorumZooKeeperServer.checkUpgradeSession).
- who may write (``checks``): a global session, a local one of this member, or a session of
  another member (its local session); only a global session may create an ephemeral;
- what a local session's write means (``on_write``): its closeSession is its member's alone (no
  txn); an ephemeral create upgrades it first, or without localSessionsUpgradingEnabled fails.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Any

from zkpy.errors import SessionExpiredError, ZookeeperError
from zkpy.ids import to_signed64
from zkpy.server.requests import DECODE_ERRORS, decode_write
from zkpy.server.sessions import SessionTracker
from zkpy.wire.consts import CreateMode, OpCode

_EPHEMERAL_FLAGS = frozenset(int(m) for m in CreateMode if m.is_ephemeral)
_CREATES = (OpCode.CREATE, OpCode.CREATE2)


def needs_global(op: int, request: Any) -> bool:
    """Does this write (decoded: a CreateRequest, or a multi's ops) create an ephemeral node, which
    only a global session may own? createTTL and createContainer never do; bad flags do not (the
    leader's prep refuses them with BadArguments)."""
    if op in _CREATES:
        return getattr(request, "flags", None) in _EPHEMERAL_FLAGS
    if op == OpCode.MULTI and isinstance(request, Iterable):
        return any(o.type in _CREATES and o.request.flags in _EPHEMERAL_FLAGS for o in request)
    return False


class LocalWrite(Enum):
    """What a write of a session means for local sessions (``LocalSessions.on_write``)."""

    GLOBAL = "global"  # nothing special: the write goes on (a global session, or a write a local one may send)
    CLOSE = "close"  # a local session's closeSession: its member answers it in the session's turn, no txn
    UPGRADED = "upgraded"  # an ephemeral create upgraded the session: its createSession goes first, then the write
    REFUSED = "refused"  # an ephemeral create with no upgrades allowed: the write fails, EphemeralOnLocalSession


class LocalSessions:
    """The local and upgrading sessions of one member's pipeline."""

    def __init__(self, tick_ms: int, now_ms: int, upgrading_enabled: bool) -> None:
        self.tracker = SessionTracker(tick_ms, 1, now_ms)  # its expiry buckets; ids come from the pipeline
        self.upgrading_enabled = upgrading_enabled  # localSessionsUpgradingEnabled
        self.upgrading: dict[int, int] = {}  # session -> timeout: upgraded, its createSession not applied yet

    def add(self, session_id: int, timeout_ms: int, now_ms: int) -> None:
        self.tracker.add(session_id, timeout_ms, now_ms)

    def is_local(self, session_id: int) -> bool:
        """Tracked here as local (closing or not)."""
        return session_id in self.tracker.sessions

    def is_live(self, session_id: int) -> bool:
        return self.tracker.is_live(session_id)

    def touch(self, session_id: int, now_ms: int, timeout_ms: int | None = None) -> bool:
        """Touch a live local session; False for any other."""
        return self.tracker.touch(session_id, now_ms, timeout_ms)

    def expired(self, now_ms: int) -> list[int]:
        """Local sessions whose bucket passed: they are gone (no txn says so: their member forgets them)."""
        out = self.tracker.expired(now_ms)
        for sid in out:
            self.tracker.remove(sid)
        return out

    def remove(self, session_id: int) -> None:
        """A local session closed by its client."""
        self.tracker.remove(session_id)

    def upgrade(self, session_id: int) -> int | None:
        """Make a live local session global: it leaves the local tracker and is upgrading; its
        timeout, for the createSession to propose. None if it is not a live local session."""
        s = self.tracker.sessions.get(session_id)
        if s is None or s.closing:
            return None
        self.tracker.remove(session_id)
        self.upgrading[session_id] = s.timeout_ms
        return s.timeout_ms

    def committed(self, session_id: int) -> None:
        """A createSession txn for this id was applied: it is global now, wherever it was created
        (a session that moved during its upgrade could be local here again: it stops being so)."""
        self.upgrading.pop(session_id, None)
        self.tracker.remove(session_id)

    def closed(self, session_id: int) -> None:
        """A closeSession txn for this id was applied."""
        self.upgrading.pop(session_id, None)
        self.tracker.remove(session_id)

    def on_write(self, session_id: int, op: int, body: bytes) -> tuple[LocalWrite, int]:
        """What a write ``op`` (its ``body`` undecoded) of ``session_id`` means here
        (QuorumZooKeeperServer.checkUpgradeSession), with the upgraded session's timeout. An
        ephemeral create (or a multi holding one) of a live local session upgrades it here, when
        localSessionsUpgradingEnabled. A body that does not decode goes on (its write fails)."""
        if not self.is_local(session_id):
            return LocalWrite.GLOBAL, 0
        if op == OpCode.CLOSE_SESSION:
            return LocalWrite.CLOSE, 0
        if op not in (OpCode.CREATE, OpCode.CREATE2, OpCode.MULTI):
            return LocalWrite.GLOBAL, 0
        try:
            request = decode_write(op, body)
        except DECODE_ERRORS:
            return LocalWrite.GLOBAL, 0
        if not needs_global(op, request):
            return LocalWrite.GLOBAL, 0
        if not self.upgrading_enabled:
            return LocalWrite.REFUSED, 0
        timeout = self.upgrade(session_id)
        return (LocalWrite.GLOBAL, 0) if timeout is None else (LocalWrite.UPGRADED, timeout)

    def checks(self, session_id: int, global_live: bool, upgrade_error: ZookeeperError | None,
               my_id: int) -> tuple[bool, ZookeeperError | None]:
        """Whether a session may write, and what an ephemeral create of it fails with (None: it
        may create one), for the pipeline that preps txns (LeaderSessionTracker.checkSession and
        checkGlobalSession): a global or local session here may write, and so may a session of
        another member (its local session, which only that member knows), but only a global
        session may own an ephemeral; ``upgrade_error`` is the failed upgrade's error."""
        ephemeral_error = upgrade_error or (None if global_live else SessionExpiredError())
        live = global_live or self.is_live(session_id) or (to_signed64(session_id) >> 56) != my_id
        return live, ephemeral_error

    def __len__(self) -> int:
        """zk_local_sessions: the local sessions (not the upgrading ones)."""
        return len(self.tracker.sessions)
