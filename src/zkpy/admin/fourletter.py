"""Four-letter words on the client port, with ZooKeeper 3.8's whitelist and output formats.

A connection whose first four bytes are a known word (``FOUR_LETTER_WORDS``) gets one
plain-text answer and is closed. Tools parse these answers, so each format follows 3.8
line for line: ``zkServer.sh status`` greps ``Mode:`` from ``srvr``, kazoo reads
``zookeeper.version=`` from ``envi`` (as ``major.minor.patch`` followed by anything) and
expects exactly ``rw`` from ``isro``, exporters split ``mntr`` lines on the tab.

Rules kept from 3.8 on purpose:
- ``srvr`` always runs, whatever ``4lw.commands.whitelist`` says (zkServer.sh needs it);
  ``*`` enables every word; a refused word is answered with one line, then the close.
- the asking connection counts as one packet received, and its answer as one sent, so
  ``stat`` lists it with ``recved=1,sent=0`` and ``srvr`` counts it among the connections;
- ``wchs``, ``wchc`` and ``wchp`` report the data-watch table only (getData, exists and
  addWatch registrations), not getChildren watches; ``mntr``'s ``zk_watch_count`` counts both;
- the znode count includes the root twice, because ZooKeeper's tree keys the root under
  both "" and "/" (a fresh server reports 5).

This is a shell module: it reads the clock, the file system and the process's limits.
"""

from __future__ import annotations

import getpass
import os
import platform
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterable
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import zkpy
from zkpy.ids import MASK64, long_hex, to_signed64
from zkpy.server.connection import Connection
from zkpy.server.core import ServerCore
from zkpy.server.learner import LearnerServerCore
from zkpy.server.metrics import Summary as MetricSummary
from zkpy.server.metrics import summary_lines
from zkpy.server.sessions import SessionTracker
from zkpy.tree.quota import EXCEEDED_PER_NAMESPACE, namespace_figures

from .view import ServerView, Summary

_LONG = struct.Struct(">q")
DEFAULT_TRACE_MASK = 306  # ZooTrace's default mask, reported by gtmk until stmk sets another
SESSIONLESS_CNXN_TIMEOUT_MS = 10000  # the bucket width ZooKeeper's connection expiry queue uses

Answer = Callable[[ServerView, Connection | None], str]
NOT_SERVING = "This ZooKeeper instance is not currently serving requests\n"


# ---- the entry point ----

def answer(word: str, server: ServerView, conn: Connection | None = None) -> str:
    """The text ZooKeeper would send for ``word`` (the connection closes after it).

    ``server`` is the server's `ServerView`; ``conn`` is the connection that asked, if the
    caller has it.
    """
    pipeline = server.pipeline
    if pipeline is None:  # an ensemble member between terms (ZooKeeper: no ZooKeeperServer running)
        if not is_enabled(word, server.config.four_letter_words):
            return f"{word} is not executed because it is not in the whitelist.\n"
        return {"ruok": "imok", "isro": "null"}.get(word, NOT_SERVING)
    if conn is not None:
        conn.received += 1
        pipeline.stats.packets_received += 1
    if is_enabled(word, server.config.four_letter_words):
        text = COMMANDS[word](server, conn)
    else:
        text = f"{word} is not executed because it is not in the whitelist.\n"
    if conn is not None:
        conn.sent += 1
        pipeline.stats.packets_sent += 1
    return text


