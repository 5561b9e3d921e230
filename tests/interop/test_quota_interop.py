"""Quotas against Apache ZooKeeper 3.8: one ``zkCli.sh`` script of setquota, listquota and delquota
with creates, setDatas, ephemerals and deletes past the limits gives the same transcript on zkpy
and on Apache, with ``enforceQuota=true`` (hard limits refuse with QuotaExceeded) and without it
(every write goes through, the stats count all the same); the per-namespace quota figures in
``mntr`` agree afterwards; a multi is checked op by op as Apache checks it; and in a mixed
ensemble every member keeps the same stats and either kind of leader enforces the limit."""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import MarshallingError, QuotaExceededError, RolledBackError
from tests.conftest import require_apache
from tests.interop.test_zkcli import ZKCLI, normalise, run_zkcli

from zkpy.testing.servers import (
    ServerProcess,
    cleanup_ensemble,
    ensemble_leader,
    four_letter,
    restart_ensemble_member,
    start_apache,
    start_ensemble,
    start_zkpy,
    wait_ensemble_serving,
)

# One command a line; PORT becomes the server's port (for ``connect`` after ``close``, which ends
# the session and so removes its ephemeral). The server refuses no quota: zkCli refuses nested
# ones and those under /zookeeper/quota, while a quota on /zookeeper itself counts the system
# nodes, its own stats node included, on both.
SCRIPT = """
create /q
create /q/a x
setquota -n 3 /missing
setquota -n 3 /zookeeper/quota/q
setquota /q
setquota -n 0 /q
setquota -b -1 /q
setquota -n abc /q
listquota /q
setquota -n 3 /q
listquota /q
get /zookeeper/quota/q/zookeeper_limits
get /zookeeper/quota/q/zookeeper_stats
create /q/b yy
create /q/c zzz
create /q/d 1
listquota /q
setquota -N 4 /q
listquota /q
create /q/e 1
create -s /q/seq- 1
set /q/a 0123456789
delete /q/d
create /q/f 1
create /q/g 1
listquota /q
delete /q/b
create -e /q/eph ephemeral
listquota /q
close
connect 127.0.0.1:PORT
listquota /q
get -s /zookeeper/quota/q/zookeeper_stats
create /r
create /r/s
setquota -b 10 /r/s
setquota -B 12 /r/s
create /r/s/t 12345678
create /r/s/u 12345
set /r/s/t 1234567890123
set /r/s/t 1
create /r/s/t/deeper 12
listquota /r/s
setquota -n 100 /r
setquota -n 100 /r/s/t
setquota -n 100 /r/s
listquota /r/s
create /d
setquota -n 1 /d
setquota -b 1 /d
setquota -N 2 /d
setquota -B 2 /d
listquota /d
create /d/x xy
create /d/y z
delquota -B /d
create /d/y z
delquota -n /d
delquota -b /d
listquota /d
delquota -N /d
listquota /d
create /d/z 1
delquota /d
listquota /d
delquota /d
ls /zookeeper/quota
get /zookeeper/quota/d
listquota /missing
delquota /missing
setquota -n 2 /zookeeper
listquota /zookeeper
create /zookeeper/x abc
listquota /zookeeper
delquota /zookeeper
setquota -N 2 /
listquota /
"""


def transcript(server: ServerProcess) -> list[str]:
    raw = run_zkcli(server, SCRIPT.lstrip("\n").replace("PORT", str(server.port)))
    lines, events = normalise(raw, server.port)
    return lines + ["", "--- watch events, in order ---"] + events


def quota_mntr(server: ServerProcess) -> dict[str, str]:
    pairs = (line.split("\t", 1) for line in four_letter(server.port, "mntr").splitlines() if line)
    return {k: v for k, v in pairs if k.endswith("_per_namespace") and "_quota_" in k}


def run_both(enforce: bool, check: Callable[[list[str]], None]) -> None:
    if not os.path.exists(ZKCLI):
        if os.environ.get("CI"):
            pytest.fail(f"{ZKCLI} is missing (Debian's zookeeper package)")
        pytest.skip(f"{ZKCLI} is not installed (apt-get install -y zookeeper)")
    require_apache()
    settings = {"enforceQuota": "true" if enforce else "false"}
    results = {}
    for kind, start in (("apache", start_apache), ("zkpy", start_zkpy)):
        server = start(settings)
        try:
            results[kind] = (transcript(server), quota_mntr(server))
        finally:
            server.cleanup()
    (want, want_mntr), (got, got_mntr) = results["apache"], results["zkpy"]
    check(want)  # the oracle itself ran the script as this test means it to
    if got != want:
        diff = "\n".join(difflib.unified_diff(want, got, "apache", "zkpy", lineterm=""))
        pytest.fail(f"zkCli.sh quota transcript differs (- apache, + zkpy):\n{diff}")
    assert want_mntr and got_mntr == want_mntr


@pytest.mark.timeout(180)
def test_quota_script_matches_apache_with_enforce_quota() -> None:
    def check(lines: list[str]) -> None:
        assert "Quota has exceeded : /q/e" in lines and "Quota has exceeded : /r/s/u" in lines
        assert "[Warning]: the count quota you create is less than the existing count:5" in lines
        assert "/r has a child /r/s which has a quota" in lines

    run_both(True, check)


