"""One term as follower or observer, on sockets: the connection to the leader, the timers, the
fsync worker, and the disk work of a TRUNC; everything else is ``member.learning.LearningCore``'s.
With ``serverWorkers`` > 1 the learner's workers (``runtime.term``) are relayed to the leader
through this learner's own link (``LearnerServerCore.relay_*``, ``member.workers``).
"""

from __future__ import annotations

import asyncio

from zkpy.member import effects as fx
from zkpy.member.datadir import truncate_data_dir
from zkpy.member.learning import LearningCore
from zkpy.runtime.persistence import Persistence
from zkpy.runtime.quorum_auth import QuorumAuthError, authenticate_to
from zkpy.runtime.term import Term, TermEnded, TermHost, log

READ_CHUNK = 1 << 20


class LearnerTerm(Term):
    def __init__(self, host: TermHost, core: LearningCore) -> None:
        super().__init__(host)
        self.role = core.role
        self.leader_sid = core.leader_sid
        self.core: LearningCore = core
        self.writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._ticker: asyncio.TimerHandle | None = None

    async def run(self) -> str:
        host = self.host
        loop = asyncio.get_running_loop()
        self.ended = loop.create_future()
        leader = host.quorum.server(self.leader_sid)
        if leader is None:
            return f"leader {self.leader_sid} is not in the configuration"
        reader = await self._connect(leader.host, leader.peer_port)
        if reader is None:
            return f"could not connect to leader {self.leader_sid} at {leader.host}:{leader.peer_port}"
        self._start_persistence()
        self._time()
        self.core.connected()
        self.pump()
        self._reader_task = asyncio.ensure_future(self._read(reader))
        self._tick()
        return await self.ended

    async def _connect(self, host: str, port: int) -> asyncio.StreamReader | None:
        """Connect to the leader, trying again as long as the core says (``connect_failed``)."""
        config = self.host.config
        tries = 0
        while True:
            tries += 1
            self._time()
            timeout = self.core.connect_timeout_ms() / 1000
            try:
                tls = self.host.quorum_tls
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(host, port, ssl=tls.client if tls else None,
                                            server_hostname=host if tls else None), timeout)
                log.info("server %d: connected to leader %d at %s:%d", self.host.sid, self.leader_sid, host, port)
                self._time()
                try:
                    await authenticate_to(reader, writer, config.quorum_sasl, self.core.connect_timeout_ms() / 1000)
                except QuorumAuthError as exc:
                    log.warning("server %d: leader %d at %s:%d: %s", self.host.sid, self.leader_sid, host, port, exc)
                    writer.close()
                    return None
                self.writer = writer
                return reader
            except (TimeoutError, OSError) as exc:
                log.warning("server %d: cannot connect to leader %d at %s:%d (try %d): %s", self.host.sid,
                            self.leader_sid, host, port, tries, exc)
                self._time()
                delay_ms = self.core.connect_failed()
                if delay_ms is None:
                    return None
                await asyncio.sleep(delay_ms / 1000)

    async def _read(self, reader: asyncio.StreamReader) -> None:
        """The leader's bytes into the core until the link closes; a link that closes before the
        leader said anything is dialled again when the core says so (``LearningCore.link_lost``)."""
        core = self.core
        try:
            while True:
                try:
                    data = await reader.read(READ_CHUNK)
                    lost = "the leader closed the connection"
                except ConnectionError as exc:
                    data, lost = b"", f"connection to the leader lost: {exc}"
                self._time()
                if data:
                    core.link_data(data)
                    self.pump()
                    continue
                retry_ms = core.link_lost(lost)
                self.pump()
                if retry_ms is None:
                    return
                reader_again = await self._reconnect(lost, retry_ms)
                if reader_again is None:
                    return
                reader = reader_again
        except asyncio.CancelledError:
            raise
        except TermEnded as exc:
            self.end(f"connection to the leader lost: {exc}")
        except Exception as exc:  # a failed effect: this term is over
            log.exception("server %d: following leader %d failed", self.host.sid, self.leader_sid)
            self.end(f"error while following: {exc}")

    async def _reconnect(self, lost: str, retry_ms: int) -> asyncio.StreamReader | None:
        """Dial the leader again after a link that closed before the leader said anything."""
        host = self.host
        leader = host.quorum.server(self.leader_sid)
        assert leader is not None  # run() found it
        log.info("server %d: %s before leader %d said anything: connecting again in %d ms", host.sid, lost,
                 self.leader_sid, retry_ms)
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        await asyncio.sleep(retry_ms / 1000)
        reader = await self._connect(leader.host, leader.peer_port)
        self._time()
        if reader is None:
            self.end(f"could not connect to leader {self.leader_sid} at {leader.host}:{leader.peer_port}")
            return None
        self.core.connected()
        self.pump()
        return reader

    def _send(self, effect: fx.Send) -> None:
        if self.writer is not None and not self.writer.is_closing():
            self.writer.write(effect.data)

    def _close_link(self, link: int, reason: str) -> None:
        self.end(reason)

    def _truncate(self, zxid: int) -> None:
        """TRUNC: cut my log after ``zxid`` and reload (``member.datadir``); the core goes on from
        what was recovered."""
        host = self.host
        log.warning("server %d: truncating my log to 0x%x for leader %d", host.sid, zxid, self.leader_sid)
        self.close_persistence()
        self.core.truncated(truncate_data_dir(host.disk, host.dirs, zxid, log.info))
        self.persistence = Persistence(host.config, host.disk, host.dirs)
        self._start_persistence()

    def _leader_id(self) -> int:
        return self.leader_sid

    def close(self) -> None:
        self.core.stop("term closed")
        self.stop_workers()
        if self._ticker is not None:
            self._ticker.cancel()
        if self._reader_task is not None:
            self._reader_task.cancel()
        if self.writer is not None:
            self.writer.close()
        self.close_persistence()

    def _tick(self) -> None:
        self._time()
        self.core.tick()
        self.pump()
        loop = asyncio.get_running_loop()
        self._ticker = loop.call_later(self.host.config.tick_interval_ms / 1000, self._tick)
