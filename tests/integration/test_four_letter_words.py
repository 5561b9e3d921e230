"""Four-letter words: the same answers, line for line, from zkpy and Apache ZooKeeper 3.8.

Structure is compared (lines, keys, formats), not numbers; where a word reports sessions,
watches or ephemerals, the test creates them with kazoo and looks for exactly those.
"""

from __future__ import annotations

import re
import socket
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from kazoo.client import KazooClient
from tests.conftest import require_apache

from zkpy.testing.servers import ServerProcess, four_letter, start_apache, start_zkpy

MASK64 = (1 << 64) - 1
VERSION = r"3\.8\.\d+-\S+, built on \d{4}-\d\d-\d\d \d\d:\d\d \S+"
JAVA_DOUBLE = r"-?\d+\.\d+(E-?\d+)?"
ADDRESS = r"/[0-9a-f.:\[\]]+:\d+"
BRIEF_CONN = ADDRESS + r"\[[0-9a-f]+\]\(queued=\d+,recved=\d+,sent=\d+"
FULL_CONN = (BRIEF_CONN + r",sid=0x[0-9a-f]+,lop=\w+,est=\d+,to=\d+(,lcxid=0x[0-9a-f]+)?,lzxid=0x[0-9a-f]+,"
             r"lresp=\d+,llat=\d+,minlat=\d+,avglat=\d+,maxlat=\d+")
JAVA_DATE = r"\w{3} \w{3} \d\d \d\d:\d\d:\d\d \S+ \d{4}"

SERVER_STATS = [
    rf"Latency min/avg/max: \d+/{JAVA_DOUBLE}/\d+",
    r"Received: \d+",
    r"Sent: \d+",
    r"Connections: \d+",
    r"Outstanding: \d+",
    r"Zxid: 0x[0-9a-f]+",
    r"Mode: standalone",
    r"Node count: \d+",
]
MNTR_KEYS = [  # what operators' dashboards and exporters read
    "zk_version", "zk_server_state", "zk_avg_latency", "zk_min_latency", "zk_max_latency",
    "zk_packets_received", "zk_packets_sent", "zk_num_alive_connections", "zk_outstanding_requests",
    "zk_znode_count", "zk_watch_count", "zk_ephemerals_count", "zk_approximate_data_size",
    "zk_open_file_descriptor_count", "zk_max_file_descriptor_count", "zk_uptime", "zk_global_sessions",
    "zk_local_sessions",
]
CONF_KEYS = ["clientPort", "secureClientPort", "dataDir", "dataDirSize", "dataLogDir", "dataLogSize", "tickTime",
             "maxClientCnxns", "minSessionTimeout", "maxSessionTimeout", "clientPortListenBacklog", "serverId"]


