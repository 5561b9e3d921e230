"""``python -m bench ensemble``: a 3-server zkpy ensemble against a 3-server Apache ZooKeeper 3.8 ensemble.

Each implementation gets a fresh ensemble of ``--size`` servers on 127.0.0.1 (own data dir, myid,
client, quorum and election port for each; one static ``server.N`` config; every data dir under
one ``/tmp`` directory, so on the same disk), started, measured and stopped before the other one
starts (with ``--rounds`` > 1 the order alternates). Both fsync their txn log before acknowledging
(zkpy's ``forceSync`` default and ZooKeeper's), and both get the same ``tickTime`` (``--tick-ms``),
``initLimit=10`` and ``syncLimit=5``. zkpy runs at its default log level (INFO); ZooKeeper runs as
in the other benchmarks (``java -Xmx512m``, the JVM's default GC and JIT, Debian's package without
a logging backend unless ``--apache-log``).

Modes (``--modes``, all by default):

* ``read``, ``mixed``, ``write``: the throughput generator of ``python -m bench``
  (``bench/workload.py``) spread over every server: ``--processes-per-server`` generator
  processes per server, each with ``--sessions`` sessions connected to that server and
  ``--outstanding`` requests in flight per session. Each request is a getData, or with probability
  0 / 0.1 / 1 a setData (version -1) of ``--value-size`` bytes, on one of ``--nodes`` znodes.
  Reads are answered by the server the session is on; writes go through the leader.
* ``create``: the ZooKeeper paper's Table 2: W workers (``--workers``, default 1,10,20), each a
  session with one create (``--value-size`` bytes) outstanding at a time, followed by the
  asynchronous delete of the znode it created. Worker i is connected to server i mod 3, followers
  first, so the 1-worker row runs against a follower (whose creates go through the leader).
* ``failover``: ``--failovers`` times: a client session on a follower (the follower with the lowest
  myid), then ``kill -9`` of the leader, and at once the client tries creates in a loop: each
  attempt waits at most ``--attempt-timeout`` s; when the connection is gone, the client reconnects
  to the same server, resuming its session (a new one if the server says it expired), every
  ``--retry-delay`` s. The time is from the kill to the first acknowledged create. The killed server
  is then restarted and the ensemble waited for until every server serves again.

The server CPU column sums the servers' processes; "others" is every other process on the
machine during the measured window (``/proc/stat``), to show when someone else's work shared it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing as mp
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from zkpy.testing.servers import (
    SLF4J_SIMPLE_JAR,
    ZK_CONF_DIR,
    ZK_JAR,
    ServerProcess,
    apache_available,
    cleanup_ensemble,
    ensemble_leader,
    free_port,
    restart_ensemble_member,
    wait_ensemble_serving,
)
from zkpy.wire.consts import PROTOCOL_VERSION, OpCode
from zkpy.wire.jute import INT
from zkpy.wire.proto import ConnectRequest

from .client import RawSession, SessionClosed, create_body
from .workload import (
    CREATE,
    NODE_EXISTS,
    READ,
    WRITE,
    CreateSpec,
    RunResult,
    Target,
    ThroughputSpec,
    _child,
    _cpu_s,
    _cpu_total,
    _merge_children,
    percentile_ms,
    prepare,
)

NAMES = {"zkpy": "zkpy", "apache": "ZooKeeper"}
MIXES = {"read": 0.0, "mixed": 0.1, "write": 1.0}
LABELS = {"read": "reads (100% getData)", "mixed": "mixed 90/10 get/set", "write": "writes (100% setData)"}
MODES = ("read", "mixed", "write", "create", "failover")
FAILOVER_ROOT = "/bench-failover"
WRITE_TARGET = 0.5  # issue 5: writes >= 0.5x ZooKeeper's throughput

Log = Callable[[str], None]


def _log(msg: str) -> None:
    print(f"[bench ensemble {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- the ensembles ---


@dataclass(frozen=True)
class EnsembleSpec:
    size: int = 3
    tick_ms: int = 2000
    apache_heap: str = "512m"
    apache_log: bool = False  # slf4j-simple on ZooKeeper's classpath: its INFO log in server.log
    ready_s: float = 120.0


def member_command(kind: str, cfg: str, spec: EnsembleSpec) -> list[str]:
    """How one member runs: ``zkpy server zoo.cfg`` at INFO, or ZooKeeper's ``QuorumPeerMain`` with the
    JVM flags of the standalone benchmark (not the test helpers' fast-start flags, which cap the JIT)."""
    if kind == "zkpy":
        return [sys.executable, "-m", "zkpy.cli.main", "server", cfg]
    classpath = [ZK_CONF_DIR, ZK_JAR]
    if spec.apache_log and os.path.exists(SLF4J_SIMPLE_JAR):
        classpath.append(SLF4J_SIMPLE_JAR)
    return ["java", f"-Xmx{spec.apache_heap}", "-Dzookeeper.admin.enableServer=false",
            "-cp", ":".join(classpath), "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg]


def member_config(kind: str, workdir: str, client_port: int, members: dict[str, str], spec: EnsembleSpec) -> dict[str, str]:
    """One member's zoo.cfg: the same keys for both implementations (fsync left at its default, yes)."""
    return {
        "tickTime": str(spec.tick_ms), "initLimit": "10", "syncLimit": "5",
        "dataDir": os.path.join(workdir, "data"),
        "clientPort": str(client_port), "clientPortAddress": "127.0.0.1",
        "maxClientCnxns": "0", "4lw.commands.whitelist": "*",
        "admin.enableServer": "false", "standaloneEnabled": "false", "reconfigEnabled": "false",
        **members,
    }


def start(kind: str, spec: EnsembleSpec) -> list[ServerProcess]:
    """A fresh ensemble of ``spec.size`` ``kind`` servers, returned (in myid order) once all serve.

    The ``ServerProcess`` objects work with ``zkpy.testing.servers``' ensemble helpers
    (``ensemble_leader``, ``restart_ensemble_member``, ``cleanup_ensemble``, ...)."""
    root = tempfile.mkdtemp(prefix=f"bench-ensemble-{kind}-")
    ports = [(free_port(), free_port(), free_port()) for _ in range(spec.size)]
    members = {f"server.{i + 1}": f"127.0.0.1:{quorum}:{election};127.0.0.1:{client}"
               for i, (client, quorum, election) in enumerate(ports)}
    servers: list[ServerProcess] = []
    try:
        for i, (client, quorum, election) in enumerate(ports):
            myid = i + 1
            workdir = os.path.join(root, f"server{myid}")
            os.makedirs(os.path.join(workdir, "data"))
            with open(os.path.join(workdir, "data", "myid"), "w", encoding="ascii") as f:
                f.write(f"{myid}\n")
            cfg = os.path.join(workdir, "zoo.cfg")
            with open(cfg, "w", encoding="utf-8") as f:
                for k, v in member_config(kind, workdir, client, members, spec).items():
                    f.write(f"{k}={v}\n")
            log_path = os.path.join(workdir, "server.log")
            cmd = member_command(kind, cfg, spec)
            with open(log_path, "ab") as log:
                proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
            servers.append(ServerProcess(kind, client, proc, workdir, log_path,
                                         {"myid": str(myid), "quorum_port": str(quorum),
                                          "election_port": str(election), "root": root}, cmd))
        wait_ensemble_serving(servers, spec.ready_s)
    except BaseException:
        for s in servers:
            s.stop(signal.SIGKILL)
        shutil.rmtree(root, ignore_errors=True)
        raise
    return servers


def myid(server: ServerProcess) -> int:
    return int(server.extra["myid"])


def followers_first(servers: Sequence[ServerProcess], leader: ServerProcess) -> list[ServerProcess]:
    """The followers in myid order, then the leader."""
    return sorted((s for s in servers if s is not leader), key=myid) + [leader]


def target(server: ServerProcess) -> Target:
    return Target("127.0.0.1", server.port, server.proc.pid)


# --- load spread over the servers ---


def _machine_busy_s() -> float | None:
    """CPU seconds the whole machine has spent running processes: user, nice and system time
    (``/proc/stat``; interrupts and softirqs, where loopback traffic is handled, are left out, as they
    are from a process's own figures)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return sum(fields[:3]) / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


@dataclass
class SpreadResult:
    """One run of a mode over the ensemble: the generator's figures and the CPU of each server."""

    result: RunResult
    server_cpus: list[float | None] = field(default_factory=list)  # cores, in the order of the targets
    others_cpu: float | None = None  # cores used by every other process on the machine

    @property
    def server_cpu(self) -> float | None:
        if not self.server_cpus or any(c is None for c in self.server_cpus):
            return None
        return sum(c for c in self.server_cpus if c is not None)


def run_spread(kind: str, targets: Sequence[Target], spec: ThroughputSpec | CreateSpec) -> SpreadResult:
    """``workload.run`` with generator process ``i`` connected to ``targets[i % len(targets)]``.

    Throughput: ``spec.processes`` processes. Create: ``spec.processes`` must be ``len(targets)``;
    process ``i`` runs workers ``i, i + n, ...``, so worker ``w`` is on ``targets[w % n]``."""
    if kind == "throughput":
        n_procs = spec.processes
    else:
        assert isinstance(spec, CreateSpec) and spec.processes == len(targets)
        n_procs = min(spec.processes, spec.workers)
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(n_procs + 1)
    results = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(kind, targets[i % len(targets)], spec, i, barrier, results), daemon=True)
             for i in range(n_procs)]
    for p in procs:
        p.start()
    server_pids = [t.pid for t in targets]
    server_cpus: list[float | None] = [None] * len(targets)
    gen_cpu = others = None
    try:
        barrier.wait(60)
        t0 = time.monotonic()
        time.sleep(spec.warmup_s)
        pids = [p.pid for p in procs if p.pid is not None]
        s0 = [_cpu_s(p) if p else None for p in server_pids]
        g0, m0 = _cpu_total(pids), _machine_busy_s()
        time.sleep(max(0.0, t0 + spec.warmup_s + spec.duration_s - time.monotonic()))
        s1 = [_cpu_s(p) if p else None for p in server_pids]
        g1, m1 = _cpu_total(pids), _machine_busy_s()
        server_cpus = [None if a is None or b is None else (b - a) / spec.duration_s for a, b in zip(s0, s1)]
        if g0 is not None and g1 is not None:
            gen_cpu = (g1 - g0) / spec.duration_s
        if m0 is not None and m1 is not None and gen_cpu is not None and None not in server_cpus:
            others = max(0.0, (m1 - m0) / spec.duration_s - gen_cpu - sum(c for c in server_cpus if c is not None))
    except Exception:  # a child failed before the barrier (BrokenBarrierError): its message follows
        pass
    merged = RunResult(spec.duration_s, generator_cpu=gen_cpu)
    _merge_children(procs, results, spec, merged)
    out = SpreadResult(merged, server_cpus, others)
    merged.server_cpu = out.server_cpu
    return out


