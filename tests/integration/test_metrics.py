"""The Prometheus endpoint (metricsProvider.*): a scrape parses with prometheus_client's parser,
its counters and summaries move with writes, new connections and elections, and its figures
are mntr's."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import QuotaExceededError
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from zkpy.testing.servers import (
    ServerProcess,
    cleanup_ensemble,
    ensemble_leader,
    four_letter,
    free_ports,
    start_ensemble,
    start_zkpy,
)

PROVIDER = "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider"


def documented_block(port: int) -> dict[str, str | None]:
    """The metricsProvider block of ZooKeeper's Administrator's Guide (its port a free one)."""
    return {"metricsProvider.className": PROVIDER, "metricsProvider.httpHost": "127.0.0.1",
            "metricsProvider.httpPort": str(port), "metricsProvider.exportJvmInfo": "true",
            "4lw.commands.whitelist": "*"}


class Scrape:
    def __init__(self, port: int) -> None:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            assert reply.status == 200
            assert reply.headers["Content-Type"].startswith("text/plain")
            self.text = reply.read().decode("utf-8")
        self.families = {f.name: f for f in text_string_to_metric_families(self.text)}

    def type(self, name: str) -> str:
        return self.families[name].type

    def samples(self, name: str) -> list[Sample]:
        return self.families[name].samples

    def value(self, name: str, sample: str | None = None, **labels: str) -> float:
        wanted = sample or name
        for s in self.samples(name):
            if s.name == wanted and s.labels == labels:
                return float(s.value)
        raise KeyError(f"{wanted} {labels}")

    def counter(self, name: str) -> float:
        return self.value(name)

    def count(self, name: str) -> float:
        return self.value(name, f"{name}_count")


def mntr(port: int) -> dict[str, str]:
    return dict(line.split("\t", 1) for line in four_letter(port, "mntr").splitlines() if line)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[ServerProcess, int]]:
    (metrics_port,) = free_ports(1)
    s = start_zkpy(documented_block(metrics_port))
    yield s, metrics_port
    s.cleanup()


def test_the_documented_block_opens_the_endpoint_and_it_parses(server: tuple[ServerProcess, int]) -> None:
    _, port = server
    scrape = Scrape(port)
    assert scrape.type("znode_count") == "gauge"
    assert scrape.type("approximate_data_size") == "gauge"
    assert scrape.type("avg_latency") == "gauge"
    # ZooKeeper's counters under their own names (dashboards query them), hence untyped
    assert scrape.type("proposal_count") == "unknown"
    assert scrape.type("connection_request_count") == "unknown"
    for name in ("readlatency", "updatelatency", "fsynctime", "snapshottime", "election_time",
                 "propagation_latency", "commit_propagation_latency"):
        assert scrape.type(name) == "summary", name
    quantiles = {s.labels.get("quantile") for s in scrape.samples("readlatency")} - {None}
    assert quantiles == {"0.5", "0.9", "0.99"}
    basic = {s.labels.get("quantile") for s in scrape.samples("election_time")} - {None}
    assert basic == {"0.5"}  # ZooKeeper's BASIC summaries: the median only
    assert scrape.type("process_cpu_seconds") == "counter"  # the process in place of the JVM
    assert "python_info" in scrape.families


def test_writes_and_connections_move_the_figures(server: tuple[ServerProcess, int]) -> None:
    s, port = server
    before = Scrape(port)
    client = KazooClient(hosts=s.hosts)
    client.start()
    try:
        fired = threading.Event()
        client.exists("/metrics-0", watch=lambda _event: fired.set())
        for i in range(5):
            client.create(f"/metrics-{i}", b"12345")
        client.get("/metrics-0")
        assert fired.wait(10)
    finally:
        client.stop()
        client.close()
    after = Scrape(port)
    assert after.count("updatelatency") >= before.count("updatelatency") + 5
    assert after.count("readlatency") > before.count("readlatency")
    assert after.count("fsynctime") > before.count("fsynctime")
    assert after.count("propagation_latency") >= before.count("propagation_latency") + 5
    assert after.counter("connection_request_count") == before.counter("connection_request_count") + 1
    assert after.counter("bytes_received_count") > before.counter("bytes_received_count")
    assert after.value("znode_count") == before.value("znode_count") + 5
    assert after.count("node_created_watch_count") == before.count("node_created_watch_count") + 1
    assert after.value("node_created_watch_count", "node_created_watch_count_sum") >= 1
    assert after.value("approximate_data_size") == before.value("approximate_data_size") + 5 * (len("/metrics-0") + 5)


def test_mntr_and_the_scrape_agree(server: tuple[ServerProcess, int]) -> None:
    s, port = server
    figures = mntr(s.port)
    scrape = Scrape(port)  # nothing writes between the two
    for key in ("znode_count", "approximate_data_size", "ephemerals_count", "watch_count", "global_sessions",
                "max_latency", "min_latency"):
        assert scrape.value(key) == float(figures[f"zk_{key}"]), key
    for name in ("updatelatency", "readlatency", "fsynctime", "dbinittime"):
        assert scrape.count(name) == float(figures[f"zk_cnt_{name}"]), name
        assert scrape.value(name, f"{name}_sum") == float(figures[f"zk_sum_{name}"]), name
    for name in ("connection_request_count", "proposal_count", "stale_sessions_expired"):
        assert scrape.counter(name) == float(figures[f"zk_{name}"]), name


def test_no_endpoint_without_the_provider() -> None:
    (metrics_port,) = free_ports(1)
    s = start_zkpy({"metricsProvider.httpPort": str(metrics_port)})  # the port alone: ZooKeeper's default provider
    try:
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5)
    finally:
        s.cleanup()


@pytest.mark.timeout(240)
def test_an_election_moves_the_election_figures() -> None:
    ports = free_ports(3)
    servers = start_ensemble(["zkpy"] * 3, {"metricsProvider.className": PROVIDER},
                             member_settings={i + 1: {"metricsProvider.httpPort": str(p)} for i, p in enumerate(ports)})
    try:
        by_port = dict(zip([s.port for s in servers], ports, strict=True))
        leader = ensemble_leader(servers)
        first = Scrape(by_port[leader.port])
        assert first.count("election_time") >= 1
        assert first.counter("looking_count") >= 1
        assert first.value("quorum_size") == 3
        assert first.value("learners") == 2
        assert first.count("unavailable_time") >= 1 and first.count("leader_unavailable_time") >= 1
        follower = next(s for s in servers if s is not leader)
        before = Scrape(by_port[follower.port])
        client = KazooClient(hosts=leader.hosts)
        client.start()
        try:
            for i in range(3):
                client.create(f"/elected-{i}", b"x")
        finally:
            client.stop()
            client.close()
        written = Scrape(by_port[leader.port])
        assert written.counter("proposal_count") >= first.counter("proposal_count") + 3
        assert written.counter("commit_count") >= first.counter("commit_count") + 3
        assert written.value("max_proposal_size") >= written.value("min_proposal_size") > 0
        assert written.value("leader_uptime") >= 0
        assert written.counter("diff_count") + written.counter("snap_count") >= 2  # each learner's sync
        reader = KazooClient(hosts=follower.hosts)
        reader.start()
        try:
            reader.sync("/")  # the follower has taken every commit before the sync's
            assert reader.exists("/elected-2") is not None
        finally:
            reader.stop()
            reader.close()
        followed = Scrape(by_port[follower.port])
        assert followed.count("follower_sync_time") >= 1
        assert followed.count("propagation_latency") >= before.count("propagation_latency") + 3
        assert followed.counter("learner_proposal_received_count") >= before.counter(
            "learner_proposal_received_count") + 3
        assert followed.counter("learner_commit_received_count") >= before.counter(
            "learner_commit_received_count") + 3
        leader.stop()
        rest = [s for s in servers if s is not leader]
        new_leader = ensemble_leader(rest)
        again = Scrape(by_port[new_leader.port])
        assert again.count("election_time") >= 2  # its first election, and this one
        assert again.counter("looking_count") >= 2
    finally:
        cleanup_ensemble(servers)


def test_snapshots_move_snapshottime() -> None:
    (metrics_port,) = free_ports(1)
    s = start_zkpy({**documented_block(metrics_port), "snapCount": "10"})
    try:
        client = KazooClient(hosts=s.hosts)
        client.start()
        try:
            for i in range(40):  # several logs' worth: each roll starts a snapshot
                client.create(f"/snap-{i}", b"x")
        finally:
            client.stop()
            client.close()
        deadline = time.monotonic() + 30
        while Scrape(metrics_port).count("snapshottime") < 1:  # the snapshot is written off the request path
            assert time.monotonic() < deadline, "no snapshot counted"
            time.sleep(0.05)
        assert float(mntr(s.port)["zk_cnt_snapshottime"]) >= 1
    finally:
        s.cleanup()


def test_quota_figures_are_labelled_by_namespace_as_zookeepers_provider_labels_them() -> None:
    (metrics_port,) = free_ports(1)
    s = start_zkpy({**documented_block(metrics_port), "enforceQuota": "true"})
    try:
        client = KazooClient(hosts=s.hosts)
        client.start()
        try:
            client.create("/ns-1/q", b"abc", makepath=True)
            client.create("/zookeeper/quota/ns-1/q", makepath=True)
            client.create("/zookeeper/quota/ns-1/q/zookeeper_limits", b"count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=1")
            client.create("/zookeeper/quota/ns-1/q/zookeeper_stats", b"count=0,bytes=0")
            with pytest.raises(QuotaExceededError):
                client.create("/ns-1/q/more")
        finally:
            client.stop()
            client.close()
        scrape = Scrape(metrics_port)
        figures = mntr(s.port)
    finally:
        s.cleanup()
    # mntr: <namespace>_<name>, as ZooKeeper's default provider prints a GaugeSet; Prometheus: a label
    assert figures["zk_ns-1_quota_count_limit_per_namespace"] == "1"
    assert figures["zk_ns-1_quota_count_usage_per_namespace"] == "1"
    assert figures["zk_ns-1_quota_bytes_usage_per_namespace"] == "3"
    assert figures["zk_ns-1_quota_exceeded_error_per_namespace"] == "1"
    assert scrape.type("quota_count_limit_per_namespace") == "gauge"
    assert scrape.value("quota_count_limit_per_namespace", key="ns-1") == 1
    assert scrape.value("quota_bytes_limit_per_namespace", key="ns-1") == -1
    assert scrape.value("quota_bytes_usage_per_namespace", key="ns-1") == 3
    assert scrape.value("quota_exceeded_error_per_namespace", key="ns-1") == 1
