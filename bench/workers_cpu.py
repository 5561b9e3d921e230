"""``python -m bench.workers_cpu``: read throughput and server CPU per op with 1..N serving processes.

For each ``--workers`` count it starts a zkpy server with ``serverWorkers`` set to it (and, unless
``--no-apache``, Apache ZooKeeper 3.8 once), loads ``--nodes`` znodes, runs the read-only (or
``--mix``) workload of ``bench/workload.py`` and prints, per server: ops/s, the cores the server's
processes used over the measured window (the member and its workers, /proc/<pid>/stat of each)
and the CPU-microseconds per op (cores x window / ops), and the generator's cores. The figures of
docs/scaling.md come from it; on a machine with more cores raise ``--workers`` and
``--processes`` (generator processes) so that the generator is not the bottleneck.
"""

from __future__ import annotations

import argparse
import os
import time

from zkpy.testing.servers import ServerProcess

from .launch import start
from .workload import Target, ThroughputSpec, _cpu_s, prepare, run


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                    if int(f.read().rpartition(")")[2].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return out


def _server_cpu(server: ServerProcess) -> float:
    pids = [server.proc.pid, *_children(server.proc.pid)]
    return sum(_cpu_s(p) or 0.0 for p in pids)


def _measure(server: ServerProcess, spec: ThroughputSpec) -> tuple[float, float, float, float | None]:
    target = Target("127.0.0.1", server.port, None)
    prepare(target, spec.nodes, spec.value_size)
    result = run("throughput", target, spec, probe=lambda: _server_cpu(server))
    ops = sum(st.ops for st in result.stats.values())
    assert result.probes is not None
    cpu_s = result.probes[1] - result.probes[0]
    return ops / spec.duration_s, cpu_s / spec.duration_s, cpu_s * 1e6 / max(ops, 1), result.generator_cpu


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.workers_cpu", description=__doc__)
    p.add_argument("--workers", default="1,2", help="serverWorkers values to run (default 1,2)")
    p.add_argument("--no-apache", action="store_true", help="zkpy only")
    p.add_argument("--mix", type=float, default=0.0, help="write ratio (default 0: reads only)")
    p.add_argument("--duration", type=float, default=8.0)
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--processes", type=int, default=2, help="generator processes")
    p.add_argument("--sessions", type=int, default=16, help="sessions per generator process")
    p.add_argument("--outstanding", type=int, default=16)
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--value-size", type=int, default=1024)
    args = p.parse_args()
    spec = ThroughputSpec(args.mix, args.processes, args.sessions, args.outstanding, args.nodes, args.value_size,
                          args.warmup, args.duration)
    rows = []
    runs = [("zkpy", int(n)) for n in args.workers.split(",")] + ([] if args.no_apache else [("apache", 1)])
    for kind, n in runs:
        settings = {"serverWorkers": str(n), "forceSync": "no"} if kind == "zkpy" else {"forceSync": "no"}
        server = start(kind, settings)
        try:
            time.sleep(1.0)  # (start_zkpy waited for every worker to listen)
            rate, cores, us, gen = _measure(server, spec)
        finally:
            server.cleanup()
        label = f"zkpy serverWorkers={n}" if kind == "zkpy" else "Apache ZooKeeper 3.8"
        rows.append((label, rate, cores, us, gen))
        print(f"{label:28} {rate:10.0f} ops/s  server {cores:4.2f} cores  {us:6.1f} CPU-us/op  "
              f"generator {gen or 0:4.2f} cores  (load {os.getloadavg()[0]:.1f})", flush=True)
    base = rows[0][1]
    for label, rate, *_ in rows[1:]:
        print(f"{label}: {rate / base:.2f}x {rows[0][0]}")


if __name__ == "__main__":
    main()
