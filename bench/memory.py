"""``python -m bench memory``: the memory of each process of a server holding a large tree.

For each N of ``--workers`` a zkpy server is started with ``serverWorkers=N`` (N = 1: one
process; N >= 2: a dedicated member and N workers, each with its own replica) and an Apache
ZooKeeper 3.8 beside them (``--servers``); ``--znodes`` leaves of ``--value-size`` bytes are
created (``bench/bigtree.py``: multis of 1,000 creates), the server idles ``--settle`` seconds (a
zkpy member writes its snapshot in a forked child meanwhile), and then every process of its tree
is read from ``/proc``: VmRSS, and PSS (``smaps_rollup``: pages shared between processes counted
once, split among them). The fsync helper and other children are listed too; the table's totals
are PSS sums, so nothing shared is counted twice. Apache runs with ``--apache-heap``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from .bigtree import TreeSpec, build
from .launch import start, target
from .scale import process_tree


def _kib(pid: int, path: str, key: str) -> int | None:
    try:
        with open(f"/proc/{pid}/{path}", encoding="ascii") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            parts = f.read().split(b"\0")
    except OSError:
        return "?"
    if b"zkpy.runtime.worker" in parts:
        return "worker"
    if any(b"fsync_child" in p or b"fsync_helper" in p for p in parts):
        return "fsync helper"
    return "java" if parts and parts[0].endswith(b"java") else os.path.basename(parts[0].decode(errors="replace"))


def measure(kind: str, workers: int, args: argparse.Namespace) -> dict[str, Any]:
    settings = {"serverWorkers": str(workers)} if kind == "zkpy" else None
    server = start(kind, settings, heap=args.apache_heap if kind == "apache" else None)
    try:
        spec = TreeSpec(znodes=args.znodes, value_size=args.value_size)
        build_s = build(target(server), spec)
        time.sleep(args.settle)
        root = server.proc.pid
        rows = []
        for pid in sorted(process_tree(root)):
            role = "member" if pid == root and kind == "zkpy" else ("server" if pid == root else _command(pid))
            rows.append({"pid": pid, "role": role, "rss_mib": (_kib(pid, "status", "VmRSS:") or 0) / 1024,
                         "pss_mib": (_kib(pid, "smaps_rollup", "Pss:") or 0) / 1024})
        return {"server": kind, "workers": workers if kind == "zkpy" else None, "znodes": args.znodes,
                "build_s": build_s, "processes": rows, "pss_total_mib": sum(r["pss_mib"] for r in rows)}
    finally:
        server.cleanup()


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| server | serverWorkers | process | RSS MiB | PSS MiB |", "|---|---|---|---|---|"]
    for r in results:
        name = "zkpy" if r["server"] == "zkpy" else "ZooKeeper"
        for p in r["processes"]:
            lines.append(f"| {name} | {r['workers'] or '-'} | {p['role']} | {p['rss_mib']:,.0f} | {p['pss_mib']:,.0f} |")
        lines.append(f"| {name} | {r['workers'] or '-'} | **all (PSS)** | | **{r['pss_total_mib']:,.0f}** |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench memory", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--servers", default="zkpy,apache", help="implementations (default: zkpy,apache)")
    p.add_argument("--workers", default="1,2", help="zkpy serverWorkers values (default 1,2)")
    p.add_argument("--znodes", type=int, default=1_000_000, help="leaves (default 1,000,000)")
    p.add_argument("--value-size", type=int, default=50, help="bytes per leaf (default 50)")
    p.add_argument("--settle", type=float, default=20.0, help="idle seconds after the build (default 20)")
    p.add_argument("--apache-heap", default="2g", help="Apache's -Xmx (default 2g)")
    p.add_argument("--json", help="write the figures here too")
    args = p.parse_args(argv)
    results = []
    for kind in args.servers.split(","):
        for workers in ([int(w) for w in args.workers.split(",")] if kind == "zkpy" else [1]):
            r = measure(kind, workers, args)
            print(f"[bench memory] {kind} x{workers}: {r['znodes']:,} znodes built in {r['build_s']:.1f}s, "
                  f"PSS {r['pss_total_mib']:,.0f} MiB over {len(r['processes'])} processes", flush=True)
            results.append(r)
    print(table(results))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    return 0
