"""Dynamic reconfiguration against real ensembles, zkpy's and Apache ZooKeeper 3.8's.

One script, run with Debian's ``zkCli.sh`` and kazoo: a 3-member ensemble with reconfigEnabled
takes two joiners (started as observers beside it, as the reconfig guide says), removes its
leader, then is given a new member list; kazoo's error cases follow. The transcript (zkCli's
answers, ``/zookeeper/config`` and every member's mode after each step, with ports written as
names) must be the same for both. Then, under a unique-value write workload, the same script on
zkpy loses no acknowledged write, every member ends with the same tree and ``/zookeeper/config``,
and a member restarted afterwards reads its dynamic config file and rejoins. A zkpy server started
on the data dir and rewritten zoo.cfg of a reconfigured Apache member joins the Apache ensemble.

3.8 keeps a removed server running as a non-voting follower (the reconfig guide: "The server will
not be shut-down automatically"), and so does zkpy: the transcript shows the removed members'
modes, compared with Apache's.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, KazooException
from tests.conftest import require_apache
from tests.helpers.ensemble_workload import Writer, check_acknowledged, patient_client, wait_same_trees

from zkpy.client.sync import Client
from zkpy.errors import ZookeeperError
from zkpy.testing.servers import (
    ServerProcess,
    cleanup_ensemble,
    ensemble_hosts,
    ensemble_leader,
    member_line,
    restart_ensemble_member,
    server_mode,
    start_apache,
    start_ensemble,
    start_joining_member,
    start_zkpy,
    wait_ensemble_serving,
)

ZKCLI = "/usr/share/zookeeper/bin/zkCli.sh"
SUPER = "super:reconfig-test"
SUPER_DIGEST = "super:" + base64.b64encode(hashlib.sha1(SUPER.encode()).digest()).decode()

pytestmark = pytest.mark.usefixtures("_needs_apache")


@pytest.fixture
def _needs_apache() -> None:
    require_apache()
    if not os.path.exists(ZKCLI):
        pytest.fail(f"{ZKCLI} is missing (Debian's zookeeper package)")


def settings(kind: str) -> dict[str, str]:
    out = {"reconfigEnabled": "true"}
    if kind == "zkpy":
        out["DigestAuthenticationProvider.superDigest"] = SUPER_DIGEST
    return out


JVM = {"zookeeper.DigestAuthenticationProvider.superDigest": SUPER_DIGEST}


def zkcli(server: ServerProcess, command: str) -> str:
    env = dict(os.environ)
    env["CLIENT_JVMFLAGS"] = "-Xshare:auto -XX:TieredStopAtLevel=1 -Xmx128m"
    proc = subprocess.run([ZKCLI, "-server", server.hosts], input=f"addauth digest {SUPER}\n{command}\n".encode(),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=60, check=False)
    return proc.stdout.decode("utf-8", "replace")


class Names:
    """Ports written as names (``client4``...), so that two runs on different ports compare."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def add(self, s: ServerProcess) -> None:
        sid = s.extra["myid"]
        self.names.update({str(s.port): f"client{sid}", str(s.extra["quorum_port"]): f"peer{sid}",
                           str(s.extra["election_port"]): f"election{sid}"})

    def __call__(self, text: str) -> str:
        return re.sub(r"\b\d{4,5}\b", lambda m: self.names.get(m.group(0), m.group(0)), text)


def config_lines(zkcli_output: str, names: Names) -> list[str]:
    """What zkCli printed of a config (its server lines and version), ports named."""
    return [names(line) for line in zkcli_output.splitlines() if re.match(r"^(server\.\d+=|version=)", line)]


def wait_modes(servers: list[ServerProcess], deadline_s: float = 60.0) -> str:
    """``1:follower 2:leader ...`` once every member serves."""
    wait_ensemble_serving(servers, deadline_s)
    return " ".join(f"{s.extra['myid']}:{server_mode(s)}" for s in servers)


def read_config(server: ServerProcess) -> str:
    client = patient_client(server.hosts)
    try:
        return str(client.retry(client.get, "/zookeeper/config")[0].decode())
    finally:
        client.stop()
        client.close()


def wait_config(servers: list[ServerProcess], older: str, deadline_s: float = 30.0) -> str:
    """Wait until every member's /zookeeper/config is one and the same, newer than ``older``; it."""
    deadline = time.monotonic() + deadline_s
    while True:
        configs = {s.extra["myid"]: read_config(s) for s in servers}
        if len(set(configs.values())) == 1 and older not in configs.values():
            return next(iter(configs.values()))
        if time.monotonic() > deadline:
            raise AssertionError(f"the members hold {configs}")
        time.sleep(0.1)


