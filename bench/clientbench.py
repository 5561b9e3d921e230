"""``python -m bench client``: zkpy's client against kazoo, on a zkpy server and on Apache ZooKeeper 3.8.

Two measurements, each on both servers in the same run, zkpy's client and kazoo taking turns
(the one that goes first alternates from round to round):

* ``throughput``: ONE session with ``--outstanding`` getData requests in flight on ``--nodes``
  znodes of ``--value-size`` bytes, closed loop (each completion issues the next). zkpy: one
  ``AsyncClient`` on ``asyncio.run`` (the default loop, not uvloop) with ``--outstanding`` tasks,
  each looping ``await zk.get(path)``. kazoo: one ``KazooClient`` (threading handler), with
  ``--outstanding`` chains of ``get_async(path).rawlink(callback)``, each callback issuing the next
  ``get_async`` (no thread waits on any single result: kazoo's fastest pipelined form).
* ``latency``: synchronous calls one at a time, ``zkpy.Client.get(path)`` against kazoo's
  ``zk.get(path)``: ``--calls`` timed calls per client and round after ``--warmup-calls`` untimed
  ones; p50/p99/p99.9 of all rounds pooled. Both clients hold a session for the whole run, and
  blocks of 250 calls alternate between them, so a busy moment on a shared machine hits both.

Everything runs in this process, one client working at a time, so "client CPU" is this process's
CPU time (``time.process_time``: every thread, kazoo's and zkpy's loop thread included) over the
measured wall time (throughput), or per call (latency).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from zkpy import AsyncClient, Client
from zkpy.testing.servers import ServerProcess, apache_available

from .launch import NAMES, start

CLIENTS = ("zkpy", "kazoo")
MODES = ("throughput", "latency")
LATENCY_BLOCK = 250  # latency: calls per block; the blocks alternate between the two clients


@dataclass(frozen=True)
class ClientSpec:
    """What every run uses; ``root`` holds ``nodes`` znodes ``n0..`` of ``value_size`` bytes."""

    outstanding: int = 100
    nodes: int = 1
    value_size: int = 1024
    warmup_s: float = 1.0
    duration_s: float = 5.0
    warmup_calls: int = 300
    calls: int = 3000
    root: str = "/bench-client"

    def paths(self) -> list[str]:
        return [f"{self.root}/n{i}" for i in range(self.nodes)]


@dataclass
class Throughput:
    """One throughput run: completions inside the measured window."""

    server: str
    client: str
    ops: int
    duration_s: float
    cpu: float  # cores this process used during the window
    errors: int

    @property
    def ops_per_s(self) -> float:
        return self.ops / self.duration_s


@dataclass
class Latency:
    """One latency run: each synchronous call's wall time, in ns."""

    server: str
    client: str
    latencies_ns: list[int] = field(repr=False)
    cpu_us_per_call: float

    def percentile_ms(self, q: float) -> float:
        xs = sorted(self.latencies_ns)
        return xs[min(len(xs) - 1, int(len(xs) * q / 100))] / 1e6

    def summary(self) -> dict[str, Any]:
        return {"server": self.server, "client": self.client, "calls": len(self.latencies_ns),
                "p50_ms": self.percentile_ms(50), "p99_ms": self.percentile_ms(99),
                "p999_ms": self.percentile_ms(99.9), "cpu_us_per_call": self.cpu_us_per_call}


def _log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- setup ---


def prepare(hosts: str, spec: ClientSpec) -> None:
    """Create ``spec.root`` and its znodes (or overwrite their values)."""
    value = b"x" * spec.value_size
    with Client(hosts) as zk:
        zk.ensure_path(spec.root)
        for path in spec.paths():
            if zk.exists(path) is None:
                zk.create(path, value)
            else:
                zk.set(path, value)


def _kazoo(hosts: str) -> Any:
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=hosts, timeout=10.0)
    zk.start(timeout=15)
    return zk


def _stop_kazoo(zk: Any) -> None:
    zk.stop()
    zk.close()


# --- throughput: one session, many outstanding ---


