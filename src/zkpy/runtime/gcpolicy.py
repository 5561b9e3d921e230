"""The cyclic collector in a server process: off while a tree loads, then tuned for a server.

A server's heap is mostly the tree: one tracked ``Node`` per znode, alive until it is deleted and
freed by its refcount (the tree makes no cycles). Each request makes a few short-lived tracked
objects (records, the txn, change records, the result); they too are freed by refcount, but those
still in flight when a young collection runs (a window of multis of 1,000 creates holds tens of
thousands) survive into the old generation. With CPython's default thresholds (700, 10, 10) that
makes full collections, each a walk of the whole tree, about as often as the long-lived count
grows by a quarter of *those* objects: 71 full collections, 12 s of a 40 s bulk load of 1M znodes.

``SERVER_THRESHOLDS`` lets a young collection wait for 50,000 net new tracked objects, so the
in-flight requests are a small share of what each one promotes: the same bulk load runs about 1 s
of collections. A young collection then takes a few milliseconds, and only where tracked objects
pile up (creates); a load of reads and setData frees what it makes and triggers none.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

SERVER_THRESHOLDS = (50_000, 20, 10)  # gc.set_threshold: young, middle, old


def tune() -> None:
    """The thresholds a server process runs with (see the module's docstring): set by the
    processes' entry points (``zkpy server``, a serving worker), not by a server object, which
    may share its process with other code (tests)."""
    gc.set_threshold(*SERVER_THRESHOLDS)


@contextmanager
def loading_tree() -> Iterator[None]:
    """Load a tree with the collector off, then keep it out of every later collection.

    Building a million nodes would run the collector over the growing tree again and again (a
    third of the load time); loading makes no cycles. What was loaded lives as long as the server,
    so it is frozen (``gc.freeze``) before the collector is back on: its first young collection
    would otherwise walk every loaded object (0.3 s at 1M znodes). No collection first: one pass
    over a million znodes would add half a second to the start, and refcounts still free them.
    """
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        gc.enable()
