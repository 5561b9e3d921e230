"""``python -m bench``: measure zkpy and Apache ZooKeeper 3.8 back to back with the same generator.

Starts each server as a real standalone process on 127.0.0.1 (``zkpy.testing.servers``),
creates the znodes, then for every workload runs zkpy and then Apache ZooKeeper, and prints
one table with throughput, latency percentiles, CPU used and the zkpy/ZooKeeper ratio.
``--hosts`` benchmarks an already running server instead (for profiling it).

``python -m bench durability [...]`` runs the durability rows instead (fsync counters, create
latency, restart on a large tree, snapshots under load): see ``bench/durability.py`` and
``python -m bench durability --help``.

``python -m bench client [...]`` compares zkpy's client with kazoo (one session's pipelined
throughput, synchronous call latency) on both servers: see ``bench/clientbench.py``.

``python -m bench recipes [...]`` runs the paper's barrier experiment (Table 3) and lock hand-off
latency (zkpy's Lock and kazoo's) on a 3-server zkpy and a 3-server ZooKeeper ensemble: see
``bench/recipes.py``.

``python -m bench ensemble [...]`` compares a 3-server zkpy ensemble with a 3-server Apache
ZooKeeper ensemble (throughput spread over the servers, create latency, leader failover): see
``bench/ensemble.py`` and ``python -m bench ensemble --help``.

``python -m bench figure5 [...]`` draws the paper's Figure 5 (throughput against the percentage of
reads, 3- and 5-server ensembles of zkpy and ZooKeeper); ``python -m bench figure8 [...]`` its
Figure 8 (throughput over time while followers and the leader are killed and restarted); ``python
-m bench scale [...]`` measures one zkpy server with 1..N serving processes (ops/s and server CPU-µs
per op, ZooKeeper standalone beside it): see ``bench/figure5.py``, ``bench/figure8.py``,
``bench/scale.py``. Their PNGs and JSON files go to ``benchmarks/``.

``python -m bench memory [...]`` builds a large tree on zkpy with 1..N serving processes and on
ZooKeeper and reads each process's RSS and PSS: see ``bench/memory.py``.

``python -m bench staleness [...]`` measures how often a session on a follower misses a create that
has just returned through the leader, on zkpy and on ZooKeeper: see ``bench/staleness.py``.

``python -m bench availability [...]`` (root) runs one seeded schedule of faults against a zkpy and a
ZooKeeper ensemble on the network test bed: the clients' longest write outage and each member's return
to serving, see ``bench/availability.py``.

``python -m bench proxied [...]`` times the example project's failover story on the pytest plugin's
ensemble, whose members reach each other through TCP proxies: see ``bench/proxied.py``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import platform
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from .workload import (
    CREATE,
    READ,
    WRITE,
    CreateSpec,
    RunResult,
    Target,
    ThroughputSpec,
    percentile_ms,
    prepare,
    remove,
    run,
)

MIXES = {"read": 0.0, "mixed": 0.1, "write": 1.0}
LABELS = {"read": "reads (100% getData)", "mixed": "mixed 90/10 get/set", "write": "writes (100% setData)"}
SERVER_NAMES = {"zkpy": "zkpy", "apache": "ZooKeeper"}


@dataclass
class Row:
    workload: str
    server: str
    result: RunResult
    kinds: tuple[str, ...]
    round_rates: list[float] = field(default_factory=list)
    errors: int = 0  # over every round

    def summary(self) -> dict[str, Any]:
        merged = self.result.merged(self.kinds)
        ops_per_s = merged.ops / self.result.duration_s
        cpu = self.result.server_cpu
        return {
            "workload": self.workload, "server": self.server,
            "ops_per_s": ops_per_s,
            # the per-core cost: server CPU-µs per op, whatever the number of cores it used
            "cpu_us_per_op": cpu / ops_per_s * 1e6 if cpu is not None and ops_per_s else None,
            "p50_ms": percentile_ms(merged.latencies_ns, 50), "p99_ms": percentile_ms(merged.latencies_ns, 99),
            "ops": merged.ops, "errors": self.errors, "error_codes": self.result.error_codes,
            "round_ops_per_s": self.round_rates,
            "server_cpu": self.result.server_cpu, "generator_cpu": self.result.generator_cpu,
            "sessions": self.result.sessions,
        }


def _fmt(x: float | None, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:,.{digits}f}"


def _ratio(a: float | None, b: float | None) -> str:
    if not a or not b or math.isnan(a) or math.isnan(b):
        return "-"
    return f"{a / b:.2f}x"


def table(rows: list[Row]) -> str:
    by_workload: dict[str, dict[str, dict[str, Any]]] = {}
    order: list[str] = []
    for r in rows:
        if r.workload not in by_workload:
            order.append(r.workload)
        by_workload.setdefault(r.workload, {})[r.server] = r.summary()
    servers = [s for s in ("zkpy", "apache") if any(s in v for v in by_workload.values())]
    servers += sorted({s for v in by_workload.values() for s in v} - set(servers))
    head = ["workload"]
    for s in servers:
        n = SERVER_NAMES.get(s, s)
        head += [f"{n} ops/s", f"{n} p50 ms", f"{n} p99 ms", f"{n} CPU (gen)", f"{n} CPU-µs/op"]
    compare = "zkpy" in servers and "apache" in servers
    if compare:
        head += ["ops/s zkpy/ZK", "p99 zkpy/ZK", "CPU/op zkpy/ZK"]
    head += ["errors"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for w in order:
        cells = [w]
        errors = 0
        for s in servers:
            d = by_workload[w].get(s)
            if d is None:
                cells += ["-"] * 5
                continue
            errors += d["errors"]
            cpu = f"{_fmt(d['server_cpu'])} ({_fmt(d['generator_cpu'])})"
            cells += [_fmt(d["ops_per_s"], 0), _fmt(d["p50_ms"]), _fmt(d["p99_ms"]), cpu, _fmt(d["cpu_us_per_op"], 1)]
        if compare:
            z, a = by_workload[w].get("zkpy"), by_workload[w].get("apache")
            cells += [_ratio(z and z["ops_per_s"], a and a["ops_per_s"]),
                      _ratio(z and z["p99_ms"], a and a["p99_ms"]),
                      _ratio(z and z["cpu_us_per_op"], a and a["cpu_us_per_op"])]
        cells.append(str(errors))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _csv_ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--servers", default="zkpy,apache", help="which servers to start (default: zkpy,apache)")
    p.add_argument("--hosts", help="benchmark this running server (host:port) instead of starting any")
    p.add_argument("--pid", type=int, help="with --hosts: the server's pid, for CPU accounting")
    p.add_argument("--modes", default="read,mixed,write,create", help="workloads (default: read,mixed,write,create)")
    p.add_argument("--duration", type=float, default=10.0, help="measured seconds per throughput run (default 10)")
    p.add_argument("--warmup", type=float, default=2.0, help="unmeasured seconds before each run (default 2)")
    p.add_argument("--create-duration", type=float, default=5.0, help="measured seconds per create run (default 5)")
    p.add_argument("--processes", type=int, default=2, help="generator processes (default 2)")
    p.add_argument("--sessions", type=int, default=16, help="sessions per generator process (default 16)")
    p.add_argument("--outstanding", type=int, default=16, help="outstanding requests per session (default 16)")
    p.add_argument("--workers", default="1,10,20", help="create-mode worker counts (default 1,10,20)")
    p.add_argument("--nodes", type=int, default=1000, help="znodes read and written (default 1000)")
    p.add_argument("--value-size", type=int, default=1024, help="bytes per znode value (default 1024)")
    p.add_argument("--server-warmup", type=float, default=5.0,
                   help="seconds of unmeasured 90/10 load on each server after it starts (default 5)")
    p.add_argument("--rounds", type=int, default=1,
                   help="repeat each run, alternating servers, and report the median round (default 1)")
    p.add_argument("--tls", action="store_true",
                   help="serve and load over TLS: secureClientPort with throwaway certificates (Apache: its "
                        "Netty connection factory), clients presenting a certificate")
    p.add_argument("--json", help="also write the figures to this JSON file")
    return p.parse_args(argv)


NETTY_FACTORY = "org.apache.zookeeper.server.NettyServerCnxnFactory"


def _tls_setup() -> tuple[dict[str, str | None], dict[str, int], tuple[str, str, str]]:
    """zoo.cfg keys for a TLS port (per server kind), and the client's (CA, cert, key) files."""
    import tempfile
    from pathlib import Path

    from zkpy.testing.certs import PASSWORD, make_pki
    from zkpy.testing.servers import free_ports

    pki = make_pki(Path(tempfile.mkdtemp(prefix="bench-pki-")))
    ports = dict(zip(("zkpy", "apache"), free_ports(2)))

    settings: dict[str, str | None] = {
        "ssl.keyStore.location": str(pki.server.jks), "ssl.keyStore.password": PASSWORD,
        "ssl.trustStore.location": str(pki.ca_jks), "ssl.trustStore.password": PASSWORD,
        "secureClientPortAddress": "127.0.0.1"}
    return settings, ports, (str(pki.ca_pem), str(pki.client.cert_pem), str(pki.client.key_pem))


