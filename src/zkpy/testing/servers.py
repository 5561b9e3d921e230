"""Start real servers for tests: zkpy (``python -m zkpy server``) and Apache ZooKeeper 3.8.

Both run as subprocesses on 127.0.0.1 with a fresh data dir and a free port, and are
ready when ``srvr`` reports a serving server. Apache ZooKeeper comes from Debian's package
(``/usr/share/java/zookeeper.jar``); ``apache_available()`` says whether it is there.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from zkpy.admin.fourletter import ask as ask_four_letter_word

ZK_JAR = "/usr/share/java/zookeeper.jar"
ZK_CONF_DIR = "/etc/zookeeper/conf"


def apache_available() -> bool:
    return os.path.exists(ZK_JAR) and shutil.which("java") is not None


PICK_FROM = 10_000  # the lowest port free_ports picks


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free now, none handed out before by this process until it has gone
    round its whole share of ports.

    Picked in turn, from a random start, below the kernel's ephemeral range
    (``ip_local_port_range``): a port of that range may be taken by any outgoing connection (a test
    run makes thousands) between this pick and the server's own bind; below it, only another
    explicit bind can take it. Picking in turn, not at random, keeps two calls of one test (an
    ensemble's ports, then its AdminServer ports) from ever sharing a port, and each pytest-xdist
    worker picks from its own slice, so two workers never race for one. Where there is no room,
    the kernel picks (port 0)."""
    socks: list[socket.socket] = []
    try:
        for _ in range(count * 50):
            if len(socks) == count:
                break
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", _turns.next_port()))
            except OSError:  # taken: pick another
                s.close()
                continue
            socks.append(s)
        while len(socks) < count:  # (every pick taken: let the kernel choose)
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


class _PortTurns:
    """The ports this process picks from, in turn: its pytest-xdist worker's slice of
    ``[PICK_FROM, ephemeral low)``, started at a random place (a fresh run does not meet the last
    run's TIME_WAIT sockets)."""

    def __init__(self) -> None:
        self._low, self._high = xdist_share(PICK_FROM, _ephemeral_low())
        self._next = random.randrange(self._low, self._high) if self._high - self._low >= 100 else 0

    def next_port(self) -> int:
        """The next port to try (0, the kernel's pick, where the slice is too small)."""
        if not self._next:
            return 0
        port = self._next
        self._next = port + 1 if port + 1 < self._high else self._low
        return port


def xdist_share(low: int, high: int) -> tuple[int, int]:
    """This pytest-xdist worker's slice of ``[low, high)`` (all of it outside pytest-xdist), so
    that two workers never pick the same port or test bed subnet."""
    try:
        index = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
        workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    except ValueError:
        return low, high
    size = (high - low) // workers
    return low + (index % workers) * size, low + (index % workers + 1) * size


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768 where it cannot be read)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_turns = _PortTurns()


def four_letter(port: int, word: str, timeout: float = 5.0, host: str = "127.0.0.1") -> str:
    """Send a four-letter word and return the whole answer (the server closes the connection)."""
    return ask_four_letter_word(host, port, word, timeout)


@dataclass
class ServerProcess:
    """A running server subprocess; ``hosts`` is its connect string."""

    kind: str
    port: int
    proc: subprocess.Popen[bytes]
    workdir: str
    log_path: str
    extra: dict[str, str] = field(default_factory=dict)
    cmd: list[str] = field(default_factory=list)  # how it was started, for restart_ensemble_member
    kept_log: str | None = None  # the log's tail, kept when its data dir is removed
    host: str = "127.0.0.1"  # the address it serves clients on (a test bed member's own: zkpy.testing.netbed)

    @property
    def hosts(self) -> str:
        return f"{self.host}:{self.port}"

    def log(self, since: int = 0) -> str:
        """The server's log from byte ``since`` on (the kept tail once its data dir is gone)."""
        if self.kept_log is not None:
            return self.kept_log
        try:
            with open(self.log_path, "rb") as f:
                f.seek(since)
                return f.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def log_size(self) -> int:
        try:
            return os.path.getsize(self.log_path)
        except OSError:
            return 0

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        return self.proc.returncode

    def cleanup(self) -> None:
        self.stop()
        self.remove_files()

    def remove_files(self) -> None:
        """Remove the data dir, keeping the log's tail for a failure report."""
        self.kept_log = log_tail(self)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __post_init__(self) -> None:
        STARTED.append(self)


