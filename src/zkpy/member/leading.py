"""One term as leader: the Zab leader core (``quorum.leader``) joined to the request pipeline.

Learners' connections are links (ids the shell picks); their bytes come in with ``link_data``
and are parsed here. Every packet that arrived is stepped before the actions run, so each
learner gets one `Send` per batch. The pipeline's proposals are serialized once, logged as
they are (`AppendLog`) and sent to the voters; the leader counts its own ack only after the
fsync that covers it (``durable``). Once the epoch is established the request pipeline serves
(`Serving`): it is ``self.pipeline``, which the shell's client port feeds; ``ready()`` proposes
what the pipeline prepped since the last call (client input and learners' requests alike).

Reconfiguration (3.8): the leader's pipeline preps a reconfig against this core (it is the
prep's ``Reconfigurer``): one reconfig in flight at a time, ``curConfigId`` against the last
config seen, the next config built by ``quorum.dynconfig``, and a quorum of the next config
synced with me. Its proposal needs a quorum of both configs; its commit makes the next config
active (`ActivateConfig`), and a leader that is no voter of it ends its term. An established
ensemble's first config (version 0) takes the version of the first NEWLEADER, and a config newer
than mine found in my tree (a reconfig logged but never activated) is the one NEWLEADER carries;
either becomes active once the epoch is established.
"""

from __future__ import annotations

import dataclasses
from typing import Any, assert_never

from zkpy.config import QuorumConfig, ServerConfig
from zkpy.errors import (
    BadArgumentsError,
    BadVersionError,
    MarshallingError,
    NewConfigNoQuorumError,
    ProtocolError,
    ReconfigInProcessError,
)
from zkpy.ids import make_zxid
from zkpy.quorum import dynconfig
from zkpy.quorum import leader as zl
from zkpy.quorum.sync import CommittedLog, LoggedTxn
from zkpy.quorum.verifier import QuorumVerifier
from zkpy.ratelimit import LogLimiter
from zkpy.server.leader import LeaderServerCore
from zkpy.server.outputs import CheckQuorum, Forward, Propose, Revalidate, Touches
from zkpy.storage.epochs import ACCEPTED_EPOCH, CURRENT_EPOCH
from zkpy.storage.snapshot import snapshot_stream
from zkpy.storage.txnlog import decode_payload, encode_payload
from zkpy.wire.consts import OpCode
from zkpy.wire.proto import ReconfigRequest
from zkpy.wire.quorum import PacketType, QuorumPacketReader

from .effects import ActivateConfig, AppendLog, PacketIn, Proposed, Serving, WriteEpoch
from .history import History
from .term import Log, TermCore, ZabOutput

_SYNC_MODES = (PacketType.DIFF, PacketType.TRUNC, PacketType.SNAP)


