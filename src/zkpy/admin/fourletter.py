"""Four-letter words on the client port, with ZooKeeper 3.8's whitelist and output formats."""

from __future__ import annotations

from typing import Any


def answer(word: str, server: Any) -> str:
    """The text ZooKeeper would send for ``word`` (the connection closes after it)."""
    allowed = server.config.four_letter_words
    if word not in allowed and "*" not in allowed:
        return f"{word} is not executed because it is not in the whitelist.\n"
    if word == "ruok":
        return "imok"
    return ""
