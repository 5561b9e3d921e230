"""RetryPolicy: backoff grows, jitter stays bounded, tries and deadline are honoured, and only
retryable errors are retried. Time is a fake clock advanced by a fake sleep; nothing sleeps."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

import pytest

from zkpy.client.retry import KazooRetry, RetryPolicy, is_retryable, retry_policy
from zkpy.errors import (
    ConnectionClosedError,
    ConnectionLoss,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
    ZookeeperError,
)


class FakeTime:
    """A clock that only moves when something sleeps on it; records every sleep."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def blocking_sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    async def sleep(self, seconds: float) -> None:
        self.blocking_sleep(seconds)


def seeded_rng(request: pytest.FixtureRequest) -> random.Random:
    seed = random.SystemRandom().randrange(2**32)
    print(f"{request.node.name}: rng seed {seed}")
    return random.Random(seed)


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> random.Random:
    return seeded_rng(request)


def policy(t: FakeTime, rng: random.Random, **kwargs: object) -> RetryPolicy:
    return RetryPolicy(clock=t.clock, sleep=t.sleep, blocking_sleep=t.blocking_sleep, rng=rng,
                       **kwargs)  # type: ignore[arg-type]


def failing(errors: list[BaseException], result: str = "ok") -> tuple[Callable[[], str], list[int]]:
    """A function that raises each of ``errors`` in turn, then returns ``result``."""
    calls = [0]

    def fn() -> str:
        calls[0] += 1
        if errors:
            raise errors.pop(0)
        return result

    return fn, calls


def run_both(p: RetryPolicy, make: Callable[[], tuple[Callable[[], str], list[int]]]) -> list[tuple[object, int]]:
    """Run the same scenario through the blocking and the async shell: (outcome, calls) each."""
    outcomes: list[tuple[object, int]] = []
    fn, calls = make()
    try:
        outcomes.append((p.run_sync(fn), calls[0]))
    except Exception as exc:
        outcomes.append((type(exc), calls[0]))

    afn, acalls = make()

    async def coro() -> str:
        return afn()

    try:
        outcomes.append((asyncio.run(p(coro)), acalls[0]))
    except Exception as exc:
        outcomes.append((type(exc), acalls[0]))
    return outcomes


def test_only_errors_flagged_retryable_are_retried() -> None:
    assert is_retryable(ConnectionLoss())
    assert is_retryable(OperationTimeoutError())
    assert not is_retryable(SessionExpiredError())
    assert not is_retryable(NoNodeError())
    assert not is_retryable(ValueError())
    assert not is_retryable(ConnectionClosedError()), "a closed client stays closed"

    class Odd(SessionExpiredError):
        retryable = True

    assert not is_retryable(Odd()), "a session that expired is never retried"


def test_delays_grow_by_backoff_until_max_delay(rng: random.Random) -> None:
    t = FakeTime()
    p = policy(t, rng, delay=0.1, backoff=2.0, max_delay=1.0, jitter=0.0)
    fn, calls = failing([ConnectionLoss() for _ in range(6)])
    assert p.run_sync(fn) == "ok"
    assert calls[0] == 7
    assert t.sleeps == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])


def test_async_delays_match_blocking_delays(rng: random.Random) -> None:
    t = FakeTime()
    p = policy(t, rng, delay=0.5, backoff=3.0, max_delay=10.0, jitter=0.0)
    fn, calls = failing([OperationTimeoutError(), ConnectionLoss(), ConnectionLoss()])

    async def op(x: int, *, y: int) -> str:
        assert (x, y) == (1, 2)
        return fn()

    assert asyncio.run(p(op, 1, y=2)) == "ok"
    assert calls[0] == 4
    assert t.sleeps == pytest.approx([0.5, 1.5, 4.5])


def test_jitter_stays_within_its_fraction_and_max_delay(rng: random.Random) -> None:
    t = FakeTime()
    p = policy(t, rng, delay=0.2, backoff=1.5, max_delay=5.0, jitter=0.25)
    for retry in range(1, 40):
        base = p.base_delay(retry)
        for _ in range(50):
            d = p.next_delay(retry)
            assert base * 0.75 - 1e-12 <= d <= min(base * 1.25, 5.0) + 1e-12
    # jitter really varies the delay
    assert len({round(p.next_delay(3), 9) for _ in range(20)}) > 1


def test_same_seed_replays_the_same_delays(request: pytest.FixtureRequest) -> None:
    seed = random.SystemRandom().randrange(2**32)
    print(f"{request.node.name}: rng seed {seed}")
    runs = []
    for _ in range(2):
        t = FakeTime()
        p = policy(t, random.Random(seed), jitter=0.5)
        fn, _ = failing([ConnectionLoss() for _ in range(5)])
        p.run_sync(fn)
        runs.append(t.sleeps)
    assert runs[0] == runs[1]


@pytest.mark.parametrize("max_tries", [1, 2, 5])
def test_max_tries_counts_calls_and_reraises_the_last_error(rng: random.Random, max_tries: int) -> None:
    t = FakeTime()
    p = policy(t, rng, max_tries=max_tries, jitter=0.0)

    def make() -> tuple[Callable[[], str], list[int]]:
        return failing([ConnectionLoss() for _ in range(10)])

    assert run_both(p, make) == [(ConnectionLoss, max_tries)] * 2
    assert len(t.sleeps) == 2 * (max_tries - 1)