class LeadingCore(TermCore):
    role = "leader"
    pipeline: LeaderServerCore | None

    def __init__(self, config: ServerConfig, verifier: QuorumVerifier, history: History, *, accepted_epoch: int,
                 current_epoch: int, config_data: bytes, now_ms: int, wall_ms: int, trace: bool = False,
                 log: Log = lambda _m: None) -> None:
        super().__init__(now_ms, wall_ms, trace=trace, log=log)
        q = config.quorum
        assert q is not None and q.my_id is not None
        self.config = config
        self.config_data = config_data
        self.quorum: QuorumConfig = q  # the active config
        self._newleader_quorum = q  # the config NEWLEADER carries (active once the epoch is established)
        self._reconfig: tuple[int, QuorumConfig] | None = None  # a reconfig prepped, not yet committed
        self._pending_new = q  # the config next_config built, until prep says it is proposed
        self.tree = history.tree
        self.zab = zl.Leader(int(q.my_id), verifier, accepted_epoch=accepted_epoch, current_epoch=current_epoch,
                             last_zxid=self.tree.last_processed_zxid, committed=CommittedLog(history.committed),
                             now_ms=now_ms, tick_ms=config.tick_ms, init_limit=q.init_limit_ticks,
                             sync_limit=q.sync_limit_ticks, config_data=config_data, quorum_sync=q.quorum_sync,
                             newleader_config=self._newleader_config if config.reconfig_enabled else None)
        self._readers: dict[int, QuorumPacketReader] = {}
        self._log_limiter = LogLimiter()  # what anyone connecting to the quorum port can make us repeat
        self.proposal_sizes = [-1, -1, -1]  # last, min, max bytes of a proposal (BufferStats; -1: none yet)
        self.established_ms = now_ms

    # ---- inputs

    def link_connected(self, link: int) -> None:
        self._readers[link] = QuorumPacketReader(self.config.max_buffer)
        self.zab.connected(link, self.now_ms)

    def link_data(self, link: int, data: bytes) -> None:
        """Bytes from a learner: every whole packet is stepped. A malformed stream drops that
        learner only (`CloseLink`)."""
        reader = self._readers.get(link)
        if reader is None:
            return
        reader.feed(data)
        try:
            while (packet := reader.next()) is not None:
                if self.trace:
                    self._effects.append(PacketIn(link, packet))
                self.zab.step(link, packet, self.now_ms)
        except (ProtocolError, zl.ZabError) as exc:
            self._log_limiter.log(self.log, "learner error", "learners", self.now_ms, f"learner connection {link}: {exc}")
            self.link_lost(link)
            self._close_link(link, str(exc))

    def link_lost(self, link: int) -> None:
        if self._readers.pop(link, None) is not None:
            self.zab.disconnected(link)

    def tick(self) -> None:
        """Zab's timers (pings, learners' and the quorum's deadlines) and the pipeline's
        (session expiry), then what they proposed."""
        self.zab.tick(self.now_ms)
        if self.pipeline is not None:
            self.pipeline.tick()

    def _stop_zab(self, reason: str) -> None:
        self.zab.stop(reason)

    # ---- after the term

    def carry_over(self) -> History:
        """Every proposal handed to the log is on disk once the shell's log is closed: the next
        term starts from this tree with those applied (the proposals Zab had not committed)."""
        committed = list(self.zab.committed)
        carried = []
        for o in self.zab.outstanding:
            hdr, txn = decode_payload(o.data)
            self.tree.apply(hdr, txn, want_stat=False)
            carried.append(LoggedTxn(o.zxid, o.data))
        self.tree.events.clear()
        return History(self.tree, committed + carried, carried)

    def quorum_metrics(self) -> list[tuple[str, object]]:
        """mntr's quorum lines (ZooKeeper 3.8 prints them on the leader)."""
        if not self.zab.established:
            return []
        handles = self.zab.forwarding()
        last, low, high = self.proposal_sizes
        return [("learners", len(self.zab.learners)),
                ("leader_uptime", self.now_ms - self.established_ms),
                ("last_proposal_size", last), ("min_proposal_size", low), ("max_proposal_size", high),
                ("synced_followers", sum(1 for h in handles if not h.observer)),
                ("synced_non_voting_followers",
                 sum(1 for h in handles if not h.observer and not self.zab.verifier.is_voter(h.sid))),
                ("synced_observers", sum(1 for h in handles if h.observer)),
                ("pending_syncs", self.zab.pending_syncs)]

    # ---- reconfiguration (the prep's Reconfigurer)

    def _newleader_config(self, epoch: int) -> tuple[bytes, QuorumVerifier | None]:
        """The config NEWLEADER carries in ``epoch``: a newer one from my tree (a reconfig in my
        log: then its verifier, whose quorum must ack NEWLEADER too), else mine, with version
        ``make_zxid(epoch, 0)`` if it has none yet."""
        q = self.quorum
        newer = None
        node = self.tree.get(dynconfig.CONFIG_NODE)
        if node is not None and node.data:
            try:
                servers, version = dynconfig.parse_config_data(node.data)
            except ValueError:
                servers, version = (), 0
            if version > q.config_version and any(s.sid == q.my_id for s in servers):
                self.log(f"the config 0x{version:x} in my log is newer than mine (0x{q.config_version:x}): "
                         "this epoch activates it")
                q = dynconfig.with_servers(q, servers, version)
                newer = dynconfig.verifier_of(q)
        if q.config_version == 0:
            q = dataclasses.replace(q, config_version=make_zxid(epoch, 0))
        self._newleader_quorum = q
        return dynconfig.config_data(q), newer

    def next_config(self, request: ReconfigRequest, zxid: int) -> bytes:
        """PrepRequestProcessor's reconfig checks, in its order (see ``Reconfigurer``)."""
        q = self.quorum
        if self._reconfig is not None or self.zab.next_verifier is not None:
            raise ReconfigInProcessError()
        if request.curConfigId != -1 and request.curConfigId != q.config_version:
            raise BadVersionError(f"Reconfiguration from version {request.curConfigId} failed -- last seen "
                                  f"version is {q.config_version}")
        if q.hierarchical:  # 3.8 refuses the incremental form; zkpy the -members one too (no group lines)
            raise BadArgumentsError("Reconfiguration of a hierarchical (group/weight) quorum is not supported")
        try:
            servers = dynconfig.next_servers(q.servers, request.joiningServers, request.leavingServers,
                                             request.newMembers, standalone_enabled=q.standalone_enabled)
        except dynconfig.BadReconfig as exc:
            raise BadArgumentsError(str(exc)) from None
        except ValueError as exc:  # a sid that is no number: 3.8's NumberFormatException
            raise MarshallingError(str(exc)) from None
        new = dynconfig.with_servers(q, servers, zxid)
        verifier = dynconfig.verifier_of(new)
        synced = {h.sid for h in self.zab.learners.values() if h.phase is zl.LearnerPhase.FORWARDING and not h.observer}
        synced.add(self.zab.sid)
        if not verifier.contains_quorum(synced):
            raise NewConfigNoQuorumError("Reconfig failed - there must be a connected and synced quorum in new "
                                         "configuration")
        self._pending_new = new
        return dynconfig.config_data(new)

    def proposed(self, zxid: int, data: bytes) -> None:
        self._reconfig = (zxid, self._pending_new)
        self.log(f"reconfig 0x{zxid:x} proposed: {data.decode('utf-8', 'replace')!r}")

    def _activate(self, quorum: QuorumConfig) -> None:
        self.quorum = quorum
        self.config = dataclasses.replace(self.config, quorum=quorum)
        self.config_data = self.zab.config_data = dynconfig.config_data(quorum)
        self.zab.verifier = dynconfig.verifier_of(quorum)  # who counts for commits and the synced check
        self._effects.append(ActivateConfig(quorum))

    # ---- the Zab core's actions

    def _logged(self, zxid: int) -> None:
        self.zab.logged(zxid)

    def _to_zab(self, outputs: list[ZabOutput]) -> None:
        """The pipeline's txns to the log and the voters (one `AppendLog` per run of them), its
        quorum checks (zkpy.quorumSync) to Zab."""
        new: list[Propose] = []
        for o in outputs:
            match o:
                case Propose():
                    new.append(o)
                case CheckQuorum():
                    self._propose(new)
                    new = []
                    self.zab.check_quorum(o.token)
                case Forward() | Revalidate() | Touches():
                    raise AssertionError(f"the leader's pipeline produced {o!r}")
                case _:
                    assert_never(o)
        self._propose(new)

    def _propose(self, new: list[Propose]) -> None:
        if not new:
            return
        zxids = tuple(p.hdr.zxid for p in new)
        self.metrics.counters["proposal_count"] += len(zxids)
        payloads = tuple(encode_payload(p.hdr, p.txn, p.body) for p in new)
        self._effects.append(AppendLog(zxids, payloads))
        self.logging.extend(zxids)
        self._log_to_workers(zxids, payloads)
        sizes = self.proposal_sizes
        for p, zxid, payload in zip(new, zxids, payloads):
            size = len(payload)
            sizes[0] = size
            if size < sizes[1] or sizes[1] < 0:
                sizes[1] = size
            if size > sizes[2]:
                sizes[2] = size
            if self.trace:
                self._effects.append(Proposed(zxid, payload))
            nxt = None
            if p.hdr.type == OpCode.RECONFIG and self._reconfig is not None and self._reconfig[0] == zxid:
                nxt = dynconfig.verifier_of(self._reconfig[1])
            self.zab.propose(zxid, payload, nxt)

    def _drain(self) -> bool:
        while actions := self.zab.ready():
            encoded: dict[int, bytes] = {}  # a packet sent to every learner is encoded once
            for a in actions:
                match a:
                    case zl.Send():
                        if a.cid not in self._readers:
                            continue
                        data = encoded.get(id(a.packet))
                        if data is None:
                            data = encoded[id(a.packet)] = a.packet.to_bytes()
                        if a.snapshot:
                            data += snapshot_stream(self.tree)
                        if a.packet.type in _SYNC_MODES:
                            self._log_sync_mode(a.cid, a.packet)
                        self._send(a.cid, a.packet, data, a.snapshot)
                    case zl.Commit():
                        self._commit(a.count)
                    case zl.LearnerRequest():
                        if self.pipeline is not None:
                            self.pipeline.learner_request(a.session, a.cxid, a.type, a.body, a.auth)
                    case zl.LearnerSync():
                        self._take_pipeline()  # the requests the learner sent before it come first
                        self.zab.learner_sync(a.cid)
                    case zl.Touch():
                        if self.pipeline is not None:
                            self.pipeline.touch(a.touches)
                    case zl.Revalidate():
                        valid = self.pipeline.revalidate(a.session, a.timeout_ms) if self.pipeline is not None else False
                        self.zab.revalidated(a.cid, a.session, valid)
                    case zl.Close():
                        self._log_limiter.log(self.log, "learner dropped", "learners", self.now_ms,
                                              f"dropping learner connection {a.cid}: {a.reason}")
                        self._readers.pop(a.cid, None)
                        self._close_link(a.cid, a.reason)
                    case zl.SetAcceptedEpoch():
                        self._effects.append(WriteEpoch(ACCEPTED_EPOCH, a.epoch))
                    case zl.SetCurrentEpoch():
                        self._effects.append(WriteEpoch(CURRENT_EPOCH, a.epoch))
                    case zl.Established():
                        self._establish(a.epoch)
                    case zl.Activate():
                        self._reconfig_committed(a.zxid, a.designated)
                    case zl.QuorumConfirmed():
                        if self.pipeline is not None:
                            self.pipeline.quorum_confirmed(a.token)
                    case zl.Failed():
                        self._end(a.reason)
                    case _:
                        assert_never(a)
        return True

    def _reconfig_committed(self, zxid: int, designated: int) -> None:
        """The reconfig ``zxid`` committed: its config is active, and names the next leader."""
        if self._reconfig is None or self._reconfig[0] != zxid:
            return
        new = self._reconfig[1]
        self._reconfig = None
        self.log(f"reconfig 0x{zxid:x} committed: config 0x{new.config_version:x} is active"
                 + ("" if designated == self.zab.sid else f"; server {designated} is the designated leader"))
        self._activate(new)
        if designated != self.zab.sid:
            self.designated = designated

    def _log_sync_mode(self, cid: int, packet: Any) -> None:
        """One line per learner sync: the mode chosen (DIFF, TRUNC or SNAP) and from where."""
        h = self.zab.learners.get(cid)
        who = f"server {h.sid}" if h is not None and h.sid >= 0 else f"learner connection {cid}"
        had = f"0x{h.last_zxid:x}" if h is not None else "?"
        self.log(f"syncing {who} (at zxid {had}) with {PacketType(packet.type).name} to 0x{packet.zxid:x}")
        if packet.type == PacketType.DIFF:
            self.metrics.counters["diff_count"] += 1
        elif packet.type == PacketType.SNAP:
            self.metrics.counters["snap_count"] += 1

    def _commit(self, count: int) -> None:
        pipeline = self.pipeline
        if pipeline is None:
            raise AssertionError(f"Commit({count}) before the epoch was established")
        self.metrics.counters["commit_count"] += count
        pipeline.apply_persisted(count)

    def _establish(self, epoch: int) -> None:
        self.log(f"epoch {epoch} established with a quorum: serving as leader")
        self.established_ms = self.now_ms
        self.tree.last_processed_zxid = make_zxid(epoch, 0)  # as ZooKeeper's startZkServer sets it
        if self._newleader_quorum.config_version > self.quorum.config_version:
            self._activate(self._newleader_quorum)
        self.tree.set_config_node(self.config_data, self.quorum.config_version, self.wall_ms)
        self.pipeline = LeaderServerCore(self.config, self.now_ms, self.wall_ms, log=self.log, tree=self.tree,
                                       next_zxid=make_zxid(epoch, 1), trace=self.trace)
        self.pipeline.prep.reconfigurer = self
        self.pipeline.metrics = self.metrics
        self._effects.append(Serving(epoch, self.pipeline))
        self._start_workers(self.pipeline)

