"""Read-only mode (``readonlymode.enabled``) of a zkpy ensemble, with real processes and real clients.

One member of three is cut off (the other two are killed): after a moment it serves read-only
clients. kazoo (``read_only=True``), zkpy's client and ``zkCli.sh -r`` read from it and their
writes get NotReadOnly; a client without the read-only flag gets no session there. When the two
come back the member rejoins the quorum, and the same client objects (and the same zkCli
process) write again without being restarted: they found the read-write server by themselves.

Against Apache ZooKeeper 3.8: the same scenario passes on an Apache ensemble (so every assertion
is ZooKeeper's behaviour, clients included), and one zkCli -r script gives the same transcript
on a read-only zkpy member and a read-only Apache member (Apache with local sessions on: 3.8
gives a read-only client no session without them), and their AdminServers answer alike.
"""

from __future__ import annotations

import difflib
import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NotReadOnlyCallError as KazooNotReadOnly
from kazoo.protocol.states import KeeperState
from tests.conftest import require_apache
from tests.helpers.clientwait import until
from tests.interop.test_zkcli import normalise

from zkpy import Client, ClientState
from zkpy.errors import ConnectionLoss, NotReadOnlyCallError, ZookeeperError
from zkpy.testing.servers import (
    ServerProcess,
    cleanup_ensemble,
    four_letter,
    free_ports,
    restart_ensemble_member,
    server_mode,
    start_ensemble,
    start_zkpy,
)

pytestmark = pytest.mark.interop

ZKCLI = "/usr/share/zookeeper/bin/zkCli.sh"
TICK_MS = 200  # session timeouts of 0.4 to 4 s; read-only service after max(2 s, tick)
SERVING = ("leader", "follower")


def _until(condition: Callable[[], object], what: str, deadline_s: float = 20.0) -> object:
    return until(condition, what, deadline_s)


def _hosts(servers: list[ServerProcess]) -> str:
    return ",".join(s.hosts for s in servers)


class ZkCli:
    """``zkCli.sh -r`` driven line by line: commands on stdin, its output read as it comes."""

    def __init__(self, hosts: str) -> None:
        self.proc = subprocess.Popen([ZKCLI, "-r", "-server", hosts], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, bufsize=1)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def wait_for(self, pattern: str, deadline_s: float = 20.0) -> str:
        deadline = time.monotonic() + deadline_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"zkCli printed no line matching {pattern!r} within {deadline_s}s; "
                                     f"it printed:\n" + "\n".join(self.seen[-40:]))
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            self.seen.append(line)
            if re.search(pattern, line):
                return line

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def _partition(servers: list[ServerProcess]) -> ServerProcess:
    """Kill members 1 and 2; the survivor, once it serves read-only."""
    for s in servers[:2]:
        s.stop(signal.SIGKILL)
    survivor = servers[2]
    _until(lambda: server_mode(survivor) == "read-only", "the survivor to serve read-only")
    return survivor


class _InOrder:
    """An rng that leaves the host list as given (the client tries the first host first)."""

    def shuffle(self, hosts: list[object]) -> None:
        pass


def _finds_a_read_write_server_by_itself(survivor: ServerProcess) -> None:
    """Connected read-only to a member that stays read-only, zkpy's client asks the other hosts
    ``isro`` and moves to the one that answers rw (here a standalone server), with a new session."""
    other = start_zkpy()
    states: list[ClientState] = []
    zk = Client(f"{survivor.hosts},{other.hosts}", read_only=True, session_timeout=4.0,
                rng=_InOrder())  # type: ignore[arg-type]
    try:
        zk.add_listener(states.append)
        zk.start(timeout=15.0)
        _until(lambda: states and states[-1] is ClientState.CONNECTED, "the client to move to the read-write server")
        zk.create("/moved", b"")
        assert server_mode(survivor) == "read-only"
        assert states[:1] == [ClientState.CONNECTED_READ_ONLY] and states[-1] is ClientState.CONNECTED
    finally:
        zk.close()
        other.cleanup()


