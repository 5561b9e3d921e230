"""Hierarchical and weighted quorums with real processes: a 5-member ensemble (zkpy alone, and zkpy
mixed with Apache ZooKeeper 3.8, each kind leading) where a plain majority and 3.8's weighted rule
disagree, commits exactly when the weighted rule says it may.

zoo.cfg: group.1=1:2:3 (server 1 weighs 2), group.2=4, group.3=5. Servers 1, 2 and 3 are a
plain majority but only one group of three: with 4 and 5 stopped, nobody may lead and writes stop.
Servers 4 and 5 are two of five but two groups of three: with 1, 2 and 3 stopped, 5 keeps
leading and writes go on. Every member holds the same /zookeeper/config, with its group and
weight lines (a different text would make an Apache member think the config changed).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from tests.helpers.clientwait import until
from tests.helpers.ensemble_workload import patient_client

from zkpy.testing.servers import (
    ServerProcess,
    apache_available,
    cleanup_ensemble,
    restart_ensemble_member,
    server_mode,
    start_ensemble,
    wait_ensemble_serving,
)

pytestmark = pytest.mark.timeout(240)

HIERARCHY = {"group.1": "1:2:3", "group.2": "4", "group.3": "5", "weight.1": "2"}
SERVING = ("leader", "follower")
# 5 leads the second half: zkpy in the first mix, Apache in the second
KINDS = {
    "zkpy": ["zkpy"] * 5,
    "mixed-zkpy-leads": ["zkpy", "apache", "zkpy", "apache", "zkpy"],
    "mixed-apache-leads": ["apache", "zkpy", "apache", "zkpy", "apache"],
}


@pytest.fixture(params=sorted(KINDS))
def ensemble(request: pytest.FixtureRequest) -> Iterator[list[ServerProcess]]:
    kinds = KINDS[request.param]
    if "apache" in kinds and not apache_available():
        pytest.skip("Apache ZooKeeper 3.8 is not installed")
    servers = start_ensemble(kinds, HIERARCHY)
    yield servers
    cleanup_ensemble(servers)


def member(servers: list[ServerProcess], sid: int) -> ServerProcess:
    return servers[sid - 1]


def modes(servers: list[ServerProcess], sids: tuple[int, ...]) -> dict[int, str | None]:
    return {sid: server_mode(member(servers, sid)) for sid in sids}


def wait_until(pred: Callable[[], bool], what: str, deadline_s: float = 30.0) -> None:
    until(pred, what, deadline_s)


def write(servers: list[ServerProcess], sids: tuple[int, ...], path: str) -> None:
    client = patient_client(",".join(member(servers, sid).hosts for sid in sids))
    try:
        client.retry(client.create, path, path.encode())
        for sid in sids:  # a sync, then the read: every running member has it
            reader = patient_client(member(servers, sid).hosts)
            try:
                reader.sync(path)
                assert reader.get(path)[0] == path.encode(), f"{path} on server {sid}"
            finally:
                reader.stop()
                reader.close()
    finally:
        client.stop()
        client.close()


def configs(servers: list[ServerProcess], sids: tuple[int, ...]) -> set[bytes]:
    out = set()
    for sid in sids:
        client = patient_client(member(servers, sid).hosts)
        try:
            out.add(client.get("/zookeeper/config")[0])
        finally:
            client.stop()
            client.close()
    return out


def test_writes_follow_the_weighted_rule_not_the_head_count(ensemble: list[ServerProcess]) -> None:
    everyone = (1, 2, 3, 4, 5)
    [config] = configs(ensemble, everyone)
    assert b"\ngroup.1=1:2:3\ngroup.2=4\ngroup.3=5\nweight.1=2\nweight.2=1\n" in config, config
    write(ensemble, everyone, "/all-five")

    # 1, 2 and 3: a plain majority, one group of three. Nobody may lead; no write commits.
    for sid in (4, 5):
        member(ensemble, sid).stop()
    wait_until(lambda: not any(m in SERVING for m in modes(ensemble, (1, 2, 3)).values()),
               "1, 2 and 3 to stop serving")
    window = time.monotonic() + 4.0  # a majority rule would elect one of them in about a second
    while time.monotonic() < window:
        assert not any(m in SERVING for m in modes(ensemble, (1, 2, 3)).values()), modes(ensemble, (1, 2, 3))
        time.sleep(0.1)
    client = KazooClient(hosts=",".join(member(ensemble, sid).hosts for sid in (1, 2, 3)), timeout=2.0)
    with pytest.raises(KazooTimeoutError):
        client.start(timeout=2.0)  # no member serves, so no session (and no write) gets through
    client.close()

    # 5 back first: 1, 2, 3 and 5 are a quorum and elect 5 (the highest sid, equal logs); then 4
    restart_ensemble_member(member(ensemble, 5))
    wait_until(lambda: server_mode(member(ensemble, 5)) == "leader", "5 to lead")
    restart_ensemble_member(member(ensemble, 4))
    wait_ensemble_serving(ensemble)
    write(ensemble, everyone, "/back")

    # 4 and 5: two of five, two groups of three. 5 keeps leading; writes go on.
    for sid in (1, 2, 3):
        member(ensemble, sid).stop()
    write(ensemble, (4, 5), "/two-of-five")
    assert modes(ensemble, (4, 5)) == {4: "follower", 5: "leader"}
    assert configs(ensemble, (4, 5)) == {config}
