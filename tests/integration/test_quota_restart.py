"""Quota counts survive a restart: a zkpy server taking snapshots while a random workload writes
under two quotas is killed (-9) and restarted on its data dir; every quota's stats, the mntr
figures and the enforcement are as they were, and Apache ZooKeeper 3.8 started on the same data
dir reads the same stats."""

from __future__ import annotations

import os
import random
import signal

from kazoo.client import KazooClient
from kazoo.exceptions import NoChildrenForEphemeralsError, NoNodeError, NotEmptyError, QuotaExceededError

from zkpy.testing.servers import ServerProcess, apache_available, four_letter, start_apache, start_zkpy

SETTINGS = {"enforceQuota": "true", "snapCount": "16"}  # a snapshot (fuzzy, while writes go on) every few txns
QUOTAS = {"/a": b"count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=40",
          "/b/c": b"count=5,bytes=200=;byteHardLimit=400;countHardLimit=-1"}


def set_quotas(client: KazooClient) -> None:
    for path, limits in QUOTAS.items():
        client.ensure_path(path)
        client.ensure_path("/zookeeper/quota" + path)
        client.create(f"/zookeeper/quota{path}/zookeeper_limits", limits)
        client.create(f"/zookeeper/quota{path}/zookeeper_stats", b"count=0,bytes=0")


def workload(client: KazooClient, rng: random.Random, n: int) -> None:
    made: list[str] = []
    for i in range(n):
        base = rng.choice(["/a", "/b/c", "/b"])
        roll = rng.random()
        try:
            if roll < 0.55 or not made:
                parent = rng.choice([base, *[p for p in made if p.startswith(base + "/")][:5]])
                made.append(client.create(f"{parent}/n{i}", rng.randbytes(rng.randrange(30)),
                                          ephemeral=rng.random() < 0.1))
            elif roll < 0.8:
                client.set(rng.choice(made), rng.randbytes(rng.randrange(30)))
            else:
                victim = rng.choice(made)
                client.delete(victim)
                made.remove(victim)
        except (QuotaExceededError, NoNodeError, NotEmptyError, NoChildrenForEphemeralsError):
            pass


def stats(client: KazooClient) -> dict[str, bytes]:
    return {path: client.get(f"/zookeeper/quota{path}/zookeeper_stats")[0] for path in QUOTAS}


def quota_mntr(server: ServerProcess) -> dict[str, str]:
    pairs = (line.split("\t", 1) for line in four_letter(server.port, "mntr").splitlines() if line)
    return {k: v for k, v in pairs if "_quota_" in k}


def connect(server: ServerProcess) -> KazooClient:
    client = KazooClient(hosts=server.hosts, timeout=10)
    client.start(timeout=20)
    return client


def test_quota_counts_are_unchanged_after_a_kill_and_restart() -> None:
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = random.Random(seed)
    server = start_zkpy(SETTINGS)
    try:
        client = connect(server)
        set_quotas(client)
        workload(client, rng, 240)
        before = stats(client)
        figures = quota_mntr(server)
        client.stop()  # its ephemerals go, and are counted out
        client.close()
        client = connect(server)
        after_close = stats(client)
        client.stop()
        client.close()
        assert any(n.startswith("snapshot.") and n != "snapshot.0"
                   for n in os.listdir(f"{server.workdir}/data/version-2")), "no snapshot taken"
        server.stop(signal.SIGKILL)

        server = start_zkpy(SETTINGS, workdir=server.workdir, port=server.port)
        client = connect(server)
        try:
            assert stats(client) == after_close, f"seed {seed}: {before}"
            usage = {p: dict(kv.split(b"=") for kv in after_close[p].split(b",")) for p in QUOTAS}
            counts = {p: int(u[b"count"]) for p, u in usage.items()}
            mntr = quota_mntr(server)
            limits = {k: v for k, v in figures.items() if "_limit_" in k}
            assert limits and {k: v for k, v in mntr.items() if "_limit_" in k} == limits, f"seed {seed}"
            for namespace, path in (("a", "/a"), ("b", "/b/c")):
                for figure in ("count", "bytes"):
                    key = f"zk_{namespace}_quota_{figure}_usage_per_namespace"
                    assert mntr[key] == usage[path][figure.encode()].decode(), f"seed {seed}: {key}"
            # still enforced from the recovered counts: fill /a up to its hard limit, then one more
            for i in range(40 - counts["/a"]):
                client.create(f"/a/fill{i}")
            try:
                client.create("/a/one-too-many")
                raise AssertionError(f"seed {seed}: a create past the hard count limit went through")
            except QuotaExceededError:
                pass
            final = stats(client)
        finally:
            client.stop()
            client.close()
        server.stop()
        if apache_available():  # the same data dir under Apache: the same counts
            apache = start_apache({}, workdir=server.workdir, port=server.port)
            try:
                client = connect(apache)
                try:
                    assert stats(client) == final, f"seed {seed}"
                finally:
                    client.stop()
                    client.close()
            finally:
                apache.stop()
    finally:
        server.cleanup()