STARTED: list[ServerProcess] = []
"""Every server started in this process, oldest first: a failing test reports the logs of the
ones it started (tests/conftest.py), since their data dirs are gone once it has cleaned up."""


def log_tail(server: ServerProcess, lines: int = 200) -> str:
    """The last ``lines`` lines of a server's log, for a test failure report."""
    return "\n".join(server.log().splitlines()[-lines:])


def _wait_ready(server: ServerProcess, deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.kind} server exited with {server.proc.returncode}:\n{server.log()[-4000:]}")
        try:
            if four_letter(server.port, "srvr", timeout=1.0, host=server.host).startswith("Zookeeper version"):
                return
        except OSError:
            pass
        time.sleep(0.05)
    server.cleanup()
    raise RuntimeError(f"{server.kind} server did not answer ruok within {deadline_s}s:\n{server.log()[-4000:]}")


def _write_cfg(workdir: str, port: int, settings: Mapping[str, str | None], extra_lines: str = "") -> str:
    """zoo.cfg with the test defaults and ``settings`` on top; a value of ``None`` removes a
    default key (e.g. ``{"4lw.commands.whitelist": None}`` for the server's own default);
    ``extra_lines`` are appended as they are (any Java properties syntax: ``key value``)."""
    cfg = {
        "tickTime": "2000",
        "dataDir": os.path.join(workdir, "data"),
        "clientPort": str(port),
        "clientPortAddress": "127.0.0.1",
        "maxClientCnxns": "0",
        "4lw.commands.whitelist": "*",
    }
    for key, value in settings.items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    path = os.path.join(workdir, "zoo.cfg")
    with open(path, "w", encoding="utf-8") as f:
        for k, v in cfg.items():
            f.write(f"{k}={v}\n")
        if extra_lines:
            f.write(extra_lines.rstrip("\n") + "\n")
    return path


def start_zkpy(settings: Mapping[str, str | None] | None = None, ready_s: float = 20.0, *,
               workdir: str | None = None, port: int | None = None, args: Sequence[str] = (),
               wait: bool = True, extra_lines: str = "") -> ServerProcess:
    """A zkpy server from a zoo.cfg with ``settings`` on top of test defaults (and ``extra_lines``
    appended as they are).

    Pass ``workdir`` and ``port`` of an earlier server to restart it on the same data dir;
    ``args`` go to ``zkpy server`` (e.g. ``--fault lose-unsynced``); the log is appended to."""
    settings = dict(settings or {})
    settings.setdefault("extendedTypesEnabled", "true")
    settings.setdefault("admin.enableServer", "false")  # tests never contend for port 8080: pass one to enable
    workdir = workdir or tempfile.mkdtemp(prefix="zkpy-test-")
    port = port or free_port()
    cfg = _write_cfg(workdir, port, settings, extra_lines)
    log_path = os.path.join(workdir, "server.log")
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "zkpy.cli.main", "server", cfg, *args],
                                stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
    server = ServerProcess("zkpy", port, proc, workdir, log_path)
    if wait:
        _wait_ready(server, ready_s)
        workers = settings.get("serverWorkers")
        if workers is not None and workers.isdigit() and int(workers) > 1:
            wait_workers(server, int(workers), ready_s)
    return server


def wait_workers(server: ServerProcess, count: int, deadline_s: float) -> None:
    """Wait until each worker of a server with ``serverWorkers`` = ``count`` > 1 listens (it logs
    so): workers 1..count, in front of the member."""
    deadline = time.monotonic() + deadline_s
    while not all(f"[worker {k}] serving " in (text := server.log()) for k in range(1, count + 1)):
        if server.proc.poll() is not None or time.monotonic() > deadline:
            server.cleanup()
            raise RuntimeError(f"zkpy server's {count} workers did not all listen within {deadline_s}s:\n"
                               f"{text[-4000:]}")
        time.sleep(0.05)


