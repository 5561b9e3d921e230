"""Java ``.properties`` text as ``java.util.Properties.load`` reads it, and as ZooKeeper's
``QuorumPeerConfig`` then takes it (key and value trimmed), for zoo.cfg and the dynamic config file.

What Properties.load does, in the order it does it: a line ending in an odd number of backslashes
goes on in the next line, whose leading blanks are dropped; a line whose first non-blank character
is ``#`` or ``!`` is a comment; the key runs to the first unescaped ``=``, ``:`` or blank (space,
tab, form feed), then blanks, one ``=`` or ``:`` and blanks again separate it from the value; ``\\t``,
``\\n``, ``\\r``, ``\\f`` and ``\\uXXXX`` are escapes and a backslash before any other character is
that character; a later line for the same key wins. So ``tickTime 3000``, ``tickTime:3000`` and
``tickTime = 3000`` all set tickTime, as in ZooKeeper.
"""

from __future__ import annotations

_BLANK = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesError(ValueError):
    """Text Properties.load refuses (a malformed ``\\uXXXX``): the message says where."""


def parse_properties(text: str) -> dict[str, str]:
    """The keys and values of ``text``, each trimmed as ZooKeeper trims them."""
    out: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key, value = _split(line)
        try:
            out[_unescape(key).strip()] = _unescape(value).strip()
        except PropertiesError as exc:
            raise PropertiesError(f"line {number}: {exc}") from None
    return out


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(number of the first natural line, the logical line without its continuations' backslashes),
    comments and blank lines left out."""
    lines = []
    natural = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    i = 0
    while i < len(natural):
        first = i
        line = natural[i].lstrip(_BLANK)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(natural):
            line = line[:-1] + natural[i].lstrip(_BLANK)
            i += 1
        if _continues(line):  # a backslash on the last line continues into nothing
            line = line[:-1]
        lines.append((first + 1, line))
    return lines


def _continues(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split(line: str) -> tuple[str, str]:
    """The raw (still escaped) key and value of a logical line."""
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _BLANK:
            break
        i += 1
    key = line[:i]
    j = i
    while j < n and line[j] in _BLANK:
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in _BLANK:
            j += 1
    return key, line[j:]


def _unescape(raw: str) -> str:
    if "\\" not in raw:
        return raw
    out = []
    i, n = 0, len(raw)
    while i < n:
        ch = raw[i]
        i += 1
        if ch != "\\" or i >= n:
            out.append(ch)
            continue
        ch = raw[i]
        i += 1
        if ch == "u":
            digits = raw[i:i + 4]
            if len(digits) < 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise PropertiesError(f"malformed \\uxxxx encoding: \\u{digits}")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(ch, ch))
    return "".join(out)
