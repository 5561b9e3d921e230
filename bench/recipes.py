"""``python -m bench recipes``: the recipes on a 3-server zkpy ensemble and a 3-server Apache
ZooKeeper 3.8 ensemble, in the same run.

Modes (``--modes``, both by default):

* ``barrier``: the ZooKeeper paper's barrier experiment (§5.3, Table 3). C clients (``--clients``)
  each enter b double barriers (``--barriers``) in succession, then leave them in succession;
  every barrier is `zkpy.recipes.AsyncDoubleBarrier` with a threshold of C, so a client waits at
  each enter (and leave) until all C have called it. Client i is a session on server i mod 3; the
  clients run in ``--processes`` generator processes, which start together. The figure is the
  paper's: the time for each client to finish, averaged over the clients. An unmeasured run of
  ``--warmup-barriers`` barriers comes first on each ensemble. "barrier ops/s" is
  enters and leaves per second (2 b C over the slowest client's time), the paper's "throughput of
  barrier operations".
* ``handoff``: lock hand-off latency. ``--waiters`` + 1 contenders, each a session of its own (on
  server i mod 3) in a thread of this process, take one lock in turn ``--handoff-rounds`` times
  each: a contender acquires, releases at once, and queues again, so ``--waiters`` always wait.
  The hand-off is the time from a holder's ``release()`` call to the next holder's ``acquire()``
  returning, p50 and p99 over every hand-off. Measured for zkpy's blocking ``Lock`` and for
  kazoo's ``Lock``, one after the other, against the same ensemble.

Each ensemble is started (``bench.ensemble.start``: fsync on, the same zoo.cfg keys), measured and
stopped before the other starts. Everything shares the machine's CPUs; compare the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import platform
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

from kazoo.client import KazooClient

from zkpy import AsyncClient, Client
from zkpy.recipes import AsyncDoubleBarrier
from zkpy.testing.servers import ServerProcess, apache_available, cleanup_ensemble

from . import ensemble
from .ensemble import EnsembleSpec

NAMES = {"zkpy": "zkpy", "apache": "ZooKeeper"}
# the paper's Table 3 (seconds) for b = 200, 400, 800, 1600, as seed 003 gives it: the 100- and
# 200-client columns (its text lost the 50-client column)
PAPER_TABLE3 = {200: (19.8, 41.0), 400: (34.1, 62.0), 800: (55.9, 112.1), 1600: (102.7, 234.4)}


def _log(msg: str) -> None:
    print(f"[bench recipes {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- the barrier experiment ---


async def _barrier_clients(hosts: Sequence[str], indices: Sequence[int], clients: int, barriers: int,
                           root: str, start: Any) -> list[float]:
    zks = [AsyncClient(hosts[i % len(hosts)], session_timeout=30.0) for i in indices]
    await asyncio.gather(*(zk.start() for zk in zks))
    await asyncio.get_running_loop().run_in_executor(None, start.wait)

    async def one(zk: AsyncClient, index: int) -> float:
        began = time.perf_counter()
        nodes = [AsyncDoubleBarrier(zk, f"{root}/b{k}", clients, f"c{index}") for k in range(barriers)]
        for barrier in nodes:
            await barrier.enter()
        for barrier in nodes:
            await barrier.leave()
        return time.perf_counter() - began

    try:
        return list(await asyncio.gather(*(one(zk, i) for zk, i in zip(zks, indices))))
    finally:
        await asyncio.gather(*(zk.close() for zk in zks), return_exceptions=True)


def _barrier_process(hosts: list[str], indices: list[int], clients: int, barriers: int, root: str,
                     start: Any, results: Any) -> None:
    try:
        results.put(("ok", asyncio.run(_barrier_clients(hosts, indices, clients, barriers, root, start))))
    except BaseException as exc:  # the parent reports it
        results.put(("error", repr(exc)))
        raise


def barrier_run(servers: Sequence[ServerProcess], clients: int, barriers: int, processes: int) -> dict[str, Any]:
    """One point of Table 3: every client's time to enter and leave ``barriers`` barriers."""
    hosts = [s.hosts for s in servers]
    root = f"/bench-barrier-{uuid.uuid4().hex[:8]}"
    ctx = mp.get_context("spawn")
    start, results = ctx.Barrier(processes + 1), ctx.Queue()
    procs = [ctx.Process(target=_barrier_process,
                         args=(hosts, list(range(p, clients, processes)), clients, barriers, root, start, results))
             for p in range(processes)]
    for p in procs:
        p.start()
    start.wait(timeout=120)
    times: list[float] = []
    for _ in procs:
        status, value = results.get(timeout=3600)
        if status != "ok":
            raise RuntimeError(f"a barrier client process failed: {value}")
        times.extend(value)
    for p in procs:
        p.join()
    with Client(hosts[0]) as zk:
        zk.delete(root, recursive=True)
    return {"clients": clients, "barriers": barriers, "avg_s": statistics.fmean(times), "max_s": max(times),
            "barrier_ops_per_s": 2 * barriers * clients / max(times)}


