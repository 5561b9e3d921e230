"""The collector's policy in a server process: off while a tree loads, the load frozen out of
later collections, the collector back on whatever the load did."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from zkpy.runtime import gcpolicy


@pytest.fixture(autouse=True)
def _restore_collector() -> Iterator[None]:
    thresholds, enabled = gc.get_threshold(), gc.isenabled()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    (gc.enable if enabled else gc.disable)()


def test_a_loaded_tree_is_frozen_and_the_collector_is_back_on() -> None:
    gc.enable()
    gc.unfreeze()
    with gcpolicy.loading_tree():
        assert not gc.isenabled()
        loaded = [{"node": i} for i in range(1000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(loaded)


def test_a_failed_load_turns_the_collector_back_on_and_freezes_nothing() -> None:
    gc.enable()
    gc.unfreeze()
    with pytest.raises(RuntimeError), gcpolicy.loading_tree():
        raise RuntimeError("corrupt log")
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_server_process_runs_at_the_server_thresholds() -> None:
    gc.set_threshold(700, 10, 10)
    gcpolicy.tune()
    assert gc.get_threshold() == gcpolicy.SERVER_THRESHOLDS
    assert gcpolicy.SERVER_THRESHOLDS[0] > 700  # in-flight requests must not promote the whole tree's worth