def start_apache(settings: Mapping[str, str | None] | None = None, ready_s: float = 60.0,
                 jvm_props: dict[str, str] | None = None, *, workdir: str | None = None,
                 port: int | None = None, extra_lines: str = "") -> ServerProcess:
    """An Apache ZooKeeper 3.8 standalone server (Debian's package), TTL nodes enabled; zoo.cfg as
    ``start_zkpy`` writes it.

    ``jvm_props`` become ``-Dkey=value`` system properties. ``jute.maxbuffer`` in ``settings``
    is passed as the system property too: ZooKeeper reads it from there, not from zoo.cfg.
    """
    settings = dict(settings or {})
    props = dict(jvm_props or {})
    if "jute.maxbuffer" in settings:
        props.setdefault("jute.maxbuffer", settings["jute.maxbuffer"] or "")
    extended = settings.pop("extendedTypesEnabled", "true")
    settings.setdefault("admin.enableServer", "false")
    workdir = workdir or tempfile.mkdtemp(prefix="zk-apache-test-")
    port = port or free_port()
    cfg = _write_cfg(workdir, port, settings, extra_lines)
    log_path = os.path.join(workdir, "server.log")
    cmd = ["java", "-Xmx512m", *_APACHE_LOGGING, f"-Dzookeeper.extendedTypesEnabled={extended}",
           "-Dzookeeper.admin.enableServer=false", *(f"-D{k}={v}" for k, v in props.items()),
           "-cp", apache_classpath(), "org.apache.zookeeper.server.ZooKeeperServerMain", cfg]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
    server = ServerProcess("apache", port, proc, workdir, log_path)
    _wait_ready(server, ready_s)
    return server


def server_mode(server: ServerProcess, timeout: float = 1.0) -> str | None:
    """The ``Mode:`` a server reports in ``srvr`` (``standalone``, ``leader``, ``follower``,
    ``observer``, ``read-only``), or ``None`` if it does not answer or is not serving."""
    try:
        answer = four_letter(server.port, "srvr", timeout=timeout, host=server.host)
    except OSError:
        return None
    for line in answer.splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    return None


def server_zxid(server: ServerProcess, timeout: float = 1.0) -> int | None:
    """The ``Zxid:`` a server reports in ``srvr``, or ``None`` if it does not answer."""
    try:
        answer = four_letter(server.port, "srvr", timeout=timeout, host=server.host)
    except OSError:
        return None
    for line in answer.splitlines():
        if line.startswith("Zxid:"):
            return int(line.split(":", 1)[1].strip(), 16)
    return None


def ensemble_hosts(servers: Sequence[ServerProcess]) -> str:
    """The connect string naming every server of an ensemble."""
    return ",".join(s.hosts for s in servers)


def ensemble_leader(servers: Sequence[ServerProcess], deadline_s: float = 30.0) -> ServerProcess:
    """The running server that reports ``Mode: leader``, waiting up to ``deadline_s`` for one
    (after a leader dies the others need an election)."""
    deadline = time.monotonic() + deadline_s
    while True:
        for s in servers:
            if s.proc.poll() is None and server_mode(s) == "leader":
                return s
        if time.monotonic() >= deadline:
            modes = {s.extra.get("myid", s.hosts): server_mode(s) for s in servers}
            raise RuntimeError(f"no leader within {deadline_s}s: {modes}")
        time.sleep(0.05)


def wait_ensemble_serving(servers: Sequence[ServerProcess], deadline_s: float = 60.0) -> dict[int, str]:
    """Wait until every running server of ``servers`` is a serving leader, follower or observer;
    the mode each reported, by client port (a ``srvr`` that is slow to answer is asked again)."""
    deadline = time.monotonic() + deadline_s
    pending = [s for s in servers if s.proc.poll() is None]
    modes: dict[int, str] = {}
    while pending:
        for s in list(pending):
            if s.proc.poll() is not None:
                raise RuntimeError(f"ensemble server {s.extra.get('myid')} exited with {s.proc.returncode}:\n"
                                   f"{s.log()[-4000:]}")
            mode = server_mode(s)
            if mode in ("leader", "follower", "observer"):
                modes[s.port] = mode
                pending.remove(s)
        if pending and time.monotonic() >= deadline:
            logs = "\n".join(f"--- server {s.extra.get('myid')}:\n{s.log()[-2000:]}" for s in pending)
            raise RuntimeError(f"ensemble not serving within {deadline_s}s:\n{logs}")
        if pending:
            time.sleep(0.05)
    return modes


def _member_command(kind: str, cfg: str, jvm_props: Mapping[str, str] | None) -> list[str]:
    """How ``start_ensemble`` runs one member: ``zkpy server`` or Apache's ``QuorumPeerMain``."""
    if kind == "zkpy":
        # DEBUG: the quorum runtime is young, and its logs are what a failing ensemble test shows
        return [sys.executable, "-m", "zkpy.cli.main", "server", cfg, "--log-level", "DEBUG"]
    return ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *_APACHE_LOGGING,
            "-Dzookeeper.extendedTypesEnabled=true", "-Dzookeeper.admin.enableServer=false",
            *(f"-D{k}={v}" for k, v in (jvm_props or {}).items()),
            "-cp", apache_classpath(), "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg]