@pytest.mark.timeout(180)
def test_quota_script_matches_apache_without_enforce_quota() -> None:
    def check(lines: list[str]) -> None:
        assert not any(line.startswith("Quota has exceeded") for line in lines)
        assert "Created /q/e" in lines and "Created /r/s/u" in lines
        assert any(line.startswith("Output stat for /q count=") for line in lines)

    run_both(False, check)


def _multi_results(server: ServerProcess) -> list[object]:
    client = KazooClient(hosts=server.hosts)
    client.start()
    try:
        client.create("/m", b"")
        client.create("/zookeeper/quota/m")
        client.create("/zookeeper/quota/m/zookeeper_limits", b"count=-1,bytes=-1=;byteHardLimit=4;countHardLimit=10")
        _path, stat = client.create("/zookeeper/quota/m/zookeeper_stats", b"count=0,bytes=0", include_data=True)
        out: list[object] = [stat.dataLength]  # the created data's length, before the server counts
        for ops in ([("a", b"12"), ("b", b"12")],  # each fits alone: Apache checks every op against the applied tree
                    [("c", b""), ("d", b"12345")]):  # the second is past the byte limit: the multi fails
            t = client.transaction()
            for name, data in ops:
                t.create(f"/m/{name}", data)
            out.append([type(r).__name__ if isinstance(r, Exception) else r for r in t.commit()])
        out.append(client.get("/zookeeper/quota/m/zookeeper_stats")[0])
        try:
            client.set("/m/a", b"123")
        except QuotaExceededError:
            out.append("set refused")
        client.set("/zookeeper/quota/m/zookeeper_limits", b"count=many")  # a limit neither can read
        try:
            client.create("/m/unreadable")
        except MarshallingError:
            out.append("create under an unreadable limit: MarshallingError")
        return out
    finally:
        client.stop()
        client.close()


def test_a_multi_is_checked_like_apaches() -> None:
    require_apache()
    results = {}
    for kind, start in (("apache", start_apache), ("zkpy", start_zkpy)):
        server = start({"enforceQuota": "true"})
        try:
            results[kind] = _multi_results(server)
        finally:
            server.cleanup()
    assert results["apache"][2] == [RolledBackError.__name__, QuotaExceededError.__name__], results
    assert results["apache"][-2:] == ["set refused", "create under an unreadable limit: MarshallingError"], results
    assert results["zkpy"] == results["apache"]


def lead_with(servers: list[ServerProcess], kind: str) -> None:
    """Make a ``kind`` member the leader: while the leader is of the other kind, stop it, wait for
    the other two to elect one, and start it again as a follower."""
    for _ in range(4):
        wait_ensemble_serving(servers)
        leader = ensemble_leader(servers)
        if leader.kind == kind:
            return
        leader.stop()
        ensemble_leader([s for s in servers if s is not leader])
        restart_ensemble_member(leader)
    raise AssertionError(f"no {kind} leader after 4 elections")


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("kinds", "leader"), [(("zkpy", "apache", "zkpy"), "zkpy"),
                                               (("apache", "zkpy", "apache"), "apache")],
                         ids=["zkpy-leads", "apache-leads"])
def test_a_mixed_ensemble_counts_and_enforces_alike_on_every_member(kinds: tuple[str, ...], leader: str) -> None:
    """zkpy and Apache members of one ensemble keep the same stats (each replica counts as it
    applies), and either kind of leader refuses the write past the hard limit, whoever forwards it."""
    require_apache()
    servers = start_ensemble(list(kinds), {"enforceQuota": "true"})
    clients = []
    try:
        lead_with(servers, leader)
        wait_ensemble_serving(servers)
        for s in servers:
            client = KazooClient(hosts=s.hosts, timeout=10)
            client.start(timeout=30)
            clients.append(client)
        first = clients[0]
        first.create("/e", b"")
        first.create("/zookeeper/quota/e")
        first.create("/zookeeper/quota/e/zookeeper_limits", b"count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=6")
        first.create("/zookeeper/quota/e/zookeeper_stats", b"count=0,bytes=0")
        for i, client in enumerate(clients):  # through every member, each kind
            client.create(f"/e/n{i}", b"x" * i)
            client.set("/e", b"set by %d" % i)
        client = clients[1]
        client.delete("/e/n0")
        for i, client in enumerate(clients):
            client.create(f"/e/m{i}", b"")
        refused = []
        for i, client in enumerate(clients):
            try:
                client.create(f"/e/over{i}")
            except QuotaExceededError:
                refused.append(i)
        assert refused == [0, 1, 2], f"leader {leader}: {refused}"
        seen = []
        for client in clients:
            client.sync("/zookeeper/quota/e/zookeeper_stats")
            seen.append(client.get("/zookeeper/quota/e/zookeeper_stats")[0])
        assert seen == [b"count=6,bytes=%d" % (len(b"set by 2") + 1 + 2)] * 3, f"leader {leader}: {seen}"
    finally:
        for client in clients:
            client.stop()
            client.close()
        cleanup_ensemble(servers)
