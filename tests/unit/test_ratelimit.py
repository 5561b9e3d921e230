"""zkpy.ratelimit: repeated log lines from one peer grow the log by a bounded number of lines."""

from __future__ import annotations

from zkpy.ratelimit import LogLimiter


def test_similar_lines_a_burst_per_window_then_a_summary_of_what_was_suppressed() -> None:
    limiter = LogLimiter(window_ms=1000, burst=3)
    written = [limiter.line("bad", "10.0.0.1", t, f"bad packet from 10.0.0.1:{40000 + t}") for t in range(1000)]
    assert [w for w in written if w is not None] == [f"bad packet from 10.0.0.1:{40000 + t}" for t in range(3)]
    assert limiter.line("bad", "10.0.0.1", 1000, "bad packet from 10.0.0.1:1") == \
        "bad packet from 10.0.0.1:1 (997 similar lines suppressed)"
    assert limiter.line("bad", "10.0.0.1", 1001, "bad packet from 10.0.0.1:2") == "bad packet from 10.0.0.1:2"


def test_kinds_peers_and_different_texts_are_limited_apart() -> None:
    limiter = LogLimiter(window_ms=1000, burst=1)
    assert limiter.line("auth", "10.0.0.1", 0, "x") == "x"
    assert limiter.line("auth", "10.0.0.1", 1, "x") is None
    assert limiter.line("auth", "10.0.0.2", 1, "x") == "x"
    assert limiter.line("sasl", "10.0.0.1", 1, "x") == "x"
    assert limiter.line("auth", "10.0.0.1", 1, "y") == "y"


def test_varying_the_text_does_not_get_around_the_peers_budget() -> None:
    limiter = LogLimiter(window_ms=60_000, burst=10, peer_burst=50, peer_per_s=5)
    written = [limiter.line("len", "10.0.0.1", 0, f"Len error: packet length {-n}") for n in range(1000)]
    assert sum(w is not None for w in written) == 50
    assert limiter.line("len", "10.0.0.2", 0, "Len error: packet length -1") is not None  # another peer
    # a second later the peer has 5 lines more; the first says what was suppressed
    later = [limiter.line("len", "10.0.0.1", 1000, f"Len error: packet length {-n}") for n in range(2000, 2010)]
    assert sum(w is not None for w in later) == 5
    assert later[0] == "Len error: packet length -2000 (950 lines from 10.0.0.1 suppressed)"


def test_the_number_of_keys_is_bounded() -> None:
    limiter = LogLimiter(window_ms=1000, burst=1, max_keys=10)
    for i in range(1000):
        limiter.line("auth", i, 5, "x")
        assert len(limiter) <= 10
    for i in range(1000):  # a later window: the stale keys go first
        limiter.line("auth", i, 2000, f"x{i}")
        assert len(limiter) <= 10


def test_log_writes_through_the_callable() -> None:
    lines: list[str] = []
    limiter = LogLimiter(window_ms=10, burst=2)
    for t in range(100):
        limiter.log(lines.append, "k", "p", t // 50 * 10, "x")
    assert lines == ["x", "x", "x (48 similar lines suppressed)", "x"]
