"""Progress bars for long operator commands (rich), drawn on stderr and only on a terminal.

Invariants: a bar is drawn only when stderr is a terminal and the command's own output does not
go to a terminal too (where the two would interleave); it writes to stderr alone, never into the
command's output (the JSON of ``zkpy export``, the lines of ``logdump``/``snapdump``); redraws are
throttled (at most ``REFRESH_PER_SECOND``, and updates closer than ``MIN_UPDATE_S`` are dropped);
it is transient: nothing is left on the terminal when it closes. While a bar is drawn, log
handlers that write to stderr write through it (their lines appear above the bar, not across it)
and get their stream back when it closes. rich is imported only when a bar is drawn.
"""

from __future__ import annotations

import logging
import sys
import time
from types import TracebackType
from typing import Any, TextIO

REFRESH_PER_SECOND = 4
MIN_UPDATE_S = 0.1


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def progress_wanted(output_to_stdout: bool) -> bool:
    """Whether to draw a bar: stderr is a terminal, and the output (stdout, when
    ``output_to_stdout``) is not one."""
    return _isatty(sys.stderr) and not (output_to_stdout and _isatty(sys.stdout))


class ProgressBar:
    """One bar: ``update(done, total, description)``; a no-op when not ``enabled``."""

    def __init__(self, description: str, enabled: bool, total: int | None = None) -> None:
        self.enabled = enabled
        self._description = description
        self._total = total
        self._last = 0.0
        self._progress: Any = None
        self._task: Any = None
        self._handlers: list[tuple[logging.StreamHandler[Any], Any]] = []

    def __enter__(self) -> ProgressBar:
        if self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                TimeRemainingColumn(), console=Console(file=sys.stderr), transient=True,
                refresh_per_second=REFRESH_PER_SECOND, redirect_stdout=False, redirect_stderr=True)
            stderr = sys.stderr
            self._progress.start()  # sys.stderr is now rich's proxy: what it gets goes above the bar
            for handler in logging.getLogger().handlers:
                if isinstance(handler, logging.StreamHandler) and handler.stream is stderr:
                    self._handlers.append((handler, handler.setStream(sys.stderr)))
            self._task = self._progress.add_task(self._description, total=self._total)
        return self

    def update(self, done: int, total: int | None = None, description: str | None = None) -> None:
        if self._progress is None:
            return
        now = time.monotonic()
        if description is None and now - self._last < MIN_UPDATE_S and (total is None or done < total):
            return
        self._last = now
        fields: dict[str, Any] = {"completed": done}
        if total is not None:
            fields["total"] = total
        if description is not None:
            fields["description"] = description
        self._progress.update(self._task, **fields)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._progress is not None:
            for handler, stream in self._handlers:
                handler.setStream(stream)
            self._handlers.clear()
            self._progress.stop()
            self._progress = None


class RecoveryBar:
    """The ``progress`` callback of ``zkpy.storage.recovery.recover`` for ``zkpy server``: a bar
    on a terminal once recovery has run for ``DELAY_S`` (a small data dir draws nothing), closed
    when recovery reports "done"."""

    DELAY_S = 0.5
    LABELS = {"snapshot": "loading snapshot (bytes)", "replay": "replaying txn logs"}

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._started: float | None = None
        self._bar: ProgressBar | None = None
        self._phase = ""

    def __call__(self, phase: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if phase == "done":
            if self._bar is not None:
                self._bar.__exit__(None, None, None)
            self._bar, self._started = None, None
            return
        now = time.monotonic()
        if self._started is None:
            self._started = now
        if self._bar is None:
            if now - self._started < self.DELAY_S:
                return
            self._bar = ProgressBar(self.LABELS.get(phase, phase), True, total).__enter__()
            self._phase = phase
        changed = phase != self._phase
        self._phase = phase
        self._bar.update(done, total, self.LABELS.get(phase, phase) if changed else None)
