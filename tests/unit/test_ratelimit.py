"""zkpy.ratelimit: repeated log lines from one peer grow the log by a bounded number of lines."""

from __future__ import annotations

from zkpy.ratelimit import LogLimiter


def test_a_burst_per_window_then_a_summary_of_what_was_suppressed() -> None:
    limiter = LogLimiter(window_ms=1000, burst=3)
    written = [limiter.line("k", t, "bad packet") for t in range(1000)]
    assert [w for w in written if w is not None] == ["bad packet"] * 3
    assert limiter.line("k", 1000, "bad packet") == "bad packet (997 similar lines suppressed)"
    assert limiter.line("k", 1001, "bad packet") == "bad packet"


def test_keys_are_limited_apart() -> None:
    limiter = LogLimiter(window_ms=1000, burst=1)
    assert limiter.check(("auth", "10.0.0.1"), 0) == 0
    assert limiter.check(("auth", "10.0.0.1"), 1) is None
    assert limiter.check(("auth", "10.0.0.2"), 1) == 0
    assert limiter.check(("sasl", "10.0.0.1"), 1) == 0


def test_the_number_of_keys_is_bounded() -> None:
    limiter = LogLimiter(window_ms=1000, burst=1, max_keys=10)
    for i in range(1000):
        limiter.check(("auth", i), 5)
        assert len(limiter) <= 10
    for i in range(1000):  # a later window: the stale keys go first
        limiter.check(("auth", i), 2000)
        assert len(limiter) <= 10


def test_log_writes_through_the_callable() -> None:
    lines: list[str] = []
    limiter = LogLimiter(window_ms=10, burst=2)
    for t in range(100):
        limiter.log(lines.append, "k", t // 50 * 10, "x")
    assert lines == ["x", "x", "x (48 similar lines suppressed)", "x"]
