"""The AdminServer against Apache ZooKeeper 3.8's (Jetty) on the same requests: every command
answers JSON with the same keys (nested objects included), ``/commands`` lists the same names,
an unknown command gets the same answer; an ensemble's leader and follower answer ``leader``,
``voting_view``, ``zabstate``, ``observers`` alike; the documentation's ``admin.*`` block starts
the server and opens the endpoint; a port in use costs a log line, not the server.

Documented differences (``zkpy.admin.commands``): ``environment`` and ``system_properties``
describe the Python process (``python.*`` for ``java.*``, no JVM memory figures or JVM
properties); ``monitor`` has mntr's keys, less the JVM-only ones ``test_mntr_keys`` lists (and
the per-namespace figures, compared there).
"""

from __future__ import annotations

import json
import re
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from tests.conftest import require_apache
from tests.interop.test_mntr_keys import excluded as mntr_excluded

from zkpy.admin.commands import BY_NAME, COMMANDS, PRIMARY_NAMES
from zkpy.testing.certs import make_pki
from zkpy.testing.servers import (
    ServerProcess,
    cleanup_ensemble,
    ensemble_leader,
    four_letter,
    free_port,
    free_ports,
    start_apache,
    start_ensemble,
    start_zkpy,
)

ALL_WORDS = {"4lw.commands.whitelist": "*"}
_JVM_ONLY = re.compile(r"^(java\.|os\.memory\.|python\.)")


def admin_settings(port: int) -> dict[str, str]:
    return {"admin.enableServer": "true", "admin.serverPort": str(port), **ALL_WORDS}


