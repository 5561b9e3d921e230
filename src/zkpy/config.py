"""Server configuration as frozen dataclasses; zoo.cfg keys map one to one to fields.

``QuorumConfig`` is the ensemble part of a zoo.cfg (``server.N`` lines, ``initLimit``, ``syncLimit``,
``peerType``, ``electionAlg``, ``standaloneEnabled``, ``quorumListenOnAllIPs``) plus this server's
``myid``. Whether it describes an ensemble follows ZooKeeper 3.8: a server runs standalone when the
list has one participant (or none) and ``standaloneEnabled`` is true; otherwise it is an ensemble.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from zkpy.ids import ServerId
from zkpy.wire.consts import DEFAULT_MAX_BUFFER


class LearnerType(enum.Enum):
    """A server's role in the ensemble (ZooKeeper's ``LearnerType``): participants vote, observers do not."""

    PARTICIPANT = "participant"
    OBSERVER = "observer"


@dataclass(frozen=True, slots=True)
class QuorumServer:
    """One ``server.N=host:peerPort:electionPort[:role][;[clientHost:]clientPort]`` line.

    ``host`` and ``client_host`` are as written (IPv6 without its brackets); ``client_host`` is
    ``None`` when the line gives only a client port, which ZooKeeper reads as the wildcard address.
    ``client_port`` is ``None`` when the line has no ``;client`` part.
    """

    sid: ServerId
    host: str
    peer_port: int  # the quorum port: followers and observers connect to the leader here
    election_port: int  # fast leader election
    role: LearnerType = LearnerType.PARTICIPANT
    client_host: str | None = None
    client_port: int | None = None


@dataclass(frozen=True, slots=True)
class QuorumConfig:
    """The ensemble as zoo.cfg describes it, and who this server is in it."""

    servers: tuple[QuorumServer, ...]  # in sid order, each sid once
    my_id: ServerId | None = None  # from dataDir/myid; None when there is no myid file
    init_limit_ticks: int = 0  # initLimit (0: not set; an ensemble needs it)
    sync_limit_ticks: int = 0  # syncLimit (0: not set; an ensemble needs it)
    peer_type: LearnerType = LearnerType.PARTICIPANT  # peerType, corrected to this server's line
    election_alg: int = 3  # electionAlg (3.8 knows only 3: fast leader election over TCP)
    standalone_enabled: bool = True  # standaloneEnabled
    quorum_listen_on_all_ips: bool = False  # quorumListenOnAllIPs
    cnx_timeout_ms: int = 5000  # cnxTimeout: connecting to a peer's election port
    # zkpy.quorumSync: the leader answers a sync only after a quorum confirms it still leads
    # (ZooKeeper's sync does not check; see ZOOKEEPER-1675)
    quorum_sync: bool = False

    @property
    def participants(self) -> tuple[QuorumServer, ...]:
        return tuple(s for s in self.servers if s.role is LearnerType.PARTICIPANT)

    @property
    def observers(self) -> tuple[QuorumServer, ...]:
        return tuple(s for s in self.servers if s.role is LearnerType.OBSERVER)

    @property
    def is_ensemble(self) -> bool:
        """ZooKeeper 3.8's ``isDistributed``: standalone only with one voting server (or none) and
        ``standaloneEnabled``; with ``standaloneEnabled=false`` even one server forms an ensemble."""
        return not self.standalone_enabled or len(self.participants) > 1

    def server(self, sid: int) -> QuorumServer | None:
        for s in self.servers:
            if s.sid == sid:
                return s
        return None

    @property
    def me(self) -> QuorumServer | None:
        """This server's own line (``None`` without a myid)."""
        return None if self.my_id is None else self.server(self.my_id)


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """A standalone server's settings (zoo.cfg key in the comment where it differs)."""

    tick_ms: int = 2000  # tickTime
    data_dir: str = "zkpy-data"  # dataDir
    data_log_dir: str | None = None  # dataLogDir (defaults to dataDir)
    client_port: int = 2181  # clientPort
    client_port_address: str = "127.0.0.1"  # clientPortAddress
    max_client_cnxns: int = 60  # maxClientCnxns (per IP; 0 = unlimited)
    min_session_timeout_ms: int = -1  # minSessionTimeout (-1: 2 ticks)
    max_session_timeout_ms: int = -1  # maxSessionTimeout (-1: 20 ticks)
    four_letter_words: frozenset[str] = field(default_factory=lambda: frozenset({"srvr"}))  # 4lw.commands.whitelist
    max_buffer: int = DEFAULT_MAX_BUFFER  # jute.maxbuffer
    super_digest: str | None = None  # superDigest (user:base64sha1)
    extended_types: bool = False  # extendedTypesEnabled
    container_check_interval_ms: int = 60000  # znode.container.checkIntervalMs
    container_max_per_minute: int = 10000  # znode.container.maxPerMinute
    server_id: int = 0  # myid (standalone: 0)
    snap_count: int = 100000  # snapCount: roll the log and snapshot after about this many txns
    prealloc_kb: int = 65536  # preAllocSize: log files grow in blocks of this many KiB
    force_sync: bool = True  # forceSync: fsync the log before acknowledging (no: only for tests)
    autopurge_snap_retain_count: int = 3  # autopurge.snapRetainCount
    autopurge_purge_interval_h: int = 0  # autopurge.purgeInterval in hours (0: never)
    quorum: QuorumConfig | None = None  # server.N lines and the ensemble keys (None: no server lines)

    @property
    def min_session_timeout(self) -> int:
        return self.min_session_timeout_ms if self.min_session_timeout_ms >= 0 else 2 * self.tick_ms

    @property
    def max_session_timeout(self) -> int:
        return self.max_session_timeout_ms if self.max_session_timeout_ms >= 0 else 20 * self.tick_ms

    @property
    def log_dir(self) -> str:
        return self.data_log_dir or self.data_dir