def _read_only_ensemble(kind: str, admin_ports: list[int] | None = None) -> list[ServerProcess]:
    """Three ``kind`` members with read-only mode on (Apache: as its system property, with local
    sessions, without which 3.8 gives a read-only client no session); with ``admin_ports``, each
    member's AdminServer on its port."""
    admin = {i + 1: {"admin.enableServer": "true", "admin.serverPort": str(port)}
             for i, port in enumerate(admin_ports or [])}
    if kind == "apache":
        return start_ensemble(["apache"] * 3, {"localSessionsEnabled": "true"}, tick_ms=TICK_MS,
                              jvm_props={"readonlymode.enabled": "true"}, member_settings=admin)
    return start_ensemble(["zkpy"] * 3, {"readonlymode.enabled": "true"}, tick_ms=TICK_MS, member_settings=admin)


@pytest.mark.parametrize("kind", ["zkpy", "apache"])
def test_a_cut_off_member_serves_reads_only_and_its_clients_write_again_when_the_quorum_returns(kind: str) -> None:
    """The same scenario on Apache ZooKeeper 3.8 shows it is ZooKeeper's behaviour, clients included."""
    require_apache()  # zkCli.sh
    servers = _read_only_ensemble(kind)
    clients: list[Callable[[], object]] = []
    try:
        path = f"/ro-{uuid.uuid4().hex[:8]}"
        with Client(_hosts(servers)) as zk:
            zk.create(path, b"before")
            zk.sync(path)
        survivor = _partition(servers)
        assert four_letter(survivor.port, "isro") == "ro"
        assert "Mode: read-only" in four_letter(survivor.port, "srvr")

        # a client without the read-only flag gets no session
        plain = Client(survivor.hosts, session_timeout=4.0)
        with pytest.raises(ConnectionLoss):
            plain.start(timeout=2.0)

        # kazoo, zkpy's client and zkCli -r, all given the whole ensemble
        kz = KazooClient(hosts=_hosts(servers), read_only=True, timeout=4.0)
        clients.append(kz.stop)
        kz.start(timeout=15)
        assert kz.client_state == KeeperState.CONNECTED_RO
        assert kz.get(path)[0] == b"before"
        with pytest.raises(KazooNotReadOnly):
            kz.create(path + "/kazoo", b"")

        zk = Client(_hosts(servers), read_only=True, session_timeout=4.0)
        clients.append(zk.close)
        zk.start(timeout=15.0)
        assert zk.state is ClientState.CONNECTED_READ_ONLY
        fired: list[object] = []
        assert zk.get(path, watch=fired.append)[0] == b"before"  # a watch set on the read-only server
        read_only_sessions = (kz.client_id[0], zk.session_id)
        with pytest.raises(NotReadOnlyCallError):
            zk.set(path, b"during")

        cli = ZkCli(_hosts(servers))
        clients.append(cli.close)
        cli.wait_for(r"state:ConnectedReadOnly")
        cli.send(f"get {path}")
        cli.wait_for(r"^before$")
        cli.send(f"create {path}/zkcli")
        cli.wait_for(r"Not a read-only call")
        assert four_letter(survivor.port, "isro") == "ro"
        _finds_a_read_write_server_by_itself(survivor)

        # the quorum returns: the survivor rejoins and each client moves to a read-write session
        for s in servers[:2]:
            restart_ensemble_member(s)
        _until(lambda: server_mode(survivor) in SERVING, "the survivor to rejoin the quorum", 30.0)
        assert four_letter(survivor.port, "isro") == "rw"

        def writes(make: Callable[[], object]) -> bool:
            try:
                make()
                return True
            except (ZookeeperError, KazooNotReadOnly, Exception):  # noqa: BLE001 (kazoo's errors too, until it moved)
                return False

        _until(lambda: writes(lambda: kz.create(path + "/kazoo", b"k")), "kazoo to write again", 30.0)
        assert kz.client_state == KeeperState.CONNECTED
        _until(lambda: writes(lambda: zk.create(path + "/zkpy", b"z")), "zkpy's client to write again", 30.0)
        assert zk.state is ClientState.CONNECTED
        # read-only sessions are local: each client has a new session now, and the watch it set
        # while read-only was set again there (setWatches), so a change fires it
        assert kz.client_id[0] != read_only_sessions[0] and zk.session_id != read_only_sessions[1]
        assert fired == []
        kz.set(path, b"after")
        _until(lambda: fired, "the watch set on the read-only server to fire")
        cli.send(f"create {path}/zkcli")  # the first try may come before it moved
        deadline = time.monotonic() + 30.0
        while True:
            line = cli.wait_for(rf"Created {path}/zkcli|Not a read-only call|ConnectionLoss|exists", 30.0)
            if "Created" in line or "exists" in line:
                break
            assert time.monotonic() < deadline, "zkCli never wrote again"
            time.sleep(0.2)
            cli.send(f"create {path}/zkcli")
        with Client(_hosts(servers)) as check:
            assert sorted(check.get_children(path)) == ["kazoo", "zkcli", "zkpy"]
    finally:
        for stop in clients:
            try:
                stop()
            except Exception:  # noqa: BLE001 (cleanup of a failed test)
                pass
        cleanup_ensemble(servers)