def ask(host: str, port: int, word: str, timeout: float) -> str:
    """The operator's side: send ``word`` to a server and return its whole answer (the server
    closes the connection after it). OSError if the server cannot be reached."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode("ascii"))
        chunks = []
        while True:
            try:
                data = s.recv(65536)
            except ConnectionResetError:
                break
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


def is_enabled(word: str, whitelist: Iterable[str]) -> bool:
    allowed = set(whitelist)
    return word == "srvr" or "*" in allowed or word in allowed


FOLLOWS = "3.8.5"  # where 3.8 releases behave differently, zkpy behaves as this one (README, "deliberately differs")


def full_version() -> str:
    """``3.8.5-zkpy-<version>, built on <date>`` (srvr, stat, envi, mntr, the AdminServer): parsers
    that read ZooKeeper's version see the 3.8 release whose behaviour zkpy follows where 3.8.0 and
    later 3.8 releases differ (exists() on an unreadable node, a bare check)."""
    return f"{FOLLOWS}-zkpy-{zkpy.__version__}, built on {_build_date()}"


def _build_date() -> str:
    try:
        mtime = os.stat(zkpy.__file__).st_mtime
    except (OSError, TypeError):
        mtime = 0.0
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(mtime))


# ---- formatting as Java prints it ----

def java_double(value: float) -> str:
    """``Double.toString``: plain between 1e-3 and 1e7, else ``d.dddE±n``; always a dot."""
    if value == 0:
        return "0.0"
    if 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    text = "".join(map(str, digits))
    power = len(text) + int(exponent) - 1
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"


def _avg(total: int, count: int) -> float:
    """ZooKeeper's average latency: rounded half-up to four decimals."""
    if not count:
        return 0.0
    return float((Decimal(total) / Decimal(count)).quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP))


def _address(conn: Connection) -> str:
    """``InetSocketAddress.toString`` of an unresolved peer: ``/ip:port``."""
    ip = f"[{conn.ip}]" if ":" in conn.ip else conn.ip
    return f"/{ip}:{conn.port}"


def _java_date(wall_ms: int) -> str:
    """``java.util.Date.toString``: ``Sat Nov 21 01:00:41 UTC 2026`` in local time."""
    return time.strftime("%a %b %d %H:%M:%S %Z %Y", time.localtime(wall_ms / 1000))


# ---- what the words read ----

def _connections(server: ServerView) -> list[Connection]:
    return [_serving(server).connections[cid] for cid in sorted(_serving(server).connections)]


def _serving(server: ServerView) -> ServerCore:
    """The request pipeline of a serving server (``answer`` runs a word only while one serves)."""
    pipeline = server.pipeline
    assert pipeline is not None
    return pipeline


def _session_of(server: ServerView, conn_id: Any) -> int:
    conn = _serving(server).connections.get(conn_id)
    return conn.session_id if conn is not None else 0


def _znode_count(pipeline: ServerCore) -> int:
    return int(pipeline.tree.node_count()) + 1  # the root, counted under "" and "/" as ZooKeeper does


def _watch_count(pipeline: ServerCore) -> int:
    return int(pipeline.tree.data_watches.count()) + int(pipeline.tree.child_watches.count())


def _ephemerals_count(pipeline: ServerCore) -> int:
    return sum(len(paths) for paths in pipeline.tree.ephemerals.values())


