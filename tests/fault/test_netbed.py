"""Ensembles across real network addresses (``zkpy.testing.netbed``): each member in a network
namespace of its own at ``198.18.X.N``, configured by address as in production, and faults cut at
the switch: the leader isolated with clients on both sides, a minority isolated past its sessions'
timeout, a member away long enough to need a snapshot, a flapping link, a slow and lossy link to
the leader (through ``TcpProxy.delay`` and ``loss``: the kernel has no netem), an isolated follower
serving read-only clients on its side. Every scenario ends with the checks of the loopback fault
tests: no acknowledged write lost, compare-and-set increments that stay linearizable (no
acknowledged update lost under another), every member with the same tree, ephemerals gone where
their sessions expired and nowhere else, nothing written on the minority side, and no ERROR line or
traceback in a zkpy member's log. The time until writes resume is printed beside Apache ZooKeeper's
(BENCHMARKS.md has the figures; no test asserts a time).

They need root (network namespaces): ``.ci/run`` runs as root, and in CI a missing bed is a failure;
elsewhere they skip, saying why.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException
from kazoo.retry import KazooRetry
from tests.conftest import require, require_apache
from tests.helpers import ensemble_workload
from tests.helpers.ensemble_workload import Writer, check_acknowledged, wait_same_trees

from zkpy.testing.netbed import NetBed, start_bed_ensemble, unavailable
from zkpy.testing.servers import (
    ServerProcess,
    cleanup_ensemble,
    ensemble_hosts,
    ensemble_leader,
    four_letter,
    server_mode,
    wait_ensemble_serving,
)

pytestmark = pytest.mark.timeout(300)

SESSION_S = 4.0  # the timeout of sessions meant to expire (the members' tickTime is 500 ms: 2 s to 10 s allowed)
KEPT_S = 10.0  # the timeout of sessions that must survive a leader change (Apache's took over 4 s once)


@pytest.fixture
def bed(request: pytest.FixtureRequest) -> Iterator[NetBed]:
    require(unavailable())
    with NetBed(getattr(request, "param", 3)) as made:
        yield made


def start_writers(servers: list[ServerProcess]) -> list[Writer]:
    return ensemble_workload.start_writers(ensemble_hosts(servers), n=2, first_writes=10, timeout_s=KEPT_S)


class CasCounter(threading.Thread):
    """Increments ``/cas`` by compare-and-set (get, then set with the version read) until stopped.
    A set acknowledged wrote ``acked``; one whose answer was lost may have (``uncertain``)."""

    def __init__(self, servers: list[ServerProcess]) -> None:
        super().__init__(daemon=True)
        retry = KazooRetry(max_tries=-1, delay=0.05, max_delay=0.5)
        self.client = KazooClient(hosts=ensemble_hosts(servers), timeout=KEPT_S, connection_retry=retry)
        self.acked: list[int] = []
        self.uncertain: list[int] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                data, stat = self.client.get("/cas")
            except KazooException:
                time.sleep(0.05)
                continue
            value = int(data) + 1
            try:
                self.client.set("/cas", str(value).encode(), version=stat.version)
                self.acked.append(value)
            except BadVersionError:
                pass
            except KazooException:
                self.uncertain.append(value)
                time.sleep(0.05)


def start_cas(servers: list[ServerProcess], n: int = 2) -> list[CasCounter]:
    setup = client(servers)
    setup.create("/cas", b"0")
    setup.stop()
    setup.close()
    counters = [CasCounter(servers) for _ in range(n)]
    for c in counters:
        c.client.start(30)
        c.start()
    return counters


def stop_cas(counters: list[CasCounter]) -> None:
    for c in counters:
        c.stopping.set()
        c.client.stop()  # a call waiting for a connection fails: its set, if any, is uncertain
    for c in counters:
        c.join(60)
        c.client.close()


def check_cas(counters: list[CasCounter], tree: dict[str, tuple]) -> None:
    """Linearizable compare-and-set: no two acknowledged sets wrote the same value (an update lost
    under another), and the counter went up once per applied set, at least every acknowledged
    one and at most those and the uncertain ones (after ``stop_cas``)."""
    acked = [v for c in counters for v in c.acked]
    assert acked, "no compare-and-set went through"
    assert len(set(acked)) == len(acked), "two acknowledged compare-and-sets wrote the same value"
    final = int(tree["/cas"][0])
    assert len(acked) <= final <= len(acked) + sum(len(c.uncertain) for c in counters)
    assert max(acked) <= final


def client(servers: list[ServerProcess]) -> KazooClient:
    retry = KazooRetry(max_tries=-1, delay=0.05, max_delay=0.5, deadline=60)
    c = KazooClient(hosts=ensemble_hosts(servers), timeout=KEPT_S, connection_retry=retry)
    c.start(30)
    return c


def time_until_write(c: KazooClient, since: float, path: str, deadline_s: float = 60.0) -> float:
    """Seconds from ``since`` until a create through ``c`` is acknowledged (tried every 50 ms)."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            c.create(path, b"probe")
            return time.monotonic() - since
        except Exception:  # noqa: BLE001 - ConnectionLoss, SessionMoved, ... while the ensemble recovers
            assert time.monotonic() < deadline, f"no write acknowledged within {deadline_s} s"
            time.sleep(0.05)