def run_script(kind: str, writers: int = 0, kinds: tuple[str, ...] | None = None
               ) -> tuple[list[str], list[ServerProcess], list[Writer]]:
    """The scenario on a ``kind`` ensemble (``kinds``: the kind of members 1 to 5, for a mixed
    one); its transcript, the members (still running) and the writers that ran through it (stopped)."""
    kinds = kinds or (kind,) * 5
    servers = start_ensemble(list(kinds[:3]), settings(kind), jvm_props=JVM, tick_ms=300,
                             member_settings={i + 1: settings(k) for i, k in enumerate(kinds[:3])})
    names = Names()
    for s in servers:
        names.add(s)
    out: list[str] = []
    running: list[Writer] = []
    try:
        for i in range(writers):
            w = Writer(f"w{i}", ensemble_hosts(servers))
            w.start_session()
            w.start()
            running.append(w)
        leader = ensemble_leader(servers)
        first = leader.extra["myid"]
        out.append(f"leader {first}, modes {wait_modes(servers)}")
        joiners = [start_joining_member(kinds[myid - 1], servers, myid, settings(kinds[myid - 1]), tick_ms=300,
                                        jvm_props=JVM) for myid in (4, 5)]
        for j in joiners:
            names.add(j)
        servers += joiners
        out.append(f"joiners serve, modes {wait_modes(servers)}")
        config = read_config(leader)
        out.append(names(config))
        for w in running:
            w.wait_for_writes(20)
        follower = next(s for s in servers if s is not leader)
        add = ",".join(f"server.{j.extra['myid']}={member_line(j)}" for j in joiners)
        answer = config_lines(zkcli(follower, f"reconfig -add {add}"), names)
        config = wait_config(servers, config)
        out += ["reconfig -add 4,5:", *answer, names(config), f"modes {wait_modes(servers)}"]
        for w in running:
            w.wait_for_writes(20)

        # every member changes leader: zkCli's connection is closed before the answer, as in 3.8.
        # The designated leader is one of the first members that acked the most (which, varies)
        zkcli(follower, f"reconfig -remove {first}")
        leader = ensemble_leader([s for s in servers if s.extra["myid"] != first])
        config = wait_config(servers, config)
        new = leader.extra["myid"]
        other = ({"1", "2", "3"} - {first, new}).pop()
        out += [f"reconfig -remove {first} (the leader):", names(config),
                f"new leader {new}, modes {wait_modes(servers)}"]
        for w in running:
            w.wait_for_writes(20)

        keep = [s for s in servers if s.extra["myid"] in ("4", "5") or s is leader]
        members = ",".join(f"server.{s.extra['myid']}={member_line(s)}" for s in keep)
        answer = config_lines(zkcli(leader, f"reconfig -members {members}"), names)
        config = wait_config(servers, config)
        out += [f"reconfig -members {new},4,5:", *answer, names(config)]
        leader = ensemble_leader(keep)
        out.append(f"leader {leader.extra['myid']}, modes {wait_modes(servers)}")
        for w in running:
            w.wait_for_writes(20)
            w.stop()
        out += kazoo_cases(servers, leader, names, config)
        return normalise(out, {first: "L", new: "N", other: "O"}), servers, running
    except BaseException:
        cleanup_ensemble(servers)
        raise


def normalise(lines: list[str], labels: dict[str, str]) -> list[str]:
    """A transcript two runs can share. The first three members are named by their part: L the
    first leader (ZooKeeper elects whichever a quorum sees first), N the leader it designates when
    it leaves (one of those that acked the most), O the other. A config version keeps its epoch, its
    counter replaced by its rank (how many txns came before it varies with the sessions the test's
    reads open). After the last handover only how many members have which mode is kept (the
    designated leader varies again)."""

    def sid(m: re.Match[str]) -> str:
        return m.group(1) + labels.get(m.group(2), m.group(2)) + m.group(3)

    versions: dict[str, str] = {}

    def version(m: re.Match[str]) -> str:
        value = int(m.group(2), 16)
        rank = versions.setdefault(m.group(2), str(len(versions) + 1))
        return f"{m.group(1)}epoch {value >> 32} #{rank}"

    out: list[str] = []
    for line in (part for text in lines for part in text.split("\n")):
        line = re.sub(r"(server\.|peer|election|client|leader |remove |members |'|^| )([1-3])(\b)", sid, line)
        line = re.sub(r"(version=)([0-9a-f]+)", version, line)
        if "modes " in line:
            modes = re.findall(r"\b\w:\w+", line[line.index("modes "):])
            line = line[:line.index("modes ") + 6] + " ".join(sorted(modes))
        if line.startswith("server.") and out and out[-1].startswith("server."):
            # a config's lines come in HashMap order of the sids: sorted, as the names changed
            run = 1
            while run < len(out) and out[-1 - run].startswith("server."):
                run += 1
            out[-run:] = sorted([*out[-run:], line])
            continue
        out.append(line)
    return out