# --- leader failover ---


class _ResumingSession(RawSession):
    """``RawSession`` whose handshake resumes a session (id and password) instead of asking for a new one."""

    def __init__(self, session_id: int = 0, passwd: bytes = b"\x00" * 16) -> None:
        super().__init__()
        self.resume_id = session_id
        self.resume_passwd = passwd
        self.passwd = b""
        self.expired = False

    async def _handshake(self, timeout_ms: int) -> None:
        assert self.transport is not None and self._connected is not None
        body = bytearray()
        ConnectRequest(PROTOCOL_VERSION, 0, timeout_ms, self.resume_id, self.resume_passwd).write(body)
        body += b"\x00"  # readOnly = false
        self.transport.write(INT.pack(len(body)) + bytes(body))
        resp = await self._connected
        if resp.timeOut <= 0:
            self.expired = True
            raise SessionClosed("session expired")
        self.session_id = resp.sessionId
        self.timeout_ms = resp.timeOut
        self.passwd = resp.passwd or b""


async def _connect(host: str, port: int, session_id: int, passwd: bytes, session_timeout_ms: int,
                   timeout_s: float) -> _ResumingSession:
    loop = asyncio.get_running_loop()
    _, proto = await asyncio.wait_for(
        loop.create_connection(lambda: _ResumingSession(session_id, passwd), host, port), timeout_s)
    try:
        await asyncio.wait_for(proto._handshake(session_timeout_ms), timeout_s)
    except BaseException:
        if proto.transport is not None:
            proto.transport.close()
        raise
    return proto