def _log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


SUBCOMMANDS = {"durability": "durability", "client": "clientbench", "recipes": "recipes", "ensemble": "ensemble",
               "figure5": "figure5", "figure8": "figure8", "scale": "scale", "availability": "availability",
               "staleness": "staleness", "memory": "memory", "proxied": "proxied"}  # python -m bench NAME -> its module


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in SUBCOMMANDS:  # loaded on demand: each pulls in its own dependencies
        return importlib.import_module(f".{SUBCOMMANDS[argv[0]]}", __package__).main(argv[1:])
    args = parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in modes:
        if m not in MIXES and m != "create":
            raise SystemExit(f"unknown mode {m!r}")
    started: list[Any] = []
    targets: dict[str, Target] = {}
    try:
        if args.hosts:
            targets["server"] = Target.parse(args.hosts, args.pid)
        else:
            from zkpy.testing.servers import apache_available, start_apache, start_zkpy

            tls = _tls_setup() if args.tls else None
            for name in [s.strip() for s in args.servers.split(",") if s.strip()]:
                if name == "apache" and not apache_available():
                    _log("Apache ZooKeeper is not installed: skipping it")
                    continue
                _log(f"starting {name}{' with TLS' if tls else ''}")
                if tls is None:
                    server = (start_zkpy if name == "zkpy" else start_apache)()
                    targets[name] = Target("127.0.0.1", server.port, server.proc.pid)
                else:
                    settings, secure_port, files = tls
                    own = {**settings, "secureClientPort": str(secure_port[name])}
                    if name == "apache":
                        server = start_apache({**own, "serverCnxnFactory": NETTY_FACTORY})
                    else:
                        server = start_zkpy(own)
                    targets[name] = Target("127.0.0.1", secure_port[name], server.proc.pid, files)
                started.append(server)
        for name, target in targets.items():
            prepare(target, args.nodes, args.value_size)
            _log(f"{name}: {target.host}:{target.port} pid {target.pid} ready")
        if args.server_warmup > 0:  # let the JVM compile its hot paths before anything is measured
            for name, target in targets.items():
                warm = ThroughputSpec(0.1, args.processes, args.sessions, args.outstanding, args.nodes,
                                      args.value_size, 0.0, args.server_warmup)
                _log(f"{name}: warming up ({args.server_warmup:g}s of 90/10, unmeasured)")
                run("throughput", target, warm)

        rows: list[Row] = []
        for mode in modes:
            if mode in MIXES:
                spec: ThroughputSpec | CreateSpec = ThroughputSpec(
                    MIXES[mode], args.processes, args.sessions, args.outstanding, args.nodes, args.value_size,
                    args.warmup, args.duration)
                rows += _rounds("throughput", LABELS[mode], spec, targets, args.rounds, (READ, WRITE))
            else:
                for workers in _csv_ints(args.workers):
                    spec = CreateSpec(workers, args.processes, args.value_size, min(args.warmup, 1.0),
                                      args.create_duration)
                    label = f"create, {workers} worker{'s' if workers > 1 else ''}"
                    rows += _rounds("create", label, spec, targets, args.rounds, (CREATE,))
    finally:
        if args.hosts:  # leave someone else's server as we found it
            for target in targets.values():
                remove(target, args.nodes)
        for server in started:
            server.cleanup()

    print()
    print(f"machine: {platform.machine()}, {_cpus()} CPUs, {platform.platform()}, Python {platform.python_version()}")
    print(f"generator: {args.processes} processes x {args.sessions} sessions x {args.outstanding} outstanding; "
          f"{args.nodes} znodes of {args.value_size} B; {args.duration:g}s measured after {args.warmup:g}s warmup "
          f"(create: {args.create_duration:g}s)")
    print("CPU (gen) = cores used by the server (and by the generator processes) during the measured window")
    print()
    print(table(rows))
    if args.rounds > 1:
        print()
        print(f"ops/s of each round (the table shows the median of {args.rounds}):")
        for r in rows:
            print(f"  {r.workload:26} {SERVER_NAMES.get(r.server, r.server):10} "
                  + "  ".join(f"{x:,.0f}" for x in r.round_rates))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump([r.summary() for r in rows], f, indent=2)
    return 1 if any(r.errors for r in rows) else 0


def _rounds(kind: str, label: str, spec: ThroughputSpec | CreateSpec, targets: dict[str, Target], rounds: int,
            kinds: tuple[str, ...]) -> list[Row]:
    """Run ``spec`` ``rounds`` times on every target, alternating which goes first; keep each median round."""
    results: dict[str, list[RunResult]] = {name: [] for name in targets}
    names = list(targets)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            result = run(kind, targets[name], spec)
            results[name].append(result)
            _log(f"{label} / {name} round {r + 1}: {result.rate(kinds):,.0f} ops/s, "
                 f"p99 {percentile_ms(result.merged(kinds).latencies_ns, 99):.2f} ms, errors {result.errors}")
    rows = []
    for name, rs in results.items():
        ranked = sorted(rs, key=lambda x: x.rate(kinds))
        row = Row(label, name, ranked[(len(ranked) - 1) // 2], kinds)
        row.round_rates = [x.rate(kinds) for x in rs]
        row.errors = sum(x.errors for x in rs)
        rows.append(row)
    return rows


def _cpus() -> int:
    import os

    return os.cpu_count() or 0


if __name__ == "__main__":
    sys.exit(main())
