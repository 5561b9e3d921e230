"""Where the shell's output goes: text as zkCli prints it, or JSON documents (``--json``).

Invariants owned here:
- results go to ``out``, error messages to ``err`` (text mode); in JSON mode a command's lines
  are collected (``take_lines``) for its document and only documents are written;
- watch events print as zkCli's default watcher prints them (``WATCHER::`` and
  ``WatchedEvent state:... type:... path:...``), or as ``{"event": {...}}``; ``printwatches``
  and ``state_events`` filter them;
- one lock around every write, so lines from the command thread and the event thread never mix.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any, TextIO

from zkpy.wire.consts import EventType, KeeperState

_STATE_NAMES: dict[int, str] = {
    KeeperState.DISCONNECTED: "Disconnected", KeeperState.SYNC_CONNECTED: "SyncConnected",
    KeeperState.AUTH_FAILED: "AuthFailed", KeeperState.CONNECTED_READ_ONLY: "ConnectedReadOnly",
    KeeperState.SASL_AUTHENTICATED: "SaslAuthenticated", KeeperState.CLOSED: "Closed",
    KeeperState.EXPIRED: "Expired",
}
_TYPE_NAMES: dict[int, str] = {
    EventType.NONE: "None", EventType.NODE_CREATED: "NodeCreated", EventType.NODE_DELETED: "NodeDeleted",
    EventType.NODE_DATA_CHANGED: "NodeDataChanged", EventType.NODE_CHILDREN_CHANGED: "NodeChildrenChanged",
    EventType.DATA_WATCH_REMOVED: "DataWatchRemoved", EventType.CHILD_WATCH_REMOVED: "ChildWatchRemoved",
    EventType.PERSISTENT_WATCH_REMOVED: "PersistentWatchRemoved",
}


def event_line(state: int, etype: int, path: str | None) -> str:
    s = _STATE_NAMES.get(state, str(state))  # IntEnum keys: a plain int finds its name
    t = _TYPE_NAMES.get(etype, str(etype))
    return f"WatchedEvent state:{s} type:{t} path:{path if path is not None else 'null'}"


class Output:
    """Where results and events go; one lock so that lines from two threads never mix."""

    def __init__(self, json_mode: bool = False, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.json_mode = json_mode
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.events: TextIO | None = None  # where watch events go, if not to ``out``
        self.lock = threading.RLock()
        self.print_watches = True
        self.state_events = True  # print connection state events (type None)
        self._lines: list[str] = []  # the current command's text output (JSON mode)

    def line(self, text: str, error: bool = False) -> None:
        with self.lock:
            if self.json_mode:
                self._lines.append(text)
                return
            stream = self.err if error else self.out
            stream.write(text + "\n")
            stream.flush()

    def take_lines(self) -> list[str]:
        lines, self._lines = self._lines, []
        return lines

    def event(self, state: int, etype: int, path: str | None) -> None:
        if not self.print_watches or (etype == EventType.NONE and not self.state_events):
            return
        with self.lock:
            stream = self.events if self.events is not None else self.out
            if self.json_mode:
                doc = {"event": {"state": _STATE_NAMES.get(state, str(state)),
                                 "type": _TYPE_NAMES.get(etype, str(etype)), "path": path}}
                stream.write(json.dumps(doc) + "\n")
            else:
                stream.write(f"\nWATCHER::\n\n{event_line(state, etype, path)}\n")
            stream.flush()

    def document(self, doc: dict[str, Any]) -> None:
        with self.lock:
            self.out.write(json.dumps(doc) + "\n")
            self.out.flush()
