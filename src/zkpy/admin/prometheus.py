"""What the Prometheus endpoint serves (ZooKeeper's PrometheusMetricsProvider): the figures of
``GET /metrics`` on ``metricsProvider.httpHost:httpPort``, in the text format ``prometheus_client`` writes.

Every ZooKeeper figure comes from ``fourletter.mntr_values``, read at scrape time, so the scrape
and ``mntr`` agree by construction; nothing is recorded for Prometheus on the request path.
Names and types are ZooKeeper's: mntr's plain numbers are gauges (``znode_count``,
``avg_latency``, ...), ServerMetrics' counters keep ZooKeeper 3.8's sample names (``<name>``, as its
simpleclient 0.9 wrote them, so that dashboards' queries find them) and are therefore exposed
untyped: prometheus_client writes a counter only as ``<name>_total``;
its summaries are summaries (``<name>_count``, ``<name>_sum``, ``quantile="0.5"``, and for
ZooKeeper's detailed ones also ``"0.9"`` and ``"0.99"``, as its provider gives them). With
``metricsProvider.exportJvmInfo`` (default true) the process and platform collectors of
``prometheus_client`` stand in for the JVM's.

It is served by aiohttp on the server's own event loop (``admin.metrics_endpoint``), not by
``start_http_server``'s thread: the figures live in structures that the loop mutates (the tree,
the connections, the sessions), and reading them from another thread would race. A scrape costs
the loop a few milliseconds of formatting, every 15 seconds or so.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric, SummaryMetricFamily, UnknownMetricFamily
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry

from zkpy.server.core import ServerCore
from zkpy.server.metrics import BASIC, COUNTERS, DETAILED, ServerMetrics
from zkpy.tree.quota import EXCEEDED_PER_NAMESPACE

from .fourletter import mntr_values, quota_figures
from .view import ServerView

PROMETHEUS_QUANTILES = (0.5, 0.9, 0.99)  # ZooKeeper's provider's quantiles (its BASIC summaries: the first)
_SUMMARIES = frozenset(DETAILED) | frozenset(BASIC) | {"fsynctime", "sync_processor_batch_size"}
_PARTS = ("avg_", "min_", "max_", "cnt_", "sum_", "p50_", "p95_", "p99_", "p999_")
_COUNTERS = frozenset(COUNTERS)


def _summary_of(key: str) -> str | None:
    for part in _PARTS:
        if key.startswith(part) and key[len(part):] in _SUMMARIES:
            return key[len(part):]
    return None


class ZooKeeperCollector(Collector):
    """ZooKeeper's metrics of one server, read from ``mntr_values`` when scraped."""

    def __init__(self, server: ServerView) -> None:
        self.server = server

    def collect(self) -> Iterator[Metric]:
        server = self.server
        pipeline = server.pipeline
        if pipeline is None:  # an ensemble member between terms: ZooKeeper has no ZooKeeperServer to read
            return
        metrics: ServerMetrics = pipeline.metrics
        lines = mntr_values(server)
        summaries: dict[str, dict[str, float]] = {}
        for key, value in lines:
            if key.endswith("_per_namespace"):
                continue  # labelled below, by namespace
            name = _summary_of(key)
            if name is not None:
                part = key[:key.index("_")]
                if part in ("cnt", "sum"):
                    summaries.setdefault(name, {})[part] = float(str(value))
                continue
            try:
                number = float(str(value))
            except ValueError:  # version, server_state, peer_state
                continue
            if key in _COUNTERS:
                yield UnknownMetricFamily(key, f"ZooKeeper counter {key}", value=number)
            else:
                yield GaugeMetricFamily(key, f"ZooKeeper gauge {key}", value=number)
        for name, figures in summaries.items():
            family = SummaryMetricFamily(name, f"ZooKeeper summary {name}", count_value=int(figures.get("cnt", 0)),
                                         sum_value=figures.get("sum", 0.0))
            summary = metrics.summaries.get(name)
            if summary is not None:  # (not the fsync worker's, which keeps no samples)
                for q in PROMETHEUS_QUANTILES if summary.detailed else PROMETHEUS_QUANTILES[:1]:
                    family.add_sample(name, {"quantile": str(q)}, summary.quantile(q))
            yield family
        yield from _quota_families(pipeline)


def _quota_families(pipeline: ServerCore) -> Iterator[Metric]:
    """The per-namespace quota figures as ZooKeeper's provider labels its GaugeSets and CounterSets:
    one family each, the namespace in the label ``key``."""
    gauges, exceeded = quota_figures(pipeline)
    for name, per_namespace in gauges.items():
        if per_namespace:
            family = GaugeMetricFamily(name, f"ZooKeeper gauge set {name}", labels=["key"])
            for namespace, figure in per_namespace.items():
                family.add_metric([namespace], figure)
            yield family
    if exceeded:
        counter = UnknownMetricFamily(EXCEEDED_PER_NAMESPACE, f"ZooKeeper counter set {EXCEEDED_PER_NAMESPACE}",
                                      labels=["key"])
        for namespace, n in exceeded.items():
            counter.add_metric([namespace], n)
        yield counter


def registry_for(server: ServerView) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ZooKeeperCollector(server))
    if server.config.metrics_export_jvm_info:  # the process in place of the JVM
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
    return registry

