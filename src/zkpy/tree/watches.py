"""Watch tables with ZooKeeper's trigger rules (WatchManager), per watcher and path.

Two tables exist, data and child, as in ZooKeeper: getData/exists register in the data
table, getChildren in the child table, addWatch in both. A registration has mode bits:
STANDARD fires once; PERSISTENT fires until removed; RECURSIVE also fires for every
descendant, except NodeChildrenChanged. Unlike 3.8 (ZOOKEEPER-4466), a standard and a
persistent watch on one path coexist instead of overwriting each other.
"""

from __future__ import annotations

from collections.abc import Hashable

from zkpy.wire.consts import EventType

from .paths import ancestors

STANDARD = 1
PERSISTENT = 2
RECURSIVE = 4


class WatchTable:
    """path -> {watcher: mode bits}, and the reverse index for dropping a watcher."""

    __slots__ = ("by_path", "by_watcher", "recursive")

    def __init__(self) -> None:
        self.by_path: dict[str, dict[Hashable, int]] = {}
        self.by_watcher: dict[Hashable, set[str]] = {}
        self.recursive = 0

    def add(self, path: str, watcher: Hashable, mode: int) -> None:
        entry = self.by_path.setdefault(path, {})
        old = entry.get(watcher, 0)
        if mode & RECURSIVE and not old & RECURSIVE:
            self.recursive += 1
        entry[watcher] = old | mode
        self.by_watcher.setdefault(watcher, set()).add(path)

    def contains(self, path: str, watcher: Hashable) -> bool:
        return watcher in self.by_path.get(path, ())

    def remove(self, path: str, watcher: Hashable) -> bool:
        entry = self.by_path.get(path)
        if not entry or watcher not in entry:
            return False
        self._drop(path, entry, watcher)
        return True

    def _drop(self, path: str, entry: dict[Hashable, int], watcher: Hashable) -> None:
        if entry.pop(watcher) & RECURSIVE:
            self.recursive -= 1
        if not entry:
            del self.by_path[path]
        paths = self.by_watcher.get(watcher)
        if paths is not None:
            paths.discard(path)
            if not paths:
                del self.by_watcher[watcher]

    def drop_watcher(self, watcher: Hashable) -> None:
        for path in list(self.by_watcher.get(watcher, ())):
            self._drop(path, self.by_path[path], watcher)

    def trigger(self, path: str, etype: int, suppress: set[Hashable] | None = None) -> set[Hashable]:
        """Watchers to notify of ``etype`` at ``path``; one-time registrations are consumed."""
        fired: set[Hashable] = set()
        lookup = ancestors(path) if self.recursive else (path,)
        for i, p in enumerate(lookup):
            entry = self.by_path.get(p)
            if not entry:
                continue
            for watcher, mode in list(entry.items()):
                if mode & RECURSIVE and etype != EventType.NODE_CHILDREN_CHANGED:
                    fired.add(watcher)
                if i == 0 and mode & (STANDARD | PERSISTENT):
                    fired.add(watcher)
                    if mode & STANDARD:
                        rest = mode & ~STANDARD
                        if rest:
                            entry[watcher] = rest
                        else:
                            self._drop(p, entry, watcher)
        if suppress:
            fired -= suppress
        return fired

    def count(self) -> int:
        return sum(len(v) for v in self.by_path.values())