def minority_client(bed: NetBed, host: int, server: ServerProcess, path: str) -> subprocess.Popen[str]:
    """A client on host ``host``'s side with a session on ``server``: it says ``connected``, and
    at a line on its stdin creates ``path``, once, then says what happened (``acknowledged``, or
    ``refused: <why>``)."""
    code = textwrap.dedent(f"""
        import sys
        from kazoo.client import KazooClient
        from kazoo.retry import KazooRetry
        c = KazooClient(hosts={server.hosts!r}, timeout={KEPT_S}, command_retry=KazooRetry(max_tries=0))
        c.start(timeout=30)
        print("connected", flush=True)
        sys.stdin.readline()
        try:
            c.create({path!r}, b"minority")
            print("acknowledged")
        except Exception as exc:
            print("refused:", type(exc).__name__)
    """)
    proc = subprocess.Popen(bed.command(host, [sys.executable, "-c", code]), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "connected", proc.communicate()[1]
    return proc


def write_now(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()


def outcome(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    return out.strip().splitlines()[-1]


def wait_synced_followers(leader: ServerProcess, count: int, deadline_s: float = 30.0) -> None:
    """Until the leader's ``mntr`` counts ``count`` synced followers (after syncLimit without a
    word from a cut follower, it drops it)."""
    deadline = time.monotonic() + deadline_s
    while True:
        mntr = four_letter(leader.port, "mntr", host=leader.host)
        found = re.search(r"zk_synced_followers\s+(\d+)", mntr)
        if found is not None and int(found.group(1)) == count:
            return
        assert time.monotonic() < deadline, f"the leader still counts: {found and found.group(0)}"
        time.sleep(0.1)


def finish(servers: list[ServerProcess], writers: list[Writer], ignore: tuple[str, ...] = ()) -> dict[str, tuple]:
    """Writers stopped, every member serving, the same tree on each (but ``ignore``), nothing
    acknowledged lost."""
    for w in writers:
        w.wait_for_writes(10, deadline_s=60)
        w.stop()
    wait_ensemble_serving(servers, 60)
    tree = wait_same_trees(servers, ignore=ignore)
    check_acknowledged(writers, tree)
    for w in writers:
        w.client.stop()
        w.client.close()
    return tree


def clean_logs(servers: list[ServerProcess]) -> None:
    """No ERROR line and no traceback in a zkpy member's log."""
    for s in servers:
        if s.kind != "zkpy":
            continue
        bad = [line for line in s.log().splitlines() if " ERROR " in line or line.startswith("Traceback")]
        assert not bad, f"member {s.extra['myid']} logged:\n" + "\n".join(bad[:10])


@pytest.mark.parametrize(("kind", "bed"), [("zkpy", 3), ("apache", 3), ("zkpy", 5), ("apache", 5)],
                         ids=["zkpy-3", "apache-3", "zkpy-5", "apache-5"], indirect=["bed"])
def test_the_leader_isolated_with_clients_on_both_sides(kind: str, bed: NetBed) -> None:
    """The majority elects a leader and takes writes again; a client beside the old leader cannot
    write; the old leader comes back as a follower with every acknowledged write, and without the
    minority's; a session on the majority side keeps its ephemeral, and moves hosts to keep it."""
    if kind == "apache":
        require_apache()
    servers = start_bed_ensemble(bed, [kind] * bed.hosts)
    try:
        old = ensemble_leader(servers)
        others = [s for s in servers if s is not old]
        holder = KazooClient(hosts=",".join(s.hosts for s in [old, *others]), timeout=KEPT_S,
                             randomize_hosts=False)
        holder.start(30)
        holder.create("/eph-holder", b"h", ephemeral=True)
        writers = start_writers(servers)
        counters = start_cas(servers)
        probe = client(others)
        probe.ensure_path("/probe")

        beside_old = minority_client(bed, int(old.extra["myid"]), old, "/minority")
        isolated_at = time.monotonic()
        bed.isolate(int(old.extra["myid"]))
        write_now(beside_old)  # while the old leader may still think it leads
        resumed = time_until_write(probe, isolated_at, "/probe/after-isolation")
        new = ensemble_leader(others, 60)
        said = outcome(beside_old)
        print(f"\n[netbed] {kind} x{bed.hosts}: leader {old.extra['myid']} isolated; writes resumed after "
              f"{resumed:.2f} s under leader {new.extra['myid']}; the minority's write: {said}")
        assert said.startswith("refused"), said
        assert server_mode(old) in (None, "looking")  # from the tester: it cannot be reached at all

        bed.heal(int(old.extra["myid"]))
        stop_cas(counters)
        tree = finish(servers, writers)
        check_cas(counters, tree)
        assert "/minority" not in tree
        assert holder.get("/eph-holder")[1].ephemeralOwner == holder.client_id[0]  # the session moved hosts
        assert "/eph-holder" in tree
        assert server_mode(old) == "follower"
        holder.stop()
        holder.close()
        probe.stop()
        probe.close()
        clean_logs(servers)
    finally:
        cleanup_ensemble(servers)


@pytest.mark.parametrize("kind", ["zkpy", "apache"])
def test_a_minority_isolated_past_the_session_timeout(kind: str, bed: NetBed) -> None:
    """A session whose client sits with an isolated follower expires (its ephemeral goes on the
    majority, and on the follower once healed); a session on the majority side keeps its own."""
    if kind == "apache":
        require_apache()
    servers = start_bed_ensemble(bed, [kind] * 3)
    try:
        leader = ensemble_leader(servers)
        follower = next(s for s in servers if s is not leader)
        host = int(follower.extra["myid"])
        kept = client([s for s in servers if s is not follower])
        kept.create("/eph-kept", b"k", ephemeral=True)
        code = textwrap.dedent(f"""
            import sys, time
            from kazoo.client import KazooClient
            c = KazooClient(hosts={follower.hosts!r}, timeout={SESSION_S})
            c.start(30)
            c.create("/eph-lost", b"l", ephemeral=True)
            print("created", flush=True)
            time.sleep(600)
        """)
        away = subprocess.Popen(bed.command(host, [sys.executable, "-c", code]), stdout=subprocess.PIPE, text=True)
        try:
            assert away.stdout is not None and away.stdout.readline().strip() == "created"
            writers = start_writers([s for s in servers if s is not follower])
            bed.isolate(host)
            deadline = time.monotonic() + 30
            while kept.exists("/eph-lost") is not None:
                assert time.monotonic() < deadline, "the isolated session's ephemeral outlived its timeout"
                time.sleep(0.1)
            assert kept.exists("/eph-kept") is not None
            bed.heal(host)
            tree = finish(servers, writers)
        finally:
            away.kill()
            away.wait()
        assert "/eph-lost" not in tree and "/eph-kept" in tree
        kept.stop()
        kept.close()
        clean_logs(servers)
    finally:
        cleanup_ensemble(servers)


def test_a_member_away_long_enough_to_need_a_snapshot(bed: NetBed) -> None:
    """A follower isolated while more txns commit than the leader keeps for a diff (500) gets a SNAP
    when it returns, and ends with the same tree."""
    servers = start_bed_ensemble(bed, ["zkpy"] * 3)
    try:
        leader = ensemble_leader(servers)
        follower = next(s for s in servers if s is not leader)
        bed.isolate(int(follower.extra["myid"]))
        wait_synced_followers(leader, 1)  # the leader has dropped it: its return is a new sync
        c = client([s for s in servers if s is not follower])
        c.ensure_path("/many")
        for batch in range(8):
            results = [c.create_async(f"/many/n{batch}-{i:03d}", b"x" * 100) for i in range(100)]
            for r in results:
                r.get(timeout=30)
        bed.heal(int(follower.extra["myid"]))
        wait_ensemble_serving(servers, 60)
        tree = wait_same_trees(servers)
        assert sum(1 for p in tree if p.startswith("/many/")) == 800
        assert re.search(rf"syncing server {follower.extra['myid']} .* with SNAP", leader.log()), \
            "the returning follower was not sent a snapshot"
        c.stop()
        c.close()
        clean_logs(servers)
    finally:
        cleanup_ensemble(servers)


def test_a_flapping_link_loses_nothing(bed: NetBed) -> None:
    """A follower's links, then the leader's, go down and up again and again under writes."""
    servers = start_bed_ensemble(bed, ["zkpy"] * 3)
    try:
        writers = start_writers(servers)
        counters = start_cas(servers)
        leader = ensemble_leader(servers)
        follower = next(s for s in servers if s is not leader)
        bed.flap(int(follower.extra["myid"]), times=5, period_s=1.0)
        bed.flap(int(leader.extra["myid"]), times=3, period_s=1.0)
        stop_cas(counters)
        check_cas(counters, finish(servers, writers))
        clean_logs(servers)
    finally:
        cleanup_ensemble(servers)


@pytest.mark.parametrize("kind", ["zkpy"])
def test_an_isolated_follower_serves_read_only_clients_on_its_side(kind: str, bed: NetBed) -> None:
    """With readonlymode.enabled, a follower cut off from its quorum serves a read-only client on
    its own side what it had, and refuses that client's write (NotReadOnlyCall); once healed it
    serves again as a follower, with the writes made meanwhile on the majority side.

    zkpy only: Apache ZooKeeper 3.8.0's isolated follower answered kazoo's read-only connect with
    16 bytes that kazoo cannot read, for the whole minute the client tried (on loopback the two
    are compared in tests/interop/test_read_only_mode.py)."""
    servers = start_bed_ensemble(bed, [kind] * 3, {"readonlymode.enabled": "true"} if kind == "zkpy" else None,
                                 jvm_props={"readonlymode.enabled": "true"} if kind == "apache" else None)
    try:
        leader = ensemble_leader(servers)
        follower = next(s for s in servers if s is not leader)
        host = int(follower.extra["myid"])
        majority = client([s for s in servers if s is not follower])
        majority.create("/before", b"b")
        majority.sync("/")
        bed.isolate(host)
        code = textwrap.dedent(f"""
            from kazoo.client import KazooClient
            from kazoo.retry import KazooRetry
            c = KazooClient(hosts={follower.hosts!r}, timeout={KEPT_S}, read_only=True,
                            connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=0.5, deadline=60))
            c.start(timeout=60)
            print("read:", c.get("/before")[0].decode())
            try:
                c.create("/from-the-minority", b"m")
                print("write: acknowledged")
            except Exception as exc:
                print("write: refused:", type(exc).__name__)
        """)
        majority.create("/during", b"d")
        proc = bed.run_python(host, code, timeout_s=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        said = proc.stdout.strip().splitlines()
        print(f"\n[netbed] {kind}: the isolated follower's read-only client: {said}")
        assert said == ["read: b", "write: refused: NotReadOnlyCallError"], said
        bed.heal(host)
        wait_ensemble_serving(servers, 60)
        tree = wait_same_trees(servers)
        assert "/during" in tree and "/from-the-minority" not in tree
        majority.stop()
        majority.close()
        clean_logs(servers)
    finally:
        cleanup_ensemble(servers)


def test_a_slow_and_lossy_link_to_the_leader_loses_nothing(bed: NetBed) -> None:
    """Member 1 reaches the leader's quorum port through a proxy that delays every chunk (the
    kernel here has no netem): 150 ms each way, then 600 ms, then 10 % of the chunks lost (each
    comes a retransmission timeout later, as over TCP), then none, under writes and
    compare-and-sets from every member. The slow follower stays a follower while only delayed (its
    round trips stay inside syncLimit); a run of losses may hold a chunk past syncLimit, as over
    TCP, and the leader may drop it then; either way it ends a follower with the same tree."""
    from zkpy.testing.netbed import ELECTION_PORT, QUORUM_PORT, TESTER
    from zkpy.testing.proxy import TcpProxy

    with TcpProxy(bed.address(3), QUORUM_PORT, listen_host=bed.address(TESTER)) as slow:
        via = f"{bed.address(TESTER)}:{slow.port}:{ELECTION_PORT};{bed.address(3)}:2181"
        servers = start_bed_ensemble(bed, ["zkpy"] * 3, member_settings={1: {"server.3": via}})
        try:
            assert ensemble_leader(servers) is servers[2]  # equal zxids: the highest id leads
            assert slow.forwarded >= 1, "member 1 did not follow through the proxy"
            writers = start_writers(servers)
            counters = start_cas(servers)
            seed = int(time.time())
            print(f"test_netbed: loss seed {seed}")
            delayed_only = ""
            for ms, percent in ((150, 0), (600, 0), (0, 10), (0, 0)):
                if percent:
                    delayed_only = servers[2].log()
                slow.delay(ms)
                slow.loss(percent, seed=seed)
                time.sleep(4)
            assert slow.retransmitted > 0
            stop_cas(counters)
            # member 1 was given another server.3 line: its /zookeeper/config says so
            check_cas(counters, finish(servers, writers, ignore=("/zookeeper/config",)))
            assert server_mode(servers[0]) == "follower"
            assert "dropping learner connection" not in delayed_only
            clean_logs(servers)
        finally:
            cleanup_ensemble(servers)