def test_success_on_the_last_allowed_try(rng: random.Random) -> None:
    t = FakeTime()
    p = policy(t, rng, max_tries=3, jitter=0.0)
    assert run_both(p, lambda: failing([ConnectionLoss(), ConnectionLoss()])) == [("ok", 3)] * 2


def test_deadline_is_never_slept_past(rng: random.Random) -> None:
    t = FakeTime()
    p = policy(t, rng, delay=1.0, backoff=2.0, max_delay=100.0, jitter=0.1, deadline=10.0)
    fn, calls = failing([ConnectionLoss() for _ in range(100)])
    with pytest.raises(ConnectionLoss):
        p.run_sync(fn)
    assert sum(t.sleeps) <= 10.0
    assert 2 <= calls[0] <= 5
    # the next delay (at least 0.9 * 2**(calls-1)) would have crossed the deadline
    assert sum(t.sleeps) + 0.9 * 2 ** (calls[0] - 1) > 10.0


def test_deadline_counts_time_spent_inside_the_call(rng: random.Random) -> None:
    t = FakeTime()
    p = policy(t, rng, delay=0.1, jitter=0.0, deadline=5.0)
    calls = [0]

    def slow() -> str:
        calls[0] += 1
        t.now += 3.0  # each call takes three seconds
        raise OperationTimeoutError()

    with pytest.raises(OperationTimeoutError):
        p.run_sync(slow)
    assert calls[0] == 2


@pytest.mark.parametrize("error", [SessionExpiredError(), NoNodeError(), ZookeeperError(), KeyError("x")])
def test_non_retryable_errors_pass_through_at_once(rng: random.Random, error: Exception) -> None:
    t = FakeTime()
    p = policy(t, rng, max_tries=None)
    assert run_both(p, lambda: failing([error, error])) == [(type(error), 1)] * 2
    assert t.sleeps == []


def test_a_retryable_error_then_a_fatal_one_stops(rng: random.Random) -> None:
    t = FakeTime()
    p = policy(t, rng, jitter=0.0)
    fn, calls = failing([ConnectionLoss(), SessionExpiredError()])
    with pytest.raises(SessionExpiredError):
        p.run_sync(fn)
    assert calls[0] == 2 and t.sleeps == [0.1]


def test_cancellation_is_not_retried(rng: random.Random) -> None:
    t = FakeTime()
    p = policy(t, rng)
    calls = [0]

    async def op() -> None:
        calls[0] += 1
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(p(op))
    assert calls[0] == 1


def test_arguments_are_checked() -> None:
    for bad in ({"max_tries": 0}, {"delay": -1.0}, {"backoff": 0.5}, {"jitter": 1.5}, {"deadline": -1.0}):
        with pytest.raises(ValueError):
            RetryPolicy(**bad)  # type: ignore[arg-type]


def test_huge_retry_numbers_do_not_overflow() -> None:
    p = RetryPolicy(delay=1.0, backoff=10.0, max_delay=7.0, jitter=0.0)
    assert p.base_delay(10_000) == 7.0


def test_kazoo_retry_arguments_map_onto_a_policy() -> None:
    """kazoo's KazooRetry arguments (a dict, as kazoo's client takes them): max_tries counts
    calls in both (-1: no limit), max_jitter is the jitter fraction."""
    p = retry_policy({"max_tries": 3, "delay": 0.5, "backoff": 3, "max_jitter": 0.2, "max_delay": 9.0,
                      "deadline": 4.0, "ignore_expire": False})
    assert p is not None
    assert (p.max_tries, p.delay, p.backoff, p.jitter, p.max_delay, p.deadline) == (3, 0.5, 3, 0.2, 9.0, 4.0)
    unlimited = retry_policy({"max_tries": -1})
    assert unlimited is not None and unlimited.max_tries is None
    own = RetryPolicy(max_tries=2)
    assert retry_policy(own) is own and retry_policy(None) is None
    assert retry_policy(KazooRetry(max_tries=5)).max_tries == 5  # type: ignore[union-attr]
    with pytest.raises(TypeError):
        retry_policy({"interrupt": lambda: True})


def test_kazoo_retry_calls_blocking_functions_with_its_sleep() -> None:
    slept: list[float] = []
    calls = [0]

    def flaky() -> str:
        calls[0] += 1
        if calls[0] < 3:
            raise ConnectionLoss()
        return "ok"

    retry = KazooRetry(max_tries=5, delay=0.25, backoff=2, max_jitter=0.0, sleep_func=slept.append)
    assert retry(flaky) == "ok" and calls[0] == 3
    assert slept == [0.25, 0.5]
    assert retry.copy().policy is retry.policy
    with pytest.raises(SessionExpiredError):  # never retried: an expired zkpy client stays expired
        KazooRetry(max_tries=5, ignore_expire=True, sleep_func=slept.append)(_expired)


def _expired() -> None:
    raise SessionExpiredError()
