"""Restart on the same files: a data dir holding an empty ``snapshot.0`` and one log of N creates,
started by zkpy and by Apache ZooKeeper 3.8 (each on its own copy), timed from ``Popen`` to the
first ``srvr`` answer.

The data dir is generated here, offline, in ZooKeeper 3.8's format as an Apache server writes it
(every record carries the tree digest after its txn, ``TxnDigest`` version 2): ``/big``, then
``parents`` znodes ``/big/p<i>`` with ``leaves`` children ``/big/p<i>/l<j>`` each, values of
``value_size`` bytes, one create txn per znode, zxids 1.. in one ``log.1``. It is built once per
shape and kept in ``--cache`` (default /tmp), then copied for every start, so both servers read the
very same bytes. Each start replays every txn; ZooKeeper then writes a snapshot inside its start
(``zk_max_snapshottime``), zkpy writes its own later, in the background. Also recorded: each
server's own figure for loading (zkpy's "recovered ... in S s"; ZooKeeper's ``zk_max_dbinittime``),
the resident memory after the start, and whether either logged a digest mismatch.

    python -m bench.replay --znodes 1000000 --rounds 2 --apache-heap 2g

With ``--snapshot`` the data dir holds the same tree as one ``snapshot.<N>`` (written by zkpy, in
ZooKeeper 3.8's format with its digest trailer) and no log: each start loads it and replays nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from zkpy.runtime.osdisk import OsDisk
from zkpy.storage.files import DataDirs
from zkpy.storage.recovery import recover
from zkpy.storage.snapshot import snapshot_name, write_snapshot
from zkpy.storage.txnlog import TxnLogWriter, encode_entry
from zkpy.testing.servers import free_port, start_apache, start_zkpy
from zkpy.tree.acl import OPEN_ACL_UNSAFE
from zkpy.tree.datatree import DataTree
from zkpy.wire.consts import OpCode
from zkpy.wire.txn import CreateTxn, TxnDigest, TxnHeader

from .launch import _java_options, compile_zkpy, rss_mb, wait_for_log
from .mntr import mntr

_RECOVERED = re.compile(r"recovered zxid 0x[0-9a-f]+, (\d+) znodes, .* in ([\d.]+)s")
SESSION = 0x1000000AB0000
T0_MS = 1_700_000_000_000


def generate(path: str, parents: int, leaves: int, value_size: int) -> int:
    """Write ``path/version-2/{snapshot.0,log.1}``; returns the number of txns."""
    ver = os.path.join(path, "version-2")
    os.makedirs(ver, exist_ok=True)
    tree = DataTree()
    with open(os.path.join(ver, "snapshot.0"), "wb") as f:
        f.write(write_snapshot(tree))
    writer = TxnLogWriter(OsDisk(), ver)
    value = b"v" * value_size
    acl = list(OPEN_ACL_UNSAFE)
    zxid = 0
    batch: list[bytes] = []
    first = 1

    def create(p: str) -> None:
        nonlocal zxid, first
        zxid += 1
        parent = tree.nodes[p.rsplit("/", 1)[0] or "/"]
        hdr = TxnHeader(SESSION, zxid, zxid, T0_MS + zxid, int(OpCode.CREATE))
        txn = CreateTxn(p, value, acl, False, parent.cversion + 1)
        tree.apply(hdr, txn)
        batch.append(encode_entry(hdr, txn, TxnDigest(2, tree.digest - (1 << 64) if tree.digest >= 1 << 63
                                                      else tree.digest)))
        if len(batch) >= 10_000:
            flush()

    def flush() -> None:
        nonlocal first
        if batch:
            writer.append(first, b"".join(batch))
            first = zxid + 1
            batch.clear()

    create("/big")
    for i in range(parents):
        create(f"/big/p{i:05d}")
        for j in range(leaves):
            create(f"/big/p{i:05d}/l{j:05d}")
    flush()
    writer.sync()
    writer.close()
    return zxid


def generate_snapshot(path: str, parents: int, leaves: int, value_size: int) -> int:
    """Write ``path/version-2/snapshot.<N>`` alone: the tree ``generate``'s log builds, as one
    snapshot (the digest trailer included), so a start loads it and replays nothing."""
    source = path + ".log"
    n = generate(source, parents, leaves, value_size)
    recovered = recover(OsDisk(), DataDirs.of(source))
    ver = os.path.join(path, "version-2")
    os.makedirs(ver, exist_ok=True)
    with open(os.path.join(ver, snapshot_name(recovered.tree.last_processed_zxid)), "wb") as f:
        f.write(write_snapshot(recovered.tree))
    shutil.rmtree(source)
    return n


def prepared(cache: str, parents: int, leaves: int, value_size: int, log: Callable[[str], None],
             snapshot: bool = False) -> str:
    kind = "snapshot" if snapshot else "replay"
    path = os.path.join(cache, f"zkpy-{kind}-{parents}x{leaves}x{value_size}")
    done = os.path.join(path, "DONE")
    if not os.path.exists(done):
        shutil.rmtree(path, ignore_errors=True)
        t0 = time.monotonic()
        n = (generate_snapshot if snapshot else generate)(os.path.join(path, "data"), parents, leaves, value_size)
        with open(done, "w") as f:
            f.write(str(n))
        log(f"generated {n:,} txns in {path} in {time.monotonic() - t0:.1f}s")
    return path


def timed_start(kind: str, source: str, heap: str | None) -> dict[str, Any]:
    workdir = tempfile.mkdtemp(prefix=f"replay-{kind}-")
    shutil.copytree(os.path.join(source, "data"), os.path.join(workdir, "data"))
    os.sync()
    port = free_port()
    t0 = time.monotonic()
    if kind == "zkpy":
        server = start_zkpy(None, 900, workdir=workdir, port=port)
    else:
        with _java_options(f"-Xmx{heap}" if heap else None):
            server = start_apache(None, 900, workdir=workdir, port=port)
    seconds = time.monotonic() - t0
    try:
        row: dict[str, Any] = {"server": kind, "seconds": seconds, "rss_mb": rss_mb(server.proc.pid)}
        if kind == "zkpy":
            m = _RECOVERED.search(wait_for_log(server, "recovered zxid", 0, 10))
            row["load_s"] = float(m.group(2)) if m else None
            row["znodes"] = int(m.group(1)) if m else None
        else:
            values = mntr("127.0.0.1", server.port)
            row["load_s"] = int(values.get("zk_max_dbinittime", "0")) / 1000
            row["startup_snapshot_s"] = int(values.get("zk_max_snapshottime", "0")) / 1000
            row["znodes"] = int(values.get("zk_znode_count", "0"))
        text = server.log().lower()
        row["digest_mismatch"] = "digest" in text and "mismatch" in text
        time.sleep(1.0)
        row["rss_after_1s_mb"] = rss_mb(server.proc.pid)
        return row
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.replay", description=__doc__.split("\n\n")[0])
    ap.add_argument("--znodes", type=int, default=1_000_000, help="leaves (parents = sqrt, 1000 leaves each)")
    ap.add_argument("--leaves", type=int, default=1000)
    ap.add_argument("--value-size", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--servers", default="zkpy,apache")
    ap.add_argument("--apache-heap", default="2g")
    ap.add_argument("--cache", default="/tmp")
    ap.add_argument("--json")
    ap.add_argument("--snapshot", action="store_true",
                    help="the data dir holds the tree in one snapshot (no log): time loading it")
    args = ap.parse_args(argv)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    compile_zkpy()  # as an installed wheel has it (see launch.compile_zkpy)
    parents = max(1, args.znodes // args.leaves)
    source = prepared(args.cache, parents, args.leaves, args.value_size, log, args.snapshot)
    rows = []
    kinds = args.servers.split(",")
    for r in range(args.rounds):
        for kind in (kinds if r % 2 == 0 else kinds[::-1]):
            row = timed_start(kind, source, args.apache_heap if kind == "apache" else None)
            row["round"] = r + 1
            log(json.dumps(row))
            rows.append(row)
    for kind in kinds:
        mine = [row for row in rows if row["server"] == kind]
        if mine:
            print(f"{kind}: start->srvr median {statistics.median(r['seconds'] for r in mine):.2f}s "
                  f"load {statistics.median(r['load_s'] or 0 for r in mine):.2f}s "
                  f"RSS {statistics.median(r['rss_mb'] or 0 for r in mine):.0f} MiB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