def kazoo_cases(servers: list[ServerProcess], leader: ServerProcess, names: Names, config: str) -> list[str]:
    """kazoo's reconfig API: a change and its error cases, by exception name."""
    out = []
    noauth = KazooClient(hosts=leader.hosts)
    admin = KazooClient(hosts=leader.hosts, auth_data=[("digest", SUPER)])
    noauth.start(30)
    admin.start(30)
    try:
        version = int(admin.get("/zookeeper/config")[0].decode().rsplit("=", 1)[1], 16)
        cases: list[tuple[str, dict[str, object]]] = [
            ("no super auth", {"client": noauth, "leaving": "4"}),
            ("joiner without a client port", {"joining": "server.9=127.0.0.1:1:2"}),
            ("joiner garbage", {"joining": "server.9=garbage"}),
            ("leaving id not a number", {"leaving": "x"}),
            ("bad member list", {"new_members": "server.1=x"}),
            ("members without a voter", {"new_members": "server.9=127.0.0.1:1:2:observer;3"}),
            ("from a stale version", {"leaving": "4", "from_config": version - 1}),
            ("no quorum of the new config synced", {"joining": "server.8=127.0.0.1:1:2:participant;3,"
                                                               "server.9=127.0.0.1:4:5:participant;6,"
                                                               "server.7=127.0.0.1:7:8:participant;9",
                                                    "leaving": "4,5"}),
        ]
        for what, kw in cases:
            client = kw.pop("client", admin)
            assert isinstance(client, KazooClient)
            try:
                data, stat = client.reconfig(joining=kw.get("joining"), leaving=kw.get("leaving"),
                                             new_members=kw.get("new_members"),
                                             from_config=kw.get("from_config", -1))
                out.append(f"kazoo {what}: ok {names(data.decode())!r} version {stat.version}")
            except KazooException as exc:
                out.append(f"kazoo {what}: {type(exc).__name__}")
        # zkpy's own client, against either server
        with Client(leader.hosts) as plain, Client(leader.hosts, auth=[("digest", SUPER.encode())]) as superuser:
            for what, client, kw in (("no super auth", plain, {"leaving": "4"}),
                                     ("from a stale version", superuser, {"leaving": "4", "from_config": version - 1}),
                                     ("joiner garbage", superuser, {"joining": "server.9=garbage"})):
                try:
                    client.reconfig(**kw)  # type: ignore[arg-type]
                    out.append(f"zkpy client {what}: ok")
                except ZookeeperError as exc:
                    out.append(f"zkpy client {what}: {type(exc).__name__}")
        # the leader made an observer, through kazoo: it hands over to 4 or 5
        sid = leader.extra["myid"]
        data, stat = admin.reconfig(joining=f"server.{sid}={member_line(leader, 'observer')}", leaving=None,
                                    new_members=None, from_config=version)
        out.append(f"kazoo make the leader {sid} an observer: {names(data.decode()).splitlines()[:-1]} "
                   f"stat version {stat.version}, mzxid-is-version={stat.mzxid == int(data.decode().rsplit('=', 1)[1], 16)}")
        wait_config(servers, config)
        modes = wait_modes(servers)
        out.append(f"roles after the handover: {sorted(m.split(':')[1] for m in modes.split())}")
        out.append(f"{sid} observes: {f'{sid}:observer' in modes.split()}")
    finally:
        for c in (noauth, admin):
            c.stop()
            c.close()
    return out


# a mixed ensemble in which zkpy leads first (3), then Apache (1, designated when 3 leaves), then
# zkpy again (4, designated when 1 becomes an observer)
MIXED = ("apache", "apache", "zkpy", "zkpy", "apache")


def test_the_reconfig_script_gives_zkpy_apache_and_a_mixed_ensemble_the_same_configs_and_roles() -> None:
    transcripts = {}
    for kind, kinds in (("apache", None), ("zkpy", None), ("mixed", MIXED)):
        lines, servers, _ = run_script(kind, kinds=kinds)
        transcripts[kind] = lines
        cleanup_ensemble(servers)
    print("\n".join(transcripts["apache"]))
    assert transcripts["zkpy"] == transcripts["apache"]
    assert transcripts["mixed"] == transcripts["apache"]


