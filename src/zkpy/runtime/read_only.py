"""The shell of read-only service: a member that lost its quorum serves read-only clients on
its client port (``server.read_only`` decides what they get, ``member.read_only`` when).

It runs the read-only pipeline over the member's last tree: the loop's clock in, a tick for
local sessions' expiry, each connection's output written at the end of the turn. The tree is
only read here, so the next term takes it as it was.
"""

from __future__ import annotations

import asyncio
import logging

from zkpy.config import ServerConfig
from zkpy.runtime.clientport import ClientPort, now_ms, wall_ms
from zkpy.server.outputs import Output
from zkpy.server.read_only import ReadOnlyServerCore
from zkpy.tree.datatree import DataTree

log = logging.getLogger("zkpy.quorum")


class ReadOnlyService:
    def __init__(self, config: ServerConfig, clients: ClientPort, tree: DataTree) -> None:
        self.clients = clients
        self.core = ReadOnlyServerCore(config, now_ms(), wall_ms(), log=log.info, tree=tree)
        self._interval_s = max(10, min(100, config.tick_ms // 4)) / 1000
        self._ticker: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._ticker = asyncio.get_running_loop().call_later(self._interval_s, self._tick)

    def _tick(self) -> None:
        self.core.set_time(now_ms(), wall_ms())
        self.core.tick()
        self.flush()
        self._ticker = asyncio.get_running_loop().call_later(self._interval_s, self._tick)

    def flush(self) -> None:
        """Write out every connection's replies (the pipeline proposes nothing)."""
        for o in self.core.ready():
            if isinstance(o, Output):
                self.clients.write(o.conn)

    def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
