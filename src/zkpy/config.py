"""Server configuration as frozen dataclasses; zoo.cfg keys map one to one to fields.

``QuorumConfig`` is the ensemble part of a zoo.cfg (``server.N`` lines, ``initLimit``, ``syncLimit``,
``peerType``, ``electionAlg``, ``standaloneEnabled``, ``quorumListenOnAllIPs``, ``group.G``,
``weight.SID``) plus this server's ``myid``. Whether it describes an ensemble follows ZooKeeper 3.8:
a server runs standalone when the list has one participant (or none) and ``standaloneEnabled`` is
true; otherwise it is an ensemble.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
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
    # zkpy.quorumBindAddress: where my quorum and election ports listen, where that is not the
    # address my server.N line announces (a wildcard there makes peers dial me by their own config)
    bind_host: str | None = None
    cnx_timeout_ms: int = 5000  # cnxTimeout: connecting to a peer's election port
    # zkpy.quorumSync: the leader answers a sync only after a quorum confirms it still leads
    # (ZooKeeper's sync does not check; see ZOOKEEPER-1675)
    quorum_sync: bool = False
    # the version of the server list: the hex suffix of the dynamicConfigFile's name (0 without one)
    config_version: int = 0
    # hierarchical quorums (ZooKeeper's QuorumHierarchical): the group.G=sid:sid lines as
    # (G, sids as written), and the weight.SID=W lines as (SID, W), both in sid / gid order.
    # Either one non-empty makes the quorum hierarchical (zkpy.quorum.hierarchical checks them).
    groups: tuple[tuple[int, tuple[int, ...]], ...] = ()
    weights: tuple[tuple[int, int], ...] = ()
    # localSessionsEnabled: a member's new sessions are local to it (server.local_sessions);
    # localSessionsUpgradingEnabled: an ephemeral create upgrades a local session to a global one
    # (without it, the create fails with EphemeralOnLocalSession). Members of an ensemble only:
    # a standalone server's sessions are all global, as in ZooKeeper 3.8.
    local_sessions: bool = False
    local_sessions_upgrading: bool = False
    static_path: str = ""  # the zoo.cfg it came from (a reconfig rewrites it; "" when built in code)

    @property
    def participants(self) -> tuple[QuorumServer, ...]:
        return tuple(s for s in self.servers if s.role is LearnerType.PARTICIPANT)

    @property
    def observers(self) -> tuple[QuorumServer, ...]:
        return tuple(s for s in self.servers if s.role is LearnerType.OBSERVER)

    @property
    def hierarchical(self) -> bool:
        """Whether zoo.cfg has group or weight lines (ZooKeeper then counts QuorumHierarchical's way)."""
        return bool(self.groups or self.weights)

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

    def listen_host(self) -> str:
        """The address my quorum and election ports listen on: every address with
        quorumListenOnAllIPs, else zkpy.quorumBindAddress, else my own line's."""
        if self.quorum_listen_on_all_ips:
            return "0.0.0.0"
        if self.bind_host is not None:
            return self.bind_host
        me = self.me
        if me is None:
            raise ValueError("no server line of my own to listen on")
        return me.host


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """A key or trust store as ZooKeeper's ``ssl.keyStore.*`` / ``ssl.trustStore.*`` keys give it.

    ``store_type`` is ``PEM``, ``PKCS12`` or ``JKS``; ``None`` means: from the file's extension
    (``.pem``, ``.p12``/``.pfx``, ``.jks``), as ZooKeeper infers it."""

    location: str
    password: str | None = field(default=None, repr=False)  # never logged
    store_type: str | None = None


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """TLS for one listener (``ssl.*`` for the client port, ``ssl.quorum.*`` between members)."""

    key_store: StoreConfig | None = None
    trust_store: StoreConfig | None = None
    client_auth: str = "need"  # ssl.clientAuth: need | want | none
    protocol: str = "TLSv1.2"  # ssl.protocol: the lowest version offered when enabledProtocols is unset
    enabled_protocols: tuple[str, ...] = ()  # ssl.enabledProtocols (empty: protocol and newer)
    ciphersuites: tuple[str, ...] = ()  # ssl.ciphersuites, in Java (IANA) names (empty: the defaults)
    hostname_verification: bool = True  # ssl.hostnameVerification (a client checks the server's name)


@dataclass(frozen=True, slots=True)
class X509AuthConfig:
    """How a TLS client's certificate becomes its ``x509:`` identity (``ssl.clientCertId*``)."""

    id_type: str = "SDN"  # ssl.clientCertIdType: SDN (the subject, RFC 2253) or SAN
    san_match_type: int = 6  # ssl.clientCertIdSanMatchType: the GeneralName tag (6 = URI)
    san_match_regex: str = ".*"  # ssl.clientCertIdSanMatchRegex: which SAN entry
    san_extract_regex: str = ".*"  # ssl.clientCertIdSanExtractRegex: what of it
    san_extract_group: int = 0  # ssl.clientCertIdSanExtractMatcherGroupIndex
    super_user: str | None = None  # X509AuthenticationProvider.superUser: this id is super


@dataclass(frozen=True, slots=True)
class SaslConfig:
    """SASL on the client port: the JAAS ``Server`` section's DIGEST-MD5 users (passwords stay in memory
    and out of every log) and where they came from."""

    users: dict[str, str] = field(default_factory=dict, repr=False)  # user_NAME="password"
    jaas_file: str = ""  # for messages only
    section: str = "Server"  # zookeeper.sasl.serverconfig
    gssapi: bool = False  # the section names Krb5LoginModule
    remove_host_from_principal: bool = False  # kerberos.removeHostFromPrincipal
    remove_realm_from_principal: bool = False  # kerberos.removeRealmFromPrincipal
    super_users: tuple[str, ...] = ()  # zookeeper.superUser (and zookeeper.superUser.*): these sasl ids are super
    # the shell's randomness for DIGEST-MD5 nonces (os.urandom); pure code draws none of its own
    random_bytes: Callable[[int], bytes] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class QuorumSaslConfig:
    """Quorum SASL (``quorum.auth.*``, DIGEST-MD5): the JAAS ``QuorumServer`` section's users check
    members that connect to me; the ``QuorumLearner`` section's user is who I am when I connect."""

    learner_required: bool = False  # quorum.auth.learnerRequireSasl: I authenticate when I connect
    server_required: bool = False  # quorum.auth.serverRequireSasl: I refuse members that do not
    server_users: dict[str, str] = field(default_factory=dict, repr=False)  # QuorumServer user_NAME="password"
    learner_user: str = ""  # QuorumLearner username=
    learner_password: str = field(default="", repr=False)  # QuorumLearner password=
    jaas_file: str = ""  # for messages only


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
    enforce_quota: bool = False  # enforceQuota (zookeeper.enforceQuota): hard quotas refuse writes
    container_check_interval_ms: int = 60000  # znode.container.checkIntervalMs
    container_max_per_minute: int = 10000  # znode.container.maxPerMinute
    server_id: int = 0  # myid (standalone: 0)
    snap_count: int = 100000  # snapCount: roll the log and snapshot after about this many txns
    prealloc_kb: int = 65536  # preAllocSize: log files grow in blocks of this many KiB
    force_sync: bool = True  # forceSync: fsync the log before acknowledging (no: only for tests)
    autopurge_snap_retain_count: int = 3  # autopurge.snapRetainCount
    autopurge_purge_interval_h: int = 0  # autopurge.purgeInterval in hours (0: never)
    quorum: QuorumConfig | None = None  # server.N lines and the ensemble keys (None: no server lines)
    # security (client port)
    secure_client_port: int | None = None  # secureClientPort (None: no TLS listener)
    client_port_enabled: bool = True  # false when zoo.cfg sets secureClientPort and no clientPort: TLS only
    secure_client_port_address: str | None = None  # secureClientPortAddress (None: clientPortAddress)
    port_unification: bool = False  # client.portUnification: the plain port also accepts TLS
    tls: TlsConfig | None = None  # ssl.* (None: no key store configured)
    quorum_tls: TlsConfig | None = None  # ssl.quorum.* when sslQuorum=true: TLS between members
    quorum_sasl: QuorumSaslConfig | None = None  # quorum.auth.enableSasl=true
    x509: X509AuthConfig = field(default_factory=X509AuthConfig)
    sasl: SaslConfig | None = None  # a JAAS Server section was found
    sasl_auth: bool = False  # authProvider.N names SASLAuthenticationProvider: sasl: ACLs are valid
    enforce_auth_schemes: tuple[str, ...] = ()  # enforce.auth.schemes when enforce.auth.enabled=true
    session_require_client_sasl_auth: bool = False  # sessionRequireClientSASLAuth
    # the AdminServer (HTTP commands); zoo.cfg turns it on by default, as ZooKeeper does (zoocfg)
    admin_enabled: bool = False  # admin.enableServer (a ServerConfig built in code has none)
    admin_address: str = "127.0.0.1"  # admin.serverAddress (ZooKeeper: 0.0.0.0; zkpy: loopback unless set)
    admin_port: int = 8080  # admin.serverPort
    admin_command_url: str = "/commands"  # admin.commandURL
    admin_idle_timeout_ms: int = 30000  # admin.idleTimeout
    admin_force_https: bool = False  # admin.forceHttps: HTTPS only, with the ssl.* key store
    reconfig_enabled: bool = False  # reconfigEnabled: the reconfig op changes the server list at runtime
    initial_configuration: str = ""  # the zoo.cfg as read (key=value lines), for initial_configuration
    # metrics (issue 12): metricsProvider.className naming ZooKeeper's PrometheusMetricsProvider
    metrics_prometheus: bool = False  # serve /metrics (ZooKeeper's default provider serves nothing)
    metrics_http_host: str = "127.0.0.1"  # metricsProvider.httpHost (ZooKeeper: 0.0.0.0; zkpy: loopback)
    metrics_http_port: int = 7000  # metricsProvider.httpPort
    metrics_export_jvm_info: bool = True  # metricsProvider.exportJvmInfo: here the process and platform metrics
    # read-only mode (issue 13): readonlymode.enabled, in zoo.cfg or as -Dreadonlymode.enabled in the JVM flags
    read_only_mode: bool = False  # an ensemble member cut off from its quorum serves read-only clients
    # processes serving the client port (runtime.workers): with 2 or more, a member process that
    # serves no client sequences the writes behind them (issue 25)
    server_workers: int = 1  # serverWorkers (zkpy's own key; "auto": the CPUs this process may run on)

    @property
    def dedicated_member(self) -> bool:
        """With ``serverWorkers`` >= 2 the member serves no client: its ``serverWorkers`` worker
        processes take every connection and the member only sequences (prep, log, apply, fan-out)."""
        return self.server_workers > 1

    @property
    def process_count(self) -> int:
        """The server's processes: the member (process 0), and ``serverWorkers`` workers (1..N)
        when it is dedicated. Session ids are partitioned over all of them (``member.workers``)."""
        return self.server_workers + 1 if self.dedicated_member else 1

    @property
    def tick_interval_ms(self) -> int:
        """How often a server process runs its cores' timers: a quarter of tickTime, between 10
        and 100 ms (the runtime's timers and the simulator's alike)."""
        return max(10, min(100, self.tick_ms // 4))

    @property
    def min_session_timeout(self) -> int:
        return self.min_session_timeout_ms if self.min_session_timeout_ms >= 0 else 2 * self.tick_ms

    @property
    def max_session_timeout(self) -> int:
        return self.max_session_timeout_ms if self.max_session_timeout_ms >= 0 else 20 * self.tick_ms

    @property
    def log_dir(self) -> str:
        return self.data_log_dir or self.data_dir