SLF4J_SIMPLE_JAR = "/usr/share/java/slf4j-simple.jar"
# slf4j-simple's INFO log with wall-clock times, to read beside zkpy's in a failure report
_APACHE_LOGGING = ("-Dorg.slf4j.simpleLogger.showDateTime=true",
                   "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss,SSS")


# Netty jars that Debian's zookeeper.jar manifest leaves out but its Netty socket (TLS) needs,
NETTY_EXTRA_JARS = ("/usr/share/java/netty-codec.jar", "/usr/share/java/netty-resolver.jar",
                    "/usr/share/java/netty-transport-native-unix-common.jar",
                    # the Servlet API the AdminServer (Jetty) needs, which the manifest leaves out too
                    "/usr/share/java/servlet-api.jar")


def apache_classpath() -> str:
    """ZooKeeper's jar and conf dir, the Netty jars its TLS needs, and slf4j-simple when installed:
    without a binding, 3.8 (built on slf4j) logs nothing, and a failing test could show nothing of
    Apache's side."""
    jars = [ZK_CONF_DIR, ZK_JAR, *(j for j in NETTY_EXTRA_JARS if os.path.exists(j))]
    if os.path.exists(SLF4J_SIMPLE_JAR):
        jars.append(SLF4J_SIMPLE_JAR)
    return ":".join(jars)


def start_ensemble(kinds: Sequence[str], settings: Mapping[str, str | None] | None = None,
                   ready_s: float = 60.0, *, tick_ms: int = 500, jvm_props: Mapping[str, str] | None = None,
                   wait: bool = True, observers: Sequence[int] = (),
                   member_settings: Mapping[int, Mapping[str, str | None]] | None = None) -> list[ServerProcess]:
    """One ensemble on loopback whose member ``i + 1`` is a ``kinds[i]`` server: ``"zkpy"``
    (``zkpy server zoo.cfg``, logging at DEBUG) or ``"apache"`` (ZooKeeper 3.8's ``QuorumPeerMain``).

    Every member has its own data dir (with its ``myid``), client, quorum and election port, and
    one static config (``server.N=127.0.0.1:quorum:election;127.0.0.1:client``); ``extra`` holds
    ``myid``, ``quorum_port``, ``election_port`` and ``root``. All are started before any is waited
    for; with ``wait`` the list is returned, in myid order, once every member answers ``srvr`` as a
    leader, follower or observer. ``settings`` go to every member's zoo.cfg, ``member_settings[myid]`` on top
    to that member's alone (its ``admin.serverPort``, say); ``jvm_props`` become ``-Dkey=value``
    system properties of the Apache members. ``cleanup_ensemble`` stops them and removes the data.
    """
    if not kinds:
        raise ValueError("an ensemble needs at least one server")
    unknown = sorted(set(kinds) - {"zkpy", "apache"})
    if unknown:
        raise ValueError(f"unknown server kind {unknown[0]!r}: zkpy or apache")
    root = tempfile.mkdtemp(prefix="zk-ensemble-test-")
    distinct = free_ports(3 * len(kinds))
    ports = [(distinct[3 * i], distinct[3 * i + 1], distinct[3 * i + 2]) for i in range(len(kinds))]
    members = {f"server.{i + 1}": f"127.0.0.1:{quorum}:{election}{':observer' if i + 1 in observers else ''}"
                                  f";127.0.0.1:{client}"
               for i, (client, quorum, election) in enumerate(ports)}
    return _launch_members(root, [(kind, i + 1, client) for i, (kind, (client, _, _)) in enumerate(zip(kinds, ports))],
                           members, settings, tick_ms=tick_ms, jvm_props=jvm_props, observers=observers,
                           wait=wait, ready_s=ready_s, member_settings=member_settings)


Place = Callable[[int], tuple[str, Sequence[str]]]
"""Where member ``myid`` runs: the address it serves clients on, and the command prefix that
starts it there (``zkpy.testing.netbed``: its own network namespace)."""


def _on_loopback(_myid: int) -> tuple[str, Sequence[str]]:
    return "127.0.0.1", ()