def get(port: int, path: str, deadline_s: float = 10.0) -> tuple[int, str, str]:
    """(status, content type, body) of ``GET http://127.0.0.1:port/path``, retried until the
    AdminServer listens or the deadline passes."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
                return r.status, r.headers.get("Content-Type", ""), r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Content-Type", ""), e.read().decode()
        except OSError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def command(port: int, name: str) -> dict[str, object]:
    status, ctype, body = get(port, f"/commands/{name}")
    assert status == 200 and ctype.startswith("application/json"), (name, status, ctype, body[:200])
    answer = json.loads(body)
    assert isinstance(answer, dict) and "command" in answer and "error" in answer, (name, answer)
    return answer


def shape(value: object) -> object:
    """The keys of a JSON value, nested objects and the first element of lists included, with the
    JSON type of each value (``error`` aside: null or a message)."""
    if isinstance(value, dict):
        return {k: shape(v) if k != "error" else None for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def key_shape(name: str, answer: dict[str, object]) -> object:
    """``shape`` less the documented differences of ``name``."""
    if name == "environment":
        return shape({k: v for k, v in answer.items() if not _JVM_ONLY.match(k)})
    if name == "system_properties":
        return shape({k: v for k, v in answer.items() if k in ("command", "error")})
    if name == "monitor":
        # per-namespace figures come with the traffic (one per top-level znode read or written):
        # test_mntr_keys compares mntr's key sets; here the keys every server reports
        return shape({k: v for k, v in answer.items() if not mntr_excluded(k) and not k.endswith("_per_namespace")})
    if name in ("dump", "watches", "watches_by_path"):  # keyed by session ids and paths: the shape only
        return {k: (sorted(type(x).__name__ for x in v) if isinstance(v, dict) else None) for k, v in answer.items()}
    return shape(answer)


def differences(apache: object, zkpy: object, where: str = "") -> list[str]:
    """Where two shapes differ, for a failure message."""
    if isinstance(apache, dict) and isinstance(zkpy, dict):
        out = [f"{where}{k}: Apache only" for k in apache if k not in zkpy]
        out += [f"{where}{k}: zkpy only" for k in zkpy if k not in apache]
        for k in apache:
            if k in zkpy:
                out += differences(apache[k], zkpy[k], f"{where}{k}.")
        return out
    return [] if apache == zkpy else [f"{where}: {apache!r} != {zkpy!r}"]


class Pair:
    def __init__(self, apache: ServerProcess, zkpy: ServerProcess, ports: dict[str, int]) -> None:
        self.apache, self.zkpy, self.ports = apache, zkpy, ports


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    """A standalone Apache and a standalone zkpy with their AdminServers, each with one client
    that holds an ephemeral znode and a data watch (so connections, dump and watches list one)."""
    require_apache()
    a_port, z_port = free_ports(2)
    apache = start_apache(admin_settings(a_port))
    zkpy = start_zkpy(admin_settings(z_port))
    clients = []
    try:
        for server in (apache, zkpy):
            client = KazooClient(hosts=server.hosts)
            client.start(timeout=15)
            clients.append(client)
            client.create("/eph", b"x", ephemeral=True)
            client.get("/eph", watch=lambda event: None)
        yield Pair(apache, zkpy, {"apache": a_port, "zkpy": z_port})
    finally:
        for client in clients:
            client.stop()
            client.close()
        apache.cleanup()
        zkpy.cleanup()


def test_the_command_table_is_zookeepers() -> None:
    assert len(COMMANDS) == 26 and len(BY_NAME) == 48
    assert BY_NAME["srvr"].primary == "server_stats" and BY_NAME["mntr"].primary == "monitor"


def test_commands_lists_the_same_names(pair: Pair) -> None:
    listed = {}
    for kind, port in pair.ports.items():
        status, _ctype, body = get(port, "/commands")
        assert status == 200
        listed[kind] = re.findall(r'href="/commands/([a-z_]+)"', body)
    assert sorted(listed["zkpy"]) == sorted(listed["apache"]) == sorted(PRIMARY_NAMES)


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_every_command_and_alias_answers_apaches_keys(pair: Pair, name: str) -> None:
    a = command(pair.ports["apache"], name)
    z = command(pair.ports["zkpy"], name)
    primary = BY_NAME[name].primary
    assert a["command"] == z["command"] == primary
    assert key_shape(primary, z) == key_shape(primary, a), differences(key_shape(primary, a), key_shape(primary, z))
    assert (z["error"] is None) == (a["error"] is None), (a["error"], z["error"])


def test_monitor_is_mntr(pair: Pair) -> None:
    z = command(pair.ports["zkpy"], "monitor")
    words = four_letter(pair.zkpy.port, "mntr").splitlines()
    assert set(z) - {"command", "error"} == {line.split("\t", 1)[0][3:] for line in words if line}
    assert z["server_state"] == "standalone" and isinstance(z["znode_count"], int)
    assert isinstance(z["avg_latency"], float)


def test_unknown_command_and_arguments_as_apache(pair: Pair) -> None:
    for path in ("/commands/nope", "/commands/set_trace_mask", "/commands/set_trace_mask?traceMask=x"):
        answers = [get(port, path) for port in pair.ports.values()]
        (a_status, _, a_body), (z_status, _, z_body) = answers
        assert a_status == z_status == 200
        assert json.loads(a_body) == json.loads(z_body), path
    z = command(pair.ports["zkpy"], "stmk?traceMask=4")
    assert z["tracemask"] == 4 and command(pair.ports["zkpy"], "gtmk")["tracemask"] == 4
    assert four_letter(pair.zkpy.port, "gtmk") == "4"
    command(pair.ports["zkpy"], "stmk?traceMask=306")
    assert get(pair.ports["zkpy"], "/")[0] == get(pair.ports["apache"], "/")[0] == 404


# ---- an ensemble ----

QUORUM_COMMANDS = PRIMARY_NAMES  # the quorum ones (leader, voting_view, zabstate, observers) and all the rest


def _answers(kind: str) -> dict[str, dict[str, dict[str, object]]]:
    """role -> command -> answer, on a 3-member ensemble of ``kind`` servers."""
    ports = free_ports(3)
    servers = start_ensemble([kind] * 3, ALL_WORDS, member_settings={
        i + 1: {"admin.enableServer": "true", "admin.serverPort": str(p)} for i, p in enumerate(ports)})
    try:
        leader = ensemble_leader(servers)
        follower = next(s for s in servers if s is not leader)
        by_role = {}
        for role, server in (("leader", leader), ("follower", follower)):
            port = ports[int(server.extra["myid"]) - 1]
            by_role[role] = {name: command(port, name) for name in QUORUM_COMMANDS}
            by_role[role]["myid"] = {"id": int(server.extra["myid"])}
        return by_role
    finally:
        cleanup_ensemble(servers)


@pytest.mark.timeout(240)
def test_ensemble_commands_answer_apaches_keys() -> None:
    require_apache()
    a, z = _answers("apache"), _answers("zkpy")
    for role in ("leader", "follower"):
        for name in QUORUM_COMMANDS:
            if name == "monitor" and role == "follower":
                continue  # a follower's mntr is test_mntr_keys' business (it lacks quorum_size today)
            assert key_shape(name, z[role][name]) == key_shape(name, a[role][name]), \
                (role, name, differences(key_shape(name, a[role][name]), key_shape(name, z[role][name])))
            assert (z[role][name]["error"] is None) == (a[role][name]["error"] is None), (role, name)
    for answers in (a, z):
        leader, follower = answers["leader"], answers["follower"]
        assert leader["leader"]["is_leader"] is True and follower["leader"]["is_leader"] is False
        assert leader["leader"]["leader_id"] == follower["leader"]["leader_id"] == leader["myid"]["id"]
        assert leader["leader"]["leader_ip"] == "127.0.0.1"
        for role in (leader, follower):
            assert role["zabstate"]["voting"] is True and role["zabstate"]["zabstate"] == "broadcast"
            assert role["zabstate"]["myid"] == role["myid"]["id"]
        assert leader["zabstate"]["is_leader"] is True and follower["zabstate"]["is_leader"] is False
        assert leader["observers"]["synced_observers"] == 0
        view = leader["voting_view"]["current_config"]
        assert isinstance(view, dict) and sorted(view) == ["1", "2", "3"]
    views = [json.dumps(answers["leader"]["voting_view"]["current_config"]) for answers in (a, z)]
    assert re.sub(r"\d+", "N", views[0]) == re.sub(r"\d+", "N", views[1])


# ---- configuration ----

ADMIN_GUIDE_BLOCK = """admin.enableServer=true
admin.serverAddress=127.0.0.1
admin.serverPort={port}
admin.idleTimeout=30000
admin.commandURL=/commands
"""


def test_the_documented_admin_block_opens_the_endpoint() -> None:
    port = free_port()
    block = dict(line.split("=", 1) for line in ADMIN_GUIDE_BLOCK.format(port=port).splitlines())
    server = start_zkpy(block)
    try:
        assert command(port, "ruok") == {"command": "ruok", "error": None}
        assert "has no effect" not in server.log() and "admin." not in server.log().replace("AdminServer", "")
        initial = command(port, "initial_configuration")["initial_configuration"]
        assert isinstance(initial, str) and f"admin.serverPort={port}\n" in initial
    finally:
        server.cleanup()


def test_another_command_url_and_a_port_in_use() -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    busy = taken.getsockname()[1]
    port = free_port()
    moved = start_zkpy({"admin.enableServer": "true", "admin.serverPort": str(port), "admin.commandURL": "/zk/"})
    blocked = start_zkpy({"admin.enableServer": "true", "admin.serverPort": str(busy)})
    try:
        status, _ctype, body = get(port, "/zk/ruok")
        assert status == 200 and json.loads(body)["command"] == "ruok"
        assert get(port, "/commands/ruok")[0] == 404
        assert four_letter(blocked.port, "ruok") == "imok"  # serving without its AdminServer
        deadline = time.monotonic() + 10
        while "AdminServer cannot listen" not in blocked.log() and time.monotonic() < deadline:
            time.sleep(0.05)
        lines = [line for line in blocked.log().splitlines() if "AdminServer cannot listen" in line]
        assert len(lines) == 1 and str(busy) in lines[0]
        assert four_letter(blocked.port, "ruok") == "imok"
    finally:
        taken.close()
        moved.cleanup()
        blocked.cleanup()


def test_https_only_with_the_client_key_store(tmp_path_factory: pytest.TempPathFactory) -> None:
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    port = free_port()
    server = start_zkpy({"admin.enableServer": "true", "admin.serverPort": str(port), "admin.forceHttps": "true",
                         "secureClientPort": str(free_port()), "ssl.keyStore.location": str(pki.server.pem),
                         "ssl.trustStore.location": str(pki.ca_pem)})
    try:
        context = ssl.create_default_context(cafile=str(pki.ca_pem))
        deadline = time.monotonic() + 10
        while True:
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{port}/commands/ruok", timeout=10,
                                            context=context) as r:
                    assert json.loads(r.read()) == {"command": "ruok", "error": None}
                break
            except urllib.error.URLError as exc:
                if isinstance(exc.reason, ssl.SSLError) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/commands/ruok", timeout=10)
    finally:
        server.cleanup()
