"""free_ports: the ports the test helpers hand to servers, which must not collide between two calls of
one test (an ensemble's ports, then its AdminServer ports: the failure of one CI run) nor between
pytest-xdist workers."""
from __future__ import annotations

import socket

import pytest

from zkpy.testing import servers
from zkpy.testing.servers import PICK_FROM, free_ports


def test_calls_in_a_row_never_share_a_port() -> None:
    picked = [p for _ in range(200) for p in free_ports(5)]
    assert len(set(picked)) == len(picked)
    assert all(PICK_FROM <= p < servers._ephemeral_low() for p in picked)


def test_a_port_held_by_someone_else_is_skipped() -> None:
    held = socket.socket()
    try:
        held.bind(("127.0.0.1", 0))
        port = int(held.getsockname()[1])
        turns = servers._PortTurns()
        turns._low, turns._high, turns._next = port, port + 50, port  # the next pick would be the held port
        original, servers._turns = servers._turns, turns
        try:
            assert port not in free_ports(3)
        finally:
            servers._turns = original
    finally:
        held.close()


@pytest.mark.parametrize("workers", [2, 3])
def test_each_xdist_worker_picks_from_its_own_slice(monkeypatch: pytest.MonkeyPatch, workers: int) -> None:
    slices = []
    for index in range(workers):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{index}")
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", str(workers))
        slices.append(servers.xdist_share(10_000, 32_768))
    assert slices[0][0] == 10_000 and all(a[1] == b[0] for a, b in zip(slices, slices[1:]))
    assert slices[-1][1] <= 32_768 and slices[-1][1] > 32_768 - workers


def test_turns_wrap_round_their_slice() -> None:
    turns = servers._PortTurns()
    turns._low, turns._high, turns._next = 20_000, 20_200, 20_198
    assert [turns.next_port() for _ in range(4)] == [20_198, 20_199, 20_000, 20_001]
