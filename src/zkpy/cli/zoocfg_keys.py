"""Every zoo.cfg key of ZooKeeper 3.8 and what zkpy does with it: the one table that the zoo.cfg
parser (``zoocfg``), the README's "Moving from Apache ZooKeeper" section and the tests read.

A key is one of:

- **honoured**: read into a ``ServerConfig`` / ``QuorumConfig`` field (or checked at start); a bad
  value exits 2 naming the key and the file.
- **no effect**: accepted with one WARN line at startup that names it and says why. ``same``
  lists the values that ask for what zkpy does anyway; with one of those the key is accepted
  without a line (``reconfigEnabled=false``).
- **refused**: zkpy will not start with it, because ignoring it would change safety (who may read
  or write, what a quorum is, whether acknowledged data survives). ``when`` lists the refused
  values (``None``: every value); any other value asks for what zkpy does and is accepted.

A key in no row is accepted with a WARN, as ZooKeeper accepts it (it passes unknown keys on as
the system property ``zookeeper.<key>``). ZooKeeper documents some keys by that property name
(``zookeeper.nio.numSelectorThreads``); a zoo.cfg line names them without the prefix, so a row
matches both spellings. Keys read by ``security_keys`` (TLS, SASL, x509, enforced auth, quorum
security) are listed here for the README; ``security_keys`` parses them and says its own WARNs.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator
from dataclasses import dataclass

from zkpy.cli.security_keys import (
    JAAS_KEY,
    QUORUM_KEYS,
    SSL_KEYS_WITHOUT_EFFECT,
    STORE_KEYS,
    TLS_KEYS,
    X509_KEYS,
)


class Treatment(enum.Enum):
    HONOURED = "honoured"
    NO_EFFECT = "no effect"
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class KeyRule:
    """What zkpy does with one zoo.cfg key (or a family of them, ``server.N``)."""

    treatment: Treatment
    detail: str  # honoured: what zkpy does with it; otherwise: why it has no effect / is refused
    field: str | None = None  # honoured: the ServerConfig field ("quorum.x": QuorumConfig's x)
    parse: str = "special"  # honoured: "int", "str", "bool" (zoocfg's generic readers) or "special"
    same: frozenset[str] = frozenset()  # no effect: values (lower case) meaning what zkpy does anyway
    when: frozenset[str] | None = None  # refused: the refused values (lower case); None: every value
    security: bool = False  # parsed by security_keys, not by zoocfg


def _honoured(detail: str, field: str | None = None, parse: str = "special") -> KeyRule:
    return KeyRule(Treatment.HONOURED, detail, field, parse)


def _none(why: str, *same: str) -> KeyRule:
    return KeyRule(Treatment.NO_EFFECT, why, same=frozenset(same))


def _refused(why: str, *when: str) -> KeyRule:
    """Refused with the values ``when`` (every value without any)."""
    return KeyRule(Treatment.REFUSED, why, when=frozenset(when) if when else None)


def _refused_unless(why: str, *same: str) -> KeyRule:
    """Refused unless the value is one of ``same`` (ZooKeeper reads anything else as the other choice)."""
    return KeyRule(Treatment.REFUSED, why, same=frozenset(same))


def refuses(rule: KeyRule, value: str) -> bool:
    """Whether a refused row refuses this value."""
    v = value.strip().lower()
    return v in rule.when if rule.when is not None else v not in rule.same


_NO_METRICS = "a tuning knob of ZooKeeper's Prometheus provider (its worker threads and queue)"
_JVM = "a setting of the JVM or of ZooKeeper's Java internals; zkpy runs one asyncio event loop"
_NO_THROTTLE = "zkpy does not rate-limit new connections"
_REQ_THROTTLE = "zkpy bounds outstanding requests per connection instead of a global request throttle"
_GROUP_COMMIT = "zkpy group-commits: one fsync covers every txn appended since the last, without a delay"
_NO_KERBEROS = "zkpy's quorum SASL is DIGEST-MD5, which names no Kerberos principal or host"

KEYS: dict[str, KeyRule] = {
    # --- minimum and advanced configuration
    "clientPort": _honoured("the plain client port", "client_port", "int"),
    "dataDir": _honoured("snapshots, myid, the epochs (and the txn log without dataLogDir)", "data_dir", "str"),
    "tickTime": _honoured("the tick, in ms", "tick_ms", "int"),
    "dataLogDir": _honoured("the txn log's directory", "data_log_dir", "str"),
    "clientPortAddress": _honoured("the address the client port listens on (default 127.0.0.1, see below)",
                                   "client_port_address", "str"),
    "maxClientCnxns": _honoured("connections per client IP (0: no limit)", "max_client_cnxns", "int"),
    "minSessionTimeout": _honoured("the smallest negotiated session timeout, in ms",
                                   "min_session_timeout_ms", "int"),
    "maxSessionTimeout": _honoured("the largest negotiated session timeout, in ms",
                                   "max_session_timeout_ms", "int"),
    "preAllocSize": _honoured("txn log files grow in blocks of this many KiB", "prealloc_kb", "int"),
    "snapCount": _honoured("roll the log and snapshot after about this many txns", "snap_count", "int"),
    "autopurge.snapRetainCount": _honoured("snapshots kept by the purge task (at least 3)",
                                           "autopurge_snap_retain_count", "int"),
    "autopurge.purgeInterval": _honoured("hours between purges (0: never)", "autopurge_purge_interval_h", "int"),
    "jute.maxbuffer": _honoured("the largest request or znode, in bytes (ZooKeeper reads it only as a "
                                "system property)", "max_buffer", "int"),
    "znode.container.checkIntervalMs": _honoured("ms between container and TTL sweeps",
                                                 "container_check_interval_ms", "int"),
    "znode.container.maxPerMinute": _honoured("containers and TTL nodes deleted per sweep",
                                              "container_max_per_minute", "int"),
    "extendedTypesEnabled": _honoured("TTL nodes", "extended_types"),
    "zookeeper.extendedTypesEnabled": _honoured("the same, by its system property's name", "extended_types"),
    "forceSync": _honoured("yes: fsync the log before acknowledging; no: only for tests", "force_sync"),
    "4lw.commands.whitelist": _honoured("the four-letter words answered", "four_letter_words"),
    "superDigest": _honoured("zkpy's name for DigestAuthenticationProvider.superDigest", "super_digest", "str"),
    "DigestAuthenticationProvider.superDigest": _honoured("the digest super user (super:base64sha1)",
                                                          "super_digest", "str"),
    "datadir.autocreate": _honoured("false: refuse to start when dataDir or dataLogDir does not exist"),
    "dynamicConfigFile": _honoured("the file holding the server.N lines (read as ZooKeeper reads it; "
                                   "a relative path is taken from the working directory)"),
    # --- cluster options
    "server.N": _honoured("an ensemble member: host:peerPort:electionPort[:participant|observer]"
                          "[;[clientHost:]clientPort]; several addresses joined by '|' are refused",
                          "quorum.servers"),
    "initLimit": _honoured("ticks a learner has to connect and sync", "quorum.init_limit_ticks", "int"),
    "syncLimit": _honoured("ticks a learner may lag", "quorum.sync_limit_ticks", "int"),
    "electionAlg": _honoured("only 3 (fast leader election), as in 3.8", "quorum.election_alg", "int"),
    "cnxTimeout": _honoured("ms to connect to a peer's election port", "quorum.cnx_timeout_ms", "int"),
    "peerType": _honoured("participant or observer (the server list wins, as in ZooKeeper)", "quorum.peer_type"),
    "standaloneEnabled": _honoured("false: even one server runs as an ensemble member",
                                   "quorum.standalone_enabled", "bool"),
    "quorumListenOnAllIPs": _honoured("listen for peers on every address", "quorum.quorum_listen_on_all_ips",
                                      "bool"),
    "zkpy.quorumBindAddress": _honoured("zkpy's own: the address this member's quorum and election ports "
                                        "listen on, where it differs from the one its server.N line announces "
                                        "(quorumListenOnAllIPs=true still listens on every address)",
                                        "quorum.bind_host", "str"),
    "zkpy.quorumSync": _honoured("zkpy's own: a sync is answered only after a quorum confirms the leader",
                                 "quorum.quorum_sync", "bool"),
    "reconfigEnabled": _honoured("true: the reconfig command changes the ensemble at runtime (dynamic files "
                                 "zoo.cfg.dynamic.<version>, zoo.cfg rewritten as ZooKeeper does); false: "
                                 "ReconfigDisabled", "reconfig_enabled"),
    "group.N": _honoured("hierarchical quorums (QuorumHierarchical): group.G=sid:sid:... puts servers in a "
                         "group; a quorum is a weighted majority in a majority of the groups", "quorum.groups"),
    "weight.N": _honoured("weight.SID=W weighs a server in its group (default 1; 0: never leads)",
                          "quorum.weights"),
    "oraclePath": _refused("the quorum oracle (QuorumOracleMaj) is not implemented: zkpy would disagree with "
                           "the other members about what a quorum is"),
    "multiAddress.enabled": _none("zkpy reads one address per server.N line; a line with several "
                                  "('a|b') is refused", "false"),
    "multiAddress.reachabilityCheckTimeoutMs": _none("zkpy reads one address per server.N line"),
    "multiAddress.reachabilityCheckEnabled": _none("zkpy reads one address per server.N line"),
    "syncEnabled": _none("zkpy observers log txns and write snapshots as participants do", "true"),
    "observerMasterPort": _none("zkpy observers connect to the leader only"),
    "connectToLearnerMasterLimit": _none("zkpy gives learners initLimit ticks to connect"),
    "maxTimeToWaitForEpoch": _none("not configurable in zkpy"),
    "leaderServes": _none("a zkpy leader always accepts client connections", "yes"),
    "quorumCnxnTimeoutMs": _none("zkpy gives an election connection's handshake syncLimit ticks "
                                 "(ZooKeeper's default)", "-1"),
    "tcpKeepAlive": _none("zkpy does not set SO_KEEPALIVE on quorum sockets", "false"),
    "clientTcpKeepAlive": _none("zkpy does not set SO_KEEPALIVE on client sockets", "false"),
    "electionPortBindRetry": _none("zkpy binds its election port once, without retries"),
    "observer.reconnectDelayMs": _none("not configurable in zkpy"),
    "observer.election.DelayMs": _none("not configurable in zkpy"),
    "fastleader.minNotificationInterval": _none("zkpy's election uses ZooKeeper's default intervals"),
    "fastleader.maxNotificationInterval": _none("zkpy's election re-sends after 200 ms of silence, doubling up "
                                                "to 2 s (ZooKeeper's default: 60 s), so a member back from a "
                                                "partition rejoins within about 2 s"),
    "localSessionsEnabled": _honoured("a member's new sessions are local: created, expired and closed by that "
                                      "member alone, without a txn (a standalone server's are all global, as in "
                                      "ZooKeeper)", "quorum.local_sessions", "bool"),
    "localSessionsUpgradingEnabled": _honoured("with localSessionsEnabled, an ephemeral create upgrades a local "
                                               "session to a global one (else it fails with "
                                               "EphemeralOnLocalSession)", "quorum.local_sessions_upgrading",
                                               "bool"),
    "portUnification": _none("zkpy's quorum ports speak either TLS (sslQuorum=true) or plaintext, not both",
                             "false"),
    "kerberos.canonicalizeHostNames": _none(_NO_KERBEROS),
    "jvm.pause.info-threshold.ms": _none(_JVM),
    "jvm.pause.warn-threshold.ms": _none(_JVM),
    "jvm.pause.sleep.time.ms": _none(_JVM),
    "jvm.pause.monitor": _none(_JVM),
    # --- performance, throttling, internals
    "globalOutstandingLimit": _none(_REQ_THROTTLE),
    "commitLogCount": _none("zkpy keeps ZooKeeper's default: the last 500 committed txns, for DIFF syncs",
                            "500"),
    "snapSizeLimitInKb": _none("zkpy snapshots after snapCount txns only"),
    "txnLogSizeLimitInKb": _none("zkpy rolls the txn log after snapCount txns only"),
    "maxCnxns": _none("zkpy limits connections per client IP only (maxClientCnxns)", "0"),
    "fsync.warningthresholdms": _none("zkpy logs no slow-fsync warning"),
    "maxResponseCacheSize": _none("zkpy has no response cache"),
    "maxGetChildrenResponseCacheSize": _none("zkpy has no response cache"),
    "emulate353TTLNodes": _refused("zkpy reads and writes TTL nodes as ZooKeeper 3.5.4 and later do; "
                                   "nodes kept in ZooKeeper 3.5.3's encoding would be misread", "true"),
    "watchManagerName": _none(_JVM),
    "watcherCleanThreadsNum": _none(_JVM),
    "watcherCleanThreshold": _none(_JVM),
    "watcherCleanIntervalInSeconds": _none(_JVM),
    "maxInProcessingDeadWatchers": _none(_JVM),
    "bitHashCacheSize": _none(_JVM),
    "connectionMaxTokens": _none(_NO_THROTTLE, "0"),
    "connectionTokenFillTime": _none(_NO_THROTTLE),
    "connectionTokenFillCount": _none(_NO_THROTTLE),
    "connectionFreezeTime": _none(_NO_THROTTLE),
    "connectionDropIncrease": _none(_NO_THROTTLE),
    "connectionDropDecrease": _none(_NO_THROTTLE),
    "connectionDecreaseRatio": _none(_NO_THROTTLE),
    "zookeeper.connection_throttle_weight_enabled": _none(_NO_THROTTLE),
    "zookeeper.connection_throttle_global_session_weight": _none(_NO_THROTTLE),
    "zookeeper.connection_throttle_local_session_weight": _none(_NO_THROTTLE),
    "zookeeper.connection_throttle_renew_session_weight": _none(_NO_THROTTLE),
    "clientPortListenBacklog": _none("zkpy listens with a fixed backlog (the conf four-letter word shows it)"),
    "serverCnxnFactory": _none("zkpy has one client port implementation (asyncio); TLS comes from "
                               "secureClientPort and ssl.*"),
    "flushDelay": _none(_GROUP_COMMIT, "0"),
    "maxWriteQueuePollTime": _none(_GROUP_COMMIT),
    "maxBatchSize": _none(_GROUP_COMMIT),
    "enforceQuota": _honoured("true: a create or setData past a hard quota (setquota -N/-B) gets QuotaExceeded, "
                              "one past a soft quota a log line (default false)", "enforce_quota"),
    "zookeeper.enforceQuota": _honoured("the same, by its system property's name (also read as "
                                        "-Dzookeeper.enforceQuota= in SERVER_JVMFLAGS or JVMFLAGS)", "enforce_quota"),
    "requestThrottleLimit": _none(_REQ_THROTTLE, "0"),
    "requestThrottleStallTime": _none(_REQ_THROTTLE),
    "requestThrottleDropStale": _none(_REQ_THROTTLE),
    "requestStaleLatencyCheck": _none(_REQ_THROTTLE),
    "requestStaleConnectionCheck": _none(_REQ_THROTTLE),
    "zookeeper.request_throttler.shutdownTimeout": _none(_REQ_THROTTLE),
    "advancedFlowControlEnabled": _none("a Netty setting; zkpy bounds each connection's buffers itself"),
    "enableEagerACLCheck": _none("zkpy checks ACLs where the request is prepared; clients get the same "
                                 "NoAuth either way", "false"),
    "maxConcurrentSnapSyncs": _none("not configurable in zkpy"),
    "maxConcurrentDiffSyncs": _none("not configurable in zkpy"),
    "digest.enabled": _none("zkpy always keeps and checks the tree digest", "true"),
    "snapshot.compression.method": _none("zkpy writes snapshots uncompressed (it reads .gz ones, not "
                                         ".snappy)", ""),
    "snapshot.trust.empty": _none("zkpy replays logs without a snapshot only when they hold the whole "
                                  "history, and refuses to start otherwise", "false"),
    "audit.enable": _none("zkpy writes no audit log", "false"),
    "audit.impl.class": _none("zkpy writes no audit log"),
    "largeRequestMaxBytes": _none("zkpy bounds requests by jute.maxbuffer and per connection"),
    "largeRequestThreshold": _none("zkpy bounds requests by jute.maxbuffer and per connection", "-1"),
    "outstandingHandshake.limit": _none("a Netty setting; zkpy bounds TLS handshakes itself"),
    "netty.server.earlyDropSecureConnectionHandshakes": _none("a Netty setting", "false"),
    "throttledOpWaitTime": _none(_REQ_THROTTLE, "0"),
    "learner.closeSocketAsync": _none("zkpy never blocks on closing a socket"),
    "leader.closeSocketAsync": _none("zkpy never blocks on closing a socket"),
    "learner.asyncSending": _none("zkpy learners always send without blocking"),
    "forward_learner_requests_to_commit_processor_disabled": _none(_JVM),
    "zookeeper.nio.numSelectorThreads": _none(_JVM + "; serverWorkers spreads clients over processes"),
    "zookeeper.nio.numWorkerThreads": _none(_JVM + "; serverWorkers spreads clients over processes"),
    "serverWorkers": _honoured("zkpy's own key: how many processes serve the client port (default 1; "
                               "'auto': one per CPU). With 1 the server is one process; with N > 1, N worker "
                               "processes each hold a replica fed like an observer, share the port with "
                               "SO_REUSEPORT and forward writes and sessions to a dedicated member process, "
                               "which serves no client: it recovers the data dir, owns the txn log and "
                               "sequences every write; an ensemble member in any role starts fresh workers "
                               "each term (a follower's or observer's relayed to the leader through it)",
                               "server_workers"),
    "zookeeper.commitProcessor.numWorkerThreads": _none(_JVM),
    "zookeeper.commitProcessor.maxReadBatchSize": _none(_JVM),
    "zookeeper.commitProcessor.maxCommitBatchSize": _none(_JVM),
    "znode.container.maxNeverUsedIntervalMs": _none("zkpy never deletes a container that never had a "
                                                    "child (ZooKeeper's default, 0)", "0"),
    "zookeeper.messageTracker.BufferSize": _none(_JVM),
    "zookeeper.messageTracker.Enabled": _none(_JVM),
    "zookeeper.follower.skipLearnerRequestToNextProcessor": _none(_JVM),
    "jute.maxbuffer.extrasize": _none("zkpy bounds txns by jute.maxbuffer"),
    "fips-mode": _none("zkpy uses OpenSSL through Python's ssl module"),
    "readonlymode.enabled": _honoured("an ensemble member cut off from its quorum serves read-only clients "
                                      "(isro: ro) until the quorum is back; ZooKeeper reads it only as the system "
                                      "property -Dreadonlymode.enabled=true (it ignores this zoo.cfg line), which "
                                      "zkpy reads in SERVER_JVMFLAGS/JVMFLAGS too, over the file",
                                      "read_only_mode", "bool"),
    "db.autocreate": _refused_unless("zkpy cannot join as a non-voting member until synced: with an "
                                     "emptied data dir it would vote, and could elect a leader missing "
                                     "acknowledged txns", "true"),
    "skipACL": _refused("zkpy always checks ACLs; it will not run a server that clients expect to skip "
                        "them", "yes"),
    # --- authentication (those not read by security_keys)
    "DigestAuthenticationProvider.enabled": _refused_unless("zkpy always accepts digest authentication; it "
                                                            "will not accept credentials this deployment "
                                                            "turned off", "true"),
    "DigestAuthenticationProvider.digestAlg": _refused_unless("zkpy computes digest ids with SHA1 only; ACLs "
                                                              "made with another algorithm would not match",
                                                              "sha1", "sha-1"),
    "zookeeper.ensembleAuthName": _none("zkpy has no ensemble auth scheme: clients are not checked for "
                                        "the ensemble's name"),
    "allowSaslFailedClients": _none("zkpy does not let a client whose SASL authentication failed go on",
                                    "false"),
    # --- AdminServer and metrics (issue 12)
    "admin.enableServer": _honoured("the AdminServer's HTTP commands (default true, as ZooKeeper; "
                                    "a ServerConfig built in code has none)", "admin_enabled"),
    "admin.serverAddress": _honoured("the address the AdminServer listens on (zkpy's default 127.0.0.1; "
                                     "ZooKeeper's 0.0.0.0)", "admin_address", "str"),
    "admin.serverPort": _honoured("the AdminServer's port (default 8080; a port in use costs a log line, "
                                  "the server goes on without it)", "admin_port", "int"),
    "admin.idleTimeout": _honoured("how long an idle AdminServer connection stays open, in ms",
                                   "admin_idle_timeout_ms", "int"),
    "admin.commandURL": _honoured("the URL prefix of the commands (default /commands)",
                                  "admin_command_url", "str"),
    "admin.forceHttps": _honoured("the AdminServer serves HTTPS only (ZooKeeper 3.9's key), with the "
                                  "ssl.quorum.* key store under sslQuorum=true, else ssl.*", "admin_force_https"),
    "admin.portUnification": _none("zkpy's AdminServer serves HTTP, or HTTPS only with admin.forceHttps=true; "
                                   "it does not take both on one port", "false"),
    "metricsProvider.className": _honoured(
        "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider serves ZooKeeper's metrics for "
        "Prometheus at http://httpHost:httpPort/metrics; ...impl.DefaultMetricsProvider (the default) serves "
        "none; any other class is refused", "metrics_prometheus"),
    "metricsProvider.httpHost": _honoured("the address /metrics listens on (zkpy's default 127.0.0.1; "
                                          "ZooKeeper's 0.0.0.0)", "metrics_http_host", "str"),
    "metricsProvider.httpPort": _honoured("the port /metrics listens on (default 7000)", "metrics_http_port", "int"),
    "metricsProvider.exportJvmInfo": _honoured("process and platform metrics (prometheus_client's collectors) "
                                               "in place of the JVM's (default true)", "metrics_export_jvm_info"),
    "metricsProvider.*": _none(_NO_METRICS),
}
"""zoo.cfg key (``N``: a number, ``*``: anything) -> what zkpy does with it."""

ALSO: dict[str, tuple[str, ...]] = {
    # the guide's name -> the zoo.cfg spellings of the system property ZooKeeper actually reads
    "connectionMaxTokens": ("connection_throttle_tokens",),
    "connectionTokenFillTime": ("connection_throttle_fill_time",),
    "connectionTokenFillCount": ("connection_throttle_fill_count",),
    "connectionFreezeTime": ("connection_throttle_freeze_time",),
    "connectionDropIncrease": ("connection_throttle_drop_increase",),
    "connectionDropDecrease": ("connection_throttle_drop_decrease",),
    "connectionDecreaseRatio": ("connection_throttle_decrease_ratio",),
    "requestThrottleLimit": ("request_throttle_max_requests",),
    "requestThrottleStallTime": ("request_throttle_stall_time",),
    "requestThrottleDropStale": ("request_throttle_drop_stale",),
    "requestStaleLatencyCheck": ("request_stale_latency_check",),
    "requestStaleConnectionCheck": ("request_stale_connection_check",),
    "throttledOpWaitTime": ("throttled_op_wait_time",),
    "advancedFlowControlEnabled": ("netty.advancedFlowControl.enabled",),
    "maxConcurrentSnapSyncs": ("leader.maxConcurrentSnapSyncs",),
    "maxConcurrentDiffSyncs": ("leader.maxConcurrentDiffSyncs",),
    "maxTimeToWaitForEpoch": ("leader.maxTimeToWaitForEpoch",),
    "outstandingHandshake.limit": ("netty.server.outstandingHandshake.limit",),
    "syncEnabled": ("observer.syncEnabled",),
}
"""Other zoo.cfg spellings of a row: where the guide's name and the property ZooKeeper reads differ."""


