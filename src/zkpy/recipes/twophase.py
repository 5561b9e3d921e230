"""Two-phase commit: every site commits a transaction, or every site aborts it (the recipe guide).

**Layout.** The coordinator creates, in one multi, the transaction node ``T = path/tx-<guid>``
(its data is the transaction) with ``T/votes/<site>`` for each site (empty: no answer yet) and
``T/alive``. Sites find ``T`` by watching ``path``'s children.

**Protocol.**

1. A site *joins*: one multi creates its ephemeral ``T/alive/<site>`` and sets its vote to
   ``pending`` (only if it was empty: a site joins once). From then on, its death shows: a
   ``pending`` vote without an ``alive`` node is a site that died mid-vote.
2. The site processes the transaction and *votes*: ``commit`` or ``abort`` into its vote node.
3. The *decision* is a function of the znodes (`decide`): ``abort`` if any vote is abort or any
   joined site died before voting; ``commit`` once every vote is commit; else not yet. Whoever
   sees it first (the coordinator, which watches every vote, or a site) creates ``T/decision``
   holding it; ``create`` succeeds once, so there is exactly one decision, which every site
   reads (`outcome`) and applies. Past its ``timeout``, anybody may decide ``abort``, which
   wins only if nothing was decided before.

Because the decision is a single znode written by the first creator, all sites apply the same
outcome even when a participant dies mid-vote or the coordinator dies (the sites then decide
abort at their timeout). Sites that only wait for the decision cost one watch each; the
coordinator watches every vote (the guide's scalable variant, where only it sees the votes).

**Failures.** ConnectionLoss is retried (a join whose reply was lost is recognised by its
``alive`` node's owner). A site whose session expires before voting makes the transaction
abort. Session expiry raises SessionExpiredError in whoever waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import cast

from zkpy.client.aio import AsyncClient
from zkpy.client.retry import RetryPolicy
from zkpy.client.sync import Client
from zkpy.errors import BadVersionError, NodeExistsError, NoNodeError, ZookeeperError
from zkpy.wire.proto import Stat

from .errors import RecipeError, RecipeTimeout
from .sequential import new_guid
from .support import DEFAULT_RETRY, Waiter, within

__all__ = ["AsyncCoordinator", "AsyncParticipant", "Coordinator", "Outcome", "Participant", "Transaction", "decide"]

PENDING, COMMIT, ABORT = b"pending", b"commit", b"abort"


class Outcome(Enum):
    COMMITTED = "commit"
    ABORTED = "abort"


@dataclass(frozen=True)
class Transaction:
    txid: str
    payload: bytes


def decide(votes: Mapping[str, bytes], alive: Collection[str]) -> Outcome | None:
    """The decision the znodes dictate, or None while it is open: ``votes`` maps every site to
    its vote node's data, ``alive`` holds the sites whose ``alive`` node exists."""
    if any(v == ABORT for v in votes.values()):
        return Outcome.ABORTED
    if any(v == PENDING and site not in alive for site, v in votes.items()):
        return Outcome.ABORTED  # joined, then died before voting
    if votes and all(v == COMMIT for v in votes.values()):
        return Outcome.COMMITTED
    return None


class _TwoPhase:
    def __init__(self, client: AsyncClient, path: str, retry: RetryPolicy) -> None:
        self.client = client
        self.path = path.rstrip("/")
        self.retry = retry
        self._waiter = Waiter(client)

    async def outcome(self, txid: str, timeout: float | None = None) -> Outcome:
        """The transaction's decision, waiting for it; after ``timeout`` seconds ``abort`` is
        decided (unless a decision came first, which then stands)."""
        try:
            return await within(timeout, f"transaction {txid}", self._decided(txid))
        except RecipeTimeout:
            return await self._settle(txid, Outcome.ABORTED)

    watch_votes = False

    async def _decided(self, txid: str) -> Outcome:
        tx = f"{self.path}/{txid}"
        while True:
            self._waiter.arm()
            try:
                data, _ = await self.retry(self.client.get, f"{tx}/decision", self._waiter.fire)
                return Outcome(data.decode("ascii"))
            except NoNodeError:
                pass
            if await self.retry(self.client.exists, f"{tx}/decision", self._waiter.fire) is not None:
                continue
            verdict = decide(*await self.retry(self._state, tx))
            if verdict is not None:
                return await self._settle(txid, verdict)
            await self._waiter.wait()

    async def _state(self, tx: str) -> tuple[dict[str, bytes], set[str]]:
        """Every vote and the live sites (with watches, where this role watches the votes)."""
        watch = self._waiter.fire if self.watch_votes else None
        sites = await self.client.get_children(f"{tx}/votes")
        # votes before alive (FIFO order): a pending vote read first whose alive node is then
        # missing is a site that died; the other order would take a site joining between the
        # two reads for a dead one
        reads = await asyncio.gather(*(self.client.get(f"{tx}/votes/{s}", watch) for s in sites),
                                     self.client.get_children(f"{tx}/alive", watch))
        votes = cast(list[tuple[bytes, Stat]], reads[:-1])
        alive = cast(list[str], reads[-1])
        return {s: data for s, (data, _) in zip(sites, votes)}, set(alive)

    async def _settle(self, txid: str, verdict: Outcome) -> Outcome:
        """Create the decision; if another came first, that one."""
        path = f"{self.path}/{txid}/decision"
        try:
            await self.retry(self.client.create, path, verdict.value.encode("ascii"))
            return verdict
        except NodeExistsError:
            data, _ = await self.retry(self.client.get, path)
            return Outcome(data.decode("ascii"))


