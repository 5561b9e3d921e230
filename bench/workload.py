"""The load: closed-loop getData/setData mixes and Table-2-style create latency, in several processes.

Each generator process runs one asyncio loop (uvloop when installed) with its own sessions.
All processes and the parent meet at a barrier once every session is connected; from there
each process runs ``warmup_s`` unmeasured, then ``duration_s`` measured (a reply counts when
it arrives inside the window), then stops issuing and drains what is outstanding. The parent
samples the CPU time of the server and of the generator processes at the window's edges.

Modes:

* throughput: every session keeps ``outstanding`` requests in flight over ``nodes`` znodes of
  ``value_size`` bytes; each new request is a setData with probability ``write_ratio``, else a
  getData, on a uniformly random znode.
* create: ``workers`` sessions, each with one create outstanding at a time (synchronous), and
  the delete of each created znode sent right after its create completes without waiting for it
  (asynchronous), as in the ZooKeeper paper's Table 2.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import random
import ssl
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from zkpy.client.core import parse_hosts
from zkpy.wire.consts import OpCode

from .client import RawSession, create_body, delete_body, get_data_body, set_data_body

NODE_ROOT = "/bench"
CREATE_ROOT = "/bench-create"
READ, WRITE, CREATE = "read", "write", "create"
NODE_EXISTS = -110


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    pid: int | None = None  # server process, for CPU accounting
    tls: tuple[str, str, str] | None = None  # (CA, client certificate, client key) PEM files: connect over TLS

    def connect(self, on_reply: Any = None) -> Any:
        """A RawSession to this server (a coroutine), over TLS when ``tls`` is set."""
        ctx = None
        if self.tls is not None:
            ctx = ssl.create_default_context(cafile=self.tls[0])
            ctx.load_cert_chain(self.tls[1], self.tls[2])
        return RawSession.connect(self.host, self.port, on_reply=on_reply, ssl_context=ctx)

    @classmethod
    def parse(cls, hosts: str, pid: int | None = None) -> Target:
        """The first server of a connect string (``:port`` alone is this machine's)."""
        if hosts.startswith(":"):
            hosts = "127.0.0.1" + hosts
        host, port = parse_hosts(hosts)[0][0]
        return cls(host, port, pid)


@dataclass(frozen=True)
class ThroughputSpec:
    write_ratio: float  # 0.0 = all getData, 1.0 = all setData
    processes: int = 2
    sessions: int = 16  # per process
    outstanding: int = 16  # per session
    nodes: int = 1000
    value_size: int = 1024
    warmup_s: float = 2.0
    duration_s: float = 10.0
    root: str = NODE_ROOT  # the znodes are {root}/n000000 ... (see prepare)


@dataclass(frozen=True)
class CreateSpec:
    workers: int
    processes: int = 2
    value_size: int = 1024
    warmup_s: float = 1.0
    duration_s: float = 5.0
    root: str = CREATE_ROOT  # parent of the created znodes (see prepare)


@dataclass
class OpStats:
    ops: int = 0
    errors: int = 0
    latencies_ns: array[int] = field(default_factory=lambda: array("q"))

    def merge(self, other: OpStats) -> None:
        self.ops += other.ops
        self.errors += other.errors
        self.latencies_ns.extend(other.latencies_ns)


@dataclass
class RunResult:
    """What one mode measured against one server."""

    duration_s: float
    stats: dict[str, OpStats] = field(default_factory=dict)
    error_codes: dict[int, int] = field(default_factory=dict)
    server_cpu: float | None = None  # cores used by the server over the window
    generator_cpu: float | None = None  # cores used by the generator processes
    sessions: int = 0
    probes: tuple[Any, Any] | None = None  # what ``run``'s probe returned at the window's edges

    @property
    def ops(self) -> int:
        return sum(s.ops for s in self.stats.values())

    @property
    def errors(self) -> int:
        return sum(s.errors for s in self.stats.values())

    def merged(self, kinds: tuple[str, ...] | None = None) -> OpStats:
        out = OpStats()
        for kind, s in self.stats.items():
            if kinds is None or kind in kinds:
                out.merge(s)
        return out

    def rate(self, kinds: tuple[str, ...] | None = None) -> float:
        return self.merged(kinds).ops / self.duration_s


def percentile_ms(latencies_ns: array[int], q: float) -> float:
    if not latencies_ns:
        return float("nan")
    ordered = sorted(latencies_ns)
    i = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))
    return ordered[i] / 1e6


# --- setup (parent process) ---


def node_paths(root: str, nodes: int) -> list[str]:
    return [f"{root}/n{i:06d}" for i in range(nodes)]


