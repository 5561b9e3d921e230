"""The election port over real loopback sockets: every live server decides the same leader, a
majority suffices, bad input costs only the connection that sent it, and one TCP connection per
pair survives (the one the higher sid dialled)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import socket
import struct
from collections.abc import Awaitable, Callable, Sequence

import pytest

from helpers.clientwait import eventually, run
from zkpy.config import QuorumConfig, QuorumServer, ServerConfig
from zkpy.ids import ServerId, make_zxid
from zkpy.quorum.election import Decision, ElectionError
from zkpy.runtime.election_net import UNACKED_LIMIT_MS, ElectionService
from zkpy.testing.servers import free_port
from zkpy.wire.quorum import (
    OBSERVER_ID,
    PACKET_MAX_SIZE,
    PROTOCOL_VERSION_V1,
    InitialMessage,
    ServerState,
    encode_initial_message,
    frame,
)

DEADLINE_S = 20.0


def ensemble_configs(n: int) -> list[ServerConfig]:
    """One ServerConfig per sid 1..n of an n-server ensemble on loopback."""
    servers = tuple(QuorumServer(ServerId(sid), "127.0.0.1", free_port(), free_port()) for sid in range(1, n + 1))
    return [ServerConfig(tick_ms=200, quorum=QuorumConfig(servers, my_id=ServerId(sid), init_limit_ticks=10,
                                                          sync_limit_ticks=5)) for sid in range(1, n + 1)]


async def started(configs: Sequence[ServerConfig], zxids: Sequence[int] | None = None) -> list[ElectionService]:
    services = []
    for i, cfg in enumerate(configs):
        svc = ElectionService(cfg, last_zxid=zxids[i] if zxids else 0, current_epoch=0, cnx_timeout_ms=1000)
        await svc.start()
        services.append(svc)
    return services


async def elect_all(services: Sequence[ElectionService], zxids: Sequence[int] | None = None) -> list[Decision]:
    rounds = [svc.elect(zxids[i] if zxids else 0, 0) for i, svc in enumerate(services)]
    return list(await asyncio.wait_for(asyncio.gather(*rounds), DEADLINE_S))


async def close_all(services: Sequence[ElectionService]) -> None:
    await asyncio.gather(*(svc.close() for svc in services))


def scenario(body: Callable[[], Awaitable[None]]) -> None:
    async def main() -> None:
        await body()

    run(main, deadline_s=60.0)


def assert_agree(services: Sequence[ElectionService], decisions: Sequence[Decision], leader: int) -> None:
    for svc, d in zip(services, decisions, strict=True):
        assert d.leader == leader, (svc.sid, d)
        assert d.state is (ServerState.LEADING if svc.sid == leader else ServerState.FOLLOWING), (svc.sid, d)


@pytest.mark.parametrize("n", [3, 5])
def test_all_servers_elect_the_highest_sid_when_zxids_are_equal(n: int) -> None:
    async def body() -> None:
        services = await started(ensemble_configs(n))
        try:
            assert_agree(services, await elect_all(services), leader=n)
        finally:
            await close_all(services)

    scenario(body)


def test_the_highest_zxid_wins_over_a_higher_sid() -> None:
    zxids = [make_zxid(1, 5), make_zxid(1, 9), make_zxid(1, 7), make_zxid(1, 9), make_zxid(1, 3)]

    async def body() -> None:
        services = await started(ensemble_configs(5), zxids)
        try:
            assert_agree(services, await elect_all(services, zxids), leader=4)
        finally:
            await close_all(services)

    scenario(body)


def test_the_others_elect_again_after_the_leader_goes() -> None:
    async def body() -> None:
        services = await started(ensemble_configs(3))
        try:
            assert_agree(services, await elect_all(services), leader=3)
            await services[2].close()
            rest = services[:2]
            decisions = await elect_all(rest)
            assert_agree(rest, decisions, leader=2)
            assert all(d.vote.election_epoch == 2 for d in decisions)
        finally:
            await close_all(services)

    scenario(body)


def test_a_majority_decides_while_a_server_is_down() -> None:
    async def body() -> None:
        configs = ensemble_configs(5)
        up = await started(configs[:3])  # sids 4 and 5 never start: their ports refuse
        try:
            assert_agree(up, await elect_all(up), leader=3)
        finally:
            await close_all(up)

    scenario(body)


async def closed_by_peer(reader: asyncio.StreamReader) -> bool:
    """Whether the other side closed the connection (EOF or reset) before the deadline."""
    try:
        while await asyncio.wait_for(reader.read(4096), DEADLINE_S):
            pass
    except ConnectionError:
        pass
    return True


def handshake(sid: int, port: int) -> bytes:
    return encode_initial_message(InitialMessage(sid, (f"127.0.0.1:{port}",), PROTOCOL_VERSION_V1))


def test_garbage_and_oversized_frames_close_only_their_connection() -> None:
    async def body() -> None:
        configs = ensemble_configs(3)
        services = await started(configs)
        port = configs[0].quorum.me.election_port  # type: ignore[union-attr]
        try:
            # an unknown protocol version
            r1, w1 = await asyncio.open_connection("127.0.0.1", port)
            w1.write(b"\xff" * 8 + b"garbage!")
            # an address length over MAX_INITIAL_MESSAGE_BYTES
            r2, w2 = await asyncio.open_connection("127.0.0.1", port)
            w2.write(struct.pack(">qqi", PROTOCOL_VERSION_V1, 99, 4096))
            # a good handshake from a stranger with a larger sid (kept), a notification too short
            # to decode (dropped, the connection stays), then a frame over PACKET_MAX_SIZE
            r3, w3 = await asyncio.open_connection("127.0.0.1", port)
            w3.write(handshake(99, 1) + frame(b"short"))
            await eventually(lambda: 99 in services[0].links(), "the stranger's connection kept")
            w3.write(struct.pack(">i", PACKET_MAX_SIZE + 1))
            for reader in (r1, r2, r3):
                assert await closed_by_peer(reader)
            for w in (w1, w2, w3):
                w.close()
            assert_agree(services, await elect_all(services), leader=3)
            await eventually(lambda: 99 not in services[0].links(), "the stranger's link dropped")
        finally:
            await close_all(services)

    scenario(body)


def test_an_observer_without_an_id_gets_a_negative_one() -> None:
    async def body() -> None:
        configs = ensemble_configs(3)
        services = await started(configs)
        port = configs[2].quorum.me.election_port  # type: ignore[union-attr]
        try:
            # OBSERVER_ID becomes -1, smaller than 3: server 3 closes and dials back the address given
            dialled_back = asyncio.Event()

            async def on_dial(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
                head = await r.readexactly(20)
                assert struct.unpack(">qqi", head)[:2] == (PROTOCOL_VERSION_V1, 3)
                dialled_back.set()
                w.close()

            server = await asyncio.start_server(on_dial, "127.0.0.1", 0)
            back_port = server.sockets[0].getsockname()[1]
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(handshake(OBSERVER_ID, back_port))
            assert await closed_by_peer(reader)
            await asyncio.wait_for(dialled_back.wait(), DEADLINE_S)
            writer.close()
            server.close()
        finally:
            await close_all(services)

    scenario(body)


def test_one_connection_per_pair_dialled_by_the_higher_sid() -> None:
    async def body() -> None:
        configs = ensemble_configs(5)
        services = await started(configs)
        try:
            await elect_all(services)
            ports = {svc.sid: cfg.quorum.me.election_port for svc, cfg in zip(services, configs)}  # type: ignore[union-attr]

            def one_per_pair() -> bool:
                for a, b in itertools.combinations(services, 2):
                    la, lb = a.links().get(b.sid), b.links().get(a.sid)
                    if la is None or lb is None or la != (lb[1], lb[0]):
                        return False
                return all(svc.open_sockets == len(services) - 1 for svc in services)

            await eventually(one_per_pair, "exactly one connection per pair", DEADLINE_S)
            for low, high in itertools.combinations(services, 2):  # low.sid < high.sid
                mine, _ = low.links()[high.sid]
                assert mine[1] == ports[low.sid], "the lower sid accepted the kept connection"
        finally:
            await close_all(services)

    scenario(body)


def test_a_server_that_starts_late_learns_the_decision() -> None:
    async def body() -> None:
        configs = ensemble_configs(3)
        first = await started(configs[:2])
        try:
            assert_agree(first, await elect_all(first), leader=2)
            late = await started(configs[2:])
            first.extend(late)
            (d,) = await elect_all(late)
            assert (d.leader, d.state) == (2, ServerState.FOLLOWING)
        finally:
            await close_all(first)

    scenario(body)


def test_a_cancelled_round_can_be_awaited_again_and_close_fails_a_waiting_round() -> None:
    async def body() -> None:
        configs = ensemble_configs(3)
        (alone,) = await started(configs[:1])  # no majority: the round cannot decide
        try:
            first = asyncio.create_task(alone.elect(0, 0))
            await eventually(lambda: alone.election.votes != {}, "my own vote in the round")
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
            again = asyncio.create_task(alone.elect(0, 0))  # waits for the same round
            others = await started(configs[1:])
            decisions = await asyncio.wait_for(asyncio.gather(again, *(s.elect(0, 0) for s in others)), DEADLINE_S)
            assert_agree([alone, *others], decisions, leader=3)
            assert decisions[0].vote.election_epoch == 1
            await close_all(others)
            waiting = asyncio.create_task(alone.elect(0, 0))
            await eventually(lambda: alone.election.logical_clock == 2, "the second round open")
        finally:
            await alone.close()
        with pytest.raises(ElectionError, match="closed"):
            await waiting

    scenario(body)


def test_where_the_quorum_ports_listen() -> None:
    """quorumListenOnAllIPs: every address (not bound here: no test listens on 0.0.0.0);
    zkpy.quorumBindAddress: that address, whatever the own line announces; else the own line's."""
    q = ensemble_configs(3)[2].quorum
    assert q is not None
    assert q.listen_host() == "127.0.0.1"
    assert dataclasses.replace(q, quorum_listen_on_all_ips=True).listen_host() == "0.0.0.0"
    assert dataclasses.replace(q, quorum_listen_on_all_ips=True, bind_host="127.0.0.1").listen_host() == "0.0.0.0"
    assert dataclasses.replace(q, bind_host="127.0.0.2").listen_host() == "127.0.0.2"