def _dir_size(path: str) -> int:
    """Bytes in the files under ``path`` (a file's own size; 0 if it does not exist)."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def _snap_dir(server: ServerView) -> str:
    return os.path.join(os.path.abspath(server.config.data_dir), "version-2")


def _log_dir(server: ServerView) -> str:
    return os.path.join(os.path.abspath(server.config.log_dir), "version-2")


def _open_fds() -> int | None:
    for fd_dir in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(fd_dir))
        except OSError:
            continue
    return None


def _max_fds() -> int | None:
    try:
        import resource
    except ImportError:  # not on Unix
        return None
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return int(soft) if soft != resource.RLIM_INFINITY else None


# ---- connection and server statistics ----

def _connection_info(conn: Connection, asking: Connection | None, brief: bool) -> str:
    """One line of ``stat`` (brief) or ``cons`` (full), without the newline."""
    reading = not (conn is asking or conn.paused or conn.closing)
    out = [f" {_address(conn)}[{1 if reading else 0}](queued={conn.outstanding},recved={conn.received},"
           f"sent={conn.sent}"]
    if not brief and conn.session_id:
        count = conn.latency_count
        out.append(f",sid=0x{long_hex(conn.session_id)},lop={conn.last_op},est={conn.established_ms},"
                   f"to={conn.timeout_ms}")
        if conn.last_cxid >= 0:
            out.append(f",lcxid=0x{long_hex(conn.last_cxid)}")
        out.append(f",lzxid=0x{long_hex(conn.last_zxid)},lresp={conn.last_response_ms},llat={conn.last_latency},"
                   f"minlat={max(conn.min_latency, 0)},avglat={conn.total_latency // count if count else 0},"
                   f"maxlat={conn.max_latency}")
    out.append(")")
    return "".join(out)


def _server_stats(server: ServerView) -> str:
    pipeline = _serving(server)
    stats = pipeline.stats
    return (f"Latency min/avg/max: {max(stats.min_latency, 0)}/{java_double(_avg(stats.total_latency, stats.count))}"
            f"/{stats.max_latency}\n"
            f"Received: {stats.packets_received}\n"
            f"Sent: {stats.packets_sent}\n"
            f"Connections: {server.connection_count}\n"
            f"Outstanding: {pipeline.outstanding}\n"
            f"Zxid: 0x{long_hex(pipeline.tree.last_processed_zxid)}\n"
            f"Mode: {_server_state(server)}\n"
            f"Node count: {_znode_count(pipeline)}\n")


def _server_state(server: ServerView) -> str:
    """standalone, leader, follower or observer (QuorumPeer.getServerState)."""
    return server.mode


# ---- the words ----

def _ruok(server: ServerView, conn: Connection | None) -> str:
    return "imok"


def _version(server: ServerView) -> str:
    """srvr's and stat's first lines: the version, and a read-only server's notice."""
    pipeline = server.pipeline
    notice = "READ-ONLY mode; serving only read-only clients\n" if pipeline is not None and pipeline.read_only else ""
    return f"Zookeeper version: {full_version()}\n{notice}"


def _srvr(server: ServerView, conn: Connection | None) -> str:
    return f"{_version(server)}{_server_stats(server)}"


def _stat(server: ServerView, conn: Connection | None) -> str:
    clients = "".join(_connection_info(c, conn, brief=True) + "\n" for c in _connections(server))
    return f"{_version(server)}Clients:\n{clients}\n{_server_stats(server)}"


def _cons(server: ServerView, conn: Connection | None) -> str:
    return "".join(_connection_info(c, conn, brief=False) + "\n" for c in _connections(server)) + "\n"


def _crst(server: ServerView, conn: Connection | None) -> str:
    for c in _connections(server):
        c.reset_stats()
    return "Connection stats reset.\n"


def _srst(server: ServerView, conn: Connection | None) -> str:
    _serving(server).stats.reset()
    _serving(server).metrics.reset()
    return "Server stats reset.\n"


def _mntr(server: ServerView, conn: Connection | None) -> str:
    return "".join(f"zk_{key}\t{value}\n" for key, value in mntr_values(server))


# mntr keys of Apache ZooKeeper 3.8 that zkpy leaves out, and why (tests/interop/test_mntr_keys.py checks the rest)
MNTR_EXCLUDED: dict[str, str] = {
    "jvm_pause_time_ms": "a JVM garbage-collection pause figure; the process metrics of the Prometheus endpoint stand in",
    "netty_queued_buffer_capacity": "Netty's buffers; zkpy serves on asyncio",
    "file_descriptor_count": "a summary ZooKeeper fills from its JMX bean; open_file_descriptor_count gives the figure",
}
MNTR_EXCLUDED_PATTERNS: dict[str, str] = {
    r"\d+_learner_handler_qp_(size|time_ms)": "per-learner queues of ZooKeeper's LearnerHandler threads; zkpy's leader "
                                              "has one bounded output per peer link",
    r"[a-z0-9_]+_write_per_namespace": "per-namespace write sizes (a SummarySet) are not kept",
}


