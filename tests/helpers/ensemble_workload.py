"""A concurrent write workload for ensemble fault tests, and the checks that follow it.

Each ``Writer`` is a kazoo client (its own session, all servers in its connect string, or only
some) that creates ``/w/<name>-<n>`` nodes with unique values one after the other, retrying a
write whose answer was lost. It records every write the ensemble acknowledged, and the ones
whose fate is unknown (the connection dropped before the answer). ``tree_dump`` reads a whole
tree from one server; ``wait_same_trees`` waits until every server holds the same tree.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, KazooException, NodeExistsError, NoNodeError, SessionExpiredError
from kazoo.retry import KazooRetry

from zkpy.testing.servers import ServerProcess


class Writer(threading.Thread):
    def __init__(self, name: str, hosts: str, timeout_s: float = 10.0) -> None:
        super().__init__(name=f"writer-{name}", daemon=True)
        self.tag = name
        retry = KazooRetry(max_tries=-1, delay=0.05, max_delay=0.5)
        self.client = KazooClient(hosts=hosts, timeout=timeout_s, connection_retry=retry, command_retry=retry)
        self.acked: dict[str, bytes] = {}
        self.uncertain: dict[str, bytes] = {}
        self.errors: list[str] = []
        self.stopping = threading.Event()
        self.count = 0
        LIVE_WRITERS.append(self)

    def start_session(self) -> None:
        self.client.start(timeout=30)
        self.client.ensure_path("/w")

    def run(self) -> None:
        n = 0
        while not self.stopping.is_set():
            path, value = f"/w/{self.tag}-{n:06d}", f"{self.tag}:{n}:{time.monotonic_ns()}".encode()
            n += 1
            try:
                self._create(path, value)
                self.acked[path] = value
                self.count += 1
            except SessionExpiredError as exc:
                self.errors.append(f"{path}: session expired: {exc}")
                return
            except KazooException as exc:
                self.uncertain[path] = value
                self.errors.append(f"{path}: {exc!r}")

    def _create(self, path: str, value: bytes) -> None:
        deadline = time.monotonic() + 60
        while True:
            try:
                self.client.create(path, value)
                return
            except NodeExistsError:
                return  # an earlier attempt whose answer was lost went through
            except ConnectionLoss:
                if time.monotonic() > deadline or self.stopping.is_set():
                    raise
                time.sleep(0.05)

    def wait_for_writes(self, more: int, deadline_s: float = 60.0) -> None:
        target = self.count + more
        deadline = time.monotonic() + deadline_s
        while self.count < target:
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.tag}: only {self.count} of {target} writes acknowledged; "
                                     f"errors: {self.errors[-5:]}")
            time.sleep(0.02)

    def stop(self) -> None:
        self.stopping.set()
        self.join(90)
        assert not self.is_alive(), f"{self.tag} did not stop"


LIVE_WRITERS: list[Writer] = []


def start_writers(hosts: str, n: int = 3, first_writes: int = 20, timeout_s: float = 10.0) -> list[Writer]:
    """``n`` writers on ``hosts``, returned once each has ``first_writes`` acknowledged."""
    writers = [Writer(f"w{i}", hosts, timeout_s) for i in range(n)]
    for w in writers:
        w.start_session()
        w.start()
    for w in writers:
        w.wait_for_writes(first_writes)
    return writers


def close_writers() -> None:
    """Stop every writer and close its client (after each test, passed or failed): a writer left
    running would retry against servers that are gone for the rest of the run."""
    while LIVE_WRITERS:
        w = LIVE_WRITERS.pop()
        w.stopping.set()
        w.client.stop()  # fails a create waiting for a connection that may never come back
        if w.is_alive():
            w.join(10)
        w.client.close()


def patient_client(hosts: str, timeout_s: float = 10.0) -> KazooClient:
    """A started kazoo client whose calls, through ``client.retry``, ride out a dropped connection
    for up to a minute: a check that reads a server must not fail because one connection stalled
    on a loaded machine (a CI run once lost one to a ping timeout)."""
    retry = KazooRetry(max_tries=-1, delay=0.05, max_delay=0.5, deadline=60)
    client = KazooClient(hosts=hosts, timeout=timeout_s, connection_retry=retry, command_retry=retry)
    client.start(timeout=30)
    return client


def _read_level(client: KazooClient, paths: list[str]) -> dict[str, tuple[bytes, Any, list[str]] | None]:
    """Data, Stat and children of every path, all requests pipelined; None for a path that is gone.
    Raises ConnectionLoss if the connection drops: the caller reads the level again."""
    asked = [(p, client.get_async(p), client.get_children_async(p)) for p in paths]
    out: dict[str, tuple[bytes, Any, list[str]] | None] = {}
    for path, get, children in asked:
        try:
            data, stat = get.get(timeout=60)
            out[path] = (data, stat, children.get(timeout=60))
        except NoNodeError:
            out[path] = None
    return out


def tree_dump(port: int, root: str = "/", host: str = "127.0.0.1") -> dict[str, tuple[bytes, int, int, int, int, int]]:
    """Every node under ``root`` on the server at ``port`` (after a sync): data and the Stat fields
    every replica must agree on (czxid, mzxid, version, cversion, ephemeralOwner). Read a level
    of the tree at a time, pipelined: thousands of nodes take a moment, not seconds."""
    client = patient_client(f"{host}:{port}")
    try:
        client.retry(client.sync, "/")
        out: dict[str, tuple[bytes, int, int, int, int, int]] = {}
        level = [root]
        while level:
            found = client.retry(_read_level, client, level)
            level = []
            for path, node in found.items():
                if node is None:
                    continue
                data, stat, children = node
                out[path] = (data, stat.czxid, stat.mzxid, stat.version, stat.cversion, stat.ephemeralOwner)
                level.extend(f"{path.rstrip('/')}/{c}" for c in children)
        return out
    finally:
        client.stop()
        client.close()


def wait_same_trees(servers: Sequence[ServerProcess], deadline_s: float = 60.0,
                    ignore: Sequence[str] = ()) -> dict[str, tuple]:
    """Wait until every running server's tree is the same (but the nodes ``ignore`` names: a
    member's own view of the config, where members were given different server lines); return it."""
    deadline = time.monotonic() + deadline_s
    while True:
        dumps = {s.extra["myid"]: {p: v for p, v in tree_dump(s.port, host=s.host).items() if p not in ignore}
                 for s in servers if s.proc.poll() is None}
        first = next(iter(dumps.values()))
        if all(d == first for d in dumps.values()):
            return first
        if time.monotonic() > deadline:
            diffs = {sid: sorted(set(d.items()) ^ set(first.items()))[:5] for sid, d in dumps.items() if d != first}
            raise AssertionError(f"servers disagree: {diffs}")
        time.sleep(0.2)


def check_acknowledged(writers: Sequence[Writer], tree: dict[str, tuple]) -> None:
    """Every acknowledged write is in the tree with its value; an uncertain one, if present,
    with its own value."""
    for w in writers:
        for path, value in w.acked.items():
            assert path in tree, f"acknowledged write {path} lost"
            assert tree[path][0] == value, f"{path} holds {tree[path][0]!r}, acknowledged {value!r}"
        for path, value in w.uncertain.items():
            if path in tree:
                assert tree[path][0] == value