@dataclass
class FailoverRun:
    """One ``kill -9`` of the leader; times in seconds from the kill."""

    killed: int  # myid of the leader that was killed
    client_on: int  # myid of the server the client was connected to
    new_leader: int | None = None
    ack_s: float | None = None  # first acknowledged create
    lost_s: float | None = None  # the client's connection closed (by the server, or by the client after a timeout)
    session_s: float | None = None  # first successful (re)connect after the loss
    connects: int = 0  # connection attempts after the kill
    connect_failures: int = 0
    timeouts: int = 0  # creates or handshakes that took longer than the attempt timeout
    new_sessions: int = 0  # reconnects where the old session had expired and a new one was made
    error_codes: dict[int, int] = field(default_factory=dict)  # create replies other than ok
    restart_s: float | None = None  # restart of the killed server until every server serves again
    killed_at: float = 0.0  # wall clock (time.time()) of the kill
    # zkpy only, from the log of the client's server, s from the kill: the term ended, the data dir was
    # reloaded and the election started (LOOKING), the election decided, the server served again
    phases: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class FailoverSpec:
    attempt_timeout_s: float = 0.5
    retry_delay_s: float = 0.01
    session_timeout_ms: int = 10000
    give_up_s: float = 60.0
    settle_s: float = 1.0  # after the ensemble serves again, before the next kill


