"""The pytest plugin (zkpy.testing.pytest_plugin): its fixtures, as a user's suite gets them, and
that loading it changes nothing for a suite that does not use them (this one included).

The fixtures are imported here, so these tests hold whether or not the installed distribution has
registered the plugin's entry point; tests/integration/test_examples.py checks the entry point
itself, from the built wheel in a fresh virtual environment."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from zkpy.errors import NodeExistsError
from zkpy.testing import pytest_plugin
from zkpy.testing.pytest_plugin import ZkEnsemble, ZkServer
from zkpy.testing.servers import four_letter

TESTS = Path(__file__).resolve().parents[1]

# the plugin's fixtures, as module fixtures: the same whether its entry point is registered or not
globals().update({name: getattr(pytest_plugin, name) for name in pytest_plugin.__all__ if name.startswith("zk_")})


def test_the_plugin_has_no_hook_no_autouse_fixture_and_no_name_a_project_fixture_has() -> None:
    hooks = [name for name in vars(pytest_plugin) if name.startswith("pytest_")]
    assert hooks == []
    fixtures = {name: obj for name, obj in vars(pytest_plugin).items() if name.startswith("zk_")}
    assert set(fixtures) == {n for n in pytest_plugin.__all__ if n.startswith("zk_")}
    for fixture in fixtures.values():
        assert not getattr(fixture, "_fixture_function_marker", None) or not fixture._fixture_function_marker.autouse
    ours = set()
    for path in TESTS.rglob("*.py"):
        if path.name == Path(__file__).name:
            continue
        ours |= set(re.findall(r"@pytest\.fixture[^\n]*\n(?:@[^\n]*\n)*(?:async )?def (\w+)", path.read_text()))
    assert ours and not ours & set(fixtures), ours & set(fixtures)


@pytest.mark.parametrize("attempt", [1, 2])
def test_each_test_gets_an_empty_tree_on_the_shared_server(zk_hosts: str, zk_client: object,
                                                            zk_server: ZkServer, attempt: int) -> None:
    kz = KazooClient(zk_hosts)
    kz.start()
    try:
        assert kz.get_children("/") == []
        kz.create("/job", b"kazoo")  # the second attempt would meet the first's node on a shared tree
        assert zk_client.get("/job")[0] == b"kazoo"  # type: ignore[attr-defined]
        with pytest.raises(NodeExistsError):
            zk_client.create("/job")  # type: ignore[attr-defined]
    finally:
        kz.stop()
        kz.close()
    assert zk_server.mode() == "standalone"


def test_the_earlier_tests_chroots_are_gone(zk_server: ZkServer) -> None:
    """Runs after the two above (file order): their chroots and everything under them went with them."""
    kz = KazooClient(zk_server.hosts)
    kz.start()
    try:
        assert kz.get_children("/") == ["zookeeper"]
    finally:
        kz.stop()
        kz.close()


def test_the_async_client_runs_in_the_tests_own_loop(zk_async_client: Callable[..., object]) -> None:
    async def main() -> list[str]:
        async with zk_async_client() as zk:  # type: ignore[operator]
            await zk.create("/a", b"1")
            return list(await zk.get_children("/"))

    assert asyncio.run(main()) == ["a"]


def test_a_server_of_the_tests_own_pauses_dies_and_restarts_with_its_data(
        zk_server_factory: Callable[..., ZkServer]) -> None:
    server = zk_server_factory({"maxClientCnxns": "10"})
    kz = KazooClient(server.hosts)
    kz.start()
    try:
        kz.create("/kept", b"v")
    finally:
        kz.stop()
        kz.close()
    server.pause()
    with pytest.raises(OSError):
        four_letter(server.port, "ruok", timeout=0.5)  # frozen: no answer
    server.resume()
    assert four_letter(server.port, "ruok") == "imok"
    server.kill()
    assert not server.running
    server.restart()
    kz = KazooClient(server.hosts)
    kz.start()
    try:
        assert kz.get("/kept")[0] == b"v"
    finally:
        kz.stop()
        kz.close()


@pytest.mark.parametrize("workers", [1, 2], ids=["1-process", "2-workers-each"])
def test_an_isolated_leader_is_replaced_and_rejoins_after_heal(zk_ensemble_factory: Callable[..., ZkEnsemble],
                                                               workers: int) -> None:
    """Also with a dedicated member behind two workers on every member (serverWorkers=2): the
    partition ends the terms, the workers go and come back with the next ones."""
    zk_ensemble = zk_ensemble_factory(3, {"serverWorkers": str(workers)})
    old = zk_ensemble.leader()
    rest = [m for m in zk_ensemble.members if m is not old]
    kz = KazooClient(zk_ensemble.hosts)
    kz.start()
    try:
        kz.create("/before", b"1")
        zk_ensemble.isolate(old)
        new = zk_ensemble.leader(among=rest)
        assert new is not old
        writer = KazooClient(new.hosts)
        writer.start()
        try:
            writer.create("/during", b"2")
        finally:
            writer.stop()
            writer.close()
        zk_ensemble.heal()
        zk_ensemble.wait_serving()
        assert old.mode() in ("follower", "leader")
        reader = KazooClient(old.hosts)
        reader.start()
        try:
            reader.sync("/")
            assert reader.exists("/before") and reader.exists("/during")
        finally:
            reader.stop()
            reader.close()
        rest[0].kill()
        rest[0].restart()
        assert rest[0].mode() in ("follower", "leader")
    finally:
        kz.stop()
        kz.close()