def _security_rules() -> dict[str, KeyRule]:
    """The keys ``security_keys`` reads, named from its own tables."""
    rules: dict[str, KeyRule] = {}

    def honoured(key: str, detail: str) -> None:
        rules[key] = KeyRule(Treatment.HONOURED, detail, security=True)

    honoured("secureClientPort", "the TLS client port")
    honoured("secureClientPortAddress", "the address the TLS client port listens on")
    honoured("client.portUnification", "the plain client port also accepts TLS")
    for key in STORE_KEYS:
        honoured(f"ssl.{key}", "the client port's TLS stores (PEM, PKCS12, JKS)")
    for key in TLS_KEYS:
        honoured(f"ssl.{key}", "the client port's TLS settings")
    for key in X509_KEYS:
        honoured(f"ssl.{key}", "how a client certificate becomes its x509: identity")
    honoured("ssl.authProvider", "the scheme a TLS client's certificate authenticates")
    honoured("authProvider.N", "the x509, sasl, digest and ip providers (others are refused)")
    honoured("X509AuthenticationProvider.superUser", "the x509 super user")
    honoured(JAAS_KEY, "the JAAS file with the Server section's SASL users")
    honoured("zookeeper.sasl.serverconfig", "the JAAS section to read (default Server)")
    honoured("kerberos.removeHostFromPrincipal", "SASL identities without the host")
    honoured("kerberos.removeRealmFromPrincipal", "SASL identities without the realm")
    honoured("enforce.auth.enabled", "refuse requests of unauthenticated sessions")
    honoured("enforce.auth.schemes", "the schemes that count for enforce.auth.enabled")
    honoured("sessionRequireClientSASLAuth", "only SASL-authenticated sessions")
    for key, why in SSL_KEYS_WITHOUT_EFFECT.items():
        rules[key] = KeyRule(Treatment.NO_EFFECT, why, security=True)
    honoured("superUser", "a SASL id that is a super user (the system property zookeeper.superUser)")
    honoured("superUser.N", "more SASL super users")
    honoured("sslQuorum", "TLS between members, with the ssl.quorum.* stores")
    honoured("ssl.quorum.*", "the quorum's TLS stores and settings with sslQuorum=true (without it: a WARN, "
                             "as they have no effect)")
    honoured("quorum.auth.enableSasl", "quorum SASL (DIGEST-MD5 from the JAAS file's QuorumServer and "
                                       "QuorumLearner sections)")
    honoured("quorum.auth.learnerRequireSasl", "a learner must authenticate to the leader")
    honoured("quorum.auth.serverRequireSasl", "the leader must authenticate to a learner")
    honoured("quorum.auth.server.saslLoginContext", "the JAAS section of the members' users")
    honoured("quorum.auth.learner.saslLoginContext", "the JAAS section this member logs in with")
    reasons = {"quorum.cnxn.threads.size": "zkpy authenticates quorum connections on its event loop"}
    for key in QUORUM_KEYS:
        if key not in rules:
            rules[key] = KeyRule(Treatment.NO_EFFECT, reasons.get(key, _NO_KERBEROS), security=True)
    return rules