async def _zkpy_throughput(hosts: str, spec: ClientSpec) -> tuple[int, float, float, int]:
    """Returns (ops in the window, window s, CPU s in the window, errors)."""
    paths = spec.paths()
    done = 0
    errors = 0
    stop = False

    async def chain(i: int) -> None:
        nonlocal done, errors
        n = len(paths)
        k = i
        while not stop:
            try:
                await zk.get(paths[k % n])
            except Exception:
                errors += 1
            done += 1
            k += 1

    async with AsyncClient(hosts) as zk:
        tasks = [asyncio.create_task(chain(i)) for i in range(spec.outstanding)]
        await asyncio.sleep(spec.warmup_s)
        d0, c0, t0 = done, time.process_time(), time.perf_counter()
        await asyncio.sleep(spec.duration_s)
        d1, c1, t1 = done, time.process_time(), time.perf_counter()
        stop = True
        await asyncio.gather(*tasks)
    return d1 - d0, t1 - t0, c1 - c0, errors


def _kazoo_throughput(hosts: str, spec: ClientSpec) -> tuple[int, float, float, int]:
    paths = spec.paths()
    n = len(paths)
    zk = _kazoo(hosts)
    counts = [0, 0]  # completions, errors; only kazoo's callback thread writes them
    stop = threading.Event()
    idle = threading.Event()
    in_flight = [spec.outstanding]

    def issue(k: int) -> None:
        zk.get_async(paths[k % n]).rawlink(lambda result: completed(result, k + 1))

    def completed(result: Any, k: int) -> None:
        if not result.successful():
            counts[1] += 1
        counts[0] += 1
        if stop.is_set():
            in_flight[0] -= 1
            if in_flight[0] == 0:
                idle.set()
            return
        issue(k)

    try:
        for i in range(spec.outstanding):
            issue(i)
        time.sleep(spec.warmup_s)
        d0, c0, t0 = counts[0], time.process_time(), time.perf_counter()
        time.sleep(spec.duration_s)
        d1, c1, t1 = counts[0], time.process_time(), time.perf_counter()
        stop.set()
        idle.wait(10.0)
    finally:
        _stop_kazoo(zk)
    return d1 - d0, t1 - t0, c1 - c0, counts[1]


def throughput(server: str, client: str, hosts: str, spec: ClientSpec) -> Throughput:
    if client == "zkpy":
        ops, wall, cpu, errors = asyncio.run(_zkpy_throughput(hosts, spec))
    else:
        ops, wall, cpu, errors = _kazoo_throughput(hosts, spec)
    return Throughput(server, client, ops, wall, cpu / wall, errors)


# --- latency: synchronous calls, one at a time ---


def _timed_block(get: Callable[[str], Any], paths: list[str], start: int, count: int,
                 into: list[int]) -> float:
    """Time ``count`` calls into ``into``; returns the CPU seconds this process spent on them."""
    n = len(paths)
    clock = time.perf_counter_ns
    c0 = time.process_time()
    for i in range(start, start + count):
        t = clock()
        get(paths[i % n])
        into.append(clock() - t)
    return time.process_time() - c0


def latency(server: str, hosts: str, spec: ClientSpec, first: str = "zkpy") -> list[Latency]:
    """Both clients connected at once; blocks of ``LATENCY_BLOCK`` calls alternate between them
    (``first`` starts), so a slow patch of a shared machine hits both alike."""
    paths = spec.paths()
    kz = _kazoo(hosts)
    try:
        with Client(hosts) as zk:
            gets: dict[str, Callable[[str], Any]] = {"zkpy": zk.get, "kazoo": kz.get}
            for get in gets.values():
                for i in range(spec.warmup_calls):
                    get(paths[i % len(paths)])
            lat: dict[str, list[int]] = {c: [] for c in CLIENTS}
            cpu = dict.fromkeys(CLIENTS, 0.0)
            order = [first] + [c for c in CLIENTS if c != first]
            done = 0
            while done < spec.calls:
                count = min(LATENCY_BLOCK, spec.calls - done)
                for client in order:
                    cpu[client] += _timed_block(gets[client], paths, done, count, lat[client])
                order.reverse()
                done += count
    finally:
        _stop_kazoo(kz)
    return [Latency(server, c, lat[c], cpu[c] / spec.calls * 1e6) for c in CLIENTS]