def mntr_values(server: ServerView) -> list[tuple[str, object]]:
    """mntr's ``(key, value)`` lines without the ``zk_`` prefix, in 3.8's order: what ``mntr``,
    the AdminServer's ``monitor`` and the Prometheus endpoint all read."""
    pipeline = _serving(server)
    stats = pipeline.stats
    metrics = pipeline.metrics
    mode = _server_state(server)
    quorum = server.quorum_metrics()  # an ensemble's leader: its learner counts, as 3.8's mntr
    values: list[tuple[str, object]] = [
        ("version", full_version()),
        ("server_state", mode),
    ]
    if mode in ("leader", "follower", "observer"):
        state = {"leader": "leading", "follower": "following", "observer": "observing"}[mode]
        values.append(("peer_state", f"{state} - broadcast"))
    values += [
        ("ephemerals_count", _ephemerals_count(pipeline)),
        ("num_alive_connections", server.connection_count),
        ("outstanding_requests", pipeline.outstanding),
        ("znode_count", _znode_count(pipeline)),
        ("global_sessions", 0 if pipeline.read_only else len(pipeline.sessions.sessions)),  # a read-only server's are local
        ("non_mtls_remote_conn_count", 0),
        ("last_client_response_size", -1),  # response sizes are not kept: -1, ZooKeeper's "none yet"
        ("max_client_response_size", -1),
        ("min_client_response_size", -1),
        ("packets_sent", stats.packets_sent),
        ("packets_received", stats.packets_received),
    ]
    values += [kv for kv in quorum if kv[0].startswith("synced_")]
    values += [
        ("connection_drop_probability", "0.0"),
        ("watch_count", _watch_count(pipeline)),
        ("auth_failed_count", metrics.auth_failed),
        ("approximate_data_size", pipeline.tree.data_size),
    ]
    open_fds, max_fds = _open_fds(), _max_fds()
    if open_fds is not None and max_fds is not None:  # ZooKeeper reports both, on Unix only
        values += [("open_file_descriptor_count", open_fds), ("max_file_descriptor_count", max_fds)]
    values += [kv for kv in quorum if not kv[0].startswith("synced_")]
    config = server.config
    if mode == "leader" and config.quorum is not None:
        values.append(("quorum_size", len(config.quorum.participants)))
    values += [
        ("local_sessions", len(pipeline.sessions.sessions) if pipeline.read_only
         else len(pipeline.local) if pipeline.local is not None else 0),
        ("uptime", pipeline.now_ms - pipeline.started_ms),
        ("outstanding_tls_handshake", 0),
        ("non_mtls_local_conn_count", 0),
    ]
    gauges, exceeded = quota_figures(pipeline)
    for name, per_namespace in gauges.items():  # ZooKeeper's GaugeSets print as <namespace>_<name>
        values += [(f"{namespace}_{name}", figure) for namespace, figure in per_namespace.items()]
    values += metrics.counters.items()
    values += [(f"{namespace}_{EXCEEDED_PER_NAMESPACE}", n) for namespace, n in exceeded.items()]
    values += [("avg_latency", java_double(_avg(stats.total_latency, stats.count))),
               ("min_latency", max(stats.min_latency, 0)), ("max_latency", stats.max_latency)]
    summaries: dict[str, Summary | MetricSummary] = dict(metrics.summaries)
    fsync = server.fsync_summaries()
    if fsync is not None:  # the fsync worker's group commits, under ZooKeeper's metric names
        summaries["fsynctime"], summaries["sync_processor_batch_size"] = fsync
    for name, summary in summaries.items():
        values += _summary(name, summary)
    return values


def quota_figures(pipeline: ServerCore) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """ZooKeeper's per-namespace quota figures: the four gauges (limits and usage summed over the
    quotas under each top-level znode) and the QuotaExceeded refusals counted per namespace."""
    gauges = namespace_figures(pipeline.tree.nodes)
    return ({name: dict(sorted(per.items())) for name, per in gauges.items()},
            dict(sorted(pipeline.prep.quota_exceeded.items())))