async def _prepare(target: Target, nodes: int, value_size: int, root: str, create_root: str) -> None:
    s = await target.connect()
    try:
        value = os.urandom(value_size)
        for path in (root, create_root):
            err, _ = await s.call(OpCode.CREATE, create_body(path, b""))
            if err not in (0, NODE_EXISTS):  # prepared by an earlier run
                raise RuntimeError(f"create {path}: error {err}")
        futs = [s.call(OpCode.CREATE, create_body(path, value)) for path in node_paths(root, nodes)]
        for err, _ in await asyncio.gather(*futs):
            if err not in (0, NODE_EXISTS):
                raise RuntimeError(f"create {root}/n...: error {err}")
    finally:
        await s.close()


def prepare(target: Target, nodes: int = 1000, value_size: int = 1024, root: str = NODE_ROOT,
            create_root: str = CREATE_ROOT) -> None:
    """Create ``root``, its ``nodes`` children of ``value_size`` bytes, and ``create_root`` (idempotent)."""
    asyncio.run(_prepare(target, nodes, value_size, root, create_root))


async def _remove(target: Target, nodes: int, root: str, create_root: str) -> None:
    s = await target.connect()
    try:
        await asyncio.gather(*(s.call(OpCode.DELETE, delete_body(p)) for p in node_paths(root, nodes)))
        await s.call(OpCode.DELETE, delete_body(root))
        await s.call(OpCode.DELETE, delete_body(create_root))
    finally:
        await s.close()


def remove(target: Target, nodes: int = 1000, root: str = NODE_ROOT, create_root: str = CREATE_ROOT) -> None:
    """Delete what ``prepare`` created (best effort: missing znodes are fine)."""
    asyncio.run(_remove(target, nodes, root, create_root))


# --- generator processes ---


class _Window:
    def __init__(self, warmup_s: float, duration_s: float) -> None:
        now = time.monotonic_ns()
        self.start = now + int(warmup_s * 1e9)
        self.end = self.start + int(duration_s * 1e9)


def _run_loop(coro: Any) -> Any:
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:
        return asyncio.run(coro)


async def _wait_barrier(barrier: Any) -> None:
    await asyncio.get_running_loop().run_in_executor(None, barrier.wait, 60)


async def _drain(sessions: list[RawSession], deadline_s: float = 10.0) -> None:
    deadline = time.monotonic() + deadline_s
    while any(s.outstanding for s in sessions) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)


async def _throughput_proc(target: Target, spec: ThroughputSpec, seed: int, barrier: Any) -> RunResult:
    rnd = random.Random(seed)
    value = rnd.randbytes(spec.value_size)
    paths = node_paths(spec.root, spec.nodes)
    reads = [get_data_body(p) for p in paths]
    writes = [set_data_body(p, value) for p in paths]
    stats = {READ: OpStats(), WRITE: OpStats()}
    codes: dict[int, int] = {}
    read_stats, write_stats = stats[READ], stats[WRITE]
    read_lat, write_lat = read_stats.latencies_ns.append, write_stats.latencies_ns.append
    write_ratio, n_nodes = spec.write_ratio, spec.nodes
    random_ = rnd.random
    window = _Window(0, 0)
    sessions: list[RawSession] = []

    def issue(s: RawSession, now: int) -> None:
        i = int(random_() * n_nodes)
        if write_ratio and random_() < write_ratio:
            s.send(OpCode.SET_DATA, writes[i], (s, True), now)
        else:
            s.send(OpCode.GET_DATA, reads[i], (s, False), now)

    def on_reply(tag: tuple[RawSession, bool], err: int, sent: int, now: int) -> None:
        s, is_write = tag
        if window.start <= now < window.end:
            if is_write:
                write_stats.ops += 1
                write_lat(now - sent)
            else:
                read_stats.ops += 1
                read_lat(now - sent)
            if err:
                (write_stats if is_write else read_stats).errors += 1
                codes[err] = codes.get(err, 0) + 1
        elif err:
            codes[err] = codes.get(err, 0) + 1
        if now < window.end:
            issue(s, now)

    sessions = list(await asyncio.gather(*(target.connect(on_reply)
                                           for _ in range(spec.sessions))))
    await _wait_barrier(barrier)
    w = _Window(spec.warmup_s, spec.duration_s)
    window.start, window.end = w.start, w.end
    now = time.monotonic_ns()
    for s in sessions:
        for _ in range(spec.outstanding):
            issue(s, now)
    await asyncio.sleep(max(0.0, (window.end - time.monotonic_ns()) / 1e9))
    await _drain(sessions)
    unexpected = sum(s.unexpected for s in sessions)
    if unexpected:
        codes[0] = codes.get(0, 0) + unexpected  # replies that matched no request: count as errors
        read_stats.errors += unexpected
    return RunResult(spec.duration_s, stats, codes, sessions=len(sessions))