async def _kill_and_write(client_server: ServerProcess, leader: ServerProcess, run: FailoverRun,
                          spec: FailoverSpec, index: int) -> None:
    host, port = "127.0.0.1", client_server.port
    sess: _ResumingSession | None = await _connect(host, port, 0, b"\x00" * 16, spec.session_timeout_ms, 10)
    assert sess is not None
    err, _ = await asyncio.wait_for(sess.call(OpCode.CREATE, create_body(f"{FAILOVER_ROOT}/k{index}-before", b"")), 10)
    if err:
        raise RuntimeError(f"create before the kill failed with error {err}")
    sid, passwd = sess.session_id, sess.passwd
    lost: list[float] = []
    assert sess.closed is not None
    sess.closed.add_done_callback(lambda _: lost.append(time.monotonic()))
    attempt = 0
    t0 = time.monotonic()
    run.killed_at = time.time()
    os.kill(leader.proc.pid, signal.SIGKILL)
    deadline = t0 + spec.give_up_s
    try:
        while time.monotonic() < deadline:
            if sess is None or sess.transport is None:
                if sess is not None and not lost:
                    lost.append(time.monotonic())
                sess = None
                run.connects += 1
                try:
                    sess = await _connect(host, port, sid, passwd, spec.session_timeout_ms, spec.attempt_timeout_s)
                except TimeoutError:
                    run.timeouts += 1
                except (OSError, SessionClosed) as exc:
                    if isinstance(exc, SessionClosed) and "expired" in str(exc):
                        sid, passwd = 0, b"\x00" * 16  # the session is gone: the next connect makes a new one
                        run.new_sessions += 1
                if sess is None:
                    run.connect_failures += 1
                    await asyncio.sleep(spec.retry_delay_s)
                    continue
                if run.session_s is None:
                    run.session_s = time.monotonic() - t0
                sid, passwd = sess.session_id, sess.passwd
            attempt += 1
            try:
                err, _ = await asyncio.wait_for(
                    sess.call(OpCode.CREATE, create_body(f"{FAILOVER_ROOT}/k{index}-a{attempt}", b"")),
                    spec.attempt_timeout_s)
            except TimeoutError:
                run.timeouts += 1
                if sess.transport is not None:
                    sess.transport.close()  # give up on this connection; reconnect
                continue
            except SessionClosed:
                continue
            if err == 0:
                run.ack_s = time.monotonic() - t0
                break
            run.error_codes[err] = run.error_codes.get(err, 0) + 1
            await asyncio.sleep(spec.retry_delay_s)
    finally:
        if lost:
            run.lost_s = lost[0] - t0
        if sess is not None and sess.transport is not None:
            sess.transport.close()


def _ensure_root(server: ServerProcess) -> None:
    async def go() -> None:
        s = await RawSession.connect("127.0.0.1", server.port)
        try:
            err, _ = await s.call(OpCode.CREATE, create_body(FAILOVER_ROOT, b""))
            if err not in (0, NODE_EXISTS):
                raise RuntimeError(f"create {FAILOVER_ROOT}: error {err}")
        finally:
            await s.close()

    asyncio.run(go())


ZKPY_PHASES = (("ended", "term ended"), ("looking", " is LOOKING"), ("decided", "election decided"),
               ("serving", ": serving as"))


def zkpy_phases(log_text: str, since: float) -> dict[str, float]:
    """When zkpy's log says a term ended, the election started, decided, and the server served again:
    the first of each after the wall-clock time ``since``, in s from it."""
    out: dict[str, float] = {}
    for line in log_text.splitlines():
        try:
            t = time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S")) + int(line[20:23]) / 1000
        except ValueError:
            continue
        if t < since - 0.002:  # the log has millisecond stamps
            continue
        for name, needle in ZKPY_PHASES:
            if name not in out and needle in line:
                out[name] = max(0.0, t - since)
    return out


def failover_once(servers: list[ServerProcess], spec: FailoverSpec, index: int, ready_s: float) -> FailoverRun:
    """Kill the leader, time the first acknowledged create on a follower, restart the killed server."""
    leader = ensemble_leader(servers)
    client_server = min((s for s in servers if s is not leader), key=myid)
    run = FailoverRun(killed=myid(leader), client_on=myid(client_server))
    offset = os.path.getsize(client_server.log_path)
    try:
        asyncio.run(_kill_and_write(client_server, leader, run, spec, index))
    finally:
        leader.proc.wait(10)
    if client_server.kind == "zkpy":
        with open(client_server.log_path, "rb") as f:
            f.seek(offset)
            run.phases = zkpy_phases(f.read().decode("utf-8", "replace"), run.killed_at)
    survivors = [s for s in servers if s is not leader]
    try:
        run.new_leader = myid(ensemble_leader(survivors, 30))
    except RuntimeError:
        run.new_leader = None
    t = time.monotonic()
    restart_ensemble_member(leader)
    wait_ensemble_serving(servers, ready_s)
    run.restart_s = time.monotonic() - t
    return run


# --- one implementation ---


@dataclass
class ImplResult:
    kind: str
    throughput: dict[str, list[SpreadResult]] = field(default_factory=dict)  # by mode, one per round
    create: dict[int, list[SpreadResult]] = field(default_factory=dict)  # by workers, one per round
    failovers: list[FailoverRun] = field(default_factory=list)
    leaders: list[int] = field(default_factory=list)  # the leader's myid when each round started
    server_errors: list[str] = field(default_factory=list)  # ERROR / Traceback lines of the server logs


