"""Path rules, identical to ZooKeeper's PathUtils.validatePath.

Java strings are UTF-16, so a code point above U+FFFF reaches ZooKeeper as a surrogate
pair, which it rejects; we reject it too.
"""

from __future__ import annotations

import re

# a character PathUtils refuses (NUL, controls, surrogates, the private use area, U+FFF0 on)
_BAD_CHAR = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\U0010ffff]")


def path_error(path: object) -> str | None:
    """Why ``path`` is not a valid znode path, or None when it is.

    A path without ``//``, without ``/.`` and without a refused character is valid whatever else
    it holds; that test is a few C-level scans, so only a suspect path takes the character walk
    (``_walk``) that names the first fault as ZooKeeper does."""
    if (type(path) is str and len(path) > 1 and path[0] == "/" and path[-1] != "/" and "//" not in path
            and "/." not in path and _BAD_CHAR.search(path) is None):
        return None
    return _walk(path)


def _walk(path: object) -> str | None:
    if path is None:
        return "Path cannot be null"
    if not isinstance(path, str):
        return "Path must be a string"
    n = len(path)
    if n == 0:
        return "Path length must be > 0"
    if path[0] != "/":
        return "Path must start with / character"
    if n == 1:
        return None
    if path[-1] == "/":
        return "Path must not end with / character"
    last = "/"
    for i in range(1, n):
        c = path[i]
        o = ord(c)
        if o == 0:
            return f"null character not allowed @{i}"
        if c == "/" and last == "/":
            return f"empty node name specified @{i}"
        if c == "." and last == "." and path[i - 2] == "/" and (i + 1 == n or path[i + 1] == "/"):
            return f"relative paths not allowed @{i}"
        if c == "." and path[i - 1] == "/" and (i + 1 == n or path[i + 1] == "/"):
            return f"relative paths not allowed @{i}"
        if 0 < o <= 0x1F or 0x7F <= o <= 0x9F or 0xD800 <= o <= 0xF8FF or o >= 0xFFF0:
            return f"invalid character @{i}"
        last = c
    return None


def parent_of(path: str) -> str:
    i = path.rfind("/")
    return "/" if i <= 0 else path[:i]


def basename(path: str) -> str:
    return path[path.rfind("/") + 1 :]


def join(parent: str, child: str) -> str:
    return "/" + child if parent == "/" else parent + "/" + child


def ancestors(path: str) -> list[str]:
    """``path`` and every ancestor up to ``/``, nearest first."""
    out = [path]
    while path != "/":
        path = parent_of(path)
        out.append(path)
    return out