@pytest.fixture
def ensemble_under_load() -> Iterator[tuple[list[ServerProcess], list[Writer]]]:
    lines, servers, writers = run_script("zkpy", writers=2)
    print("\n".join(lines))
    try:
        yield servers, writers
    finally:
        cleanup_ensemble(servers)


def test_reconfig_under_writes_loses_nothing_and_a_restarted_member_rejoins(
        ensemble_under_load: tuple[list[ServerProcess], list[Writer]]) -> None:
    servers, writers = ensemble_under_load
    assert sum(w.count for w in writers) >= 2 * 80
    tree = wait_same_trees(servers)
    check_acknowledged(writers, tree)
    config = tree["/zookeeper/config"]
    # a member restarted reads the dynamic file its zoo.cfg now names, and rejoins with that config
    four = next(s for s in servers if s.extra["myid"] == "4")
    cfg = open(os.path.join(four.workdir, "zoo.cfg"), encoding="utf-8").read()
    assert "server." not in cfg and "clientPort" not in cfg
    dynamic = re.search(r"^dynamicConfigFile=(.*)$", cfg, re.M)
    assert dynamic is not None and dynamic.group(1).endswith(config[0].decode().rsplit("=", 1)[1])
    four.stop()
    restart_ensemble_member(four)
    wait_ensemble_serving(servers)
    assert wait_same_trees(servers)["/zookeeper/config"] == config


def test_a_zkpy_server_takes_over_a_reconfigured_apache_member() -> None:
    lines, servers, _ = run_script("apache")
    try:
        five = next(s for s in servers if s.extra["myid"] == "5")
        before = wait_same_trees(servers)
        five.stop()
        # the same data dir and the zoo.cfg Apache rewrote (dynamicConfigFile, no server lines)
        five.cmd = [sys.executable, "-m", "zkpy.cli.main", "server", os.path.join(five.workdir, "zoo.cfg")]
        five.kind = "zkpy"
        restart_ensemble_member(five)
        wait_ensemble_serving(servers)
        assert server_mode(five) in ("follower", "leader")
        assert wait_same_trees(servers)["/zookeeper/config"] == before["/zookeeper/config"]
    finally:
        cleanup_ensemble(servers)


def reconfig_answer(server: ServerProcess) -> str:
    client = KazooClient(hosts=server.hosts)
    client.start(30)
    try:
        client.reconfig(joining=None, leaving="1", new_members=None)
        return "ok"
    except KazooException as exc:
        return type(exc).__name__
    finally:
        client.stop()
        client.close()


def test_standalone_servers_refuse_reconfig_alike(zkpy_server: ServerProcess, apache_server: ServerProcess) -> None:
    """reconfigEnabled unset: ReconfigDisabled; set on a standalone server: Unimplemented (3.8's
    standalone server cannot reconfigure)."""
    assert {s.kind: reconfig_answer(s) for s in (zkpy_server, apache_server)} == \
        {"zkpy": "ReconfigDisabledError", "apache": "ReconfigDisabledError"}
    enabled = [start_zkpy({"reconfigEnabled": "true"}), start_apache({"reconfigEnabled": "true"})]
    try:
        assert {s.kind: reconfig_answer(s) for s in enabled} == \
            {"zkpy": "UnimplementedError", "apache": "UnimplementedError"}
    finally:
        for s in enabled:
            s.cleanup()


def test_a_member_that_missed_a_reconfig_adopts_the_config_it_hears_of_and_rejoins() -> None:
    servers = start_ensemble(["zkpy"] * 3, settings("zkpy"), tick_ms=300)
    try:
        four = start_joining_member("zkpy", servers, 4, settings("zkpy"), tick_ms=300)
        servers.append(four)
        wait_ensemble_serving(servers)
        leader = ensemble_leader(servers)
        absent = next(s for s in servers[:3] if s is not leader)
        absent.stop()
        # 4 in, the leader out: the leader of the next term may be 4, which the absent member's
        # config (the first three) does not even list
        present = [s for s in servers if s is not absent]
        before = read_config(leader)
        admin = KazooClient(hosts=ensemble_hosts(present), auth_data=[("digest", SUPER)])
        admin.start(30)
        try:
            admin.reconfig(joining=f"server.4={member_line(four)}", leaving=leader.extra["myid"], new_members=None)
        except ConnectionLoss:
            pass  # every member changes leader: the answer may be lost, as in 3.8
        finally:
            admin.stop()
            admin.close()
        config = wait_config(present, before)
        assert "server.4=" in config and f"server.{leader.extra['myid']}=" not in config
        restart_ensemble_member(absent)
        wait_ensemble_serving(servers)
        assert read_config(absent) == config
        assert "heard of a newer config" in absent.log()
    finally:
        cleanup_ensemble(servers)