def _spawn_member(kind: str, root: str, myid: int, client: int, members: Mapping[str, str],
                  settings: Mapping[str, str | None] | None, *, tick_ms: int,
                  jvm_props: Mapping[str, str] | None, observer: bool, place: Place = _on_loopback) -> ServerProcess:
    """Start, without waiting for it, ensemble member ``myid`` in ``root/server<myid>``: its data
    dir with ``myid``, its zoo.cfg (every member's line, ``settings`` on top), its log, its process
    (where ``place`` says)."""
    quorum, election = _member_ports(members[f"server.{myid}"])
    address, prefix = place(myid)
    workdir = os.path.join(root, f"server{myid}")
    os.makedirs(os.path.join(workdir, "data"))
    with open(os.path.join(workdir, "data", "myid"), "w", encoding="ascii") as f:
        f.write(f"{myid}\n")
    # TTL nodes: a zoo.cfg key for zkpy, a system property for Apache (set in _member_command)
    own = {"extendedTypesEnabled": "true"} if kind == "zkpy" else {}
    cfg = _write_cfg(workdir, client, {
        "tickTime": str(tick_ms), "initLimit": "10", "syncLimit": "5", "clientPortAddress": address,
        "admin.enableServer": "false", "standaloneEnabled": "false", "reconfigEnabled": "false",
        "cnxTimeout": "1000", **own, **members, **(settings or {}),
        **({"peerType": "observer"} if observer else {}),
    })
    log_path = os.path.join(workdir, "server.log")
    cmd = [*prefix, *_member_command(kind, cfg, jvm_props)]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
    return ServerProcess(kind, client, proc, workdir, log_path,
                         {"myid": str(myid), "quorum_port": quorum, "election_port": election, "root": root}, cmd,
                         host=address)


def _launch_members(root: str, starts: Sequence[tuple[str, int, int]], members: Mapping[str, str],
                    settings: Mapping[str, str | None] | None, *, tick_ms: int,
                    jvm_props: Mapping[str, str] | None, observers: Sequence[int], wait: bool,
                    ready_s: float, member_settings: Mapping[int, Mapping[str, str | None]] | None = None,
                    place: Place = _on_loopback) -> list[ServerProcess]:
    """Start every ``(kind, myid, client port)`` (where ``place`` says) before waiting for any; on
    any failure, kill what was started and remove ``root``."""
    servers: list[ServerProcess] = []
    try:
        for kind, myid, client in starts:
            own = {**(settings or {}), **(member_settings or {}).get(myid, {})}
            servers.append(_spawn_member(kind, root, myid, client, members, own, tick_ms=tick_ms,
                                         jvm_props=jvm_props, observer=myid in observers, place=place))
        if wait:
            wait_ensemble_serving(servers, ready_s)
    except BaseException:
        for s in servers:
            s.stop(signal.SIGKILL)
            s.remove_files()
        shutil.rmtree(root, ignore_errors=True)
        raise
    return servers


def member_line(server: ServerProcess, role: str = "participant") -> str:
    """The ``server.N`` value of a member started here: ``127.0.0.1:quorum:election:role;127.0.0.1:client``."""
    return f"127.0.0.1:{server.extra['quorum_port']}:{server.extra['election_port']}:{role};127.0.0.1:{server.port}"


def start_joining_member(kind: str, ensemble: Sequence[ServerProcess], myid: int,
                         settings: Mapping[str, str | None] | None = None, *, tick_ms: int = 500,
                         jvm_props: Mapping[str, str] | None = None) -> ServerProcess:
    """Start (without waiting) a new member ``myid`` beside a running ``ensemble`` on fresh ports, as
    ZooKeeper's reconfig guide says to: its config lists the ensemble's members and itself as an
    observer, so that it joins and syncs without voting until a ``reconfig -add`` takes it in."""
    client, quorum, election = free_ports(3)
    members = {f"server.{s.extra['myid']}": member_line(s) for s in ensemble}
    members[f"server.{myid}"] = f"127.0.0.1:{quorum}:{election}:observer;127.0.0.1:{client}"
    return _spawn_member(kind, ensemble[0].extra["root"], myid, client, members, settings, tick_ms=tick_ms,
                         jvm_props=jvm_props, observer=False)