def test_an_own_line_announcing_the_wildcard_listens_on_the_bind_address_and_is_dialled_by_config() -> None:
    """Member 3 announces 0.0.0.0 and listens on 127.0.0.1 (zkpy.quorumBindAddress): 1 and 2 reach
    it through their configured address, and its dial-backs to them too."""
    async def body() -> None:
        configs = ensemble_configs(3)
        q = configs[2].quorum
        assert q is not None
        wild = tuple(dataclasses.replace(s, host="0.0.0.0") if s.sid == 3 else s for s in q.servers)
        configs[2] = dataclasses.replace(configs[2], quorum=dataclasses.replace(q, servers=wild, bind_host="127.0.0.1"))
        services = await started(configs)
        try:
            assert_agree(services, await elect_all(services), leader=3)
            assert services[2]._server is not None
            assert services[2]._server.sockets[0].getsockname()[0] == "127.0.0.1"
            assert all(svc.links()[3][1][0] == "127.0.0.1" for svc in services[:2])
        finally:
            await close_all(services)

    scenario(body)


@pytest.mark.parametrize("loop_factory", ["asyncio", "uvloop"])
def test_a_message_queued_for_a_link_whose_transport_closed_drops_the_link(loop_factory: str) -> None:
    """The peer reset the connection and the transport closed before the receiver noticed: the
    sender, woken by a new message, must drop the link (and dial again), not fail its task with
    uvloop's RuntimeError (issue 26: logged at ERROR in every partition run)."""
    from zkpy.runtime import election_net

    async def body() -> None:
        accepted: asyncio.Queue[asyncio.StreamWriter] = asyncio.Queue()

        async def on_accept(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            await accepted.put(w)

        listener = await asyncio.start_server(on_accept, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        svc = ElectionService(ensemble_configs(2)[0], last_zxid=0, current_epoch=0, cnx_timeout_ms=1000)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            (await accepted.get()).close()
            writer.transport.abort()  # closed under the sender, which has not written yet
            await asyncio.sleep(0)
            peer, link = election_net._Peer(2), election_net._Link(2, reader, writer)
            peer.link = link
            peer.queue.append(b"\x00" * 8)
            await asyncio.wait_for(svc._send_loop(peer, link), DEADLINE_S)
            assert link.closed
        finally:
            await svc.close()
            listener.close()

    if loop_factory == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(asyncio.wait_for(body(), 60.0))
    else:
        scenario(body)


@pytest.mark.skipif(not hasattr(socket, "TCP_USER_TIMEOUT"), reason="TCP_USER_TIMEOUT is Linux's")
def test_election_links_reset_when_their_bytes_stay_unacknowledged() -> None:
    """Every kept link, dialled or accepted, is reset by the kernel after UNACKED_LIMIT_MS (or
    cnxTimeout, if longer) of unacknowledged bytes: across a partition a notification would
    otherwise wait for TCP's next retransmission, seconds after the heal."""

    async def body() -> None:
        services = await started(ensemble_configs(3))
        try:
            await elect_all(services)
            links = [p.link for svc in services for p in svc._peers.values() if p.link is not None]
            assert len(links) == 6
            for link in links:
                sock = link.writer.get_extra_info("socket")
                assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == max(UNACKED_LIMIT_MS, 1000)
        finally:
            await close_all(services)

    scenario(body)
