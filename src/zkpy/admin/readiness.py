"""Live and ready, from a server's ``srvr`` answer: what ``zkpy probe`` (an ``exec`` probe) and the
AdminServer's ``/live`` and ``/ready`` (``httpGet`` probes) say.

Ready means serving: a standalone server, or a synchronised member (leader, follower, observer)
of an ensemble with a quorum; a read-only server, one starting or one without a quorum is live and
not ready."""

from __future__ import annotations

READY, NOT_READY, NO_ANSWER = 0, 1, 3  # zkpy probe's exit status (2 is click's usage error)
SERVING_MODES = ("standalone", "leader", "follower", "observer")


def verdict(kind: str, answer: str | None) -> tuple[int, str]:
    """(status, the line to print) for ``live`` or ``ready`` given the ``srvr`` answer (None: no
    answer)."""
    if answer is None:
        return NO_ANSWER, "no answer"
    if kind == "live":
        return READY, "live"
    mode = next((line.split(":", 1)[1].strip() for line in answer.splitlines() if line.startswith("Mode:")), None)
    if mode in SERVING_MODES:
        return READY, f"ready: {mode}"
    if mode is not None:
        return NOT_READY, f"not ready: {mode}"
    if "not in the whitelist" in answer:
        return NOT_READY, "not ready: srvr is not in 4lw.commands.whitelist"
    return NOT_READY, "not ready: not serving (starting, or no quorum)"