class AsyncCoordinator(_TwoPhase):
    """Starts transactions and watches their votes."""

    watch_votes = True

    def __init__(self, client: AsyncClient, path: str, *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        super().__init__(client, path, retry)

    async def begin(self, payload: bytes, sites: Sequence[str]) -> str:
        """Create a transaction for ``sites``; its id."""
        if not sites or len(set(sites)) != len(sites) or any(not s or "/" in s for s in sites):
            raise ValueError("sites must be distinct, non-empty znode names")
        txid = f"tx-{new_guid()}"
        tx = f"{self.path}/{txid}"
        await self.retry(self.client.ensure_path, self.path)
        await self.retry(self._begin_once, tx, payload, list(sites), [False])
        return txid

    async def _begin_once(self, tx: str, payload: bytes, sites: list[str], tried: list[bool]) -> None:
        if tried[0] and await self.client.exists(tx) is not None:
            return  # the multi was applied; its reply was lost
        tried[0] = True
        t = self.client.transaction()
        t.create(tx, payload)
        t.create(f"{tx}/votes")
        t.create(f"{tx}/alive")
        for site in sites:
            t.create(f"{tx}/votes/{site}")
        for result in await t.commit():
            if isinstance(result, ZookeeperError):
                raise result

    async def forget(self, txid: str) -> None:
        """Delete a finished transaction's nodes."""
        await self.client.delete(f"{self.path}/{txid}", recursive=True)


class AsyncParticipant(_TwoPhase):
    """One site: finds transactions, joins, votes, learns the outcome."""

    def __init__(self, client: AsyncClient, path: str, site: str, *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        super().__init__(client, path, retry)
        self.site = site

    async def next(self, timeout: float | None = None) -> Transaction:
        """Join the oldest transaction that waits for this site; `RecipeTimeout` after ``timeout``."""
        return await within(timeout, f"transactions at {self.path}", self._next())

    async def _next(self) -> Transaction:
        await self.retry(self.client.ensure_path, self.path)
        while True:
            self._waiter.arm()
            txids = await self.retry(self.client.get_children, self.path, self._waiter.fire)
            stats = await asyncio.gather(*(self.client.exists(f"{self.path}/{t}") for t in txids))
            by_age = sorted((s.czxid, t) for t, s in zip(txids, stats) if s is not None)
            for _, txid in by_age:
                try:
                    return await self.join(txid)
                except (RecipeError, NoNodeError):
                    continue  # not for us, already answered, or gone
            await self._waiter.wait()

    async def join(self, txid: str) -> Transaction:
        """Take part in ``txid``: its payload. `RecipeError` if this site is not one of its sites
        or has answered it already."""
        tx = f"{self.path}/{txid}"
        return await self.retry(self._join_once, tx, txid, [False])

    async def _join_once(self, tx: str, txid: str, tried: list[bool]) -> Transaction:
        alive, vote = f"{tx}/alive/{self.site}", f"{tx}/votes/{self.site}"
        if tried[0]:
            stat = await self.client.exists(alive)
            if stat is not None and stat.ephemeralOwner == self.client.session_id:
                return Transaction(txid, (await self.client.get(tx))[0])
        tried[0] = True
        t = self.client.transaction()
        t.check(vote, 0)  # never answered (a fresh vote node has version 0)
        t.create(alive, b"", ephemeral=True)
        t.set_data(vote, PENDING)
        results = await t.commit()
        errors = [r for r in results if isinstance(r, ZookeeperError) and r.code != -2]
        if any(isinstance(e, (NoNodeError, BadVersionError, NodeExistsError)) for e in errors):
            raise RecipeError(f"site {self.site} cannot join {txid}: not one of its sites, or it answered already")
        if errors:
            raise errors[0]
        return Transaction(txid, (await self.retry(self.client.get, tx))[0])

    async def vote(self, txid: str, commit: bool) -> None:
        """Answer ``commit`` or ``abort`` (after `join`)."""
        await self.retry(self.client.set, f"{self.path}/{txid}/votes/{self.site}", COMMIT if commit else ABORT)


class Coordinator:
    """The blocking form of `AsyncCoordinator`."""

    def __init__(self, client: Client, path: str, *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self.client = client
        self.aio = AsyncCoordinator(client.aio, path, retry=retry)

    def begin(self, payload: bytes, sites: Sequence[str]) -> str:
        return self.client.run(self.aio.begin, payload, sites)

    def outcome(self, txid: str, timeout: float | None = None) -> Outcome:
        return self.client.run(self.aio.outcome, txid, timeout)

    def forget(self, txid: str) -> None:
        self.client.run(self.aio.forget, txid)


class Participant:
    """The blocking form of `AsyncParticipant`."""

    def __init__(self, client: Client, path: str, site: str, *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self.client = client
        self.aio = AsyncParticipant(client.aio, path, site, retry=retry)

    def next(self, timeout: float | None = None) -> Transaction:
        return self.client.run(self.aio.next, timeout)

    def join(self, txid: str) -> Transaction:
        return self.client.run(self.aio.join, txid)

    def vote(self, txid: str, commit: bool) -> None:
        self.client.run(self.aio.vote, txid, commit)

    def outcome(self, txid: str, timeout: float | None = None) -> Outcome:
        return self.client.run(self.aio.outcome, txid, timeout)