async def _create_proc(target: Target, spec: CreateSpec, proc_index: int, barrier: Any) -> RunResult:
    worker_ids = list(range(proc_index, spec.workers, spec.processes))
    value = random.Random(proc_index).randbytes(spec.value_size)
    create_stats = OpStats()
    delete_stats = OpStats()
    codes: dict[int, int] = {}
    lat = create_stats.latencies_ns.append
    window = _Window(0, 0)
    seq = {w: 0 for w in worker_ids}
    sessions: dict[int, RawSession] = {}

    def next_create(worker: int, now: int) -> None:
        seq[worker] += 1
        path = f"{spec.root}/w{worker}-{seq[worker]}"
        sessions[worker].send(OpCode.CREATE, create_body(path, value), (worker, path), now)

    def on_reply(tag: tuple[int, str | None], err: int, sent: int, now: int) -> None:
        worker, path = tag
        if err:
            codes[err] = codes.get(err, 0) + 1
        if path is None:  # a delete
            if window.start <= now < window.end:
                delete_stats.ops += 1
                delete_stats.errors += err != 0
            return
        if window.start <= now < window.end:
            create_stats.ops += 1
            create_stats.errors += err != 0
            lat(now - sent)
        if not err:
            sessions[worker].send(OpCode.DELETE, delete_body(path), (worker, None), now)
        if now < window.end:
            next_create(worker, now)

    conns = await asyncio.gather(*(target.connect(on_reply)
                                   for _ in worker_ids))
    sessions.update(zip(worker_ids, conns))
    await _wait_barrier(barrier)
    w = _Window(spec.warmup_s, spec.duration_s)
    window.start, window.end = w.start, w.end
    now = time.monotonic_ns()
    for worker in worker_ids:
        next_create(worker, now)
    await asyncio.sleep(max(0.0, (window.end - time.monotonic_ns()) / 1e9))
    await _drain(list(sessions.values()))
    return RunResult(spec.duration_s, {CREATE: create_stats, "delete": delete_stats}, codes,
                     sessions=len(sessions))


def _child(kind: str, target: Target, spec: Any, index: int, barrier: Any, results: Any) -> None:
    try:
        if kind == "throughput":
            result = _run_loop(_throughput_proc(target, spec, 1000 + index, barrier))
        else:
            result = _run_loop(_create_proc(target, spec, index, barrier))
        results.put((index, result, None))
    except BaseException as exc:  # report, never hang the parent
        barrier.abort()
        results.put((index, None, f"{type(exc).__name__}: {exc}"))


# --- CPU accounting (Linux /proc) ---

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_s(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime
    except (OSError, ValueError, IndexError):
        return None


def _cpu_total(pids: list[int]) -> float | None:
    values = [_cpu_s(p) for p in pids]
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


# --- parent ---


def _merge_children(procs: list[Any], results: Any, spec: ThroughputSpec | CreateSpec, merged: RunResult) -> None:
    """Add every generator process's figures into ``merged``, join them; raise if one failed."""
    failures = []
    for _ in procs:
        _, result, error = results.get(timeout=spec.warmup_s + spec.duration_s + 120)
        if error is not None:
            failures.append(error)
            continue
        for name, st in result.stats.items():
            merged.stats.setdefault(name, OpStats()).merge(st)
        for code, n in result.error_codes.items():
            merged.error_codes[code] = merged.error_codes.get(code, 0) + n
        merged.sessions += result.sessions
    for p in procs:
        p.join(10)
    if failures:
        raise RuntimeError("generator process failed: " + "; ".join(failures))


def run(kind: str, target: Target, spec: ThroughputSpec | CreateSpec,
        probe: Callable[[], Any] | None = None) -> RunResult:
    """Run one mode with ``spec.processes`` generator processes; blocks until they finish.

    ``probe`` (e.g. reading the server's counters) is called at the start and at the end of the
    measured window; ``RunResult.probes`` holds the two results."""
    processes = spec.processes if kind == "throughput" else min(spec.processes, spec.workers)  # type: ignore[union-attr]
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(processes + 1)
    results = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(kind, target, spec, i, barrier, results), daemon=True)
             for i in range(processes)]
    for p in procs:
        p.start()
    server_cpu = gen_cpu = None
    probes: tuple[Any, Any] | None = None
    try:
        barrier.wait(60)
        t0 = time.monotonic()
        time.sleep(spec.warmup_s)
        pids = [p.pid for p in procs if p.pid is not None]
        p0 = probe() if probe is not None else None
        s0 = _cpu_s(target.pid) if target.pid else None
        g0 = _cpu_total(pids)
        time.sleep(max(0.0, t0 + spec.warmup_s + spec.duration_s - time.monotonic()))
        s1 = _cpu_s(target.pid) if target.pid else None
        g1 = _cpu_total(pids)
        if probe is not None:
            probes = (p0, probe())
        if s0 is not None and s1 is not None:
            server_cpu = (s1 - s0) / spec.duration_s
        if g0 is not None and g1 is not None:
            gen_cpu = (g1 - g0) / spec.duration_s
    except Exception:  # a child failed before the barrier (BrokenBarrierError): its message follows
        pass
    merged = RunResult(spec.duration_s, server_cpu=server_cpu, generator_cpu=gen_cpu, probes=probes)
    _merge_children(procs, results, spec, merged)
    return merged
