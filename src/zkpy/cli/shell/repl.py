"""The interactive front end of ``zkpy shell`` (prompt_toolkit).

- the prompt is zkCli's: ``[zk: HOSTS(STATE) N] `` where N is the next history number;
- TAB completes command names (first word), their options, znode paths (a word starting with
  ``/``: the children of its parent, asked of the server then, for at most 2 s) and
  ``addWatch -m`` modes;
- the line history is kept in ``$ZKPY_SHELL_HISTORY`` (default ``~/.zkpy_shell_history``),
  searched with Ctrl-R and suggested as you type; ``history`` and ``redo`` work on the session's
  own numbered list, as in zkCli;
- watch events print above the prompt as they arrive (``patch_stdout``), a command's output
  in order, before the next prompt;
- Ctrl-C drops the line being typed (or abandons a running command), Ctrl-D (or ``quit``)
  ends the shell.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from prompt_toolkit import PromptSession
from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.patch_stdout import patch_stdout

from zkpy.client.core import ClientState
from zkpy.errors import ZookeeperError

from . import parse as P
from .parse import Quit
from .session import Shell

_MODES = ("PERSISTENT", "PERSISTENT_RECURSIVE")
COMPLETION_TIMEOUT_S = 2.0


class ShellCompleter(Completer):
    """Commands, znode paths (from the live tree) and watch modes."""

    def __init__(self, shell: Shell) -> None:
        self.shell = shell

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        words = text.split()
        current = "" if not words or text[-1:].isspace() else words[-1]
        before = words if current == "" else words[:-1]
        if not before:
            for name in P.COMMANDS:
                if name.startswith(current):
                    yield Completion(name + " ", start_position=-len(current), display=name)
            return
        if before[-1] == "-m" and before[0] == "addWatch":
            for mode in _MODES:
                if mode.startswith(current):
                    yield Completion(mode, start_position=-len(current))
            return
        spec = P.SPECS.get(before[0])
        if current.startswith("-") and spec is not None:
            for letter in spec.flags + spec.valued:
                if f"-{letter}".startswith(current):
                    yield Completion(f"-{letter} ", start_position=-len(current), display=f"-{letter}")
            return
        if current.startswith("/"):
            yield from self._paths(current)

    def _paths(self, current: str) -> Iterable[Completion]:
        parent, _, prefix = current.rpartition("/")
        parent = parent or "/"
        client = self.shell.client
        if client is None or not client.state.is_connected:
            return
        try:  # a server that does not answer must not freeze the prompt
            names = client.get_children_async(parent).result(timeout=COMPLETION_TIMEOUT_S)
            children = sorted(name for name in names if isinstance(name, str))  # (no stat asked for)
        except (ZookeeperError, ValueError, TimeoutError):
            return
        base = "" if parent == "/" else parent
        for child in children:
            if child.startswith(prefix):
                yield Completion(f"{base}/{child}", start_position=-len(current), display=child)


def _history() -> History:
    path = os.environ.get("ZKPY_SHELL_HISTORY") or os.path.expanduser("~/.zkpy_shell_history")
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError:
        return InMemoryHistory()
    return FileHistory(path)


# the client's states as zkCli's prompt names them (ZooKeeper.States)
_PROMPT_STATES = {ClientState.CONNECTING: "CONNECTING", ClientState.SUSPENDED: "CONNECTING",
                  ClientState.CONNECTED: "CONNECTED", ClientState.CONNECTED_READ_ONLY: "CONNECTEDREADONLY",
                  ClientState.EXPIRED: "CLOSED", ClientState.AUTH_FAILED: "AUTH_FAILED", ClientState.CLOSED: "CLOSED"}


def prompt_text(shell: Shell) -> str:
    client = shell.client
    state = "CLOSED" if client is None or client.closed else _PROMPT_STATES[client.state]
    return f"[zk: {shell.hosts}({state}) {len(shell.history)}] "


def run_interactive(shell: Shell) -> int:
    """Read, run and print until quit or end of input; the exit status (0)."""
    session: PromptSession[str] = PromptSession(history=_history(), completer=ShellCompleter(shell),
                                                auto_suggest=AutoSuggestFromHistory(), complete_while_typing=False)
    with patch_stdout(raw=True):
        # patch_stdout swaps sys.stdout for a proxy that prints above the prompt: events, which
        # come at any time, go there; a command's output is written while no prompt is shown
        shell.output.events = sys.stdout
        while True:
            try:
                line = session.prompt(lambda: prompt_text(shell))
            except KeyboardInterrupt:
                continue
            except EOFError:
                break
            try:
                shell.execute(line)
            except Quit:
                break
            except KeyboardInterrupt:  # Ctrl-C during a command: the request is abandoned
                print("Interrupted", file=sys.__stdout__, flush=True)
            shell.drain()
    shell.close_session()
    return 0