# --- lock hand-off ---


def handoff_run(servers: Sequence[ServerProcess], client_kind: str, waiters: int, rounds: int) -> dict[str, Any]:
    """Contenders take one lock in turn; the time from each release to the next acquire."""
    hosts = [s.hosts for s in servers]
    path = f"/bench-lock-{uuid.uuid4().hex[:8]}"
    holds: list[tuple[float, float]] = []  # (acquired, release called)
    record = threading.Lock()
    ready = threading.Barrier(waiters + 2)
    failures: list[BaseException] = []

    def contender(index: int) -> None:
        host = hosts[index % len(hosts)]
        try:
            if client_kind == "kazoo":
                kz = KazooClient(host, timeout=30.0)
                kz.start()
                lock: Any = kz.Lock(path, f"c{index}")
                stop = lambda: (kz.stop(), kz.close())  # noqa: E731
            else:
                zk = Client(host, session_timeout=30.0)
                zk.start()
                lock = zk.Lock(path, f"c{index}")
                stop = zk.close
        except BaseException as exc:
            failures.append(exc)
            ready.abort()
            return
        try:
            ready.wait()
            for _ in range(rounds):
                lock.acquire()
                acquired = time.perf_counter()
                released = time.perf_counter()
                lock.release()
                with record:
                    holds.append((acquired, released))
        except BaseException as exc:
            failures.append(exc)
        finally:
            stop()

    threads = [threading.Thread(target=contender, args=(i,), daemon=True) for i in range(waiters + 1)]
    for t in threads:
        t.start()
    ready.wait(timeout=300)
    for t in threads:
        t.join()
    if failures:
        raise RuntimeError(f"{len(failures)} contenders failed: {failures[0]!r}")
    holds.sort()
    gaps = [holds[i + 1][0] - holds[i][1] for i in range(len(holds) - 1)]
    gaps.sort()
    return {"client": client_kind, "waiters": waiters, "handoffs": len(gaps),
            "p50_ms": 1000 * gaps[len(gaps) // 2], "p99_ms": 1000 * gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))]}


# --- the run ---


def measure(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    _log(f"starting a {args.size}-server {NAMES[kind]} ensemble")
    servers = ensemble.start(kind, EnsembleSpec(size=args.size, tick_ms=args.tick_ms))
    out: dict[str, Any] = {"barrier": [], "handoff": []}
    try:
        if "barrier" in args.modes:
            if args.warmup_barriers:  # unmeasured: the JVM's JIT and both servers' caches warm up
                barrier_run(servers, min(args.clients), args.warmup_barriers, args.processes)
            for clients in args.clients:
                for barriers in args.barriers:
                    row = barrier_run(servers, clients, barriers, args.processes)
                    _log(f"{NAMES[kind]} barrier C={clients} b={barriers}: avg {row['avg_s']:.2f}s "
                         f"({row['barrier_ops_per_s']:.0f} barrier ops/s)")
                    out["barrier"].append(row)
        if "handoff" in args.modes:
            for client_kind in ("zkpy", "kazoo"):
                row = handoff_run(servers, client_kind, args.waiters, args.handoff_rounds)
                _log(f"{NAMES[kind]} hand-off with {client_kind}: p50 {row['p50_ms']:.2f} ms, p99 {row['p99_ms']:.2f} ms")
                out["handoff"].append(row)
    finally:
        cleanup_ensemble(servers)
    return out


def tables(results: dict[str, dict[str, Any]]) -> str:
    lines = []
    if any(r["barrier"] for r in results.values()):
        lines += ["| clients | barriers | zkpy avg s | ZooKeeper avg s | ratio (ZK/zkpy time) | zkpy barrier ops/s | "
                  "ZooKeeper barrier ops/s | paper s |",
                  "|---|---|---|---|---|---|---|---|"]
        zk_rows = {(r["clients"], r["barriers"]): r for r in results.get("apache", {}).get("barrier", [])}
        for r in results.get("zkpy", {}).get("barrier", []):
            other = zk_rows.get((r["clients"], r["barriers"]))
            paper = _paper(r["clients"], r["barriers"])
            lines.append(f"| {r['clients']} | {r['barriers']} | {r['avg_s']:.2f} | "
                         f"{other['avg_s']:.2f} | {other['avg_s'] / r['avg_s']:.2f} | {r['barrier_ops_per_s']:.0f} | "
                         f"{other['barrier_ops_per_s']:.0f} | {paper} |" if other else
                         f"| {r['clients']} | {r['barriers']} | {r['avg_s']:.2f} | - | - | {r['barrier_ops_per_s']:.0f} | - | {paper} |")
    if any(r["handoff"] for r in results.values()):
        lines += ["", "| ensemble | client | hand-offs | p50 ms | p99 ms |", "|---|---|---|---|---|"]
        for kind, r in results.items():
            for h in r["handoff"]:
                lines.append(f"| {NAMES[kind]} | {h['client']} | {h['handoffs']} | {h['p50_ms']:.2f} | {h['p99_ms']:.2f} |")
    return "\n".join(lines)


def _paper(clients: int, barriers: int) -> str:
    """The paper's time for the same client count, scaled linearly from its b=200 row."""
    column = {100: 0, 200: 1}.get(clients)
    if column is None:
        return "-"
    if barriers in PAPER_TABLE3:
        return f"{PAPER_TABLE3[barriers][column]:.1f}"
    return f"{PAPER_TABLE3[200][column] * barriers / 200:.1f} (scaled)"


def _csv_ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench recipes", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--impls", default="zkpy,apache", help="zkpy, apache or both (default)")
    p.add_argument("--modes", default="barrier,handoff")
    p.add_argument("--size", type=int, default=3)
    p.add_argument("--tick-ms", type=int, default=2000)
    p.add_argument("--clients", type=_csv_ints, default=[50, 100])
    p.add_argument("--barriers", type=_csv_ints, default=[50, 100, 200])
    p.add_argument("--processes", type=int, default=2, help="barrier client processes")
    p.add_argument("--warmup-barriers", type=int, default=50,
                   help="an unmeasured barrier run of this many barriers first (0: none)")
    p.add_argument("--waiters", type=int, default=50)
    p.add_argument("--handoff-rounds", type=int, default=6, help="acquires per contender")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    args.impls = [x for x in args.impls.split(",") if x]
    args.modes = [x for x in args.modes.split(",") if x]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if "apache" in args.impls and not apache_available():
        print("Apache ZooKeeper 3.8 is not installed (apt-get install -y zookeeper)", file=sys.stderr)
        return 2
    results = {kind: measure(kind, args) for kind in args.impls}
    print(tables(results))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"machine": platform.platform(), "args": vars(args), "results": results}, f, indent=1)
    return 0
