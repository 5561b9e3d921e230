"""Retrying client operations: exponential backoff with bounded jitter.

`RetryPolicy` retries a call while it raises an error whose ``retryable`` flag is True
(`ConnectionLoss`, `OperationTimeoutError`); every other exception, and always
`SessionExpiredError`, passes through at once. The last retryable error is re-raised
when the policy gives up.

Invariants this module owns:

- the delay before retry ``n`` (n = 1, 2, ...) is ``min(delay * backoff**(n-1), max_delay)``
  scaled by a factor drawn from ``[1 - jitter, 1 + jitter]`` with the injected ``rng``, and
  never exceeds ``max_delay``;
- ``max_tries`` counts calls, not retries: ``max_tries=3`` calls ``fn`` at most three times
  (``None``: no limit);
- ``deadline`` (seconds, measured with the injected ``clock`` from the first call) is never
  slept past: when the next delay would end after it, the last error is raised instead;
- a policy keeps no state between calls, so one policy may serve many concurrent callers.

The clock, both sleeps and the RNG are injected, so tests replay a run exactly.

kazoo's ``KazooRetry`` arguments (``max_tries`` with -1 for no limit, ``delay``, ``backoff``,
``max_jitter``, ``max_delay``, ``deadline``, ``ignore_expire``, ``sleep_func``) map onto a
`RetryPolicy` with `retry_policy` (a dict, as kazoo's ``connection_retry``/``command_retry``
take) and `KazooRetry` (the blocking callable kazoo code builds). kazoo's ``max_tries`` also
counts calls. ``ignore_expire`` has no effect: an expired zkpy client does not get a new
session, so retrying after SessionExpiredError cannot help; ``interrupt`` is refused.
"""

from __future__ import annotations

import asyncio
import inspect
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ParamSpec, TypeVar

from zkpy.errors import SessionExpiredError

__all__ = ["KazooRetry", "RetryPolicy", "is_retryable", "retry_policy"]

P = ParamSpec("P")
T = TypeVar("T")


def is_retryable(exc: BaseException) -> bool:
    """True for errors a retry may cure (``retryable`` is True); never for SessionExpiredError."""
    if isinstance(exc, SessionExpiredError):
        return False
    return getattr(exc, "retryable", False) is True