SECURITY_KEYS: dict[str, KeyRule] = _security_rules()
"""The keys ``security_keys`` reads, for the README: it parses them and says their WARNs."""

ALL_KEYS: dict[str, KeyRule] = {**KEYS, **SECURITY_KEYS}
_ALIASES = {alias: name for name, aliases in ALSO.items() for alias in aliases}


def _family(name: str) -> re.Pattern[str]:
    """``server.N``: ``server.`` and a number; ``metricsProvider.*``: ``metricsProvider.`` and anything."""
    prefix, last = name.rsplit(".", 1)
    return re.compile(re.escape(prefix + ".") + ("[0-9]+" if last == "N" else ".+"))


_FAMILIES = [(_family(name), name) for name in ALL_KEYS if name.endswith((".N", ".*"))]


def rule_for(key: str) -> tuple[str, KeyRule] | None:
    """The table's row for a zoo.cfg key, as ``(row name, rule)``; ``None`` for a key in no row.
    A row named ``zookeeper.X`` also matches ``X``: ZooKeeper turns the zoo.cfg line ``X=v`` into
    the system property ``zookeeper.X``, the name its guide gives some keys by."""
    spellings = (key, f"zookeeper.{key}")
    for name in spellings:
        if name in ALL_KEYS:
            return name, ALL_KEYS[name]
        if name in _ALIASES:
            return _ALIASES[name], ALL_KEYS[_ALIASES[name]]
    for pattern, name in _FAMILIES:
        if any(pattern.fullmatch(spelling) for spelling in spellings):
            return name, ALL_KEYS[name]
    # ZooKeeper documents group and weight lines with any suffix after the dot
    if key.startswith("group.") or key.startswith("weight."):
        name = key.split(".", 1)[0] + ".N"
        return name, ALL_KEYS[name]
    return None


