"""Helpers for scripted simulation scenarios: boot an ensemble, open a session, write, wait."""

from __future__ import annotations

from collections.abc import Callable

from zkpy.quorum.leader import Phase as LeaderPhase
from zkpy.testing.sim import Cluster, SimConfig
from zkpy.testing.sim.node import SimNode
from zkpy.testing.sim.terms import SimLeaderTerm
from zkpy.tree.acl import OPEN_ACL_UNSAFE
from zkpy.wire.consts import CreateMode, OpCode
from zkpy.wire.proto import CreateRequest

SCRIPT = SimConfig(session_timeout_ms=60_000, fsync_ms=(2, 4))


class Script:
    """A scripted run: every step is explicit; the checker still watches every state change."""

    def __init__(self, seed: int = 1, config: SimConfig = SCRIPT, start: tuple[int, ...] | None = None) -> None:
        self.c = Cluster(seed, config)
        self.started = False
        for sid in start if start is not None else tuple(self.c.nodes):
            self.c.start(sid)

    def wait(self, pred: Callable[[], bool], what: str, timeout_ms: int = 20_000) -> None:
        if not self.c.run_until(pred, timeout_ms):
            raise AssertionError(f"timed out waiting for {what}\n{self.c.describe()}")

    def run(self, ms: int) -> None:
        self.c.run_for(ms)

    def node(self, sid: int) -> SimNode:
        return self.c.nodes[sid]

    def leader(self) -> SimNode:
        self.wait(lambda: self.c.leader() is not None, "an established leader")
        leader = self.c.leader()
        assert leader is not None
        return leader

    def converge(self, timeout_ms: int = 30_000, only: tuple[int, ...] | None = None) -> SimNode:
        """Wait until every server (of ``only``) serves the established leader's whole history."""
        self.wait(lambda: self.c.converged(only=only), "the ensemble to converge", timeout_ms)
        return self.leader()

    def leading(self, sid: int) -> bool:
        """Server ``sid`` is an established leader (as it believes)."""
        t = self.node(sid).term
        return isinstance(t, SimLeaderTerm) and t.zab.phase is LeaderPhase.BROADCAST and t.ended is None

    def open_session(self, sid: int, client: int = 0) -> None:
        assert self.c.open_session(sid, client), f"server {sid} is not serving"
        w = self.c.workload.clients[client]
        self.wait(lambda: w.state == "open", f"client {client}'s session on server {sid}")

    def create(self, sid: int, path: str, client: int = 0) -> None:
        """Send a create of ``path`` (persistent) to server ``sid``; does not wait."""
        req = CreateRequest(path, path.encode(), list(OPEN_ACL_UNSAFE), int(CreateMode.PERSISTENT))  # type: ignore[call-arg]
        assert self.c.submit(sid, OpCode.CREATE, path, req, client), f"server {sid} is not serving"

    def acked(self, path: str) -> bool:
        return any(w.path == path and w.zxid is not None for w in self.c.workload.writes)

    def has(self, sid: int, path: str) -> bool:
        tree = self.node(sid).tree
        return tree is not None and tree.get(path) is not None

    def everywhere(self, path: str) -> bool:
        return all(self.has(sid, path) for sid in self.c.nodes)

    def nowhere(self, path: str) -> bool:
        return not any(self.has(sid, path) for sid in self.c.nodes if self.node(sid).tree is not None)

    def final(self) -> None:
        self.converge()
        self.c.check_final(expect_no_sessions=False)
