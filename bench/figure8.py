"""``python -m bench figure8``: the ZooKeeper paper's Figure 8, throughput over time while servers fail.

For each implementation (zkpy, Apache ZooKeeper 3.8) a fresh ensemble of ``--size`` servers (default
5, as in the paper) is started on 127.0.0.1 (``bench/ensemble.py``'s ``start``: the same zoo.cfg for
both, fsync on), the znodes created and the ensemble warmed up; then a steady closed-loop load runs
for the whole timeline: one generator process per server, ``--sessions-total`` sessions in all, each
with ``--outstanding`` requests in flight, each request a setData (probability ``--writes``, default
30 % as in the paper) or a getData of ``--value-size`` bytes on one of ``--nodes`` znodes. Every
completed request is counted in the ``--bin-ms`` bin in which its reply arrived (error replies are
counted apart).

A session whose connection breaks (its server was killed, or lost its leader and closed its clients)
connects to another server picked at random, with a new session, every ``--retry-ms`` until one
accepts it; a session with requests outstanding and no reply for ``--stall-ms`` is closed and moved
too. As in the paper, clients move only when their connection breaks, so a restarted server gets
clients back only from later failures.

The events, at ``--time-scale`` x these seconds from the start of the timeline (the paper's list):

1. a follower is killed (``kill -9``) at 2 s and restarted at 5 s;
2. a different follower is killed at 8 s and restarted at 11 s;
3. the leader is killed at 14 s (restarted at 18 s, unmarked in the paper);
4. two followers are killed at 21 s (a) and 23 s (b), and both restarted at 26 s (c);
5. the leader is killed at 30 s;
6. it is restarted at 34 s; the timeline ends at 38 s.

A restart starts the same command on the same data dir and ports, without waiting. Before each kill
the parent waits (at most ``--wait-whole`` s) until every running server serves, since the paper's
events assume the restarted servers are back (on a loaded 2-core machine a restarted JVM needs
several seconds); the rest of the schedule moves back by the wait, and the marks are drawn where the
kills and restarts really happened. Beside the
load, the parent polls ``srvr`` to note when a restarted server serves again and when, after a leader
is killed, a new leader serves (both in the JSON and the table, not drawn). Writes ``--json`` and
``--png`` (default ``benchmarks/figure8.{json,png}``); ``--plot-only`` redraws the PNG from the JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import random
import signal
import sys
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

from zkpy.testing.servers import (
    ServerProcess,
    cleanup_ensemble,
    ensemble_leader,
    restart_ensemble_member,
    server_mode,
)
from zkpy.wire.consts import OpCode

from . import figrun, plot
from .client import RawSession, SessionClosed, get_data_body, set_data_body
from .ensemble import EnsembleSpec, followers_first, myid, run_spread, start, target
from .workload import ThroughputSpec, _run_loop, node_paths, prepare

NAMES = {"zkpy": "zkpy", "apache": "ZooKeeper"}

# (seconds, mark, action): the action names who is killed or restarted; ``f1`` etc. are roles
# bound to a server when first used.
SCHEDULE: tuple[tuple[float, str, tuple[str, ...]], ...] = (
    (2, "1", ("kill", "follower", "f1")),
    (5, "1 back", ("restart", "f1")),
    (8, "2", ("kill", "follower", "f2")),
    (11, "2 back", ("restart", "f2")),
    (14, "3", ("kill", "leader", "l3")),
    (18, "3 back", ("restart", "l3")),
    (21, "4a", ("kill", "follower", "a")),
    (23, "4b", ("kill", "follower", "b")),
    (26, "4c", ("restart", "a", "b")),
    (30, "5", ("kill", "leader", "l5")),
    (34, "6", ("restart", "l5")),
)
END_S = 38.0


def _log(msg: str) -> None:
    print(f"[bench figure8 {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- the load: one generator process ---


@dataclass(frozen=True)
class LoadSpec:
    write_ratio: float
    sessions: int  # per process
    outstanding: int
    nodes: int
    value_size: int
    bin_ms: int
    retry_ms: int
    stall_ms: int
    session_timeout_ms: int = 30000


async def _load(hosts: list[int], home: int, spec: LoadSpec, seed: int, barrier: Any, stop: Any) -> dict[str, Any]:
    """Run the load until ``stop`` is set; the counts per absolute bin (monotonic ns // bin)."""
    rnd = random.Random(seed)
    value = rnd.randbytes(spec.value_size)
    paths = node_paths("/bench", spec.nodes)
    reads = [get_data_body(p) for p in paths]
    writes = [set_data_body(p, value) for p in paths]
    bin_ns = spec.bin_ms * 1_000_000
    ok: dict[int, int] = {}
    failed: dict[int, int] = {}
    moves: list[int] = []  # monotonic ns of each reconnect to another server
    last: dict[int, int] = {}  # id(session) -> last reply, ns
    running = True
    random_, n_nodes, write_ratio = rnd.random, spec.nodes, spec.write_ratio

    def issue(s: RawSession, now: int) -> None:
        i = int(random_() * n_nodes)
        if random_() < write_ratio:
            s.send(OpCode.SET_DATA, writes[i], s, now)
        else:
            s.send(OpCode.GET_DATA, reads[i], s, now)

    def on_reply(s: RawSession, err: int, sent: int, now: int) -> None:
        b = now // bin_ns
        if err:
            failed[b] = failed.get(b, 0) + 1
        else:
            ok[b] = ok.get(b, 0) + 1
        last[id(s)] = now
        if running:
            issue(s, now)

    async def connect(port: int) -> RawSession | None:
        try:
            return await asyncio.wait_for(
                RawSession.connect("127.0.0.1", port, spec.session_timeout_ms, on_reply), 2.0)
        except (OSError, SessionClosed, TimeoutError):
            return None

    first = [await connect(hosts[home]) for _ in range(spec.sessions)]
    await asyncio.get_running_loop().run_in_executor(None, barrier.wait, 60)

    async def keep(s: RawSession | None, where: int) -> None:
        while running:
            if s is None:
                where = rnd.choice([i for i in range(len(hosts)) if i != where])
                s = await connect(hosts[where])
                if s is None:
                    await asyncio.sleep(spec.retry_ms / 1000)
                    continue
                moves.append(time.monotonic_ns())
            now = time.monotonic_ns()
            last[id(s)] = now
            for _ in range(spec.outstanding):
                issue(s, now)
            assert s.closed is not None
            while running and not s.closed.done():
                await asyncio.wait({s.closed}, timeout=0.1)
                if s.outstanding and time.monotonic_ns() - last[id(s)] > spec.stall_ms * 1_000_000:
                    if s.transport is not None:
                        s.transport.close()
                    break
            if s.transport is not None and not running:
                s.transport.close()
            last.pop(id(s), None)
            s = None

    tasks = [asyncio.ensure_future(keep(s, home)) for s in first]
    while not stop.is_set():
        await asyncio.sleep(0.05)
    running = False
    await asyncio.wait(tasks, timeout=5)
    return {"ok": ok, "failed": failed, "moves": moves}


def _child(hosts: list[int], home: int, spec: LoadSpec, index: int, barrier: Any, stop: Any, results: Any) -> None:
    try:
        results.put((index, _run_loop(_load(hosts, home, spec, 2000 + index, barrier, stop)), None))
    except BaseException as exc:  # report, never hang the parent
        barrier.abort()
        results.put((index, None, f"{type(exc).__name__}: {exc}"))


# --- the events ---


class Watcher:
    """Polls ``srvr`` in a thread: when a restarted server serves again, when a new leader serves."""

    def __init__(self, t0_ns: int) -> None:
        self.t0_ns = t0_ns
        self.threads: list[threading.Thread] = []
        self.stopped = threading.Event()

    def _poll(self, event: dict[str, Any], key: str, check: Any) -> None:
        deadline = time.monotonic() + 60
        while not self.stopped.is_set() and time.monotonic() < deadline:
            found = check()
            if found is not None:
                event[key] = round((time.monotonic_ns() - self.t0_ns) / 1e9 - event["t"], 3)
                if isinstance(found, int) and not isinstance(found, bool):
                    event["new_leader"] = found
                return
            time.sleep(0.05)

    def watch(self, event: dict[str, Any], key: str, check: Any) -> None:
        t = threading.Thread(target=self._poll, args=(event, key, check), daemon=True)
        t.start()
        self.threads.append(t)

    def close(self) -> None:
        self.stopped.set()
        for t in self.threads:
            t.join(5)


def _serving(server: ServerProcess) -> Any:
    return lambda: True if server.proc.poll() is None and server_mode(server, 0.5) in ("leader", "follower") else None


def _new_leader(servers: list[ServerProcess], old: ServerProcess) -> Any:
    def check() -> int | None:
        for s in servers:
            if s is not old and s.proc.poll() is None and server_mode(s, 0.5) == "leader":
                return myid(s)
        return None
    return check


def _do(action: tuple[str, ...], servers: list[ServerProcess], roles: dict[str, ServerProcess]) -> list[ServerProcess]:
    """Carry out one scheduled action; the servers it touched."""
    if action[0] == "kill":
        alive = [s for s in servers if s.proc.poll() is None]
        leader = ensemble_leader(alive, 5.0)
        if action[1] == "leader":
            victim = leader
        else:  # a live follower not used by an earlier role in this schedule, lowest myid first
            used = {id(s) for s in roles.values()}
            candidates = [s for s in followers_first(alive, leader)[:-1] if id(s) not in used] or \
                [s for s in followers_first(alive, leader)[:-1]]
            victim = candidates[0]
        roles[action[2]] = victim
        os.kill(victim.proc.pid, signal.SIGKILL)
        victim.proc.wait(10)
        return [victim]
    touched = [roles[name] for name in action[1:]]
    for s in touched:
        restart_ensemble_member(s)
    return touched


def _wait_whole(servers: list[ServerProcess], limit_s: float) -> float:
    """Wait until every running server serves (at most ``limit_s``); the seconds waited."""
    t = time.monotonic()
    while time.monotonic() - t < limit_s:
        if all(server_mode(s, 0.5) in ("leader", "follower") for s in servers if s.proc.poll() is None):
            break
        time.sleep(0.05)
    return time.monotonic() - t


def timeline(kind: str, servers: list[ServerProcess], spec: LoadSpec, sessions_total: int, scale: float,
             leader_at_start: ServerProcess, whole_s: float) -> dict[str, Any]:
    """Run the load over the schedule; the throughput per bin and the events, seconds from the start.

    Before a kill, wait up to ``whole_s`` for restarted servers to serve again (the paper's events
    assume they have); the rest of the schedule moves back by the wait."""
    ordered = followers_first(servers, leader_at_start)
    hosts = [s.port for s in ordered]
    n = len(hosts)
    ctx = mp.get_context("fork")
    barrier, stop, results = ctx.Barrier(n + 1), ctx.Event(), ctx.Queue()
    per = max(1, round(sessions_total / n))
    lspec = replace(spec, sessions=per)
    procs = [ctx.Process(target=_child, args=(hosts, i, lspec, i, barrier, stop, results), daemon=True)
             for i in range(n)]
    for p in procs:
        p.start()
    bin_ns = spec.bin_ms * 1_000_000
    events: list[dict[str, Any]] = []
    roles: dict[str, ServerProcess] = {}
    watcher: Watcher | None = None
    try:
        barrier.wait(60)
        t0 = time.monotonic_ns() // bin_ns * bin_ns
        watcher = Watcher(t0)
        shift = 0.0  # seconds the schedule has been pushed back by waits for restarted servers
        for at, mark, action in SCHEDULE:
            time.sleep(max(0.0, t0 / 1e9 + at * scale + shift - time.monotonic()))
            waited = _wait_whole(servers, whole_s) if action[0] == "kill" and whole_s > 0 else 0.0
            shift += waited
            t = (time.monotonic_ns() - t0) / 1e9
            event: dict[str, Any] = {"t": round(t, 3), "mark": mark, "action": " ".join(action[:2]),
                                     "waited_s": round(waited, 3)}
            try:
                old_leader = ensemble_leader([s for s in servers if s.proc.poll() is None], 5.0) \
                    if action[:2] == ("kill", "leader") else None
                touched = _do(action, servers, roles)
            except RuntimeError as exc:  # no leader to find: note it, go on with the schedule
                event["error"] = str(exc)[:200]
                touched = []
                old_leader = None
            event["done_s"] = round((time.monotonic_ns() - t0) / 1e9 - t, 3)
            event["myids"] = [myid(s) for s in touched]
            events.append(event)
            if action[0] == "restart":
                for s in touched:
                    watcher.watch(event, f"serving_s_{myid(s)}", _serving(s))
            elif old_leader is not None:
                watcher.watch(event, "new_leader_s", _new_leader(servers, old_leader))
            _log(f"{kind} t={t:.2f}s event {mark}: {event['action']} {event['myids']}"
                 + (f" ({event['error']})" if "error" in event else ""))
        time.sleep(max(0.0, t0 / 1e9 + END_S * scale + shift - time.monotonic()))
        t_end = (time.monotonic_ns() - t0) / 1e9
    finally:
        stop.set()
        if watcher is not None:
            watcher.close()
    ok: dict[int, int] = {}
    failed: dict[int, int] = {}
    moves: list[float] = []
    failures = []
    for _ in procs:
        _, r, error = results.get(timeout=60)
        if error is not None:
            failures.append(error)
            continue
        for src, dst in ((r["ok"], ok), (r["failed"], failed)):
            for b, c in src.items():
                dst[b] = dst.get(b, 0) + c
        moves += [(m - t0) / 1e9 for m in r["moves"]]
    for p in procs:
        p.join(10)
    if failures:
        raise RuntimeError("generator process failed: " + "; ".join(failures))
    first, bins = t0 // bin_ns, int(t_end * 1e9) // bin_ns
    per_s = 1e9 / bin_ns
    return {
        "server": kind, "bin_ms": spec.bin_ms, "seconds": t_end,
        "ops_per_s": [ok.get(first + i, 0) * per_s for i in range(bins)],
        "errors_per_bin": [failed.get(first + i, 0) for i in range(bins)],
        "events": events, "moves": sorted(round(m, 3) for m in moves), "sessions": per * n,
        "leader_at_start": myid(leader_at_start),
    }


# --- summary ---


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def event_table(runs: list[dict[str, Any]]) -> str:
    head = ["server", "mark", "t s", "action", "myid", "waited s", "ops/s 1 s before", "lowest bin in 2 s after",
            "mean ops/s 2 s after", "new leader serving, s", "restarted: serving again, s", "moves in 2 s after"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in runs:
        bin_s = r["bin_ms"] / 1000
        rates = r["ops_per_s"]
        for e in r["events"]:
            i = int(e["t"] / bin_s)
            before = rates[max(0, i - int(1 / bin_s)):i]
            after = rates[i + 1:i + 1 + int(2 / bin_s)]
            serving = [f"{k.rsplit('_', 1)[1]}: {v:.2f}" for k, v in e.items() if k.startswith("serving_s_")]
            moved = sum(1 for m in r["moves"] if e["t"] <= m < e["t"] + 2)
            lines.append("| " + " | ".join([
                NAMES.get(r["server"], r["server"]), e["mark"], f"{e['t']:.2f}", e["action"],
                ",".join(map(str, e["myids"])) or e.get("error", "-"), f"{e.get('waited_s', 0):.2f}",
                f"{_mean(before):,.0f}", f"{min(after, default=float('nan')):,.0f}", f"{_mean(after):,.0f}",
                f"{e['new_leader_s']:.2f} (server {e.get('new_leader')})" if "new_leader_s" in e else "-",
                "; ".join(serving) or "-", str(moved)]) + " |")
    return "\n".join(lines)


def summary_table(runs: list[dict[str, Any]]) -> str:
    head = ["server", "steady ops/s (before event 1)", "mean ops/s over the timeline", "bins with 0 ops",
            "error replies", "client moves"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in runs:
        bin_s = r["bin_ms"] / 1000
        first_event = r["events"][0]["t"] if r["events"] else r["seconds"]
        steady = r["ops_per_s"][1:int(first_event / bin_s)]
        lines.append("| " + " | ".join([
            NAMES.get(r["server"], r["server"]), f"{_mean(steady):,.0f}", f"{_mean(r['ops_per_s']):,.0f}",
            str(sum(1 for x in r["ops_per_s"] if x == 0)), str(sum(r["errors_per_bin"])),
            str(len(r["moves"]))]) + " |")
    return "\n".join(lines)


# --- command line ---


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench figure8", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--servers", default="zkpy,apache", help="implementations (default: zkpy,apache)")
    p.add_argument("--size", type=int, default=5, help="servers per ensemble (default 5, as in the paper)")
    p.add_argument("--writes", type=float, default=0.3, help="fraction of setData requests (default 0.3)")
    p.add_argument("--time-scale", type=float,
                   help=f"multiply the schedule's times by this (default 1: {END_S:g} s; --quick 0.4)")
    p.add_argument("--wait-whole", type=float, default=15.0,
                   help="before each kill, wait up to this many s for every running server to serve; the rest "
                        "of the schedule moves back by the wait (default 15; 0: a strict schedule)")
    p.add_argument("--bin-ms", type=int, default=250, help="width of a throughput bin, ms (default 250)")
    p.add_argument("--sessions-total", type=int, default=40, help="sessions over all generator processes (default 40)")
    p.add_argument("--outstanding", type=int, default=10, help="requests in flight per session (default 10)")
    p.add_argument("--nodes", type=int, default=1000, help="znodes read and written (default 1000)")
    p.add_argument("--value-size", type=int, default=1024, help="bytes per setData value (default 1024)")
    p.add_argument("--retry-ms", type=int, default=50, help="pause between reconnect attempts, ms (default 50)")
    p.add_argument("--stall-ms", type=int, default=2000,
                   help="move a session with requests outstanding and no reply for this long, ms (default 2000)")
    p.add_argument("--server-warmup", type=float, help="unmeasured seconds of load on the fresh ensemble (default 3)")
    p.add_argument("--tick-ms", type=int, default=2000, help="tickTime of the ensembles (default 2000)")
    p.add_argument("--quick", action="store_true", help="smoke run: the schedule at 0.4x, 0.5 s server warmup")
    p.add_argument("--json", default="benchmarks/figure8.json", help="numbers (default benchmarks/figure8.json)")
    p.add_argument("--png", default="benchmarks/figure8.png", help="figure (default benchmarks/figure8.png)")
    p.add_argument("--plot-only", action="store_true", help="redraw --png from --json without running anything")
    args = p.parse_args(argv)
    if args.time_scale is None:
        args.time_scale = 0.4 if args.quick else 1.0
    if args.server_warmup is None:
        args.server_warmup = 0.5 if args.quick else 3.0
    return args


def measure(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    _log(f"{kind}: starting a {args.size}-server ensemble")
    servers = start(kind, EnsembleSpec(args.size, args.tick_ms))
    try:
        leader = ensemble_leader(servers)
        prepare(target(leader), args.nodes, args.value_size)
        if args.server_warmup > 0:
            targets = [target(s) for s in followers_first(servers, leader)]
            run_spread("throughput", targets, ThroughputSpec(args.writes, len(targets), 8, args.outstanding,
                                                             args.nodes, args.value_size, 0.0, args.server_warmup))
        spec = LoadSpec(args.writes, 0, args.outstanding, args.nodes, args.value_size, args.bin_ms,
                        args.retry_ms, args.stall_ms)
        return timeline(kind, servers, spec, args.sessions_total, args.time_scale, leader, args.wait_whole)
    finally:
        cleanup_ensemble(servers)


def draw(data: dict[str, Any], png: str) -> None:
    a = data["args"]
    panels = []
    for r in data["runs"]:
        label = (f"{plot.NAMES.get(r['server'], r['server'])}: {a['size']} servers, leader at start: server "
                 f"{r['leader_at_start']}")
        events = [(e["t"], f"{e['mark']}: " + (("kill " if e["action"].startswith("kill") else "start ")
                                                  + ",".join(f"s{i}" for i in e["myids"]) if e["myids"] else "failed"))
                  for e in r["events"]]
        panels.append((label, r["bin_ms"] / 1000, r["ops_per_s"], events))
    title = (f"Figure 8 on {data['machine']}: {round(a['writes'] * 100)}% setData of {a['value_size']} B, "
             f"{a['sessions_total']} sessions x {a['outstanding']} outstanding, {a['bin_ms']} ms bins; "
             f"kill -9 and restart; load {data['load_before'][0]:.2f} before")
    plot.figure8(png, panels, title)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.plot_only:
        return figrun.replot(args, draw)
    kinds = figrun.server_kinds(args, _log)
    load_before = os.getloadavg()
    started = time.monotonic()
    runs = [measure(kind, args) for kind in kinds]
    figrun.save(args, "runs", runs, load_before, started, draw)
    print(f"{args.size} servers, {round(args.writes * 100)}% setData of {args.value_size} B, {args.sessions_total} "
          f"sessions x {args.outstanding} outstanding, {args.bin_ms} ms bins, schedule x{args.time_scale:g}")
    print()
    print(summary_table(runs))
    print()
    print(event_table(runs))
    print()
    print(f"wrote {args.json} and {args.png}")
    return 1 if any("error" in e for r in runs for e in r["events"]) else 0
