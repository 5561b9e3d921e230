"""The transcript driver of the member cores (``member.leading`` / ``member.learning``), wired
back to back in memory, in the manner of etcd-raft's interaction tests.

Servers are ``1..n``; the highest sid leads (its learners' links are their sids), ``observers``
names learners that observe. Nothing moves unless a command moves it:

    members N [observers=SID,SID]    fresh members with empty data dirs, epochs 0
    start                            the learners' connections to the leader are up
    establish                        (start and) run every member until nothing moves
    process-ready [SID...]           each member's ``ready()`` until it has nothing (all members
                                     without SIDs); its effects are rendered and run
    deliver [SID...]                 bytes in flight to these members (all without SIDs) arrive
    durable SID                      SID's fsync worker reports everything it was handed
    tick MS                          every member's clock moves on and its timers run
    stop SID [REASON]                SID's shell ends its term (then nothing it gets counts)
    client SID VERB ARGS...          a client command (``pipeline``'s) on SID's serving pipeline

A `Send` is rendered packet by packet (``3->1 PROPOSAL 0x100000001``), and held until a
``deliver``; `AppendLog` is held until a ``durable``; a client's `Output` is what it reads.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import assert_never

from zkpy.config import LearnerType, QuorumConfig, QuorumServer, ServerConfig
from zkpy.member import effects as fx
from zkpy.member.history import History
from zkpy.member.leading import LeadingCore
from zkpy.member.learning import LearningCore
from zkpy.quorum.verifier import QuorumMaj, config_string
from zkpy.tree.datatree import DataTree
from zkpy.wire.quorum import PacketType, QuorumPacket, QuorumPacketReader

from .datadriven import Driver
from .pipeline import CLIENT_VERBS, START_MS, WALL_MS, Clients, Names

TICK_MS = 100


@dataclass
class Member:
    sid: int
    core: LeadingCore | LearningCore
    inbox: deque[tuple[int, bytes]] = field(default_factory=deque)  # (from sid, bytes) in flight to it
    appended: int = 0  # txns handed to the fsync worker and not reported
    epochs: dict[str, int] = field(default_factory=dict)


class MembersDriver(Driver):
    def __init__(self) -> None:
        self.names = Names()
        self.clients = Clients(self.names)
        self.now = START_MS
        self.members: dict[int, Member] = {}
        self.leader_sid = 0
        self.started = False

    # ---- commands

    def cmd_members(self, n: str, *args: str) -> None:
        opts = dict(a.split("=", 1) for a in args)
        count = int(n)
        observers = {int(s) for s in opts.get("observers", "").split(",") if s}
        servers = tuple(QuorumServer(sid, "127.0.0.1", 2888 + sid, 3888 + sid,  # type: ignore[arg-type]
                                     LearnerType.OBSERVER if sid in observers else LearnerType.PARTICIPANT)
                        for sid in range(1, count + 1))
        verifier = QuorumMaj.of([s for s in range(1, count + 1) if s not in observers], sorted(observers))
        self.leader_sid = count
        for sid in range(1, count + 1):
            quorum = QuorumConfig(servers, my_id=sid, init_limit_ticks=10, sync_limit_ticks=5)  # type: ignore[arg-type]
            config = ServerConfig(tick_ms=TICK_MS, server_id=sid, quorum=quorum)
            config_data = config_string(quorum).encode("utf-8")
            history = History(DataTree(), [])
            core: LeadingCore | LearningCore
            if sid == count:
                core = LeadingCore(config, verifier, history, accepted_epoch=0, current_epoch=0,
                                   config_data=config_data, now_ms=self.now, wall_ms=WALL_MS + self.now)
            else:
                core = LearningCore(config, history, leader_sid=count, observer=sid in observers,
                                    accepted_epoch=0, current_epoch=0, config_data=config_data,
                                    now_ms=self.now, wall_ms=WALL_MS + self.now)
            self.members[sid] = Member(sid, core)

    def cmd_start(self) -> None:
        for m in self.members.values():
            if isinstance(m.core, LeadingCore):
                for sid in self.members:
                    if sid != m.sid:
                        m.core.link_connected(sid)
            else:
                m.core.connected()

    def cmd_establish(self) -> list[str]:
        """``start`` (the first time), then ready/deliver/durable rounds until nothing moves;
        only `Serving` effects and what clients read are shown (``establish.txt`` has the whole
        exchange)."""
        if not self.started:
            self.started = True
            self.cmd_start()
        lines = []
        while True:
            moved = self.cmd_process_ready()
            moved += self.cmd_deliver()
            for m in self.members.values():
                if m.appended:
                    self.cmd_durable(str(m.sid))
                    moved.append("fsync")
            lines += [line for line in moved if " serving " in line or " <- " in line]
            if not moved:
                return lines

    def cmd_process_ready(self, *sids: str) -> list[str]:
        lines = []
        for m in self._chosen(sids):
            while effects := m.core.ready():
                for effect in effects:
                    lines.extend(self._run(m, effect))
        return lines

    def cmd_deliver(self, *sids: str) -> list[str]:
        lines = []
        for m in self._chosen(sids):
            while m.inbox:
                src, data = m.inbox.popleft()
                if isinstance(m.core, LeadingCore):
                    m.core.link_data(src, data)
                else:
                    m.core.link_data(data)
                lines.append(f"{src}->{m.sid} delivered")
        return lines

    def cmd_durable(self, sid: str) -> list[str]:
        m = self.members[int(sid)]
        count, m.appended = m.appended, 0
        m.core.durable(count)
        return [f"{m.sid}: fsync reports {count} txns"]

    def cmd_tick(self, ms: str) -> None:
        self.now += int(ms)
        for m in self.members.values():
            m.core.set_time(self.now, WALL_MS + self.now)
            m.core.tick()

    def cmd_stop(self, sid: str, *reason: str) -> None:
        self.members[int(sid)].core.stop(" ".join(reason) or "term closed")

    def cmd_client(self, sid: str, verb: str, *args: str) -> None:
        core = self.members[int(sid)].core
        server = core.pipeline
        if server is None:
            raise ValueError(f"server {sid} does not serve")
        server.set_time(self.now, WALL_MS + self.now)
        if verb == "connect":
            self.clients.connect(server, *args)
        elif verb in CLIENT_VERBS:
            self.clients.request(verb, *args)
        else:
            raise ValueError(f"unknown client command {verb!r}")

    # ---- effects

    def _chosen(self, sids: tuple[str, ...]) -> list[Member]:
        return [self.members[int(s)] for s in sids] if sids else list(self.members.values())

    def _run(self, m: Member, effect: fx.Effect) -> list[str]:
        who = f"{m.sid}:"
        match effect:
            case fx.Send():
                dest = effect.link if isinstance(m.core, LeadingCore) else self.leader_sid
                self.members[dest].inbox.append((m.sid, effect.data))
                return [f"{who} send {m.sid}->{dest} {p}" for p in self._packets(effect)]
            case fx.AppendLog():
                m.appended += len(effect.zxids)
                return [f"{who} append-log {' '.join(f'0x{z:x}' for z in effect.zxids)}"]
            case fx.WriteEpoch():
                m.epochs[effect.name] = effect.value
                return [f"{who} write {effect.name}={effect.value}"]
            case fx.WriteSnapshot():
                return [f"{who} write snapshot 0x{effect.tree.last_processed_zxid:x}"]
            case fx.Serving():
                return [f"{who} serving epoch={effect.epoch} as {m.core.role}"]
            case fx.EndTerm():
                return [f"{who} end term: {effect.reason}"]
            case fx.CloseLink():
                return [f"{who} close link {effect.link}: {effect.reason}"]
            case fx.Output():
                return [f"{who} {line}" for line in self.clients.render(effect.conn)]
            case fx.Truncate() | fx.ActivateConfig() | fx.StartWorkers() | fx.PublishApplied() | fx.ToWorker():
                raise AssertionError(f"these transcripts never run {effect!r} (``peers`` runs whole members)")
            case fx.PacketIn() | fx.PacketOut() | fx.Proposed() | fx.Logged() | fx.Applied() | fx.SnapshotLoaded():
                raise AssertionError(f"a trace effect from a core made without trace: {effect!r}")
            case _:
                assert_never(effect)

    @staticmethod
    def _packets(effect: fx.Send) -> list[str]:
        reader = QuorumPacketReader(1 << 24)
        reader.feed(effect.data)
        out = []
        while (p := reader.next()) is not None:
            out.append(_show_packet(p))
            if p.type == PacketType.SNAP:
                out[-1] += " + snapshot"
                break
        return out


def _show_packet(p: QuorumPacket) -> str:
    name = PacketType(p.type).name
    if p.type == PacketType.PING:
        return name
    if p.type == PacketType.REQUEST:
        return f"{name} ({len(p.data or b'')} bytes)"
    return f"{name} {f'0x{p.zxid:x}' if p.zxid >= 0 else p.zxid}"