def rows(treatment: Treatment) -> Iterator[tuple[str, KeyRule]]:
    """The table's rows with this treatment, in order."""
    for name, rule in ALL_KEYS.items():
        if rule.treatment is treatment:
            yield name, rule


README_BEGIN = "<!-- zoo.cfg keys: generated by `python -m zkpy.cli.zoocfg_keys`; do not edit by hand -->"
README_END = "<!-- end of zoo.cfg keys -->"


def _values(values: frozenset[str]) -> str:
    return " or ".join(f"`{v}`" if v else "empty" for v in sorted(values))


def readme_section() -> str:
    """The README's list of keys, from the table (tests check that the README holds exactly this)."""
    out = [README_BEGIN, "", "**Honoured** (a bad value exits 2 naming the key and the file):", ""]
    for name, rule in rows(Treatment.HONOURED):
        out.append(f"- `{name}`: {rule.detail}")
    out += ["", "**Accepted without effect** (one WARN line at startup naming the key and why; none for "
            "the values listed, which ask for what zkpy does anyway):", ""]
    for name, rule in rows(Treatment.NO_EFFECT):
        also = "".join(f" (also `{alias}`)" for alias in ALSO.get(name, ()))
        same = f" (silent when {_values(rule.same)})" if rule.same else ""
        out.append(f"- `{name}`{also}{same}: {rule.detail}")
    out += ["", "**Refused** (exit 2 with the reason, since ignoring them would change safety):", ""]
    for name, rule in rows(Treatment.REFUSED):
        if rule.when is not None:
            cond = f" when {_values(rule.when)}"
        elif rule.same:
            cond = f" unless {_values(rule.same)}"
        else:
            cond = ""
        out.append(f"- `{name}`{cond}: {rule.detail}")
    out += ["", README_END]
    return "\n".join(out)


if __name__ == "__main__":
    print(readme_section())
