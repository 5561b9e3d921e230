"""server.metrics: the figures a summary folds from its pending values match a direct count,
its memory stays bounded, and the registry names ZooKeeper's metrics."""

from __future__ import annotations

import random

from zkpy.server.metrics import BASIC, COUNTERS, DETAILED, FOLD_AT, RESERVOIR, ServerMetrics, Summary


def test_summary_figures_after_any_number_of_values() -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    for n in (0, 1, 7, FOLD_AT - 1, FOLD_AT, FOLD_AT + 1, 3 * FOLD_AT + 5):
        summary = Summary(detailed=True)
        values = [rng.randrange(1000) for _ in range(n)]
        for v in values:
            summary.add(v)
            assert len(summary.pending) < FOLD_AT
        assert summary.count == n, seed
        assert summary.total == sum(values), seed
        assert summary.min == (min(values) if values else 0), seed
        assert summary.max == (max(values) if values else 0), seed
        assert len(summary.samples) == min(n, RESERVOIR), seed
        assert sorted(summary.samples) == sorted(values[-RESERVOIR:]), seed
        if values:
            kept = sorted(values[-RESERVOIR:])
            assert summary.quantile(0.5) in kept and summary.quantile(0.999) <= kept[-1]
            assert summary.quantile(0.0) == kept[0]
        else:
            assert summary.quantile(0.5) == 0.0


def test_basic_summaries_keep_a_bounded_reservoir_too() -> None:
    summary = Summary()
    for v in range(5000):
        summary.add(v)
    assert len(summary.samples) == RESERVOIR and summary.count == 5000 and summary.max == 4999
    assert summary.quantile(0.5) >= 5000 - RESERVOIR


def test_registry_has_zookeepers_names_and_resets() -> None:
    metrics = ServerMetrics()
    assert set(metrics.counters) == set(COUNTERS)
    assert set(metrics.summaries) == set(DETAILED) | set(BASIC)
    assert all(metrics.summaries[n].detailed for n in DETAILED)
    metrics.count("proposal_count", 3)
    metrics.record("election_time", 40)
    metrics.readlatency.add(2)
    assert metrics.counters["proposal_count"] == 3 and metrics.summaries["election_time"].count == 1
    metrics.reset()
    assert metrics.counters["proposal_count"] == 0
    assert metrics.summaries["election_time"].count == 0 and metrics.readlatency.count == 0
