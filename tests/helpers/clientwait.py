"""Waiting in asyncio client tests: conditions with deadlines, and a listener that records states."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

_T = TypeVar("_T")

DEADLINE = 15.0


def run(make: Callable[[], Coroutine[Any, Any, _T]], deadline_s: float = 60.0) -> _T:
    """Run an async scenario on a fresh loop, failing it if it takes longer than ``deadline_s``."""

    async def bounded() -> _T:
        return await asyncio.wait_for(make(), deadline_s)

    return asyncio.run(bounded())


async def eventually(condition: Callable[[], bool | Awaitable[bool]], what: str | Callable[[], str],
                     deadline_s: float = DEADLINE, poll_s: float = 0.01) -> None:
    """Wait until ``condition()`` holds (it may be a coroutine function), or fail after ``deadline_s``
    (``what`` may be a function, to describe the state at the time of the failure)."""
    deadline = time.monotonic() + deadline_s
    while True:
        result = condition()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {deadline_s}s waiting for {what() if callable(what) else what}")
        await asyncio.sleep(poll_s)


def until(condition: Callable[[], _T], what: str, deadline_s: float = DEADLINE, poll_s: float = 0.05) -> _T:
    """Blocking: poll ``condition()`` until its value is truthy and return it, or fail after
    ``deadline_s`` (for tests that drive servers and clients from plain threads)."""
    deadline = time.monotonic() + deadline_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {deadline_s}s waiting for {what}")
        time.sleep(poll_s)


async def wait_event(event: asyncio.Event, what: str, deadline_s: float = DEADLINE) -> None:
    try:
        await asyncio.wait_for(event.wait(), deadline_s)
    except TimeoutError:
        raise AssertionError(f"timed out after {deadline_s}s waiting for {what}") from None


class StateLog:
    """A client listener that records every state it is told about, in order."""

    def __init__(self) -> None:
        self.states: list[Any] = []

    def __call__(self, state: Any) -> None:
        self.states.append(state)

    def count(self, state: Any) -> int:
        return self.states.count(state)

    async def wait_for(self, state: Any, count: int = 1, deadline_s: float = DEADLINE) -> None:
        await eventually(lambda: self.states.count(state) >= count,
                         lambda: f"state {state} x{count} (seen {self.states})", deadline_s)
