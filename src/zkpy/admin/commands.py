"""The AdminServer's commands: ZooKeeper 3.8's ``Commands`` table, names, aliases and JSON fields.

Each command turns a `ServerView` into the dict ZooKeeper's AdminServer answers as JSON (its
fields, then ``command``, the primary name, and ``error``, null or a message). The figures are
the four-letter words' (``fourletter``): ``monitor`` is ``mntr``'s key/value list without the
``zk_`` prefix, ``stat`` and ``srvr`` read the same counters. ``http`` serves them.

Differences from 3.8, on purpose:
- ``environment`` and ``system_properties`` describe the Python process (``python.*`` in place
  of ``java.*``, no JVM memory figures; a Python process has no system properties, so
  ``system_properties`` lists the environment's entries and the OS separators);
- ``hash`` answers an empty ``digests`` list (zkpy keeps no digest history), ``observers``
  counts synced observers but lists none, ``server_stats``' JVM-only entries are constants
  (``provider_null`` false, ``fsync_threshold_exceed_count`` 0, the buffer sizes -1);
- ``zabstate``'s addresses are the configured ones (no reachability check);
- ``initial_configuration`` masks the values of keys that name a password.

This is a shell module (it reads the clock, the environment and the data dir's file names).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from zkpy.config import LearnerType, QuorumServer
from zkpy.ids import long_hex
from zkpy.server.connection import Connection
from zkpy.server.core import ServerCore

from . import fourletter as flw
from .view import ServerView

NOT_SERVING = "This ZooKeeper instance is not currently serving requests"
Fields = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Command:
    names: tuple[str, ...]  # the primary name first
    run: Callable[[ServerView, Mapping[str, str]], Fields]
    server_required: bool = True

    @property
    def primary(self) -> str:
        return self.names[0]


def run_command(name: str, server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    """The JSON object ZooKeeper's AdminServer answers for ``name`` (always with HTTP 200)."""
    command = BY_NAME.get(name)
    if command is None:
        return {"command": name, "error": f"Unknown command: {name}"}
    if command.server_required and server.pipeline is None:
        return {"command": name, "error": NOT_SERVING}
    fields = command.run(server, kwargs)
    return {**fields, "command": command.primary, "error": fields.pop("error", None)}


# ---- helpers ----

# modes in which ZooKeeper's server is not a QuorumZooKeeperServer: its quorum commands answer as a
# standalone server's (a read-only server is a plain ZooKeeperServer in 3.8)
_NOT_QUORUM_SERVERS = ("standalone", "read-only")

def _pipeline(server: ServerView) -> ServerCore:
    pipeline = server.pipeline
    assert pipeline is not None  # run_command runs a server_required command only while one serves
    return pipeline


def _number(value: object) -> object:
    """mntr's text figures as JSON numbers ("0.0" -> 0.0); other strings stay strings."""
    if isinstance(value, str):
        try:
            number = Decimal(value)
        except InvalidOperation:
            return value
        return int(number) if number == number.to_integral_value() and "." not in value else float(number)
    return value


