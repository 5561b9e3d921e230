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
    if word == "srvr":
        core = server.core
        return (f"Zookeeper version: 3.8.0-zkpy\nLatency min/avg/max: 0/0.0/0\nReceived: {core.stats.packets_received}\n"
                f"Sent: {core.stats.packets_sent}\nConnections: {len(server.protocols)}\nOutstanding: {core.outstanding}\n"
                f"Zxid: 0x{core.tree.last_processed_zxid:x}\nMode: standalone\nNode count: {core.tree.node_count()}\n")
    return ""
