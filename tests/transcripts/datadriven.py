"""Transcript files, in the manner of etcd-raft's ``testdata/*.txt`` (cockroachdb/datadriven).

A file is a series of cases separated by blank lines. A case is optional ``#`` comment lines,
one command, a ``----`` line, and the transcript that the command produced: one line per
effect, or ``ok`` when there was none. The test runs every command in order against one
driver and compares the whole file; a change in behaviour shows up as a diff of the
transcript. ``ZKPY_REWRITE_TRANSCRIPTS=1`` writes the new transcripts into the files instead,
for review in ``git diff``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SEPARATOR = "----"
REWRITE = "ZKPY_REWRITE_TRANSCRIPTS"


@dataclass
class Case:
    comments: list[str]
    command: str
    expected: list[str]
    line: int


def parse(text: str, source: str) -> list[Case]:
    cases: list[Case] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        start = i
        comments = []
        while i < len(lines) and lines[i].startswith("#"):
            comments.append(lines[i])
            i += 1
        if i >= len(lines) or not lines[i].strip():
            cases.append(Case(comments, "", [], start + 1))  # a comment on its own
            continue
        command = lines[i].strip()
        i += 1
        if i >= len(lines) or lines[i] != SEPARATOR:
            raise ValueError(f"{source}:{i + 1}: expected {SEPARATOR!r} after the command {command!r}")
        i += 1
        expected = []
        while i < len(lines) and lines[i].strip():
            expected.append(lines[i])
            i += 1
        cases.append(Case(comments, command, expected, start + 1))
    return cases


def render(cases: list[Case], outputs: list[list[str]]) -> str:
    blocks = []
    for case, out in zip(cases, outputs):
        if not case.command:
            blocks.append("\n".join(case.comments))
            continue
        blocks.append("\n".join([*case.comments, case.command, SEPARATOR, *(out or ["ok"])]))
    return "\n\n".join(blocks) + "\n"


def run_file(path: Path, run: Callable[[str], list[str]]) -> None:
    """Run every command of ``path`` through ``run`` and compare (or rewrite) the transcript."""
    text = path.read_text()
    cases = parse(text, str(path))
    outputs: list[list[str]] = []
    for case in cases:
        if not case.command:
            outputs.append([])
            continue
        try:
            outputs.append(run(case.command))
        except Exception as exc:
            raise AssertionError(f"{path}:{case.line}: {case.command!r} failed: {exc!r}") from exc
    actual = render(cases, outputs)
    if os.environ.get(REWRITE):
        path.write_text(actual)
        return
    assert actual.splitlines() == text.splitlines(), (
        f"{path.name}: the transcript changed (rerun with {REWRITE}=1 to rewrite it, then review the diff)")


class Driver:
    """A transcript driver: ``run(command)`` calls the driver's ``cmd_<verb>`` (a dash in the
    verb becomes an underscore) with the command's other words, and returns its lines."""

    def run(self, command: str) -> list[str]:
        verb, *args = command.split()
        handler = getattr(self, "cmd_" + verb.replace("-", "_"), None)
        if handler is None:
            raise ValueError(f"unknown command {verb!r}")
        lines: list[str] = handler(*args) or []
        return lines
