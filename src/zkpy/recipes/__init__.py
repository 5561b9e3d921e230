"""Coordination recipes on the ZooKeeper client: the primitives of the paper (§2.4) and the recipe
guide, asyncio first, each with a blocking form that drives the same code.

Every recipe has an asyncio class (``AsyncLock``) that takes an `AsyncClient`, and a blocking
class with kazoo's name (``Lock``) that takes a `Client` and runs the asyncio one on the client's
loop. ``zkpy.Client`` and ``zkpy.AsyncClient`` also make them the kazoo way: ``zk.Lock(path,
identifier)``. One module per protocol; each module's docstring states the protocol, its
guarantees, and what happens on ConnectionLoss, SUSPENDED and session expiry. See
docs/recipes.md.
"""

from .barrier import AsyncBarrier, AsyncDoubleBarrier, Barrier, DoubleBarrier
from .config import AsyncReadyConfig, ReadyConfig
from .counter import AsyncCounter, Counter
from .election import AsyncElection, AsyncSimpleElection, Election, SimpleElection
from .errors import CancelledError, LockLost, LockTimeout, RecipeError, RecipeTimeout
from .lock import AsyncLock, AsyncReadLock, AsyncWriteLock, Lock, ReadLock, WriteLock
from .ownership import Ownership
from .party import AsyncParty, AsyncShallowParty, Party, ShallowParty
from .queue import AsyncLockingQueue, AsyncPriorityQueue, AsyncQueue, LockingQueue, PriorityQueue, Queue
from .rendezvous import AsyncRendezvous, Rendezvous
from .revocable import (
    AsyncRevocableLock,
    AsyncRevocableReadLock,
    AsyncRevocableWriteLock,
    RevocableLock,
    RevocableReadLock,
    RevocableWriteLock,
    revoke,
    revoke_blocking,
)
from .semaphore import AsyncSemaphore, Semaphore
from .twophase import AsyncCoordinator, AsyncParticipant, Coordinator, Outcome, Participant, Transaction
from .watchers import AsyncChildrenWatch, AsyncDataWatch, ChildrenWatch, DataWatch

__all__ = [
    "AsyncBarrier", "AsyncChildrenWatch", "AsyncCoordinator", "AsyncCounter", "AsyncDataWatch",
    "AsyncDoubleBarrier", "AsyncElection", "AsyncLock", "AsyncLockingQueue", "AsyncParticipant", "AsyncParty",
    "AsyncPriorityQueue", "AsyncQueue", "AsyncReadLock", "AsyncReadyConfig", "AsyncRendezvous",
    "AsyncRevocableLock", "AsyncRevocableReadLock", "AsyncRevocableWriteLock", "AsyncSemaphore",
    "AsyncShallowParty", "AsyncSimpleElection", "AsyncWriteLock",
    "Barrier", "CancelledError", "ChildrenWatch", "Coordinator", "Counter", "DataWatch", "DoubleBarrier",
    "Election", "Lock", "LockLost", "LockTimeout", "LockingQueue", "Outcome", "Ownership", "Participant", "Party",
    "PriorityQueue", "Queue", "ReadLock", "ReadyConfig", "RecipeError", "RecipeTimeout", "Rendezvous",
    "RevocableLock", "RevocableReadLock", "RevocableWriteLock", "Semaphore", "ShallowParty", "SimpleElection",
    "Transaction", "WriteLock", "revoke", "revoke_blocking",
]
