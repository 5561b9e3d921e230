"""A job queue on ZooKeeper, for kazoo's ``KazooClient`` or zkpy's ``Client`` alike.

Layout under ``root``: ``queue/job-<seq>`` (persistent sequential: the payload, in submission
order), ``claims/job-<seq>`` (ephemeral: the worker holding it; it goes with the worker's
session, so a dead worker's job becomes claimable again), ``done/job-<seq>`` (the result).

Invariants: a job is claimed by at most one live worker at a time; a completed job leaves the queue
and never returns to it (``done`` is written before the job is removed from ``queue``, so a crash
between the two leaves a job that ``claim`` skips)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zkpy.errors import NodeExistsError, NoNodeError

_EXISTS: tuple[type[BaseException], ...] = (NodeExistsError,)
_NO_NODE: tuple[type[BaseException], ...] = (NoNodeError,)
try:  # the same errors as kazoo names them, when kazoo is there
    from kazoo.exceptions import NodeExistsError as KazooNodeExists
    from kazoo.exceptions import NoNodeError as KazooNoNode

    _EXISTS, _NO_NODE = _EXISTS + (KazooNodeExists,), _NO_NODE + (KazooNoNode,)
except ImportError:
    pass


@dataclass(frozen=True)
class Job:
    name: str
    payload: bytes


class JobQueue:
    """``JobQueue(client, root="/jobs")``: ``client`` is a started ``KazooClient`` or zkpy ``Client``."""

    def __init__(self, client: Any, root: str = "/jobs") -> None:
        self.client = client
        self.root = root.rstrip("/")
        for part in ("queue", "claims", "done"):
            client.ensure_path(f"{self.root}/{part}")

    def submit(self, payload: bytes) -> str:
        """Queue a job; returns its name (``job-0000000000``, in submission order)."""
        path = self.client.create(f"{self.root}/queue/job-", payload, sequence=True)
        return str(path).rsplit("/", 1)[1]

    def pending(self) -> list[str]:
        """Names of the jobs not completed yet, oldest first."""
        return sorted(self.client.get_children(f"{self.root}/queue"))

    def claim(self, worker: str) -> Job | None:
        """The oldest job nobody holds, now held by ``worker`` until it completes or its session ends."""
        done = set(self.client.get_children(f"{self.root}/done"))
        for name in self.pending():
            if name in done:
                continue
            try:
                self.client.create(f"{self.root}/claims/{name}", worker.encode(), ephemeral=True)
            except _EXISTS:
                continue
            try:
                payload, _ = self.client.get(f"{self.root}/queue/{name}")
            except _NO_NODE:  # completed meanwhile by a worker whose claim had just gone
                self.client.delete(f"{self.root}/claims/{name}")
                continue
            return Job(name, payload)
        return None

    def complete(self, job: Job, result: bytes) -> None:
        """Record ``result`` and remove the job from the queue and its claim."""
        try:
            self.client.create(f"{self.root}/done/{job.name}", result)
        except _EXISTS:
            pass
        for part in ("queue", "claims"):
            try:
                self.client.delete(f"{self.root}/{part}/{job.name}")
            except _NO_NODE:
                pass

    def result(self, name: str) -> bytes | None:
        try:
            data, _ = self.client.get(f"{self.root}/done/{name}")
        except _NO_NODE:
            return None
        return bytes(data)