class RetryPolicy:
    """Backoff with jitter around an operation.

    ``await policy(zk.create, "/x", b"")`` for coroutine functions (`AsyncClient`);
    ``policy.run_sync(zk.create, "/x", b"")`` for blocking ones (`Client`).
    """

    __slots__ = ("max_tries", "delay", "backoff", "max_delay", "jitter", "deadline",
                 "clock", "sleep", "blocking_sleep", "rng")

    def __init__(
        self,
        max_tries: int | None = None,
        delay: float = 0.1,
        backoff: float = 2.0,
        max_delay: float = 30.0,
        jitter: float = 0.1,
        deadline: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        rng: random.Random | None = None,
        *,
        blocking_sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        """Raises ValueError for a negative delay, a backoff below 1, a jitter outside [0, 1],
        a max_tries below 1 or a negative deadline."""
        if max_tries is not None and max_tries < 1:
            raise ValueError(f"max_tries must be at least 1 (or None), not {max_tries}")
        if delay < 0 or max_delay < 0:
            raise ValueError("delay and max_delay must not be negative")
        if backoff < 1.0:
            raise ValueError(f"backoff must be at least 1.0, not {backoff}")
        if not 0.0 <= jitter <= 1.0:
            raise ValueError(f"jitter is a fraction in [0, 1], not {jitter}")
        if deadline is not None and deadline < 0:
            raise ValueError(f"deadline must not be negative, not {deadline}")
        self.max_tries = max_tries
        self.delay = delay
        self.backoff = backoff
        self.max_delay = max_delay
        self.jitter = jitter
        self.deadline = deadline
        self.clock = clock
        self.sleep = sleep
        self.blocking_sleep = blocking_sleep
        self.rng = rng if rng is not None else random.Random()

    def __repr__(self) -> str:
        return (f"RetryPolicy(max_tries={self.max_tries}, delay={self.delay}, backoff={self.backoff}, "
                f"max_delay={self.max_delay}, jitter={self.jitter}, deadline={self.deadline})")

    # -- the pure part: how long to wait, and whether to wait at all ---------------------------

    def base_delay(self, retry: int) -> float:
        """The delay before retry number ``retry`` (1-based), before jitter."""
        if retry < 1:
            raise ValueError(f"retries are numbered from 1, not {retry}")
        # backoff ** (retry - 1) overflows for large retry counts; cap it first.
        try:
            grown = self.delay * self.backoff ** (retry - 1)
        except OverflowError:
            grown = self.max_delay
        return min(grown, self.max_delay)

    def next_delay(self, retry: int) -> float:
        """The jittered delay before retry number ``retry``; draws once from ``rng``."""
        base = self.base_delay(retry)
        factor = 1.0 + self.rng.uniform(-self.jitter, self.jitter) if self.jitter else 1.0
        return min(max(base * factor, 0.0), self.max_delay)

    def _plan(self, exc: Exception, tries: int, started: float) -> float:
        """After call number ``tries`` raised ``exc``: the delay to sleep, or re-raise ``exc``."""
        if not is_retryable(exc):
            raise exc
        if self.max_tries is not None and tries >= self.max_tries:
            raise exc
        wait = self.next_delay(tries)
        if self.deadline is not None and (self.clock() - started) + wait > self.deadline:
            raise exc
        return wait

    # -- the shells ---------------------------------------------------------------------------

    async def __call__(self, fn: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """Await ``fn(*args, **kwargs)``, retrying retryable errors.

        Raises whatever ``fn`` raises: at once if it is not retryable, else once the tries or
        the deadline are used up (the last error)."""
        started = self.clock()
        tries = 0
        while True:
            tries += 1
            try:
                result: Any = fn(*args, **kwargs)
                if inspect.isawaitable(result):
                    result = await result
                return result  # type: ignore[no-any-return]
            except Exception as exc:  # noqa: BLE001 - _plan re-raises what must not be retried
                wait = self._plan(exc, tries, started)
            await self.sleep(wait)

    def run_sync(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Call ``fn(*args, **kwargs)`` (blocking), retrying retryable errors with
        ``blocking_sleep`` between tries. Raises as `__call__` does."""
        started = self.clock()
        tries = 0
        while True:
            tries += 1
            try:
                return fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - _plan re-raises what must not be retried
                wait = self._plan(exc, tries, started)
            self.blocking_sleep(wait)


def _from_kazoo(max_tries: int | None = 1, delay: float = 0.1, backoff: float = 2.0, max_jitter: float = 0.4,
                max_delay: float = 60.0, ignore_expire: bool = True,
                sleep_func: Callable[[float], object] = time.sleep, deadline: float | None = None) -> RetryPolicy:
    del ignore_expire  # see the module doc
    tries = None if max_tries is None or max_tries < 0 else max(1, max_tries)
    return RetryPolicy(max_tries=tries, delay=delay, backoff=max(1.0, backoff), max_delay=max_delay,
                       jitter=max(0.0, min(1.0, max_jitter)), deadline=deadline, blocking_sleep=sleep_func)


def retry_policy(arg: RetryPolicy | KazooRetry | Mapping[str, Any] | None) -> RetryPolicy | None:
    """A client's ``connection_retry``/``command_retry`` argument as a `RetryPolicy`: a policy
    as it is, a `KazooRetry`'s policy, or a dict of kazoo's ``KazooRetry`` arguments.

    Raises TypeError for an unknown argument name (``interrupt`` included)."""
    if arg is None or isinstance(arg, RetryPolicy):
        return arg
    if isinstance(arg, KazooRetry):
        return arg.policy
    return _from_kazoo(**arg)


class KazooRetry:
    """kazoo's ``KazooRetry``: ``KazooRetry(max_tries=3)(zk.get, "/x")`` calls a blocking
    function under the `RetryPolicy` its kazoo arguments make (see the module doc); the last
    retryable error is raised when it gives up (kazoo raises RetryFailedError)."""

    def __init__(self, max_tries: int | None = 1, delay: float = 0.1, backoff: float = 2.0,
                 max_jitter: float = 0.4, max_delay: float = 60.0, ignore_expire: bool = True,
                 sleep_func: Callable[[float], object] = time.sleep, deadline: float | None = None) -> None:
        self.policy = _from_kazoo(max_tries, delay, backoff, max_jitter, max_delay, ignore_expire,
                                  sleep_func, deadline)

    def __call__(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return self.policy.run_sync(fn, *args, **kwargs)

    def copy(self) -> KazooRetry:
        """kazoo's ``copy``: a policy keeps no state between calls, so this is the same policy."""
        clone = KazooRetry.__new__(KazooRetry)
        clone.policy = self.policy
        return clone