@pytest.fixture(scope="module", params=["zkpy", "apache"])
def own_server(request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    """A server only this module uses: counters and session counts move only by what a test does."""
    if request.param == "apache":
        require_apache()
    server = start_zkpy() if request.param == "zkpy" else start_apache()
    yield server
    server.cleanup()


def lines_match(text: str, patterns: list[str]) -> None:
    """``text`` is exactly one line per pattern, each ending in a newline."""
    assert text.endswith("\n"), repr(text)
    lines = text[:-1].split("\n")
    assert len(lines) == len(patterns), text
    for line, pattern in zip(lines, patterns):
        assert re.fullmatch(pattern, line), (line, pattern)


def wait_for(check: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "condition not reached before the deadline"
        time.sleep(0.02)


@contextmanager
def kazoo(server: ServerProcess) -> Iterator[KazooClient]:
    zk = KazooClient(hosts=server.hosts, timeout=10)
    zk.start(timeout=15)
    try:
        yield zk
    finally:
        zk.stop()
        zk.close()


def sid_of(zk: KazooClient) -> str:
    return f"0x{zk.client_id[0] & MASK64:x}"


def unique(prefix: str) -> str:
    return f"/{prefix}-{uuid.uuid4().hex[:8]}"


def mntr(server: ServerProcess) -> dict[str, str]:
    text = four_letter(server.port, "mntr")
    assert text.endswith("\n")
    out = {}
    for line in text[:-1].split("\n"):
        key, value = line.split("\t")  # exactly one tab per line
        out[key] = value
    return out


# ---- simple words ----

def test_ruok_and_isro(any_server: ServerProcess) -> None:
    assert four_letter(any_server.port, "ruok") == "imok"
    assert four_letter(any_server.port, "isro") == "rw"


def test_srvr_is_what_zkserver_sh_status_parses(any_server: ServerProcess) -> None:
    text = four_letter(any_server.port, "srvr")
    lines_match(text, [rf"Zookeeper version: {VERSION}", *SERVER_STATS])
    assert [line for line in text.splitlines() if "Mode" in line] == ["Mode: standalone"]  # `grep Mode`


def test_stat_lists_every_connection_with_the_asking_one(any_server: ServerProcess) -> None:
    with kazoo(any_server):
        text = four_letter(any_server.port, "stat")
    head, clients_and_rest = text.split("Clients:\n", 1)
    assert re.fullmatch(rf"Zookeeper version: {VERSION}\n", head)
    clients, rest = clients_and_rest.split("\n\n", 1)
    conns = clients.split("\n")
    assert len(conns) >= 2
    for line in conns:
        assert re.fullmatch(rf" {BRIEF_CONN}\)", line), line
    assert any(re.fullmatch(rf" {ADDRESS}\[0\]\(queued=0,recved=1,sent=0\)", line) for line in conns)
    lines_match(rest, SERVER_STATS)


def test_conf_keys_and_values(any_server: ServerProcess) -> None:
    text = four_letter(any_server.port, "conf")
    lines_match(text, [rf"{key}=.*" for key in CONF_KEYS])
    conf = dict(line.split("=", 1) for line in text.splitlines())
    assert int(conf["clientPort"]) == any_server.port
    assert conf["tickTime"] == "2000" and conf["maxClientCnxns"] == "0"
    assert (conf["minSessionTimeout"], conf["maxSessionTimeout"]) == ("4000", "40000")
    assert conf["dataDir"].startswith(any_server.workdir) and conf["dataDir"].endswith("/version-2")
    for key in ("dataDirSize", "dataLogSize", "secureClientPort", "clientPortListenBacklog", "serverId"):
        int(conf[key])


def test_dirs_reports_sizes(any_server: ServerProcess) -> None:
    lines_match(four_letter(any_server.port, "dirs"), [r"datadir_size: \d+", r"logdir_size: \d+"])


def test_envi_is_key_value_lines_and_kazoo_reads_the_version(any_server: ServerProcess) -> None:
    text = four_letter(any_server.port, "envi")
    lines = text.splitlines()
    assert text.endswith("\n") and lines[0] == "Environment:"
    assert re.fullmatch(rf"zookeeper\.version={VERSION}", lines[1])
    for line in lines[1:]:
        assert re.fullmatch(r"[a-z.]+=.*", line), line
    keys = {line.split("=", 1)[0] for line in lines[1:]}
    assert {"host.name", "os.name", "os.arch", "os.version", "user.name", "user.home", "user.dir"} <= keys
    with kazoo(any_server) as zk:
        assert zk.server_version() == ((3, 8, 5) if any_server.kind == "zkpy" else (3, 8, 0))  # Debian's 3.8.0


def test_mntr_is_tab_separated_with_the_keys_tools_read(any_server: ServerProcess) -> None:
    values = mntr(any_server)
    assert set(MNTR_KEYS) <= set(values)
    assert re.fullmatch(VERSION, values["zk_version"])
    assert values["zk_server_state"] == "standalone"
    assert re.fullmatch(JAVA_DOUBLE, values["zk_avg_latency"])
    for key in MNTR_KEYS[3:]:
        assert re.fullmatch(r"\d+", values[key]), (key, values[key])


def test_mntr_keys_are_apaches(zkpy_server: ServerProcess, apache_server: ServerProcess) -> None:
    """Every key zkpy reports is one Apache ZooKeeper reports too, under the same name."""
    assert set(mntr(zkpy_server)) <= set(mntr(apache_server))


def test_mntr_counts_follow_sessions_nodes_and_watches(own_server: ServerProcess) -> None:
    before = mntr(own_server)
    path = unique("mntr")
    with kazoo(own_server) as zk:
        zk.create(path, b"12345")
        zk.create(path + "/eph", b"", ephemeral=True)
        zk.get(path, watch=lambda _e: None)
        zk.get_children(path, watch=lambda _e: None)
        during = mntr(own_server)
    after = mntr(own_server)

    def delta(values: dict[str, str], key: str) -> int:
        return int(values[key]) - int(before[key])

    assert delta(during, "zk_znode_count") == 2
    assert delta(during, "zk_ephemerals_count") == 1
    assert delta(during, "zk_watch_count") == 2  # one data watch, one child watch
    assert delta(during, "zk_global_sessions") == 1
    assert delta(during, "zk_approximate_data_size") == len(path) + 5 + len(path + "/eph")
    assert delta(during, "zk_num_alive_connections") == 1
    assert int(during["zk_packets_received"]) > int(before["zk_packets_received"])
    assert delta(after, "zk_ephemerals_count") == 0 and delta(after, "zk_global_sessions") == 0
    assert delta(after, "zk_znode_count") == 1


# ---- sessions, connections, watches ----

def test_cons_shows_each_session(any_server: ServerProcess) -> None:
    with kazoo(any_server) as zk1, kazoo(any_server) as zk2:
        s1, s2 = sid_of(zk1), sid_of(zk2)
        zk1.create(unique("cons"), b"")
        text = four_letter(any_server.port, "cons")
    assert text.endswith("\n\n")
    lines = text[:-2].split("\n")
    full = [line for line in lines if ",sid=" in line]
    for line in full:
        assert re.fullmatch(rf" {FULL_CONN}\)", line), line
    seen = {re.search(r",sid=(0x[0-9a-f]+),", line).group(1) for line in full}  # type: ignore[union-attr]
    assert {s1, s2} <= seen
    creator = next(line for line in full if f"sid={s1}," in line)
    assert ",lop=CREA," in creator and ",to=10000," in creator
    assert any(re.fullmatch(rf" {ADDRESS}\[0\]\(queued=0,recved=1,sent=0\)", line) for line in lines)


def parse_grouped(text: str, head: str, item: str) -> dict[str, set[str]]:
    """wchc/wchp output: a heading line matching ``head``, then tab-indented lines matching ``item``."""
    assert text.endswith("\n")
    out: dict[str, set[str]] = {}
    current = ""
    for line in text[:-1].split("\n"):
        if not line:
            continue
        if line.startswith("\t"):
            assert re.fullmatch(item, line[1:]), line
            out[current].add(line[1:])
        else:
            assert re.fullmatch(head, line), line
            current = line
            out[current] = set()
    return out


def parse_wchc(text: str) -> dict[str, set[str]]:
    return parse_grouped(text, r"0x[0-9a-f]+", r"/.*")


def parse_wchp(text: str) -> dict[str, set[str]]:
    return parse_grouped(text, r"/.*", r"0x[0-9a-f]+")


def test_watch_words_report_data_watches_by_session_and_path(any_server: ServerProcess) -> None:
    a, b, missing = unique("wa"), unique("wb"), unique("missing")
    with kazoo(any_server) as zk1, kazoo(any_server) as zk2:
        s1, s2 = sid_of(zk1), sid_of(zk2)
        zk1.create(a, b"")
        zk1.create(b, b"")
        zk1.get(a, watch=lambda _e: None)
        zk1.exists(missing, watch=lambda _e: None)
        zk2.get(a, watch=lambda _e: None)
        zk2.get_children(b, watch=lambda _e: None)  # child watches are not listed, as in ZooKeeper 3.8

        by_session = parse_wchc(four_letter(any_server.port, "wchc"))
        assert by_session[s1] == {a, missing} and by_session[s2] == {a}
        by_path = parse_wchp(four_letter(any_server.port, "wchp"))
        assert by_path[a] == {s1, s2} and by_path[missing] == {s1} and b not in by_path

        total = sum(len(paths) for paths in by_session.values())
        lines_match(four_letter(any_server.port, "wchs"), [
            rf"{len(by_session)} connections watching {len(by_path)} paths", rf"Total watches:{total}"])

        zk2.set(a, b"fire")  # one-time watches are consumed when they fire
        assert a not in parse_wchp(four_letter(any_server.port, "wchp"))
    wait_for(lambda: not {s1, s2} & set(parse_wchc(four_letter(any_server.port, "wchc"))))


def test_dump_shows_sessions_ephemerals_and_connections(any_server: ServerProcess) -> None:
    path = unique("dump")
    with kazoo(any_server) as zk:
        sid = sid_of(zk)
        zk.create(path, b"", ephemeral=True)
        text = four_letter(any_server.port, "dump")
    sessions, rest = text.split("ephemeral nodes dump:\n")
    ephemerals, connections = rest.split("Connections dump:\n")
    s_lines = sessions.splitlines()
    assert s_lines[0] == "SessionTracker dump:"
    assert re.fullmatch(r"Session Sets \(\d+\)/\(\d+\):", s_lines[1])
    for line in s_lines[2:]:
        assert re.fullmatch(rf"\d+ expire at {JAVA_DATE}:|\t0x[0-9a-f]+", line), line
    assert f"\t{sid}" in s_lines
    assert re.match(r"Sessions with Ephemerals \(\d+\):\n", ephemerals)
    assert f"\n{sid}:\n\t{path}\n" in ephemerals
    c_lines = connections.splitlines()
    assert re.fullmatch(r"Connections Sets \(\d+\)/\(\d+\):", c_lines[0])
    for line in c_lines[1:]:
        assert re.fullmatch(rf"\d+ expire at {JAVA_DATE}:|\tip: {ADDRESS} sessionId: 0x[0-9a-f]+", line), line
    assert any(line.endswith(f" sessionId: {sid}") for line in c_lines)
    assert any(line.endswith(" sessionId: 0x0") for line in c_lines)  # the connection asking


# ---- words that change state ----

def test_srst_and_crst_reset_counters(own_server: ServerProcess) -> None:
    with kazoo(own_server) as zk:
        for _ in range(5):
            zk.exists("/")
        assert four_letter(own_server.port, "crst") == "Connection stats reset.\n"
        line = next(line for line in four_letter(own_server.port, "cons").splitlines() if sid_of(zk) in line)
        assert re.search(r"recved=[0-2],", line), line  # a ping may have arrived since
        assert four_letter(own_server.port, "srst") == "Server stats reset.\n"
        received = int(re.search(r"Received: (\d+)", four_letter(own_server.port, "srvr")).group(1))  # type: ignore[union-attr]
        assert 1 <= received <= 3


def test_gtmk_and_stmk(any_server: ServerProcess) -> None:
    original = int(four_letter(any_server.port, "gtmk"))
    for mask in (0b1010, original):
        with socket.create_connection(("127.0.0.1", any_server.port), timeout=5) as s:
            s.sendall(b"stmk" + struct.pack(">q", mask))
            answer = b""
            while chunk := s.recv(100):
                answer += chunk
        assert answer == str(mask).encode()
        assert four_letter(any_server.port, "gtmk") == str(mask)


# ---- the whitelist ----

@pytest.mark.parametrize("kind", ["zkpy", "apache"])
def test_default_whitelist_allows_only_srvr(kind: str) -> None:
    if kind == "apache":
        require_apache()
    start = start_zkpy if kind == "zkpy" else start_apache
    server = start({"4lw.commands.whitelist": None})
    try:
        assert four_letter(server.port, "srvr").startswith("Zookeeper version: 3.8.")
        for word in ("stat", "ruok", "mntr"):
            assert four_letter(server.port, word) == f"{word} is not executed because it is not in the whitelist.\n"
    finally:
        server.cleanup()


def test_explicit_whitelist_still_allows_srvr() -> None:
    server = start_zkpy({"4lw.commands.whitelist": "ruok, conf"})
    try:
        assert four_letter(server.port, "ruok") == "imok"
        assert four_letter(server.port, "conf").startswith("clientPort=")
        assert four_letter(server.port, "srvr").startswith("Zookeeper version: 3.8.5-zkpy-")
        assert four_letter(server.port, "cons") == "cons is not executed because it is not in the whitelist.\n"
    finally:
        server.cleanup()


def test_averages_print_as_java_doubles() -> None:
    """``Latency min/avg/max`` and ``zk_avg_latency`` carry Java's ``Double.toString``."""
    from zkpy.admin.fourletter import java_double

    cases = {0.0: "0.0", 5.1667: "5.1667", 12.0: "12.0", 0.001: "0.001", 0.0001: "1.0E-4",
             0.00025: "2.5E-4", 1e7: "1.0E7", 12345678.5: "1.23456785E7"}
    for value, text in cases.items():
        assert java_double(value) == text