def _server_errors(servers: Sequence[ServerProcess], limit: int = 20) -> list[str]:
    out = []
    for s in servers:
        for line in s.log().splitlines():
            if " ERROR " in line or "Traceback" in line or " CRITICAL " in line:
                out.append(f"server {myid(s)}: {line[:300]}")
    return out[:limit] + ([f"... {len(out) - limit} more"] if len(out) > limit else [])


def measure(kind: str, args: argparse.Namespace, modes: list[str], into: ImplResult, round_index: int,
            log: Log = _log) -> None:
    """Start a fresh ``kind`` ensemble, run ``modes`` on it, stop it; results go into ``into``."""
    espec = EnsembleSpec(args.size, args.tick_ms, args.apache_heap, args.apache_log)
    log(f"{kind}: starting a {args.size}-server ensemble (tickTime {args.tick_ms} ms)")
    servers = start(kind, espec)
    try:
        leader = ensemble_leader(servers)
        into.leaders.append(myid(leader))
        ordered = followers_first(servers, leader)
        targets = [target(s) for s in ordered]
        log(f"{kind}: serving; leader is server {myid(leader)}; "
            + ", ".join(f"server {myid(s)} on {s.port} pid {s.proc.pid}" for s in servers))
        prepare(target(leader), args.nodes, args.value_size)
        per = args.processes_per_server
        if args.server_warmup > 0:
            log(f"{kind}: warming up ({args.server_warmup:g}s of 90/10 on every server, unmeasured)")
            run_spread("throughput", targets, ThroughputSpec(0.1, per * len(targets), args.sessions, args.outstanding,
                                                             args.nodes, args.value_size, 0.0, args.server_warmup))
        for mode in modes:
            if mode in MIXES:
                spec = ThroughputSpec(MIXES[mode], per * len(targets), args.sessions, args.outstanding, args.nodes,
                                      args.value_size, args.warmup, args.duration)
                r = run_spread("throughput", targets, spec)
                into.throughput.setdefault(mode, []).append(r)
                merged = r.result.merged((READ, WRITE))
                log(f"{kind} round {round_index + 1}: {LABELS[mode]}: {merged.ops / spec.duration_s:,.0f} ops/s, "
                    f"p99 {percentile_ms(merged.latencies_ns, 99):.2f} ms, errors {r.result.errors} "
                    f"{r.result.error_codes or ''}, servers CPU {_fmt(r.server_cpu)}, others {_fmt(r.others_cpu)}")
            elif mode == "create":
                for workers in args.workers:
                    cspec = CreateSpec(workers, len(targets), args.value_size, min(args.warmup, 1.0),
                                       args.create_duration)
                    r = run_spread("create", targets, cspec)
                    into.create.setdefault(workers, []).append(r)
                    c = r.result.merged((CREATE,))
                    log(f"{kind} round {round_index + 1}: create, {workers} workers: "
                        f"{c.ops / cspec.duration_s:,.0f} creates/s, p50 {percentile_ms(c.latencies_ns, 50):.2f} ms, "
                        f"p99 {percentile_ms(c.latencies_ns, 99):.2f} ms, errors {r.result.errors} "
                        f"{r.result.error_codes or ''}, servers CPU {_fmt(r.server_cpu)}, others {_fmt(r.others_cpu)}")
        if "failover" in modes:
            _ensure_root(leader)
            fspec = FailoverSpec(args.attempt_timeout, args.retry_delay, give_up_s=args.give_up)
            for i in range(args.failovers):
                time.sleep(fspec.settle_s)
                index = round_index * 1000 + i
                run = failover_once(servers, fspec, index, espec.ready_s)
                into.failovers.append(run)
                log(f"{kind} failover {len(into.failovers)}: killed leader {run.killed}, client on {run.client_on}, "
                    f"new leader {run.new_leader}: first create acked after {_fmt(run.ack_s, 3)} s "
                    f"(connection lost {_fmt(run.lost_s, 3)} s, session back {_fmt(run.session_s, 3)} s, "
                    f"{run.connects} connects, {run.timeouts} timeouts, errors {run.error_codes or 0}); "
                    f"restart {_fmt(run.restart_s, 1)} s"
                    + (f"; zkpy log: {', '.join(f'{k} {v:.3f}' for k, v in run.phases.items())}" if run.phases else ""))
    finally:
        into.server_errors += _server_errors(servers)
        if args.keep_logs:
            os.makedirs(args.keep_logs, exist_ok=True)
            for s in servers:
                shutil.copy(s.log_path, os.path.join(args.keep_logs, f"{kind}-round{round_index + 1}-server{myid(s)}.log"))
        cleanup_ensemble(servers)


# --- tables ---


def _fmt(x: float | None, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:,.{digits}f}"


def _ratio(a: float | None, b: float | None) -> float | None:
    if not a or not b or math.isnan(a) or math.isnan(b):
        return None
    return a / b


