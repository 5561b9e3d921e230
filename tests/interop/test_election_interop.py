"""zkpy's election port in one fast leader election with Apache ZooKeeper 3.8 servers.

A zkpy ElectionService (in this process) and Apache servers (Debian's package) share one static
configuration. With fresh data dirs every zxid is equal, so the highest sid must win on both
sides; Apache must also accept the config string zkpy puts in its notifications, and send the
same bytes itself.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator, Sequence

import pytest
from tests.conftest import require_apache

from helpers.clientwait import eventually
from zkpy.config import QuorumConfig, QuorumServer, ServerConfig
from zkpy.ids import ServerId
from zkpy.quorum.election import Decision
from zkpy.runtime.election_net import ElectionService
from zkpy.testing.servers import (
    SLF4J_SIMPLE_JAR,
    ServerProcess,
    cleanup_ensemble,
    four_letter,
    free_port,
    server_mode,
    start_apache_members,
    wait_ensemble_serving,
)
from zkpy.wire.quorum import Notification, ServerState

pytestmark = pytest.mark.interop

DEADLINE_S = 60.0
TICK_MS = 500


class RecordingService(ElectionService):
    """An ElectionService that also keeps every notification it receives, by sender."""

    def __init__(self, config: ServerConfig) -> None:
        super().__init__(config, last_zxid=0, current_epoch=0, cnx_timeout_ms=1000)
        self.received: dict[int, list[Notification]] = {}

    def _receive(self, sid: int, n: Notification) -> None:
        self.received.setdefault(sid, []).append(n)
        super()._receive(sid, n)


def ensemble(n: int) -> tuple[dict[str, str], tuple[QuorumServer, ...]]:
    servers = tuple(QuorumServer(ServerId(sid), "127.0.0.1", free_port(), free_port()) for sid in range(1, n + 1))
    members = {f"server.{s.sid}": f"{s.host}:{s.peer_port}:{s.election_port}" for s in servers}
    return members, servers


def zkpy_config(servers: tuple[QuorumServer, ...], my_id: int) -> ServerConfig:
    return ServerConfig(tick_ms=TICK_MS, quorum=QuorumConfig(servers, my_id=ServerId(my_id), init_limit_ticks=10,
                                                             sync_limit_ticks=5))


@pytest.fixture
def apache_members() -> Iterator[list[ServerProcess]]:
    """The Apache servers a test started; stopped and removed at the end."""
    require_apache()
    started: list[ServerProcess] = []
    yield started
    cleanup_ensemble(started)


def assert_config_accepted(apache: Sequence[ServerProcess], zkpy_sid: int) -> None:
    for s in apache:
        assert f"Something went wrong while processing config received from {zkpy_sid}" not in s.log()


async def wait_looking(server: ServerProcess) -> None:
    """Until ``server`` runs its election: its log says LOOKING (slf4j-simple), or else its client
    port answers while it is not serving yet."""
    if os.path.exists(SLF4J_SIMPLE_JAR):
        await eventually(lambda: "LOOKING" in server.log(), "Apache server 3 looking", DEADLINE_S, poll_s=0.05)
        return
    await eventually(lambda: _answers(server), "Apache server 3 answering", DEADLINE_S, poll_s=0.05)


def _answers(server: ServerProcess) -> bool:
    try:
        return "not currently serving" in four_letter(server.port, "srvr")
    except OSError:
        return False


def test_zkpy_follows_the_highest_sid_with_two_apache_servers(apache_members: list[ServerProcess]) -> None:
    members, servers = ensemble(3)

    async def main() -> None:
        # 3 first, already looking when the round starts: started together, 2 could reach zkpy
        # before 3 did, and 1 and 2 would then settle on 2 within the finalize wait.
        apache_members.extend(start_apache_members(members, [3], tick_ms=TICK_MS, wait=False))
        await wait_looking(apache_members[0])
        svc = RecordingService(zkpy_config(servers, 1))
        await svc.start()
        try:
            round_ = asyncio.create_task(svc.elect(0, 0))
            apache_members.extend(start_apache_members(members, [2], tick_ms=TICK_MS, wait=False))
            decision = await decide_task(round_, apache_members)
            assert (decision.leader, decision.state) == (3, ServerState.FOLLOWING)
            await asyncio.to_thread(wait_ensemble_serving, apache_members, DEADLINE_S)
            modes = {s.extra["myid"]: server_mode(s) for s in apache_members}
            assert modes == {"2": "follower", "3": "leader"}
            # Apache sends the very config string zkpy sends, and parses zkpy's without complaint
            for sid in (2, 3):
                configs = {n.config for n in svc.received.get(sid, []) if n.version >= 2}
                assert configs == {svc.config_data}, (sid, configs)
            assert_config_accepted(apache_members, 1)
        finally:
            await svc.close()

    asyncio.run(main())


def test_apache_servers_elect_zkpy_as_leader(apache_members: list[ServerProcess]) -> None:
    members, servers = ensemble(3)

    async def main() -> None:
        svc = RecordingService(zkpy_config(servers, 3))
        await svc.start()
        try:
            round_ = asyncio.create_task(svc.elect(0, 0))
            apache_members.extend(start_apache_members(members, [1, 2], tick_ms=TICK_MS, wait=False))
            decision = await decide_task(round_, apache_members)
            assert (decision.leader, decision.state) == (3, ServerState.LEADING)
            # a quorum voted for 3 in zkpy's round; the other Apache server comes round to 3 as well
            assert sum(v.leader == 3 for v in svc.election.votes.values()) >= 2, svc.election.votes
            await eventually(lambda: all(any(n.leader == 3 for n in svc.received.get(sid, [])) for sid in (1, 2)),
                             "both Apache servers voting for 3", DEADLINE_S)
            # Nothing listens on zkpy's peer port: Apache follows 3, cannot connect, never serves.
            if os.path.exists(SLF4J_SIMPLE_JAR):  # Apache logs: wait until both tried to follow
                await eventually(lambda: all("FOLLOWING" in s.log() for s in apache_members),
                                 "both Apache servers following 3", DEADLINE_S, poll_s=0.1)
            for s in apache_members:
                answer = await asyncio.to_thread(four_letter, s.port, "srvr")
                assert "not currently serving" in answer, answer
                assert s.proc.poll() is None
            assert_config_accepted(apache_members, 3)
        finally:
            await svc.close()

    asyncio.run(main())


async def decide_task(round_: asyncio.Task[Decision], apache: Sequence[ServerProcess]) -> Decision:
    try:
        return await asyncio.wait_for(round_, DEADLINE_S)
    except TimeoutError:
        logs = "\n".join(f"--- apache {s.extra['myid']}:\n{s.log()[-3000:]}" for s in apache)
        raise AssertionError(f"zkpy decided nothing within {DEADLINE_S}s\n{logs}") from None
