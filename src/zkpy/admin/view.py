"""What the four-letter words read of a server: one typed view that a standalone server and an
ensemble member both give (``runtime.server.ZkServer``, ``runtime.peer.QuorumPeer``)."""

from __future__ import annotations

from typing import Protocol

from zkpy.config import ServerConfig
from zkpy.server.core import ServerCore


class Summary(Protocol):
    """A BASIC summary's figures (``storage.groupcommit.AvgMinMax``)."""

    count: int
    total: int
    min: int
    max: int


class ServerView(Protocol):
    trace_mask: int  # gtmk / stmk

    @property
    def config(self) -> ServerConfig:
        """The server's config (a member's active one)."""

    @property
    def pipeline(self) -> ServerCore | None:
        """The request pipeline serving clients; None while an ensemble member is not serving."""

    @property
    def mode(self) -> str:
        """standalone, leader, follower, observer or looking (QuorumPeer.getServerState)."""

    @property
    def port(self) -> int:
        """The client port listened on (``clientPort`` before it listens)."""

    @property
    def listen_backlog(self) -> int: ...

    @property
    def leader_id(self) -> int:
        """The leader's server id while in an ensemble term; -1 otherwise."""

    @property
    def connection_count(self) -> int:
        """Client connections open now."""

    def quorum_metrics(self) -> list[tuple[str, object]]:
        """mntr's quorum lines (an ensemble's leader); [] elsewhere."""

    def fsync_summaries(self) -> tuple[Summary, Summary] | None:
        """The fsync worker's group commits (fsynctime, batch size), when it runs."""