RO_SCRIPT = """ls /
get /ro
stat /ro
ls /missing
get /missing
create /ro/child
create -e /ro/eph
set /ro changed
delete /ro
setAcl /ro world:anyone:r
sync /ro
getAcl /ro
get /ro
"""


ADMIN_COMMANDS = ("is_read_only", "zabstate", "leader", "voting_view")


def _admin(port: int, command: str) -> dict[str, object]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/commands/{command}", timeout=10) as rsp:
        return dict(json.load(rsp))


def _read_only_transcript(kind: str) -> tuple[list[str], set[str]]:
    """RO_SCRIPT run by one ``zkCli.sh -r`` on the cut-off member of a 3-member ``kind`` ensemble,
    then what its AdminServer answers to ADMIN_COMMANDS and its srvr and stat; and its mntr keys."""
    admin_ports = free_ports(3)
    servers = _read_only_ensemble(kind, admin_ports)
    try:
        with Client(_hosts(servers)) as zk:
            zk.create("/ro", b"written with quorum")
            zk.sync("/ro")
        survivor = _partition(servers)
        env = {**os.environ, "CLIENT_JVMFLAGS": "-Xshare:auto -XX:TieredStopAtLevel=1 -Xmx128m"}
        proc = subprocess.run([ZKCLI, "-r", "-server", survivor.hosts], input=RO_SCRIPT.encode("utf-8"),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=60, check=False)
        lines, events = normalise(proc.stdout.decode("utf-8", "replace"), survivor.port)
        admin = [f"{command}: {json.dumps(_admin(admin_ports[2], command), sort_keys=True)}"
                 for command in ADMIN_COMMANDS]
        # srvr and stat: their lines' names, the mode in full (the figures are each server's own)
        words: list[str] = []
        for word in ("srvr", "stat"):
            words.append(f"--- {word} ---")
            words += [line if line.startswith("Mode:") else line.split(":")[0]
                      for line in four_letter(survivor.port, word).splitlines()]
        keys = {line.split("\t")[0] for line in four_letter(survivor.port, "mntr").splitlines()}
        return lines + ["--- events ---"] + events + ["--- AdminServer ---"] + admin + words, keys
    finally:
        cleanup_ensemble(servers)


def test_zkcli_read_only_transcript_and_admin_commands_match_apache() -> None:
    require_apache()
    (zkpy, zkpy_keys), (apache, apache_keys) = _read_only_transcript("zkpy"), _read_only_transcript("apache")
    assert zkpy == apache, "\n".join(difflib.unified_diff(apache, zkpy, "apache", "zkpy", lineterm=""))
    assert "zk_server_state" in zkpy_keys and zkpy_keys <= apache_keys, sorted(zkpy_keys - apache_keys)