def _connection_info(conn: Connection, brief: bool) -> Fields:
    """ServerCnxn.getConnectionInfo."""
    info: Fields = {"remote_socket_address": f"{conn.ip}:{conn.port}",
                    "interest_ops": 0 if conn.paused or conn.closing else 1,
                    "outstanding_requests": conn.outstanding, "packets_received": conn.received,
                    "packets_sent": conn.sent}
    if not brief:
        count = conn.latency_count
        info.update({"session_id": conn.session_id, "last_operation": conn.last_op,
                     "established": conn.established_ms, "session_timeout": conn.timeout_ms,
                     "last_cxid": conn.last_cxid, "last_zxid": conn.last_zxid,
                     "last_response_time": conn.last_response_ms, "last_latency": conn.last_latency,
                     "min_latency": max(conn.min_latency, 0),
                     "avg_latency": conn.total_latency // count if count else 0, "max_latency": conn.max_latency})
    return info


def _connections(server: ServerView, brief: bool) -> list[Fields]:
    pipeline = _pipeline(server)
    return [_connection_info(pipeline.connections[cid], brief) for cid in sorted(pipeline.connections)]


def _quorum_figure(server: ServerView, name: str) -> int:
    for key, value in server.quorum_metrics():
        if key == name and isinstance(value, int):
            return value
    return 0


# ---- the commands ----

def _server_stats(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    pipeline = _pipeline(server)
    stats = pipeline.stats
    snap_dir, log_dir = os.path.join(os.path.abspath(server.config.data_dir), "version-2"), \
        os.path.join(os.path.abspath(server.config.log_dir), "version-2")
    buffers = {"last_buffer_size": -1, "min_buffer_size": -1, "max_buffer_size": -1}
    return {
        "version": flw.full_version(),
        "read_only": pipeline.read_only,
        "server_stats": {
            "packets_sent": stats.packets_sent, "packets_received": stats.packets_received,
            "fsync_threshold_exceed_count": 0, "client_response_stats": dict(buffers),
            "provider_null": False, "data_dir_size": flw._dir_size(snap_dir),
            "log_dir_size": flw._dir_size(log_dir), "server_state": server.mode,
            "last_processed_zxid": pipeline.tree.last_processed_zxid, "outstanding_requests": pipeline.outstanding,
            "avg_latency": flw._avg(stats.total_latency, stats.count), "max_latency": stats.max_latency,
            "min_latency": max(stats.min_latency, 0), "num_alive_client_connections": server.connection_count,
            "uptime": pipeline.now_ms - pipeline.started_ms, "auth_failed_count": 0,
            "non_mtlsremote_conn_count": 0, "non_mtlslocal_conn_count": 0,
        },
        "client_response": dict(buffers),
        **({"proposal_stats": dict(buffers)} if server.mode == "leader" else {}),
        "node_count": flw._znode_count(pipeline),
    }


def _stats(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    return {**_server_stats(server, kwargs), "connections": _connections(server, brief=True),
            "secure_connections": []}


def _monitor(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    return {key: _number(value) for key, value in flw.mntr_values(server)}


def _configuration(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    cfg = server.config
    return {"client_port": server.port,
            "data_dir": os.path.join(os.path.abspath(cfg.data_dir), "version-2"),
            "data_log_dir": os.path.join(os.path.abspath(cfg.log_dir), "version-2"),
            "tick_time": cfg.tick_ms, "max_client_cnxns": cfg.max_client_cnxns,
            "min_session_timeout": cfg.min_session_timeout, "max_session_timeout": cfg.max_session_timeout,
            "server_id": cfg.server_id, "client_port_listen_backlog": server.listen_backlog}


def _cons(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    return {"connections": _connections(server, brief=False), "secure_connections": []}


def _crst(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    for conn in _pipeline(server).connections.values():
        conn.reset_stats()
    return {}


def _srst(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    _pipeline(server).stats.reset()
    return {}


def _dirs(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    cfg = server.config
    return {"datadir_size": flw._dir_size(os.path.join(os.path.abspath(cfg.data_dir), "version-2")),
            "logdir_size": flw._dir_size(os.path.join(os.path.abspath(cfg.log_dir), "version-2"))}


def _dump(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    pipeline = _pipeline(server)
    # the expiry buckets on the server's monotonic clock in ms, as ZooKeeper's (Time.currentElapsedTime)
    expiry = {str(at): sorted(sids) for at, sids in sorted(pipeline.sessions.buckets.items()) if sids}
    ephemerals = {str(sid): sorted(paths) for sid, paths in sorted(pipeline.tree.ephemerals.items())}
    return {"expiry_time_to_session_ids": expiry, "session_id_to_ephemeral_paths": ephemerals}


def _environment(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    lines = flw._envi(server, None).splitlines()[1:]
    return dict(line.split("=", 1) for line in lines if "=" in line)


def _get_trace_mask(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    return {"tracemask": server.trace_mask}


def _set_trace_mask(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    if "traceMask" not in kwargs:
        return {"error": "setTraceMask requires long traceMask argument"}
    try:
        mask = int(kwargs["traceMask"])
    except ValueError:
        return {"error": f"setTraceMask requires long traceMask argument, got {kwargs['traceMask']}"}
    server.trace_mask = mask
    return {"tracemask": mask}


def _hash(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    return {"digests": []}


def _initial_configuration(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    # ZooKeeper 3.8 keeps the zoo.cfg text for a standalone server only; an ensemble member answers null
    standalone = server.mode == "standalone"
    return {"initial_configuration": server.config.initial_configuration if standalone else None}


def _is_read_only(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    pipeline = server.pipeline
    return {"read_only": pipeline is not None and pipeline.read_only}


_SNAPSHOT = re.compile(r"snapshot\.([0-9a-fA-F]+)$")


def _last_snapshot(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    snap_dir = os.path.join(os.path.abspath(server.config.data_dir), "version-2")
    best: tuple[int, str] | None = None
    try:
        for name in os.listdir(snap_dir):
            match = _SNAPSHOT.match(name)
            if match and (best is None or int(match.group(1), 16) > best[0]):
                best = (int(match.group(1), 16), name)
    except OSError:
        pass
    if best is None:
        return {"zxid": long_hex(-1), "timestamp": -1}
    try:
        stamp = int(os.path.getmtime(os.path.join(snap_dir, best[1])))
    except OSError:
        stamp = -1
    return {"zxid": f"{best[0]:x}", "timestamp": stamp}


def _leader(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    quorum = server.config.quorum
    if server.mode in _NOT_QUORUM_SERVERS or quorum is None:
        return {"error": "server is not initialized"}
    leader_id = server.leader_id
    leader = quorum.server(leader_id) if leader_id >= 0 else None
    return {"is_leader": server.mode == "leader", "leader_id": leader_id,
            "leader_ip": leader.host if leader is not None else ""}


def _observers(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    return {"synced_observers": _quorum_figure(server, "synced_observers"), "observers": []}


def _observer_connection_stat_reset(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    return {}


def _ruok(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    return {}


def _system_properties(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    env = _environment(server, kwargs)
    props = {key: value for key, value in env.items() if key != "zookeeper.version"}
    props["file.separator"], props["path.separator"], props["line.separator"] = os.sep, os.pathsep, os.linesep
    props["user.timezone"] = time.strftime("%Z")
    return dict(sorted(props.items()))


def _voting_view(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    quorum = server.config.quorum
    if server.mode in _NOT_QUORUM_SERVERS or quorum is None:
        return {"current_config": {}}
    return {"current_config": {str(int(s.sid)): {
        "server_addresses": [_address(s.host, s.peer_port)],
        "election_addresses": [_address(s.host, s.election_port)],
        "client_address": _client_address(s), "learner_type": s.role.value} for s in quorum.participants}}


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _client_address(s: QuorumServer) -> str:
    return _address(s.client_host or "0.0.0.0", s.client_port) if s.client_port is not None else ""


def _multiple_addresses(host: str, port: int) -> Fields:
    """A ``MultipleAddresses`` as 3.8's Jackson writes it (one address: every view is that one)."""
    one = _address(host, port)
    return {"empty": False, "all_addresses": [one], "all_reachable_addresses": [one], "one": one,
            "reachable_address": one, "wildcard_addresses": [f"0.0.0.0:{port}"], "all_ports": [port],
            "all_host_strings": [host], "all_reachable_addresses_or_all": [one], "reachable_or_one": one}


def _watches(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    pipeline = _pipeline(server)
    table = pipeline.tree.data_watches
    out: dict[str, list[str]] = {}
    for watcher, paths in table.by_watcher.items():
        out.setdefault(str(flw._session_of(server, watcher)), []).extend(sorted(paths))
    return {"session_id_to_watched_paths": out}


def _watches_by_path(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    table = _pipeline(server).tree.data_watches
    return {"path_to_session_ids": {path: sorted(flw._session_of(server, w) for w in watchers)
                                    for path, watchers in sorted(table.by_path.items())}}


def _watch_summary(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    table = _pipeline(server).tree.data_watches
    return {"num_connections": len(table.by_watcher), "num_paths": len(table.by_path),
            "num_total_watches": sum(len(paths) for paths in table.by_watcher.values())}


def _zabstate(server: ServerView, kwargs: Mapping[str, str]) -> Fields:
    quorum = server.config.quorum
    if server.mode in _NOT_QUORUM_SERVERS or quorum is None:
        return {"voting": False, "zabstate": ""}
    me = quorum.me
    if server.mode == "looking":
        state = "election"
    elif server.pipeline is None:
        state = "synchronization"
    else:
        state = "broadcast"
    zxid = server.pipeline.tree.last_processed_zxid if server.pipeline is not None else 0
    fields: Fields = {"myid": server.config.server_id, "is_leader": server.mode == "leader"}
    if me is not None:
        fields.update({"quorum_address": _multiple_addresses(me.host, me.peer_port),
                       "election_address": _multiple_addresses(me.host, me.election_port),
                       "client_address": _client_address(me)})
    fields.update({"voting": me is not None and me.role is LearnerType.PARTICIPANT, "last_zxid": f"0x{zxid:x}",
                   "zab_epoch": zxid >> 32, "zab_counter": zxid & 0xFFFFFFFF, "zabstate": state})
    return fields


COMMANDS: tuple[Command, ...] = (
    Command(("connection_stat_reset", "crst"), _crst),
    Command(("configuration", "conf", "config"), _configuration),
    Command(("connections", "cons"), _cons),
    Command(("hash",), _hash),
    Command(("dirs",), _dirs),
    Command(("dump",), _dump),
    Command(("environment", "env", "envi"), _environment, server_required=False),
    Command(("get_trace_mask", "gtmk"), _get_trace_mask, server_required=False),
    Command(("initial_configuration", "icfg"), _initial_configuration),
    Command(("is_read_only", "isro"), _is_read_only),
    Command(("last_snapshot", "lsnp"), _last_snapshot),
    Command(("leader", "lead"), _leader),
    Command(("monitor", "mntr"), _monitor),
    Command(("observer_connection_stat_reset", "orst"), _observer_connection_stat_reset),
    Command(("ruok",), _ruok),
    Command(("set_trace_mask", "stmk"), _set_trace_mask, server_required=False),
    Command(("server_stats", "srvr"), _server_stats),
    Command(("stats", "stat"), _stats),
    Command(("stat_reset", "srst"), _srst),
    Command(("observers", "obsr"), _observers),
    Command(("system_properties", "sysp"), _system_properties, server_required=False),
    Command(("voting_view",), _voting_view),
    Command(("watches", "wchc"), _watches),
    Command(("watches_by_path", "wchp"), _watches_by_path),
    Command(("watch_summary", "wchs"), _watch_summary),
    Command(("zabstate",), _zabstate, server_required=False),
)
"""Every command of ZooKeeper 3.8's AdminServer, primary name first."""

BY_NAME: dict[str, Command] = {name: c for c in COMMANDS for name in c.names}
PRIMARY_NAMES: tuple[str, ...] = tuple(sorted(c.primary for c in COMMANDS))
