"""What Zab's leader and learner cores share: the actions that persist an epoch or end a term,
and packet names for messages (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from zkpy.wire.quorum import PacketType


@dataclass(frozen=True, slots=True)
class SetAcceptedEpoch:
    """Persist ``acceptedEpoch`` before the next action runs."""

    epoch: int


@dataclass(frozen=True, slots=True)
class SetCurrentEpoch:
    """Persist ``currentEpoch`` before the next action runs."""

    epoch: int


@dataclass(frozen=True, slots=True)
class Failed:
    """The term is over (back to election); ``reason`` says why."""

    reason: str


def packet_name(t: int) -> str:
    try:
        return PacketType(t).name
    except ValueError:
        return f"packet type {t}"
