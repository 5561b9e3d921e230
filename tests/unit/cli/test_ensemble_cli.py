"""``zkpy ensemble``'s pure parts: port plans, zoo.cfg text, ensemble.json, and the status table
read from canned ``srvr`` answers (no sockets, no processes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from zkpy.cli import ensemble as ens
from zkpy.cli.ensemble import (
    Ensemble,
    EnsembleError,
    MemberStatus,
    ensemble_from_json,
    ensemble_to_json,
    has_quorum,
    load_ensemble,
    parse_hosts,
    plan_ensemble,
    reconcile,
    render_status,
    render_zoo_cfg,
    save_ensemble,
    status_from_answers,
    whitelist_note,
)
from zkpy.cli.main import main
from zkpy.cli.properties import parse_properties
from zkpy.cli.zoocfg import config_from_properties
from zkpy.config import LearnerType

ROOT = "/srv/ens"

# answers as Apache ZooKeeper 3.8 gives them (zkpy's srvr follows the same format)
SRVR_LEADER = """Zookeeper version: 3.8.0-5a02a05eddb59aee6ac762f7ea82e92a68eb9c0f, built on 2022-02-25 08:49 UTC
Latency min/avg/max: 0/0.125/3
Received: 12
Sent: 11
Connections: 2
Outstanding: 0
Zxid: 0x300000007
Mode: leader
Node count: 9
Proposal sizes last/min/max: 48/36/92
"""
SRVR_FOLLOWER = SRVR_LEADER.replace("Mode: leader", "Mode: follower").replace("Connections: 2", "Connections: 1") \
    .replace("Proposal sizes last/min/max: 48/36/92\n", "")
SRVR_NOT_SERVING = "This ZooKeeper instance is not currently serving requests\n"
CONF_SID_2 = "clientPort=2182\nsecureClientPort=-1\ndataDir=/d/version-2\ntickTime=2000\nserverId=2\n" \
             "initLimit=10\nsyncLimit=5\n"
CONF_REFUSED = "conf is not executed because it is not in the whitelist.\n"


def three_ports(count: int) -> list[int]:
    return list(range(40000, 40000 + count))


# ---- planning ----

def test_base_port_gives_clients_peers_and_elections_100_apart() -> None:
    plan = plan_ensemble(3, base_port=2181, tick_ms=500)
    assert [(m.sid, m.client_port, m.peer_port, m.election_port) for m in plan.members] == [
        (1, 2181, 2281, 2381), (2, 2182, 2282, 2382), (3, 2183, 2283, 2383)]
    assert plan.tick_ms == 500
    assert plan.connect_string == "127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183"
    assert [(m.zoo_cfg, m.data_dir, m.log_file) for m in plan.members][1] == (
        "server2/zoo.cfg", "server2/data", "server2/server.log")


def test_free_ports_are_used_three_per_member() -> None:
    plan = plan_ensemble(2, pick_ports=three_ports)
    assert [(m.client_port, m.peer_port, m.election_port) for m in plan.members] == [
        (40000, 40001, 40002), (40003, 40004, 40005)]


def test_the_last_members_are_the_observers() -> None:
    plan = plan_ensemble(5, observers=2, base_port=3000)
    assert [m.role for m in plan.members] == ["participant"] * 3 + ["observer"] * 2
    assert plan.observers == 2


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"size": 0}, "--size 0"),
    ({"size": 3, "observers": 3}, "--observers 3"),
    ({"size": 2, "observers": 1}, "at least two participants"),
    ({"size": 3, "base_port": 65400}, "--base-port 65400"),
    ({"size": 3, "tick_ms": 0}, "--tick-ms 0"),
    ({"size": 2, "pick_ports": lambda n: [5000] * n}, "distinct free ports"),
])
def test_impossible_plans_are_refused(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(EnsembleError, match=needle):
        plan_ensemble(**kwargs)  # type: ignore[arg-type]


# ---- zoo.cfg ----

def test_zoo_cfg_is_read_by_zkpy_as_the_planned_ensemble() -> None:
    plan = plan_ensemble(3, observers=0, base_port=2181, tick_ms=300)
    for member in plan.members:
        text = render_zoo_cfg(plan, member, ROOT)
        props = parse_properties(text)
        assert props["dataDir"] == f"{ROOT}/server{member.sid}/data"
        assert props["4lw.commands.whitelist"] == "*"
        assert props[f"server.{member.sid}"] == (f"127.0.0.1:{member.peer_port}:{member.election_port};"
                                                 f"127.0.0.1:{member.client_port}")
        cfg = config_from_properties(props, "zoo.cfg", lambda path, sid=member.sid: f"{sid}\n")
        assert (cfg.tick_ms, cfg.client_port, cfg.client_port_address) == (300, member.client_port, "127.0.0.1")
        assert cfg.four_letter_words == frozenset({"*"})
        assert cfg.quorum is not None and cfg.quorum.is_ensemble
        assert (cfg.quorum.my_id, cfg.quorum.init_limit_ticks, cfg.quorum.sync_limit_ticks) == (member.sid, 10, 5)
        assert [(s.sid, s.peer_port, s.election_port, s.client_port) for s in cfg.quorum.servers] == [
            (m.sid, m.peer_port, m.election_port, m.client_port) for m in plan.members]


def test_an_observer_says_so_twice() -> None:
    plan = plan_ensemble(3, observers=1, base_port=2181)
    observer = plan.members[2]
    text = render_zoo_cfg(plan, observer, ROOT)
    assert "peerType=observer\n" in text
    assert "server.3=127.0.0.1:2283:2383:observer;127.0.0.1:2183\n" in text
    cfg = config_from_properties(parse_properties(text), "zoo.cfg", lambda path: "3")
    assert cfg.quorum is not None and cfg.quorum.peer_type is LearnerType.OBSERVER
    assert "peerType" not in render_zoo_cfg(plan, plan.members[0], ROOT)


# ---- ensemble.json ----

def test_ensemble_json_round_trips_with_pids() -> None:
    plan = plan_ensemble(3, observers=0, base_port=2181).with_pids({1: 101, 3: 303})
    again = ensemble_from_json(ensemble_to_json(plan), "ensemble.json")
    assert again == plan
    assert [m.pid for m in again.members] == [101, None, 303]


def test_save_and_load(tmp_path: Path) -> None:
    plan = plan_ensemble(3, observers=1, base_port=2181)
    save_ensemble(str(tmp_path), plan)
    assert load_ensemble(str(tmp_path)) == plan
    assert not (tmp_path / "ensemble.json.tmp").exists()


def _doc() -> dict[str, object]:
    return json.loads(ensemble_to_json(plan_ensemble(3, base_port=2181)))  # type: ignore[no-any-return]


def _member(doc: dict[str, object], i: int) -> dict[str, object]:
    members = doc["members"]
    assert isinstance(members, list)
    return members[i]  # type: ignore[no-any-return]


@pytest.mark.parametrize(("mutate", "needle"), [
    (lambda d: _member(d, 1).update(client_port="2182"), "members[1].client_port=\"2182\" is not an integer"),
    (lambda d: _member(d, 2).update(peer_port=True), "members[2].peer_port=true is not an integer"),
    (lambda d: _member(d, 0).pop("election_port"), "members[0].election_port is missing"),
    (lambda d: _member(d, 1).update(role="leader"), "members[1].role='leader'"),
    (lambda d: _member(d, 2).update(client_port=2181), "members[2].client_port=2181 is also members[0].client_port"),
    (lambda d: _member(d, 1).update(sid=1), "members[1].sid=1"),
    (lambda d: _member(d, 0).update(peer_port=70000), "members[0].peer_port=70000 is not a port"),
    (lambda d: _member(d, 0).update(data_dir=""), "members[0].data_dir is empty"),
    (lambda d: d.update(version=9), "version=9"),
    (lambda d: d.update(tick_ms=0), "tick_ms=0"),
    (lambda d: d.update(members=[]), "members must be a non-empty list"),
    (lambda d: [_member(d, i).update(role="observer") for i in (1, 2)], "observers need at least two participants"),
])
def test_bad_ensemble_json_names_file_and_key(mutate: object, needle: str) -> None:
    doc = _doc()
    mutate(doc)  # type: ignore[operator]
    with pytest.raises(EnsembleError) as info:
        ensemble_from_json(json.dumps(doc), "/x/ensemble.json")
    assert str(info.value).startswith("/x/ensemble.json: ")
    assert needle in str(info.value)


def test_ensemble_json_that_is_not_json_names_the_place() -> None:
    with pytest.raises(EnsembleError, match=r"^/x/ensemble.json: not JSON: .* line 2 column"):
        ensemble_from_json('{"version": 1,\n oops}', "/x/ensemble.json")


def test_status_on_a_bad_ensemble_json_exits_2_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "ensemble.json").write_text("[]", encoding="utf-8")
    result = CliRunner().invoke(main, ["ensemble", "status", "--dir", str(tmp_path)])
    assert result.exit_code == 2
    assert f"{tmp_path}/ensemble.json: expected a JSON object" in result.stderr


def test_status_on_a_missing_dir_names_the_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["ensemble", "status", "--dir", str(tmp_path / "none")])
    assert result.exit_code == 2
    assert f"{tmp_path}/none/ensemble.json: cannot read" in result.stderr


def test_a_rerun_keeps_the_recorded_ensemble() -> None:
    recorded = plan_ensemble(3, observers=1, base_port=2181)
    assert reconcile(recorded, "e.json", None, None, None, None) == recorded
    assert reconcile(recorded, "e.json", 3, 1, 2181, 100) == Ensemble(100, recorded.members)
    with pytest.raises(EnsembleError, match="^e.json: the ensemble has 3 servers, --size asks for 5"):
        reconcile(recorded, "e.json", 5, None, None, None)
    with pytest.raises(EnsembleError, match="^e.json: the ensemble has 1 observers"):
        reconcile(recorded, "e.json", None, 0, None, None)
    with pytest.raises(EnsembleError, match="^e.json: server.1 uses ports 2181/2281/2381, not those of --base-port 3000"):
        reconcile(recorded, "e.json", None, None, 3000, None)


def test_run_without_size_or_ensemble_json_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["ensemble", "--dir", str(tmp_path / "new")])
    assert result.exit_code == 2
    assert "--size is needed" in result.stderr
    assert not (tmp_path / "new").exists()


def test_run_options_before_status_are_refused() -> None:
    result = CliRunner().invoke(main, ["ensemble", "--size", "3", "status"])
    assert result.exit_code == 2 and "options before 'status'" in result.stderr


# ---- status from canned answers ----

def test_srvr_answers_become_rows() -> None:
    leader = status_from_answers("127.0.0.1:2181", 1, SRVR_LEADER)
    assert leader == MemberStatus("127.0.0.1:2181", 1, "leader", 0x300000007, 2, 9)
    assert leader.epoch == 3 and leader.serving
    follower = status_from_answers("127.0.0.1:2182", None, SRVR_FOLLOWER, CONF_SID_2)
    assert (follower.sid, follower.role, follower.connections) == (2, "follower", 1)
    assert status_from_answers("h:1", None, SRVR_FOLLOWER, CONF_REFUSED).sid is None
    not_serving = status_from_answers("h:1", 3, SRVR_NOT_SERVING)
    assert (not_serving.role, not_serving.zxid, not_serving.serving) == ("not serving", None, False)
    down = status_from_answers("h:1", 4, None)
    assert (down.role, down.epoch, down.serving) == ("down", None, False)


def test_a_whitelist_without_conf_and_mntr_is_named_under_the_table() -> None:
    """ZooKeeper 3.8's default whitelist (the operations guide's ensemble) allows srvr alone:
    the sid and sessions cells are "-", and a line says why and what to add."""
    refused_mntr = "mntr is not executed because it is not in the whitelist.\n"
    rows = [status_from_answers("h:1", None, SRVR_LEADER, CONF_REFUSED, refused_mntr),
            status_from_answers("h:2", None, SRVR_FOLLOWER, CONF_REFUSED, refused_mntr)]
    assert [(r.sid, r.sessions, r.refused) for r in rows] == [(None, None, ("conf", "mntr"))] * 2
    assert whitelist_note(rows) == ("sid and sessions: '-' where conf and mntr are not in 4lw.commands.whitelist "
                                    "(add conf,mntr to it to see them)")
    assert whitelist_note([status_from_answers("h:1", 1, SRVR_LEADER, None, refused_mntr)]) == (
        "sessions: '-' where mntr is not in 4lw.commands.whitelist (add mntr to it to see them)")
    assert whitelist_note([status_from_answers("h:1", 1, SRVR_LEADER, None, "zk_global_sessions\t5\n")]) is None


def test_status_table_is_aligned() -> None:
    rows = [MemberStatus("127.0.0.1:2181", 1, "leader", 0x300000007, 2, 9, 4),
            MemberStatus("127.0.0.1:2182", 2, "follower", 0x300000007, 1, 9),
            MemberStatus("127.0.0.1:12183", 13, "down")]
    assert render_status(rows) == (
        "sid  address          role      zxid         epoch  sessions  conns  znodes\n"
        "1    127.0.0.1:2181   leader    0x300000007  3      4         2      9\n"
        "2    127.0.0.1:2182   follower  0x300000007  3      -         1      9\n"
        "13   127.0.0.1:12183  down      -            -      -         -      -\n")


def test_sessions_come_from_mntr_when_it_is_whitelisted() -> None:
    mntr = "zk_version\t3.8.0\nzk_global_sessions\t5\nzk_local_sessions\t0\n"
    assert status_from_answers("h:1", 1, SRVR_LEADER, None, mntr).sessions == 5
    refused = "mntr is not executed because it is not in the whitelist.\n"
    assert status_from_answers("h:1", 1, SRVR_LEADER, None, refused).sessions is None


@pytest.mark.parametrize(("roles", "observers", "ok", "line"), [
    (["leader", "follower", "follower"], (), True, "quorum: 3 of 3 voting servers serving (a quorum is 2)"),
    (["leader", "follower", "down"], (), True, "quorum: 2 of 3 voting servers serving (a quorum is 2)"),
    (["not serving", "down", "down"], (), False, "no quorum: 0 of 3 voting servers serving (a quorum is 2)"),
    (["follower", "down", "down"], (), False, "no quorum: 1 of 3 voting servers serving (a quorum is 2)"),
    (["leader", "follower", "observer", "observer"], (), True, "quorum: 2 of 2 voting servers serving"),
    (["leader", "down", "down"], ("a:3",), False, "no quorum: 1 of 2 voting servers serving (a quorum is 2)"),
    (["standalone"], (), True, "quorum: 1 of 1 voting servers serving (a quorum is 1)"),
])
def test_quorum_is_a_majority_of_voters(roles: list[str], observers: tuple[str, ...], ok: bool, line: str) -> None:
    rows = [MemberStatus(f"a:{i + 1}", i + 1, role) for i, role in enumerate(roles)]
    verdict, text = has_quorum(rows, observers)
    assert verdict is ok and text.startswith(line)


def test_hosts_are_read_as_a_connect_string() -> None:
    assert parse_hosts("a:1,b:2") == [("a", 1), ("b", 2)]
    assert parse_hosts(" a , [::1]:2182,[fe80::1]/chroot/x") == [("a", 2181), ("::1", 2182), ("fe80::1", 2181)]
    for bad in ("", "a:x", "a:0", "[::1", "[::1]x", ":2181"):
        with pytest.raises(EnsembleError, match="^--hosts: "):
            parse_hosts(bad)


def test_status_command_reports_and_exits_by_quorum(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = {2181: SRVR_LEADER, 2182: SRVR_FOLLOWER, 2183: None}
    confs = {2181: "serverId=1\n", 2182: CONF_SID_2}
    mntrs = {2181: "zk_global_sessions\t4\n", 2182: "zk_global_sessions\t4\n"}

    def fake(host: str, port: int, word: str, timeout: float = 2.0) -> str:
        text = {"srvr": answers, "conf": confs, "mntr": mntrs}[word].get(port)
        if text is None:
            raise ConnectionRefusedError(111, "Connection refused")
        return text

    monkeypatch.setattr(ens, "four_letter", fake)
    hosts = "127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183"
    result = CliRunner().invoke(main, ["ensemble", "status", "--hosts", hosts])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[1].split() == ["1", "127.0.0.1:2181", "leader", "0x300000007", "3", "4", "2", "9"]
    assert lines[2].split() == ["2", "127.0.0.1:2182", "follower", "0x300000007", "3", "4", "1", "9"]
    assert lines[3].split() == ["-", "127.0.0.1:2183", "down", "-", "-", "-", "-", "-"]
    assert lines[4] == "quorum: 2 of 3 voting servers serving (a quorum is 2)"
    answers[2182] = SRVR_NOT_SERVING
    result = CliRunner().invoke(main, ["ensemble", "status", "--hosts", hosts])
    assert result.exit_code == 1
    assert "not serving" in result.stdout and result.stdout.endswith("no quorum: 1 of 3 voting servers serving "
                                                                     "(a quorum is 2)\n")


def test_status_of_a_dir_knows_sids_and_observers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = plan_ensemble(4, observers=1, base_port=2181)
    save_ensemble(str(tmp_path), plan)
    asked: list[tuple[int, str]] = []

    def fake(host: str, port: int, word: str, timeout: float = 2.0) -> str:
        asked.append((port, word))
        if port == 2184:
            raise ConnectionRefusedError(111, "Connection refused")
        if word == "mntr":
            return "mntr is not executed because it is not in the whitelist.\n"
        return SRVR_LEADER if port == 2181 else SRVR_FOLLOWER

    monkeypatch.setattr(ens, "four_letter", fake)
    result = CliRunner().invoke(main, ["ensemble", "status", "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    # no conf (the sids are known), mntr only from those that answered srvr
    assert sorted(asked) == [(2181, "mntr"), (2181, "srvr"), (2182, "mntr"), (2182, "srvr"), (2183, "mntr"),
                             (2183, "srvr"), (2184, "srvr")]
    assert [line.split()[0] for line in result.stdout.splitlines()[1:5]] == ["1", "2", "3", "4"]
    assert result.stdout.splitlines()[-1] == "quorum: 3 of 3 voting servers serving (a quorum is 2)"
