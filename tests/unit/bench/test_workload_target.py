"""``bench.workload.Target.parse``: the server a ``--hosts`` connect string names, read by the
client's parser."""

from __future__ import annotations

import pytest
from bench.workload import Target


def test_the_first_server_of_a_connect_string_is_the_target() -> None:
    assert (Target.parse("h:2182,g:2183", 7).host, Target.parse("h:2182").port) == ("h", 2182)
    assert Target.parse("h:2182", 7).pid == 7
    assert (Target.parse("[::1]:2183").host, Target.parse("[::1]:2183").port) == ("::1", 2183)
    assert (Target.parse(":2184").host, Target.parse(":2184").port) == ("127.0.0.1", 2184)
    assert Target.parse("h").port == 2181


def test_a_malformed_connect_string_is_refused() -> None:
    with pytest.raises(ValueError, match="has no valid port"):
        Target.parse("h:x")