def _summary(name: str, counter: Summary | MetricSummary) -> list[tuple[str, object]]:
    """A ``Summary`` as 3.8's mntr prints it: ``avg_``, ``min_``, ``max_``, ``cnt_``, ``sum_``, and
    ``p50_``, ``p95_``, ``p99_``, ``p999_`` for one with quantiles."""
    if isinstance(counter, MetricSummary):
        return summary_lines(name, counter, java_double(_avg(counter.total, counter.count)))
    count, total = counter.count, counter.total
    return [(f"avg_{name}", java_double(_avg(total, count))), (f"min_{name}", counter.min),
            (f"max_{name}", counter.max), (f"cnt_{name}", count), (f"sum_{name}", total)]


def _conf(server: ServerView, conn: Connection | None) -> str:
    cfg = server.config
    snap_dir, log_dir = _snap_dir(server), _log_dir(server)
    return (f"clientPort={server.port}\n"
            f"secureClientPort=-1\n"
            f"dataDir={snap_dir}\n"
            f"dataDirSize={_dir_size(snap_dir)}\n"
            f"dataLogDir={log_dir}\n"
            f"dataLogSize={_dir_size(log_dir)}\n"
            f"tickTime={cfg.tick_ms}\n"
            f"maxClientCnxns={cfg.max_client_cnxns}\n"
            f"minSessionTimeout={cfg.min_session_timeout}\n"
            f"maxSessionTimeout={cfg.max_session_timeout}\n"
            f"clientPortListenBacklog={server.listen_backlog}\n"
            f"serverId={cfg.server_id}\n")


def _envi(server: ServerView, conn: Connection | None) -> str:
    """``key=value`` lines; Java's ``java.*`` entries become the interpreter's ``python.*``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "<NA>"
    entries = [
        ("zookeeper.version", full_version()),
        ("host.name", socket.gethostname() or "<NA>"),  # no DNS lookup: the event loop must not block
        ("python.version", platform.python_version()),
        ("python.implementation", platform.python_implementation()),
        ("python.executable", sys.executable or "<NA>"),
        ("python.path", os.pathsep.join(sys.path)),
        ("os.name", platform.system() or "<NA>"),
        ("os.arch", platform.machine() or "<NA>"),
        ("os.version", platform.release() or "<NA>"),
        ("user.name", user),
        ("user.home", os.path.expanduser("~")),
        ("user.dir", os.getcwd()),
    ]
    if server.config.server_workers > 1:  # which of the serving processes answered (the member logs their pids)
        entries += [("zkpy.serverWorkers", str(server.config.server_workers)), ("process.id", str(os.getpid()))]
    return "Environment:\n" + "".join(f"{key}={value}\n" for key, value in entries)


def _wchs(server: ServerView, conn: Connection | None) -> str:
    table = _serving(server).tree.data_watches
    total = sum(len(paths) for paths in table.by_watcher.values())
    return f"{len(table.by_watcher)} connections watching {len(table.by_path)} paths\nTotal watches:{total}\n"


def _wchc(server: ServerView, conn: Connection | None) -> str:
    table = _serving(server).tree.data_watches
    out = []
    for watcher in sorted(table.by_watcher, key=lambda w: (_session_of(server, w) & MASK64, str(w))):
        out.append(f"0x{long_hex(_session_of(server, watcher))}\n")
        out.extend(f"\t{path}\n" for path in sorted(table.by_watcher[watcher]))
    return "".join(out) + "\n"


def _wchp(server: ServerView, conn: Connection | None) -> str:
    table = _serving(server).tree.data_watches
    out = []
    for path in sorted(table.by_path):
        out.append(f"{path}\n")
        sessions = sorted(_session_of(server, w) & MASK64 for w in table.by_path[path])
        out.extend(f"\t0x{long_hex(sid)}\n" for sid in sessions)
    return "".join(out) + "\n"


def _expiry_sets(buckets: dict[int, list[str]], now_ms: int, wall_ms: int) -> str:
    """ExpiryQueue.dump: ``Sets (buckets)/(members):``, then each bucket by expiry time."""
    out = [f"Sets ({len(buckets)})/({sum(len(m) for m in buckets.values())}):\n"]
    for expires_at in sorted(buckets):
        members = buckets[expires_at]
        out.append(f"{len(members)} expire at {_java_date(wall_ms + expires_at - now_ms)}:\n")
        out.extend(f"\t{m}\n" for m in members)
    return "".join(out)


def _session_sets(tracker: SessionTracker, now_ms: int, wall_ms: int) -> str:
    """A session tracker's expiry buckets, as ExpiryQueue.dump writes them."""
    buckets = {t: [f"0x{long_hex(sid)}" for sid in sorted(sids, key=lambda s: s & MASK64)]
               for t, sids in tracker.buckets.items() if sids}
    return _expiry_sets(buckets, now_ms, wall_ms)