def start_apache_ensemble(n: int = 3, settings: Mapping[str, str | None] | None = None,
                          ready_s: float = 60.0, *, tick_ms: int = 500,
                          jvm_props: Mapping[str, str] | None = None) -> list[ServerProcess]:
    """``n`` Apache ZooKeeper 3.8 servers forming one ensemble on loopback (Debian's package):
    ``start_ensemble(["apache"] * n, ...)``, returned once every server serves.

    ``ensemble_leader`` finds the leader, ``ensemble_hosts`` gives the connect string;
    ``cleanup_ensemble`` at the end. ``jvm_props`` become ``-Dkey=value`` system properties of
    every server (e.g. ``{"readonlymode.enabled": "true"}``), and again on ``restart_ensemble_member``.
    """
    if n < 1:
        raise ValueError("an ensemble needs at least one server")
    return start_ensemble(["apache"] * n, settings, ready_s, tick_ms=tick_ms, jvm_props=jvm_props)


def start_zkpy_ensemble(n: int = 3, settings: Mapping[str, str | None] | None = None, ready_s: float = 60.0, *,
                        tick_ms: int = 500, wait: bool = True) -> list[ServerProcess]:
    """``n`` zkpy servers forming one ensemble on loopback: ``start_ensemble(["zkpy"] * n, ...)``."""
    if n < 1:
        raise ValueError("an ensemble needs at least one server")
    return start_ensemble(["zkpy"] * n, settings, ready_s, tick_ms=tick_ms, wait=wait)


def restart_ensemble_member(server: ServerProcess) -> ServerProcess:
    """Start again, on the same ports and data dir, an ensemble member that was stopped: the
    same command as before (zkpy or Apache, with the same system properties)."""
    if server.proc.poll() is None:
        raise RuntimeError(f"server {server.extra.get('myid')} is still running")
    cmd = server.cmd or _member_command(server.kind, os.path.join(server.workdir, "zoo.cfg"), None)
    with open(server.log_path, "ab") as log:
        server.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=server.workdir)
    return server


def cleanup_ensemble(servers: Sequence[ServerProcess]) -> None:
    """Stop every server of an ensemble and remove its data dirs."""
    for s in servers:
        s.stop()
    for s in servers:
        s.remove_files()
    roots = {s.extra["root"] for s in servers if "root" in s.extra}
    for root in roots:
        shutil.rmtree(root, ignore_errors=True)


def server_of_session(servers: Sequence[ServerProcess], session_id: int,
                      deadline_s: float = 10.0) -> ServerProcess | None:
    """The running server whose ``cons`` lists a connection of ``session_id``; None if none does
    within ``deadline_s`` (a busy server may answer ``cons`` slowly, or list a new connection late)."""
    needle = f"sid=0x{session_id:x}"
    deadline = time.monotonic() + deadline_s
    while True:
        for s in servers:
            if s.proc.poll() is not None:
                continue
            try:
                answer = four_letter(s.port, "cons", timeout=2.0, host=s.host)
            except OSError:
                continue
            if any(needle + "," in line or needle + ")" in line for line in answer.splitlines()):
                return s
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def _member_ports(line: str) -> tuple[str, str]:
    """The quorum and election ports of a ``host:quorum:election[:role][;client]`` line."""
    server = line.split(";")[0]
    for role in (":participant", ":observer"):
        server = server.removesuffix(role)
    _, quorum, election = server.rsplit(":", 2)
    return quorum, election


def start_apache_members(members: Mapping[str, str], myids: Sequence[int],
                         settings: Mapping[str, str | None] | None = None, ready_s: float = 60.0, *,
                         tick_ms: int = 500, jvm_props: Mapping[str, str] | None = None,
                         wait: bool = True) -> list[ServerProcess]:
    """Apache ZooKeeper 3.8 servers for some members of an ensemble whose other members run elsewhere
    (e.g. zkpy in the test process): ``members`` is every ``server.N`` line (``{"server.1":
    "127.0.0.1:quorum:election", ...}``), ``myids`` the ones started here, each with its own data dir,
    ``myid`` and client port, and the zoo.cfg defaults of ``start_apache_ensemble``.

    ``log()`` shows ZooKeeper's INFO log (slf4j-simple, when installed); ``wait`` waits until every started server serves as leader or follower.
    ``extra`` holds ``myid``, ``quorum_port``, ``election_port`` and ``root``; ``cleanup_ensemble``
    stops them and removes their data."""
    root = tempfile.mkdtemp(prefix="zk-members-test-")
    return _launch_members(root, [("apache", myid, free_port()) for myid in myids], members, settings,
                           tick_ms=tick_ms, jvm_props=jvm_props, observers=(), wait=wait, ready_s=ready_s)