# --- rounds and tables ---


@dataclass
class Results:
    throughput: list[Throughput] = field(default_factory=list)
    latency: list[Latency] = field(default_factory=list)


def run_server(name: str, hosts: str, spec: ClientSpec, modes: list[str], rounds: int, results: Results) -> None:
    for r in range(rounds):
        order = CLIENTS if r % 2 == 0 else CLIENTS[::-1]
        if "throughput" in modes:
            for client in order:
                t = throughput(name, client, hosts, spec)
                results.throughput.append(t)
                _log(f"{name} / {client} throughput round {r + 1}: {t.ops_per_s:,.0f} ops/s, "
                     f"CPU {t.cpu:.2f}, errors {t.errors}")
        if "latency" in modes:
            for lat in latency(name, hosts, spec, order[0]):
                results.latency.append(lat)
                _log(f"{name} / {lat.client} latency round {r + 1}: p50 {lat.percentile_ms(50):.3f} ms, "
                     f"p99 {lat.percentile_ms(99):.3f} ms, {lat.cpu_us_per_call:.0f} us CPU/call")


def _median_run(runs: list[Throughput]) -> Throughput:
    ranked = sorted(runs, key=lambda t: t.ops_per_s)
    return ranked[(len(ranked) - 1) // 2]


def throughput_table(results: Results, servers: list[str]) -> str:
    head = ["server", "zkpy ops/s", "zkpy CPU", "kazoo ops/s", "kazoo CPU", "zkpy/kazoo", "target >= 2x",
            "zkpy ops/s each round", "kazoo ops/s each round", "errors"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for s in servers:
        by = {c: [t for t in results.throughput if t.server == s and t.client == c] for c in CLIENTS}
        if not by["zkpy"] or not by["kazoo"]:
            continue
        z, k = _median_run(by["zkpy"]), _median_run(by["kazoo"])
        ratio = z.ops_per_s / k.ops_per_s if k.ops_per_s else float("nan")
        lines.append("| " + " | ".join([
            NAMES.get(s, s), f"{z.ops_per_s:,.0f}", f"{z.cpu:.2f}", f"{k.ops_per_s:,.0f}", f"{k.cpu:.2f}",
            f"**{ratio:.2f}x**", "met" if ratio >= 2 else "missed",
            " · ".join(f"{t.ops_per_s:,.0f}" for t in by["zkpy"]),
            " · ".join(f"{t.ops_per_s:,.0f}" for t in by["kazoo"]),
            str(sum(t.errors for t in by["zkpy"] + by["kazoo"]))]) + " |")
    return "\n".join(lines)


def _pooled(runs: list[Latency], server: str, client: str) -> Latency | None:
    mine = [x for x in runs if x.server == server and x.client == client]
    if not mine:
        return None
    return Latency(server, client, [v for x in mine for v in x.latencies_ns],
                   statistics.fmean(x.cpu_us_per_call for x in mine))


def latency_table(results: Results, servers: list[str]) -> str:
    head = ["server", "zkpy p50 ms", "zkpy p99 ms", "zkpy p99.9 ms", "zkpy CPU µs/call",
            "kazoo p50 ms", "kazoo p99 ms", "kazoo p99.9 ms", "kazoo CPU µs/call", "p50 zkpy/kazoo",
            "p99 zkpy/kazoo", "target <= 1x"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for s in servers:
        z, k = _pooled(results.latency, s, "zkpy"), _pooled(results.latency, s, "kazoo")
        if z is None or k is None:
            continue
        p50, p99 = z.percentile_ms(50) / k.percentile_ms(50), z.percentile_ms(99) / k.percentile_ms(99)
        cells = [NAMES.get(s, s)]
        for x in (z, k):
            cells += [f"{x.percentile_ms(50):.3f}", f"{x.percentile_ms(99):.3f}", f"{x.percentile_ms(99.9):.3f}",
                      f"{x.cpu_us_per_call:.0f}"]
        cells += [f"**{p50:.2f}x**", f"{p99:.2f}x", "met" if p50 <= 1 and p99 <= 1 else "missed"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --- the command ---


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench client", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--servers", default="zkpy,apache", help="which servers to start (default: zkpy,apache)")
    p.add_argument("--hosts", help="use this running server (host:port) instead of starting any")
    p.add_argument("--modes", default=",".join(MODES), help=f"default: {','.join(MODES)}")
    p.add_argument("--rounds", type=int, default=3, help="rounds per server, alternating the client order (default 3)")
    p.add_argument("--outstanding", type=int, default=100, help="throughput: requests in flight (default 100)")
    p.add_argument("--nodes", type=int, default=1, help="znodes read, round robin (default 1)")
    p.add_argument("--value-size", type=int, default=1024, help="bytes per znode (default 1024)")
    p.add_argument("--warmup", type=float, default=1.0, help="throughput: unmeasured seconds first (default 1)")
    p.add_argument("--duration", type=float, default=5.0, help="throughput: measured seconds (default 5)")
    p.add_argument("--warmup-calls", type=int, default=300, help="latency: untimed calls first (default 300)")
    p.add_argument("--calls", type=int, default=3000, help="latency: timed calls per run (default 3000)")
    p.add_argument("--server-warmup", type=float, default=3.0,
                   help="unmeasured seconds of zkpy-client load on each fresh server first (default 3)")
    p.add_argument("--json", help="also write the figures to this JSON file")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in modes:
        if m not in MODES:
            raise SystemExit(f"unknown mode {m!r} (modes: {', '.join(MODES)})")
    spec = ClientSpec(args.outstanding, args.nodes, args.value_size, args.warmup, args.duration,
                      args.warmup_calls, args.calls)
    results = Results()
    servers: list[str] = []
    if args.hosts:
        servers.append("server")
        prepare(args.hosts, spec)
        run_server("server", args.hosts, spec, modes, args.rounds, results)
    for name in ([] if args.hosts else [s.strip() for s in args.servers.split(",") if s.strip()]):
        if name == "apache" and not apache_available():
            _log("Apache ZooKeeper is not installed: skipping it")
            continue
        _log(f"starting {name}")
        server: ServerProcess = start(name)
        try:
            servers.append(name)
            prepare(server.hosts, spec)
            if args.server_warmup > 0:
                _log(f"{name}: warming up ({args.server_warmup:g}s of getData, unmeasured)")
                throughput(name, "zkpy", server.hosts, ClientSpec(spec.outstanding, spec.nodes, spec.value_size,
                                                                  0.0, args.server_warmup))
            run_server(name, server.hosts, spec, modes, args.rounds, results)
        finally:
            server.cleanup()

    print()
    print(f"machine: {platform.machine()}, {_cpus()} CPUs, {platform.platform()}, Python {platform.python_version()}")
    print(f"{args.nodes} znode(s) of {args.value_size} B; {args.rounds} rounds per server, the client order alternating")
    if results.throughput:
        print(f"throughput: 1 session, {args.outstanding} getData outstanding, {args.duration:g}s measured after "
              f"{args.warmup:g}s; median round; CPU = cores used by the client process")
        print()
        print(throughput_table(results, servers))
    if results.latency:
        print()
        print(f"latency: synchronous get(), one at a time, {args.calls} timed calls per round "
              f"(all rounds pooled); CPU = client process CPU per call")
        print()
        print(latency_table(results, servers))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"throughput": [asdict(t) | {"ops_per_s": t.ops_per_s} for t in results.throughput],
                       "latency": [x.summary() for x in results.latency]}, f, indent=2)
    errors = sum(t.errors for t in results.throughput)
    return 1 if errors else 0


def _cpus() -> int:
    import os

    return os.cpu_count() or 0
