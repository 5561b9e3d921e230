"""``zkpy.Client`` and ``zkpy.AsyncClient``: the clients with kazoo's recipe factories.

kazoo users write ``zk.Lock(path, identifier)``; these subclasses make every recipe that way,
bound to the client (``zk.Lock`` is ``functools.partial(Lock, zk)``). They live here, above the
client package, because the client never imports the recipes (the layers go one way:
recipes -> client). ``zkpy.client.sync.Client`` / ``zkpy.client.AsyncClient`` are the same clients without them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Generic, TypeVar, overload

from zkpy.client.aio import AsyncClient as BareAsyncClient
from zkpy.client.sync import Client as BareClient

from . import (
    barrier,
    config,
    counter,
    election,
    lock,
    party,
    queue,
    rendezvous,
    revocable,
    semaphore,
    twophase,
)
from . import watchers as watch

__all__ = ["AsyncClient", "Client"]

R = TypeVar("R")


class _Factory(Generic[R]):
    """``zk.Name(...)`` makes ``recipe(zk, ...)``."""

    def __init__(self, recipe: Callable[..., R]) -> None:
        self.recipe = recipe

    @overload
    def __get__(self, client: None, owner: type) -> _Factory[R]: ...
    @overload
    def __get__(self, client: object, owner: type) -> Callable[..., R]: ...
    def __get__(self, client: object | None, owner: type) -> Any:
        if client is None:
            return self
        return partial(self.recipe, client)


class Client(BareClient):
    """The blocking client (see `zkpy.client.sync.Client`) with kazoo's recipe factories."""

    Barrier = _Factory(barrier.Barrier)
    DoubleBarrier = _Factory(barrier.DoubleBarrier)
    ReadyConfig = _Factory(config.ReadyConfig)
    Counter = _Factory(counter.Counter)
    Election = _Factory(election.Election)
    SimpleElection = _Factory(election.SimpleElection)
    Lock = _Factory(lock.Lock)
    ReadLock = _Factory(lock.ReadLock)
    WriteLock = _Factory(lock.WriteLock)
    RevocableLock = _Factory(revocable.RevocableLock)
    RevocableReadLock = _Factory(revocable.RevocableReadLock)
    RevocableWriteLock = _Factory(revocable.RevocableWriteLock)
    Semaphore = _Factory(semaphore.Semaphore)
    Party = _Factory(party.Party)
    ShallowParty = _Factory(party.ShallowParty)
    Queue = _Factory(queue.Queue)
    PriorityQueue = _Factory(queue.PriorityQueue)
    LockingQueue = _Factory(queue.LockingQueue)
    Rendezvous = _Factory(rendezvous.Rendezvous)
    Coordinator = _Factory(twophase.Coordinator)
    Participant = _Factory(twophase.Participant)
    DataWatch = _Factory(watch.DataWatch)
    ChildrenWatch = _Factory(watch.ChildrenWatch)


class AsyncClient(BareAsyncClient):
    """The asyncio client (see `zkpy.client.aio.AsyncClient`) with the recipe factories, each
    making the asyncio form: ``zk.Lock(path, identifier)`` is an `AsyncLock`."""

    Barrier = _Factory(barrier.AsyncBarrier)
    DoubleBarrier = _Factory(barrier.AsyncDoubleBarrier)
    ReadyConfig = _Factory(config.AsyncReadyConfig)
    Counter = _Factory(counter.AsyncCounter)
    Election = _Factory(election.AsyncElection)
    SimpleElection = _Factory(election.AsyncSimpleElection)
    Lock = _Factory(lock.AsyncLock)
    ReadLock = _Factory(lock.AsyncReadLock)
    WriteLock = _Factory(lock.AsyncWriteLock)
    RevocableLock = _Factory(revocable.AsyncRevocableLock)
    RevocableReadLock = _Factory(revocable.AsyncRevocableReadLock)
    RevocableWriteLock = _Factory(revocable.AsyncRevocableWriteLock)
    Semaphore = _Factory(semaphore.AsyncSemaphore)
    Party = _Factory(party.AsyncParty)
    ShallowParty = _Factory(party.AsyncShallowParty)
    Queue = _Factory(queue.AsyncQueue)
    PriorityQueue = _Factory(queue.AsyncPriorityQueue)
    LockingQueue = _Factory(queue.AsyncLockingQueue)
    Rendezvous = _Factory(rendezvous.AsyncRendezvous)
    Coordinator = _Factory(twophase.AsyncCoordinator)
    Participant = _Factory(twophase.AsyncParticipant)
    DataWatch = _Factory(watch.AsyncDataWatch)
    ChildrenWatch = _Factory(watch.AsyncChildrenWatch)
