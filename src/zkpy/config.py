"""Server configuration as frozen dataclasses; zoo.cfg keys map one to one to fields."""

from __future__ import annotations

from dataclasses import dataclass, field

from zkpy.wire.consts import DEFAULT_MAX_BUFFER


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

    @property
    def min_session_timeout(self) -> int:
        return self.min_session_timeout_ms if self.min_session_timeout_ms >= 0 else 2 * self.tick_ms

    @property
    def max_session_timeout(self) -> int:
        return self.max_session_timeout_ms if self.max_session_timeout_ms >= 0 else 20 * self.tick_ms

    @property
    def log_dir(self) -> str:
        return self.data_log_dir or self.data_dir
