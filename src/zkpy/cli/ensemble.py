"""``zkpy ensemble``: run a local ensemble of zkpy servers, and report on any ensemble.

``zkpy ensemble --size N`` writes a zoo.cfg and a myid per member under ``--dir``, starts each
member as a ``zkpy server`` child process, prints the connect string once every member serves,
and stops them all on Ctrl-C or SIGTERM. ``zkpy ensemble status`` asks every member ``srvr``
(which ZooKeeper 3.8 answers whatever ``4lw.commands.whitelist`` says) and prints one line per
member; it reads Apache ZooKeeper's answers as well as zkpy's.

The ensemble directory::

    ensemble.json          members: sid, role, ports, paths (relative to the directory), pids
    serverN/zoo.cfg        rewritten from ensemble.json on every start
    serverN/data/myid      dataDir
    serverN/server.log     the member's output, appended to on every start

Port layout with ``--base-port P``: member i (from 0) gets client port P+i, peer port P+100+i
and election port P+200+i; without it, free ports. A second run on the same directory reuses
its data dirs and the ports recorded in ensemble.json.

Planning, zoo.cfg text, ensemble.json and the parsing and rendering of ``srvr`` answers are
functions of their arguments (no sockets, no processes), so they are tested as such.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from types import FrameType
from typing import Any, NoReturn

import click
from click.core import ParameterSource

from zkpy.admin.fourletter import ask as ask_four_letter_word
from zkpy.cli.service import alive as pid_alive
from zkpy.client.core import parse_hosts as parse_connect_string

ENSEMBLE_FILE = "ensemble.json"
FORMAT_VERSION = 1
DEFAULT_DIR = "zkpy-ensemble"
DEFAULT_TICK_MS = 2000
INIT_LIMIT = 10
SYNC_LIMIT = 5
PORT_STRIDE = 100  # --base-port P: clients at P.., peers at P+100.., elections at P+200..
HOST = "127.0.0.1"

EXIT_NO_QUORUM = 1
EXIT_FAILED = 1
EXIT_CONFIG = 2

PARTICIPANT = "participant"
OBSERVER = "observer"
ROLES = (PARTICIPANT, OBSERVER)

# what `srvr` says in its Mode line, plus the two states of a member that does not say one
SERVING_MODES = frozenset({"leader", "follower", "observer", "standalone"})
DOWN = "down"
NOT_SERVING = "not serving"


class EnsembleError(Exception):
    """A bad ensemble directory or request; the message names the file and key."""


# ---- the ensemble description (pure) ----

@dataclass(frozen=True, slots=True)
class Member:
    """One server of a local ensemble; paths are relative to the ensemble directory."""

    sid: int
    role: str  # participant | observer
    client_port: int
    peer_port: int
    election_port: int
    zoo_cfg: str
    data_dir: str
    log_file: str
    pid: int | None = None  # while a supervisor runs it

    @property
    def address(self) -> str:
        return f"{HOST}:{self.client_port}"

    @property
    def workdir(self) -> str:
        return os.path.dirname(self.zoo_cfg)


@dataclass(frozen=True, slots=True)
class Ensemble:
    """What ensemble.json holds."""

    tick_ms: int
    members: tuple[Member, ...]

    @property
    def connect_string(self) -> str:
        return ",".join(m.address for m in self.members)

    @property
    def observers(self) -> int:
        return sum(1 for m in self.members if m.role == OBSERVER)

    def with_pids(self, pids: dict[int, int | None]) -> Ensemble:
        return replace(self, members=tuple(replace(m, pid=pids.get(m.sid, m.pid)) for m in self.members))


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports the kernel hands out now (all held until all are chosen)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            sockets.append(s)
            s.bind((HOST, 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def plan_ensemble(size: int, observers: int = 0, base_port: int | None = None, tick_ms: int = DEFAULT_TICK_MS,
                  pick_ports: Callable[[int], list[int]] = free_ports) -> Ensemble:
    """``size`` members, the last ``observers`` of them observers; ports from ``base_port`` or
    ``pick_ports`` (three per member: client, peer, election)."""
    if size < 1:
        raise EnsembleError(f"--size {size}: an ensemble needs at least one server")
    if not 0 <= observers < size:
        raise EnsembleError(f"--observers {observers}: must be between 0 and --size - 1 ({size - 1})")
    if observers and size - observers < 2:
        raise EnsembleError(f"--observers {observers}: observers need at least two participants "
                            f"(--size {size} leaves {size - observers})")
    if tick_ms < 1:
        raise EnsembleError(f"--tick-ms {tick_ms}: must be positive")
    if base_port is not None:
        if size > PORT_STRIDE:
            raise EnsembleError(f"--size {size}: at most {PORT_STRIDE} servers with --base-port")
        if base_port < 1 or base_port + 2 * PORT_STRIDE + size - 1 > 65535:
            raise EnsembleError(f"--base-port {base_port}: ports {base_port}..{base_port + 2 * PORT_STRIDE + size - 1} "
                                "must lie in 1..65535")
        ports = [(base_port + i, base_port + PORT_STRIDE + i, base_port + 2 * PORT_STRIDE + i) for i in range(size)]
    else:
        picked = pick_ports(3 * size)
        if len(set(picked)) != 3 * size:
            raise EnsembleError(f"could not find {3 * size} distinct free ports")
        ports = [(picked[3 * i], picked[3 * i + 1], picked[3 * i + 2]) for i in range(size)]
    members = []
    for i, (client, peer, election) in enumerate(ports):
        sid = i + 1
        workdir = f"server{sid}"
        members.append(Member(sid, OBSERVER if i >= size - observers else PARTICIPANT, client, peer, election,
                              zoo_cfg=f"{workdir}/zoo.cfg", data_dir=f"{workdir}/data",
                              log_file=f"{workdir}/server.log"))
    return Ensemble(tick_ms, tuple(members))


def server_line(member: Member) -> str:
    """``server.N=host:peer:election[:observer];host:client`` (ZooKeeper 3.8's form)."""
    role = ":observer" if member.role == OBSERVER else ""
    return f"server.{member.sid}={HOST}:{member.peer_port}:{member.election_port}{role};{HOST}:{member.client_port}"


def render_zoo_cfg(ensemble: Ensemble, member: Member, root: str) -> str:
    """The zoo.cfg of ``member``; ``root`` is the ensemble directory (dataDir is written absolute)."""
    lines = [
        "# written by `zkpy ensemble` from ensemble.json; edits are lost on its next start",
        f"tickTime={ensemble.tick_ms}",
        f"initLimit={INIT_LIMIT}",
        f"syncLimit={SYNC_LIMIT}",
        f"dataDir={os.path.join(root, member.data_dir)}",
        f"clientPort={member.client_port}",
        "4lw.commands.whitelist=*",
        # every member on one host would ask for the AdminServer's port 8080: off here; the
        # four-letter words answer, and a member started by hand with admin.serverPort serves HTTP
        "admin.enableServer=false",
    ]
    if member.role == OBSERVER:
        lines.append("peerType=observer")
    lines += [server_line(m) for m in ensemble.members]
    return "\n".join(lines) + "\n"


def ensemble_to_json(ensemble: Ensemble) -> str:
    members = [{"sid": m.sid, "role": m.role, "client_port": m.client_port, "peer_port": m.peer_port,
                "election_port": m.election_port, "zoo_cfg": m.zoo_cfg, "data_dir": m.data_dir,
                "log_file": m.log_file, "pid": m.pid} for m in ensemble.members]
    doc = {"version": FORMAT_VERSION, "tick_ms": ensemble.tick_ms, "members": members}
    return json.dumps(doc, indent=2) + "\n"


def _field(source: str, where: str, obj: dict[str, Any], key: str, kind: type, optional: bool = False) -> Any:
    if key not in obj:
        if optional:
            return None
        raise EnsembleError(f"{source}: {where}{key} is missing")
    value = obj[key]
    if value is None and optional:
        return None
    # bool is an int in Python; JSON true is no port number
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise EnsembleError(f"{source}: {where}{key}={json.dumps(value)} is not {'an integer' if kind is int else 'a string'}")
    return value


def ensemble_from_json(text: str, source: str) -> Ensemble:
    """Read ensemble.json; ``source`` names the file in errors, with the key at fault."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EnsembleError(f"{source}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if not isinstance(doc, dict):
        raise EnsembleError(f"{source}: expected a JSON object")
    version = _field(source, "", doc, "version", int)
    if version != FORMAT_VERSION:
        raise EnsembleError(f"{source}: version={version}: this zkpy reads version {FORMAT_VERSION}")
    tick_ms = _field(source, "", doc, "tick_ms", int)
    if tick_ms < 1:
        raise EnsembleError(f"{source}: tick_ms={tick_ms} must be positive")
    raw_members = doc.get("members")
    if not isinstance(raw_members, list) or not raw_members:
        raise EnsembleError(f"{source}: members must be a non-empty list")
    members: list[Member] = []
    seen_ports: dict[int, str] = {}
    for i, raw in enumerate(raw_members):
        where = f"members[{i}]."
        if not isinstance(raw, dict):
            raise EnsembleError(f"{source}: members[{i}] is not an object")
        sid = _field(source, where, raw, "sid", int)
        if sid < 1 or any(m.sid == sid for m in members):
            raise EnsembleError(f"{source}: {where}sid={sid} must be positive and unique")
        role = _field(source, where, raw, "role", str)
        if role not in ROLES:
            raise EnsembleError(f"{source}: {where}role={role!r} must be participant or observer")
        ports = []
        for key in ("client_port", "peer_port", "election_port"):
            port = _field(source, where, raw, key, int)
            if not 1 <= port <= 65535:
                raise EnsembleError(f"{source}: {where}{key}={port} is not a port number")
            if port in seen_ports:
                raise EnsembleError(f"{source}: {where}{key}={port} is also {seen_ports[port]}")
            seen_ports[port] = f"{where}{key}"
            ports.append(port)
        paths = [_field(source, where, raw, key, str) for key in ("zoo_cfg", "data_dir", "log_file")]
        for key, path in zip(("zoo_cfg", "data_dir", "log_file"), paths):
            if not path:
                raise EnsembleError(f"{source}: {where}{key} is empty")
        pid = _field(source, where, raw, "pid", int, optional=True)
        members.append(Member(sid, role, ports[0], ports[1], ports[2], paths[0], paths[1], paths[2], pid))
    participants = sum(1 for m in members if m.role == PARTICIPANT)
    if participants == 0 or (participants == 1 and len(members) > 1):
        raise EnsembleError(f"{source}: members: {participants} participant(s) among {len(members)} servers; "
                            "observers need at least two participants")
    return Ensemble(tick_ms, tuple(members))


def load_ensemble(root: str) -> Ensemble:
    path = os.path.join(root, ENSEMBLE_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise EnsembleError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return ensemble_from_json(text, path)


def save_ensemble(root: str, ensemble: Ensemble) -> None:
    """Write ensemble.json whole or not at all (a reader never sees half a file)."""
    path = os.path.join(root, ENSEMBLE_FILE)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(ensemble_to_json(ensemble))
    os.replace(tmp, path)


def reconcile(existing: Ensemble, source: str, size: int | None, observers: int | None, base_port: int | None,
              tick_ms: int | None) -> Ensemble:
    """The recorded ensemble, with the options of this run checked against it (only the tick may change)."""
    if size is not None and size != len(existing.members):
        raise EnsembleError(f"{source}: the ensemble has {len(existing.members)} servers, --size asks for {size}; "
                            "use another --dir for another ensemble")
    if observers is not None and observers != existing.observers:
        raise EnsembleError(f"{source}: the ensemble has {existing.observers} observers, --observers asks for "
                            f"{observers}")
    if base_port is not None:
        planned = plan_ensemble(len(existing.members), existing.observers, base_port, existing.tick_ms)
        for old, new in zip(existing.members, planned.members):
            if (old.client_port, old.peer_port, old.election_port) != (new.client_port, new.peer_port,
                                                                       new.election_port):
                raise EnsembleError(f"{source}: server.{old.sid} uses ports {old.client_port}/{old.peer_port}/"
                                    f"{old.election_port}, not those of --base-port {base_port}")
    return replace(existing, tick_ms=tick_ms) if tick_ms is not None else existing


# ---- four-letter words and the status table (pure but for `four_letter`) ----

def four_letter(host: str, port: int, word: str, timeout: float = 2.0) -> str:
    """Send a four-letter word, return the whole answer (the server closes the connection)."""
    return ask_four_letter_word(host, port, word, timeout)


@dataclass(frozen=True, slots=True)
class MemberStatus:
    """One row of ``zkpy ensemble status``."""

    address: str
    sid: int | None
    role: str  # a srvr Mode (leader, follower, observer, standalone, read-only), "not serving" or "down"
    zxid: int | None = None
    connections: int | None = None
    znodes: int | None = None
    sessions: int | None = None  # mntr's zk_global_sessions, when mntr is whitelisted
    refused: tuple[str, ...] = ()  # the words it did not answer: not in its 4lw.commands.whitelist

    @property
    def serving(self) -> bool:
        return self.role in SERVING_MODES

    @property
    def epoch(self) -> int | None:
        return None if self.zxid is None else self.zxid >> 32


def _srvr_fields(text: str) -> dict[str, str]:
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


def _int_or_none(text: str | None, base: int = 10) -> int | None:
    if text is None:
        return None
    try:
        return int(text, base)
    except ValueError:
        return None


def _sessions(mntr: str | None) -> int | None:
    for line in (mntr or "").splitlines():
        key, _, value = line.partition("\t")
        if key == "zk_global_sessions":
            return _int_or_none(value.strip())
    return None


def status_from_answers(address: str, sid: int | None, srvr: str | None, conf: str | None = None,
                        mntr: str | None = None) -> MemberStatus:
    """A row from a member's ``srvr`` answer (``None``: it did not answer), for the sid when it
    is not known its ``conf`` answer, and for the session count its ``mntr`` answer."""
    if sid is None and conf:
        for line in conf.splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "serverId":
                sid = _int_or_none(value.strip())
    if srvr is None:
        return MemberStatus(address, sid, DOWN)
    fields = _srvr_fields(srvr)
    mode = fields.get("Mode")
    if not mode:  # "This ZooKeeper instance is not currently serving requests"
        return MemberStatus(address, sid, NOT_SERVING)
    zxid_text = fields.get("Zxid")
    zxid = _int_or_none(zxid_text[2:] if zxid_text and zxid_text.startswith("0x") else zxid_text, 16)
    refused = tuple(word for word, answer in (("conf", conf), ("mntr", mntr))
                    if answer is not None and "is not in the whitelist" in answer)
    return MemberStatus(address, sid, mode, zxid, _int_or_none(fields.get("Connections")),
                        _int_or_none(fields.get("Node count")), _sessions(mntr), refused)


def whitelist_note(rows: Sequence[MemberStatus]) -> str | None:
    """Why a sid or sessions cell is "-" on a member that serves: the line that says which words
    its 4lw.commands.whitelist lacks (ZooKeeper 3.8's default allows srvr alone)."""
    refused = sorted({word for r in rows for word in r.refused})
    if not refused:
        return None
    shows = {"conf": "sid", "mntr": "sessions"}
    return (f"{' and '.join(shows[w] for w in refused)}: '-' where {' and '.join(refused)} "
            f"{'is' if len(refused) == 1 else 'are'} not in 4lw.commands.whitelist "
            f"(add {','.join(refused)} to it to see them)")


def has_quorum(rows: Sequence[MemberStatus], observers: Iterable[str] = ()) -> tuple[bool, str]:
    """Whether a majority of the voting members serves, and a line that says so.

    A member counts as voting unless it reports ``observer`` or its address is in ``observers``
    (from ensemble.json); a member that is down and unknown counts as voting."""
    known_observers = set(observers)
    voters = [r for r in rows if r.role != "observer" and r.address not in known_observers]
    serving = sum(1 for r in voters if r.serving)
    needed = len(voters) // 2 + 1
    ok = bool(voters) and serving >= needed
    verdict = "quorum" if ok else "no quorum"
    return ok, f"{verdict}: {serving} of {len(voters)} voting servers serving (a quorum is {needed})"


def render_status(rows: Sequence[MemberStatus]) -> str:
    """Aligned columns: sid, address, role, zxid, epoch, sessions, connections, znodes ("-" when unknown)."""
    header = ("sid", "address", "role", "zxid", "epoch", "sessions", "conns", "znodes")

    def cell(value: object) -> str:
        return "-" if value is None else str(value)

    table = [header] + [(cell(r.sid), r.address, r.role, "-" if r.zxid is None else f"0x{r.zxid:x}", cell(r.epoch),
                         cell(r.sessions), cell(r.connections), cell(r.znodes)) for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in table) + "\n"


def parse_hosts(text: str) -> list[tuple[str, int]]:
    """The servers of a connect string given as ``--hosts`` (``host:port,host:port[/chroot]``, IPv6
    in brackets, port 2181 by default), read by the client's parser (``client.core.parse_hosts``)."""
    try:
        hosts, _chroot = parse_connect_string(text)
    except ValueError as exc:
        raise EnsembleError(f"--hosts: {exc}") from None
    return hosts


def query_member(host: str, port: int, sid: int | None, timeout: float = 2.0) -> MemberStatus:
    """Ask one member ``srvr`` (and ``conf`` for its sid, when not known)."""
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        srvr: str | None = four_letter(host, port, "srvr", timeout)
    except OSError:
        srvr = None
    conf = mntr = None
    if sid is None and srvr is not None:
        try:
            conf = four_letter(host, port, "conf", timeout)
        except OSError:
            conf = None
    if srvr is not None:
        try:
            mntr = four_letter(host, port, "mntr", timeout)
        except OSError:
            mntr = None
    return status_from_answers(address, sid, srvr, conf, mntr)


def query_all(targets: Sequence[tuple[str, int, int | None]], timeout: float = 2.0) -> list[MemberStatus]:
    """Every member at once, so a hung one costs one timeout, not one each."""
    with ThreadPoolExecutor(max_workers=max(1, min(len(targets), 16))) as pool:
        return list(pool.map(lambda t: query_member(t[0], t[1], t[2], timeout), targets))


# ---- running the ensemble (the shell) ----

def _port_in_use(port: int) -> bool:
    """Whether something listens on ``port``; SO_REUSEADDR as the servers bind, so connections
    of an earlier run lingering in TIME_WAIT do not count."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return True
    return False


def _check_ports_free(ensemble: Ensemble, source: str) -> None:
    for m in ensemble.members:
        for name, port in (("client port", m.client_port), ("peer port", m.peer_port),
                           ("election port", m.election_port)):
            if _port_in_use(port):
                hint = f"; its recorded pid {m.pid} is still running" if m.pid and pid_alive(m.pid) else ""
                raise EnsembleError(f"{source}: server.{m.sid} {name} {port} is in use{hint}")


def _write_member_files(root: str, ensemble: Ensemble) -> None:
    for m in ensemble.members:
        data_dir = os.path.join(root, m.data_dir)
        os.makedirs(data_dir, exist_ok=True)
        with open(os.path.join(data_dir, "myid"), "w", encoding="ascii") as f:
            f.write(f"{m.sid}\n")
        cfg_path = os.path.join(root, m.zoo_cfg)
        os.makedirs(os.path.dirname(cfg_path), exist_ok=True)
        with open(cfg_path, "w", encoding="utf-8") as f:
            f.write(render_zoo_cfg(ensemble, m, root))


def _log_tail(path: str, limit: int = 2000) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()[-limit:]
    except OSError:
        return ""


class _Supervisor:
    """The children of one ``zkpy ensemble`` run: start, watch, stop (SIGTERM, then SIGKILL)."""

    def __init__(self, root: str, ensemble: Ensemble, log_level: str) -> None:
        self.root = root
        self.ensemble = ensemble
        self.log_level = log_level
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.reported: set[int] = set()
        self.stop_requested = threading.Event()

    def start(self) -> None:
        for m in self.ensemble.members:
            log_path = os.path.join(self.root, m.log_file)
            with open(log_path, "ab") as log:
                log.write(f"--- zkpy ensemble: starting server.{m.sid} at "
                          f"{time.strftime('%Y-%m-%d %H:%M:%S')} ---\n".encode())
                log.flush()
                # a session of its own: Ctrl-C reaches the supervisor only, which stops members in order
                self.procs[m.sid] = subprocess.Popen(
                    [sys.executable, "-m", "zkpy.cli.main", "server", os.path.join(self.root, m.zoo_cfg),
                     "--log-level", self.log_level],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    cwd=os.path.join(self.root, m.workdir), start_new_session=True)
        self.ensemble = self.ensemble.with_pids({sid: p.pid for sid, p in self.procs.items()})
        save_ensemble(self.root, self.ensemble)

    def exited(self) -> list[Member]:
        """Members whose process has ended and that were not reported yet."""
        out = []
        for m in self.ensemble.members:
            proc = self.procs.get(m.sid)
            if proc is not None and proc.poll() is not None and m.sid not in self.reported:
                self.reported.add(m.sid)
                out.append(m)
        return out

    def serving(self) -> list[MemberStatus]:
        return query_all([(HOST, m.client_port, m.sid) for m in self.ensemble.members], timeout=1.0)

    def stop(self, timeout_s: float) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for sid, proc in self.procs.items():
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                click.echo(f"zkpy ensemble: server.{sid} did not stop within {timeout_s:g}s; killing it", err=True)
                proc.kill()
                proc.wait()
        self.ensemble = self.ensemble.with_pids({sid: None for sid in self.procs})
        save_ensemble(self.root, self.ensemble)


def _describe_exit(root: str, m: Member, proc: subprocess.Popen[bytes]) -> str:
    log_path = os.path.join(root, m.log_file)
    return (f"zkpy ensemble: server.{m.sid} ({m.address}) exited with status {proc.returncode}; "
            f"its log is {log_path}:\n{_log_tail(log_path)}")


def _run_ensemble(root: str, ensemble: Ensemble, log_level: str, ready_s: float, stop_s: float) -> int:
    supervisor = _Supervisor(root, ensemble, log_level)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        supervisor.stop_requested.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    status = 0
    try:
        supervisor.start()
        deadline = time.monotonic() + ready_s
        while True:  # until every member serves
            for m in supervisor.exited():
                click.echo(_describe_exit(root, m, supervisor.procs[m.sid]), err=True)
                return EXIT_FAILED
            rows = supervisor.serving()
            if all(r.serving for r in rows):
                break
            if time.monotonic() >= deadline:
                waiting = ", ".join(f"server.{r.sid} {r.role}" for r in rows if not r.serving)
                click.echo(f"zkpy ensemble: not serving within {ready_s:g}s: {waiting}; logs under {root}", err=True)
                return EXIT_FAILED
            if supervisor.stop_requested.wait(0.1):
                return 0
        click.echo(supervisor.ensemble.connect_string)
        sys.stdout.flush()
        for m in supervisor.ensemble.members:
            click.echo(f"zkpy ensemble: server.{m.sid} {m.role} {m.address} pid {m.pid} "
                       f"log {os.path.join(root, m.log_file)}", err=True)
        n = len(rows)
        click.echo(f"zkpy ensemble: {n} server{'s' if n != 1 else ''} serving from {root}; Ctrl-C stops "
                   f"{'them' if n != 1 else 'it'}", err=True)
        while not supervisor.stop_requested.wait(0.2):
            for m in supervisor.exited():
                click.echo(_describe_exit(root, m, supervisor.procs[m.sid]), err=True)
            if len(supervisor.reported) == len(supervisor.procs):
                click.echo("zkpy ensemble: every server has exited", err=True)
                status = EXIT_FAILED
                break
        return status
    finally:
        supervisor.stop(stop_s)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        click.echo("zkpy ensemble: stopped", err=True)


def _fail(exc: EnsembleError, code: int = EXIT_CONFIG) -> NoReturn:
    click.echo(f"zkpy: {exc}", err=True)
    sys.exit(code)


@click.group(invoke_without_command=True)
@click.option("--size", type=int, help="number of servers (needed unless DIR holds an ensemble)")
@click.option("--dir", "directory", default=DEFAULT_DIR, show_default=True, type=click.Path(file_okay=False),
              help="where the members' configs, data and logs live")
@click.option("--base-port", type=int, metavar="P",
              help="client ports from P, peer ports from P+100, election ports from P+200 (default: free ports)")
@click.option("--tick-ms", type=int, help=f"tickTime (default {DEFAULT_TICK_MS})")
@click.option("--observers", type=int, help="how many of the servers (the last ones) are observers (default 0)")
@click.option("--log-level", default="INFO", show_default=True, help="the servers' log level")
@click.option("--ready-timeout", "ready_s", default=60.0, show_default=True, type=float,
              help="seconds to wait for every server to serve")
@click.option("--stop-timeout", "stop_s", default=15.0, show_default=True, type=float,
              help="seconds between SIGTERM and SIGKILL when stopping")
@click.pass_context
def ensemble(ctx: click.Context, size: int | None, directory: str, base_port: int | None, tick_ms: int | None,
             observers: int | None, log_level: str, ready_s: float, stop_s: float) -> None:
    """Run a local ensemble of zkpy servers on 127.0.0.1 until Ctrl-C or SIGTERM.

    Prints the connect string once every server serves. Running it again on the same --dir
    starts the same servers on their data. `zkpy ensemble status` reports on any ensemble.
    """
    if ctx.invoked_subcommand is not None:
        given = [name for name in ("size", "directory", "base_port", "tick_ms", "observers", "log_level", "ready_s",
                                   "stop_s") if ctx.get_parameter_source(name) is not ParameterSource.DEFAULT]
        if given:
            raise click.UsageError(f"options before {ctx.invoked_subcommand!r} are for running an ensemble; "
                                   f"{ctx.invoked_subcommand!r} takes its own after it")
        return
    root = os.path.abspath(directory)
    source = os.path.join(root, ENSEMBLE_FILE)
    try:
        if os.path.exists(source):
            planned = reconcile(load_ensemble(root), source, size, observers, base_port, tick_ms)
        else:
            if size is None:
                raise click.UsageError(f"--size is needed to create an ensemble ({source} does not exist)")
            planned = plan_ensemble(size, observers or 0, base_port, tick_ms or DEFAULT_TICK_MS)
    except EnsembleError as exc:
        _fail(exc)
    try:
        _check_ports_free(planned, source)
    except EnsembleError as exc:
        _fail(exc, EXIT_FAILED)
    os.makedirs(root, exist_ok=True)
    _write_member_files(root, planned)
    save_ensemble(root, planned)
    sys.exit(_run_ensemble(root, planned, log_level, ready_s, stop_s))


@ensemble.command()
@click.option("--dir", "directory", type=click.Path(file_okay=False),
              help=f"an ensemble directory (default ./{DEFAULT_DIR})")
@click.option("--hosts", help="a connect string, host:port,host:port (any ZooKeeper 3.8 ensemble)")
@click.option("--timeout", default=2.0, show_default=True, type=float, help="seconds to wait for each answer")
def status(directory: str | None, hosts: str | None, timeout: float) -> None:
    """One line per server: sid, address, role, zxid, epoch, connections, znodes.

    Exits 0 when a quorum of the voting servers serves, 1 otherwise."""
    if directory is not None and hosts is not None:
        raise click.UsageError("give --dir or --hosts, not both")
    observers: list[str] = []
    try:
        if hosts is not None:
            targets: list[tuple[str, int, int | None]] = [(h, p, None) for h, p in parse_hosts(hosts)]
        else:
            recorded = load_ensemble(os.path.abspath(directory or DEFAULT_DIR))
            targets = [(HOST, m.client_port, m.sid) for m in recorded.members]
            observers = [m.address for m in recorded.members if m.role == OBSERVER]
    except EnsembleError as exc:
        _fail(exc)
    rows = query_all(targets, timeout)
    ok, summary = has_quorum(rows, observers)
    click.echo(render_status(rows), nl=False)
    note = whitelist_note(rows)
    if note is not None:
        click.echo(note)
    click.echo(summary)
    sys.exit(0 if ok else EXIT_NO_QUORUM)
