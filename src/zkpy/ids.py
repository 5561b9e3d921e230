"""Identifiers: zxids, session ids, xids, server ids.

A zxid is ``epoch << 32 | counter``: the total order of every change.
"""

from __future__ import annotations

from typing import NewType

Zxid = NewType("Zxid", int)
SessionId = NewType("SessionId", int)
Xid = NewType("Xid", int)
ServerId = NewType("ServerId", int)

MASK64 = (1 << 64) - 1  # a Java long's 64 bits, for sums that wrap and for two's-complement hex


def make_zxid(epoch: int, counter: int) -> Zxid:
    return Zxid((epoch << 32) | (counter & 0xFFFFFFFF))


def zxid_epoch(zxid: int) -> int:
    return zxid >> 32


def zxid_counter(zxid: int) -> int:
    return zxid & 0xFFFFFFFF


def initial_session_id(server_id: int, now_ms: int) -> SessionId:
    """ZooKeeper's first session id: server id in the top byte, the clock below it."""
    base = ((now_ms << 24) & MASK64) >> 8
    value = base | (server_id << 56)
    return SessionId(to_signed64(value))


def to_signed64(value: int) -> int:
    value &= MASK64
    return value - (1 << 64) if value >= 1 << 63 else value


def long_hex(value: int) -> str:
    """``Long.toHexString``: a long's two's-complement hex without leading zeros (how ZooKeeper
    prints session ids, zxids and digests)."""
    return f"{value & MASK64:x}"