def _get(d: dict[str, Any] | None, key: str) -> float | None:
    return None if d is None else d[key]


def _rx(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _median_run(runs: list[SpreadResult], kinds: tuple[str, ...]) -> SpreadResult:
    ranked = sorted(runs, key=lambda r: r.result.rate(kinds))
    return ranked[(len(ranked) - 1) // 2]


def run_summary(runs: list[SpreadResult], kinds: tuple[str, ...]) -> dict[str, Any]:
    """The median round of ``runs`` (by rate), and every round's rate."""
    r = _median_run(runs, kinds)
    merged = r.result.merged(kinds)
    return {
        "ops_per_s": merged.ops / r.result.duration_s,
        "p50_ms": percentile_ms(merged.latencies_ns, 50), "p99_ms": percentile_ms(merged.latencies_ns, 99),
        "ops": merged.ops, "errors": sum(x.result.errors for x in runs),
        "error_codes": r.result.error_codes, "server_cpu": r.server_cpu, "server_cpus": r.server_cpus,
        "generator_cpu": r.result.generator_cpu, "others_cpu": r.others_cpu, "sessions": r.result.sessions,
        "round_ops_per_s": [x.result.rate(kinds) for x in runs],
    }


def failover_summary(runs: list[FailoverRun]) -> dict[str, Any]:
    acks = [r.ack_s for r in runs if r.ack_s is not None]
    return {
        "runs": len(runs), "acked": len(acks),
        "median_s": statistics.median(acks) if acks else None, "max_s": max(acks) if acks else None,
        "min_s": min(acks) if acks else None,
        "median_session_s": statistics.median([r.session_s for r in runs if r.session_s is not None] or [math.nan]),
        "each": [asdict(r) for r in runs],
    }


def _impls(results: dict[str, ImplResult]) -> list[str]:
    return [k for k in ("zkpy", "apache") if k in results] + sorted(set(results) - {"zkpy", "apache"})


def throughput_table(results: dict[str, ImplResult]) -> str:
    impls = _impls(results)
    modes = [m for m in MIXES if any(m in results[k].throughput for k in impls)]
    head = ["workload"]
    for k in impls:
        n = NAMES.get(k, k)
        head += [f"{n} ops/s", f"{n} p50 ms", f"{n} p99 ms", f"{n} CPU servers (gen; others)"]
    compare = "zkpy" in impls and "apache" in impls
    if compare:
        head += ["ops/s zkpy/ZK", "p99 zkpy/ZK", "target"]
    head.append("errors")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for m in modes:
        cells = [LABELS[m]]
        sums: dict[str, dict[str, Any]] = {}
        errors = 0
        for k in impls:
            runs = results[k].throughput.get(m)
            if not runs:
                cells += ["-"] * 4
                continue
            d = sums[k] = run_summary(runs, (READ, WRITE))
            errors += d["errors"]
            cells += [_fmt(d["ops_per_s"], 0), _fmt(d["p50_ms"]), _fmt(d["p99_ms"]),
                      f"{_fmt(d['server_cpu'])} ({_fmt(d['generator_cpu'])}; {_fmt(d['others_cpu'])})"]
        if compare:
            z, a = sums.get("zkpy"), sums.get("apache")
            ops = _ratio(_get(z, "ops_per_s"), _get(a, "ops_per_s"))
            cells += [_rx(ops), _rx(_ratio(_get(z, "p99_ms"), _get(a, "p99_ms")))]
            if m == "write" and ops is not None:
                cells.append(f">= {WRITE_TARGET}x: {'met' if ops >= WRITE_TARGET else 'missed'}")
            else:
                cells.append("-")
        cells.append(str(errors))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def create_table(results: dict[str, ImplResult]) -> str:
    impls = _impls(results)
    workers = sorted({w for k in impls for w in results[k].create})
    head = ["workers"]
    for k in impls:
        n = NAMES.get(k, k)
        head += [f"{n} creates/s", f"{n} p50 ms", f"{n} p99 ms", f"{n} CPU servers (others)"]
    compare = "zkpy" in impls and "apache" in impls
    if compare:
        head += ["creates/s zkpy/ZK", "p50 zkpy/ZK"]
    head.append("errors")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for w in workers:
        cells = [str(w)]
        sums: dict[str, dict[str, Any]] = {}
        errors = 0
        for k in impls:
            runs = results[k].create.get(w)
            if not runs:
                cells += ["-"] * 4
                continue
            d = sums[k] = run_summary(runs, (CREATE,))
            errors += d["errors"]
            cells += [_fmt(d["ops_per_s"], 0), _fmt(d["p50_ms"]), _fmt(d["p99_ms"]),
                      f"{_fmt(d['server_cpu'])} ({_fmt(d['others_cpu'])})"]
        if compare:
            z, a = sums.get("zkpy"), sums.get("apache")
            cells += [_rx(_ratio(_get(z, "ops_per_s"), _get(a, "ops_per_s"))),
                      _rx(_ratio(_get(z, "p50_ms"), _get(a, "p50_ms")))]
        cells.append(str(errors))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def failover_table(results: dict[str, ImplResult]) -> str:
    impls = [k for k in _impls(results) if results[k].failovers]
    head = ["server", "runs (acked)", "median s", "max s", "min s", "each run: kill -> first acked create, s",
            "median kill -> session back, s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    sums = {}
    for k in impls:
        d = sums[k] = failover_summary(results[k].failovers)
        each = " · ".join(_fmt(r.ack_s, 3) for r in results[k].failovers)
        lines.append("| " + " | ".join([NAMES.get(k, k), f"{d['runs']} ({d['acked']})", _fmt(d["median_s"], 3),
                                        _fmt(d["max_s"], 3), _fmt(d["min_s"], 3), each,
                                        _fmt(d["median_session_s"], 3)]) + " |")
    if "zkpy" in sums and "apache" in sums:
        z, a = sums["zkpy"], sums["apache"]
        med, mx = _ratio(z["median_s"], a["median_s"]), _ratio(z["max_s"], a["max_s"])
        verdict = "met" if med is not None and med <= 1.0 else "missed"
        lines.append("")
        lines.append(f"failover zkpy/ZooKeeper: median {_rx(med)}, max {_rx(mx)} "
                     f"(target: no slower than ZooKeeper, median: {verdict})")
    return "\n".join(lines)


def failover_detail(results: dict[str, ImplResult]) -> str:
    head = ["server", "run", "killed leader", "client on", "new leader", "acked s", "conn. lost s",
            "session back s", "connects (failed)", "timeouts", "error replies", "restart s",
            "zkpy log: term ended / LOOKING / decided / serving, s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for k in _impls(results):
        for i, r in enumerate(results[k].failovers):
            lines.append("| " + " | ".join([
                NAMES.get(k, k), str(i + 1), str(r.killed), str(r.client_on), str(r.new_leader), _fmt(r.ack_s, 3),
                _fmt(r.lost_s, 3), _fmt(r.session_s, 3), f"{r.connects} ({r.connect_failures})", str(r.timeouts),
                ", ".join(f"{c}: {n}" for c, n in sorted(r.error_codes.items())) or "0", _fmt(r.restart_s, 1),
                " / ".join(_fmt(r.phases.get(name), 3) for name, _ in ZKPY_PHASES) if r.phases else "-"]) + " |")
    return "\n".join(lines)


# --- command line ---


def _csv_ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench ensemble", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--servers", default="zkpy,apache", help="which implementations (default: zkpy,apache)")
    p.add_argument("--modes", default=",".join(MODES), help=f"default: {','.join(MODES)}")
    p.add_argument("--rounds", type=int, default=1,
                   help="fresh ensembles per implementation, alternating which goes first; the tables show "
                        "the median round of each workload and pool the failovers (default 1)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 2 s workloads after 0.5 s warmup, 1 s creates, 1 s server warmup, 2 failovers, "
                        "100 znodes (the other flags still apply on top)")
    p.add_argument("--size", type=int, default=3, help="servers per ensemble (default 3)")
    p.add_argument("--tick-ms", type=int, default=2000, help="tickTime of both ensembles, ms (default 2000)")
    p.add_argument("--duration", type=float, help="measured seconds per throughput run (default 10)")
    p.add_argument("--warmup", type=float, help="unmeasured seconds before each run (default 2)")
    p.add_argument("--create-duration", type=float, help="measured seconds per create run (default 5)")
    p.add_argument("--server-warmup", type=float,
                   help="seconds of unmeasured 90/10 load on a fresh ensemble before any run (default 5)")
    p.add_argument("--processes-per-server", type=int, default=1,
                   help="throughput: generator processes connected to each server (default 1)")
    p.add_argument("--sessions", type=int, default=16, help="throughput: sessions per generator process (default 16)")
    p.add_argument("--outstanding", type=int, default=11,
                   help="throughput: requests in flight per session (default 11: 3 x 16 x 11 = 528 in flight)")
    p.add_argument("--nodes", type=int, help="throughput: znodes read and written (default 1000)")
    p.add_argument("--value-size", type=int, default=1024, help="bytes per setData / create value (default 1024)")
    p.add_argument("--workers", default="1,10,20", help="create: worker counts (default 1,10,20)")
    p.add_argument("--failovers", type=int, help="failover: leader kills per ensemble (default 5)")
    p.add_argument("--attempt-timeout", type=float, default=0.5,
                   help="failover: longest wait for one connect or create before retrying, s (default 0.5)")
    p.add_argument("--retry-delay", type=float, default=0.01,
                   help="failover: pause after a failed connect or an error reply, s (default 0.01)")
    p.add_argument("--give-up", type=float, default=60.0, help="failover: stop trying after this many s (default 60)")
    p.add_argument("--apache-heap", default="512m", help="ZooKeeper's -Xmx per server (default 512m)")
    p.add_argument("--apache-log", action="store_true",
                   help="put slf4j-simple on ZooKeeper's classpath so its INFO log lands in server.log")
    p.add_argument("--keep-logs", metavar="DIR", help="copy every server's log into DIR before removing its data")
    p.add_argument("--json", help="also write the figures to this JSON file")
    args = p.parse_args(argv)
    quick = args.quick
    for name, full, short in (("duration", 10.0, 2.0), ("warmup", 2.0, 0.5), ("create_duration", 5.0, 1.0),
                              ("server_warmup", 5.0, 1.0), ("failovers", 5, 2), ("nodes", 1000, 100)):
        if getattr(args, name) is None:
            setattr(args, name, short if quick else full)
    args.workers = _csv_ints(args.workers)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in modes:
        if m not in MODES:
            raise SystemExit(f"unknown mode {m!r}: choose from {', '.join(MODES)}")
    kinds = [k.strip() for k in args.servers.split(",") if k.strip()]
    if "apache" in kinds and not apache_available():
        _log("Apache ZooKeeper is not installed: skipping it")
        kinds.remove("apache")
    load_before = os.getloadavg()
    _log(f"load average before the run: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}")
    results = {k: ImplResult(k) for k in kinds}
    started = time.monotonic()
    for r in range(args.rounds):
        for k in kinds if r % 2 == 0 else kinds[::-1]:
            measure(k, args, modes, results[k], r)
    load_after = os.getloadavg()
    elapsed = time.monotonic() - started

    print()
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}, "
          f"Python {platform.python_version()}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in load_before)}; after: "
          f"{' '.join(f'{x:.2f}' for x in load_after)}; run took {elapsed:.0f} s")
    print(f"ensembles: {args.size} servers each, tickTime {args.tick_ms} ms, initLimit 10, syncLimit 5, fsync on; "
          f"ZooKeeper -Xmx{args.apache_heap}; leader at the start of each round: "
          + "; ".join(f"{NAMES.get(k, k)} {results[k].leaders}" for k in kinds))
    n = args.size * args.processes_per_server
    if any(m in MIXES for m in modes):
        print(f"throughput: {n} processes ({args.processes_per_server} per server) x {args.sessions} sessions x "
              f"{args.outstanding} outstanding = {n * args.sessions * args.outstanding} in flight; {args.nodes} znodes "
              f"of {args.value_size} B; {args.duration:g}s measured after {args.warmup:g}s warmup")
        print("CPU servers (gen; others) = cores used by the servers, the generator processes, and every other "
              "process, during the measured window")
        print()
        print(throughput_table(results))
    if "create" in modes:
        print()
        print(f"create latency: each worker one create of {args.value_size} B outstanding (then an async delete); "
              f"worker i on server i mod {args.size}, followers first; {args.create_duration:g}s measured")
        print()
        print(create_table(results))
    if args.rounds > 1:
        print()
        print(f"ops/s of each round (the tables show the median of {args.rounds}):")
        for k in kinds:
            for m, runs in results[k].throughput.items():
                print(f"  {LABELS[m]:26} {NAMES.get(k, k):10} "
                      + "  ".join(f"{x.result.rate((READ, WRITE)):,.0f}" for x in runs))
            for w, runs in results[k].create.items():
                print(f"  {f'create, {w} workers':26} {NAMES.get(k, k):10} "
                      + "  ".join(f"{x.result.rate((CREATE,)):,.0f}" for x in runs))
    if "failover" in modes:
        print()
        print(f"failover: kill -9 of the leader -> first acknowledged create by a client on a follower "
              f"(attempt timeout {args.attempt_timeout:g} s, retry delay {args.retry_delay:g} s)")
        print()
        print(failover_table(results))
        print()
        print(failover_detail(results))
    for k in kinds:
        if results[k].server_errors:
            print()
            print(f"{NAMES.get(k, k)} server logs, ERROR lines:")
            for line in results[k].server_errors:
                print(f"  {line}")
    if args.json:
        out = {
            "load_before": load_before, "load_after": load_after, "args": vars(args),
            "throughput": {k: {m: run_summary(v, (READ, WRITE)) for m, v in results[k].throughput.items()}
                           for k in kinds},
            "create": {k: {str(w): run_summary(v, (CREATE,)) for w, v in results[k].create.items()} for k in kinds},
            "failover": {k: failover_summary(results[k].failovers) for k in kinds if results[k].failovers},
            "leaders": {k: results[k].leaders for k in kinds},
            "server_errors": {k: results[k].server_errors for k in kinds},
        }
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2, default=str)
    failed = any(x.result.errors for k in kinds for runs in (*results[k].throughput.values(),
                                                              *results[k].create.values()) for x in runs)
    failed |= any(r.ack_s is None for k in kinds for r in results[k].failovers)
    return 1 if failed else 0