def _dump(server: ServerView, conn: Connection | None) -> str:
    pipeline = _serving(server)
    now_ms, wall_ms = pipeline.now_ms, pipeline.wall_ms
    if isinstance(pipeline, LearnerServerCore):  # LearnerSessionTracker: the committed sessions, no expiry sets
        ids = sorted(pipeline.sessions.sessions, key=to_signed64)
        sessions = f"Global Sessions({len(ids)}):\n" + "".join(
            f"0x{long_hex(sid)}\t{pipeline.sessions.sessions[sid].timeout_ms}ms\n" for sid in ids)
    else:
        sessions = ("Global " if pipeline.local is not None else "") + f"Session {_session_sets(pipeline.sessions, now_ms, wall_ms)}"
    if pipeline.local is not None:  # 3.8's Leader/LearnerSessionTracker: the local tracker's sets first
        sessions = f"Local Session {_session_sets(pipeline.local.tracker, now_ms, wall_ms)}{sessions}"
    ephemerals = pipeline.tree.ephemerals
    owners = sorted(ephemerals, key=lambda s: s & MASK64)
    eph = "".join(f"0x{long_hex(sid)}:\n" + "".join(f"\t{p}\n" for p in sorted(ephemerals[sid])) for sid in owners)
    width = SESSIONLESS_CNXN_TIMEOUT_MS
    conns: dict[int, list[str]] = {}
    for c in _connections(server):
        session = pipeline.sessions.sessions.get(c.session_id) if c.session_id else None
        if session is None and pipeline.local is not None:
            session = pipeline.local.tracker.sessions.get(c.session_id)
        expires_at = session.expires_at if session is not None else (now_ms + width) // width * width + width
        conns.setdefault(expires_at, []).append(f"ip: {_address(c)} sessionId: 0x{long_hex(c.session_id)}")
    return ("SessionTracker dump:\n"
            f"{sessions}"
            "ephemeral nodes dump:\n"
            f"Sessions with Ephemerals ({len(owners)}):\n{eph}"
            "Connections dump:\n"
            f"Connections {_expiry_sets(conns, now_ms, wall_ms)}")


def _dirs(server: ServerView, conn: Connection | None) -> str:
    return f"datadir_size: {_dir_size(_snap_dir(server))}\nlogdir_size: {_dir_size(_log_dir(server))}\n"


def _isro(server: ServerView, conn: Connection | None) -> str:
    pipeline = server.pipeline
    return "ro" if pipeline is not None and pipeline.read_only else "rw"


def _gtmk(server: ServerView, conn: Connection | None) -> str:
    return str(server.trace_mask)


def _stmk(server: ServerView, conn: Connection | None) -> str:
    """``stmk`` is followed by the new mask, a big-endian long; the answer echoes it."""
    if conn is None or conn.decoder.buffered < 12:
        return ""  # the mask did not come with the word: ZooKeeper fails the command too
    mask = _LONG.unpack(conn.decoder.peek(12)[4:])[0]
    server.trace_mask = mask
    return str(mask)


COMMANDS: dict[str, Answer] = {
    "ruok": _ruok, "srvr": _srvr, "stat": _stat, "mntr": _mntr, "conf": _conf, "cons": _cons,
    "crst": _crst, "srst": _srst, "envi": _envi, "wchs": _wchs, "wchc": _wchc, "wchp": _wchp,
    "dump": _dump, "dirs": _dirs, "isro": _isro, "gtmk": _gtmk, "stmk": _stmk,
}
