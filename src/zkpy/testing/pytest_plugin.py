"""pytest fixtures for code that uses ZooKeeper: real zkpy servers on loopback, no JVM, no Docker.

Installed with zkpy, this plugin loads by itself (entry point ``pytest11``, name ``zkpy``;
``pytest -p no:zkpy`` turns it off). Every fixture name starts with ``zk_``, so none shadows a
project's own; none is autouse, and the plugin adds no hook, so a suite that asks for none of its
fixtures runs exactly as without it. docs/testing.md is the user's guide.

- ``zk_server`` (session): one standalone zkpy server for the whole run (it serves in about 0.3 s).
- ``zk_chroot`` (test): a fresh, empty znode on ``zk_server``; its subtree is removed after the test.
- ``zk_hosts`` (test): ``zk_server``'s connect string with ``zk_chroot`` as chroot, for any client
  (kazoo's ``KazooClient(zk_hosts)``, zkpy's ``Client(zk_hosts)``): each test sees an empty tree.
- ``zk_client`` (test): a started zkpy ``Client`` on ``zk_hosts``, closed after the test.
- ``zk_async_client`` (test): ``async with zk_async_client() as zk:`` gives a started zkpy
  ``AsyncClient`` on ``zk_hosts`` in the running event loop (a client belongs to one loop, so the
  test's loop makes it: with ``asyncio.run`` or pytest-asyncio/anyio alike).
- ``zk_server_factory`` (test): ``zk_server_factory(settings)`` starts a server of the test's own
  (zoo.cfg keys in ``settings``) that it may kill, pause or restart; all are removed after the test.
- ``zk_ensemble_factory`` (test): ``zk_ensemble_factory(n)`` starts an ensemble of ``n`` members
  whose peer links can be partitioned; ``zk_ensemble`` is a 3-member one.

Invariants: a fixture's servers, clients and data dirs are gone when its scope ends, whatever the
test did to them; every peer link of a ``ZkEnsemble`` (member ``i`` to member ``j``, quorum and
election port) goes through a proxy of its own, so cutting member ``i`` from member ``j`` touches
no other link. A member's own line announces its quorum and election ports on ``0.0.0.0`` while
it listens on 127.0.0.1 only (``zkpy.quorumBindAddress``): a peer that is dialled by a lower id
dials back to the address that id announced, and a wildcard one sends it to its configuration,
that is through the proxy, where a loopback address would go around it. The servers themselves come from zkpy.testing.servers, the proxies from
zkpy.testing.proxy: this module only wires them to pytest.
"""

from __future__ import annotations

import contextlib
import re
import signal
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # the rest loads when a fixture is used: pytest's start-up pays nothing for the plugin
    from zkpy.recipes.clients import AsyncClient, Client
    from zkpy.testing.proxy import CutMode, TcpProxy
    from zkpy.testing.servers import ServerProcess

Settings = Mapping[str, str | None]


class ZkServer:
    """A zkpy server process started for a test, with the faults a test may inject.

    ``hosts`` is its connect string; ``process`` the underlying ``ServerProcess`` (its ``log()``
    shows what the server wrote). A standalone server restarts on the same port and data dir; an
    ensemble member rejoins its ensemble."""

    def __init__(self, process: ServerProcess, settings: Settings | None = None) -> None:
        self.process = process
        self._settings = dict(settings or {})

    @property
    def hosts(self) -> str:
        return self.process.hosts

    @property
    def port(self) -> int:
        return self.process.port

    @property
    def myid(self) -> int | None:
        """The member's id in its ensemble (None for a standalone server)."""
        myid = self.process.extra.get("myid")
        return int(myid) if myid is not None else None

    @property
    def running(self) -> bool:
        return self.process.proc.poll() is None

    def mode(self) -> str | None:
        """What ``srvr`` says: standalone, leader, follower, observer, read-only; None if it does not
        serve (or does not answer within 5 s: a loaded CI machine can take more than one)."""
        from zkpy.testing.servers import server_mode

        return server_mode(self.process, timeout=5.0)

    def kill(self) -> None:
        """SIGKILL: a crash (nothing is flushed beyond what the server had synced)."""
        self.resume()
        self.process.stop(signal.SIGKILL)

    def stop(self) -> None:
        """SIGTERM: a clean shutdown."""
        self.resume()
        self.process.stop()

    def pause(self) -> None:
        """SIGSTOP: the process freezes with its sockets open, as a long GC pause or a hung host."""
        if self.running:
            self.process.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after ``pause``."""
        if self.running:
            self.process.proc.send_signal(signal.SIGCONT)

    def restart(self, wait: bool = True, ready_s: float = 30.0) -> None:
        """Stop the server if it runs, then start it again on the same port and data dir; with
        ``wait``, return once it serves."""
        from zkpy.testing import servers

        self.stop()
        if self.myid is None:
            self.process.proc = servers.start_zkpy(self._settings, ready_s, workdir=self.process.workdir,
                                           port=self.process.port, wait=wait).proc
            return
        servers.restart_ensemble_member(self.process)
        if wait:
            servers.wait_ensemble_serving([self.process], ready_s)

    def cleanup(self) -> None:
        self.resume()
        self.process.cleanup()

    def __repr__(self) -> str:
        who = f"member {self.myid}" if self.myid is not None else "server"
        return f"<ZkServer {who} {self.hosts} {'running' if self.running else 'stopped'}>"


class ZkEnsemble:
    """An ensemble of zkpy members on loopback whose peer links can be cut.

    ``members`` in myid order; ``hosts`` is the connect string of all of them. ``partition(*groups)``
    cuts every peer link between members of different groups (clients still reach every member,
    as in a network split between racks); ``isolate(member)`` is ``partition([member], others)``;
    ``heal()`` restores every link."""

    def __init__(self, n: int = 3, settings: Settings | None = None, *, tick_ms: int = 200,
                 ready_s: float = 60.0) -> None:
        if n < 1:
            raise ValueError("an ensemble needs at least one member")
        from zkpy.testing import servers
        from zkpy.testing.proxy import TcpProxy

        ports = servers.free_ports(3 * n)
        client = [ports[3 * i] for i in range(n)]
        quorum = [ports[3 * i + 1] for i in range(n)]
        election = [ports[3 * i + 2] for i in range(n)]
        self._links: dict[tuple[int, int], tuple[TcpProxy, TcpProxy]] = {}
        try:
            for i in range(1, n + 1):
                for j in range(1, n + 1):
                    if i != j:
                        self._links[(i, j)] = (TcpProxy("127.0.0.1", quorum[j - 1]).start(),
                                               TcpProxy("127.0.0.1", election[j - 1]).start())
            lines = {f"server.{j}": f"127.0.0.1:{quorum[j - 1]}:{election[j - 1]};127.0.0.1:{client[j - 1]}"
                     for j in range(1, n + 1)}
            # member i reaches member j through the proxies of link (i, j); its own line stays real
            own = {i: {f"server.{j}": f"127.0.0.1:{self._links[(i, j)][0].port}:{self._links[(i, j)][1].port}"
                                      f";127.0.0.1:{client[j - 1]}"
                       for j in range(1, n + 1) if j != i}
                   for i in range(1, n + 1)}
            for i in range(1, n + 1):  # announced as the wildcard, listening on loopback only
                own[i][f"server.{i}"] = f"0.0.0.0:{quorum[i - 1]}:{election[i - 1]};127.0.0.1:{client[i - 1]}"
                own[i]["zkpy.quorumBindAddress"] = "127.0.0.1"
            root = tempfile.mkdtemp(prefix="zk-ensemble-test-")
            processes = servers._launch_members(
                root, [("zkpy", i, client[i - 1]) for i in range(1, n + 1)], lines, settings, tick_ms=tick_ms,
                jvm_props=None, observers=(), wait=True, ready_s=ready_s, member_settings=own)
        except BaseException:
            self._stop_proxies()
            raise
        self.members = [ZkServer(p) for p in processes]

    @property
    def hosts(self) -> str:
        return ",".join(m.hosts for m in self.members)

    def member(self, myid: int) -> ZkServer:
        return self.members[myid - 1]

    def leader(self, among: Iterable[ZkServer] | None = None, deadline_s: float = 30.0) -> ZkServer:
        """The member of ``among`` (default: every running member) that reports itself leader,
        waiting up to ``deadline_s`` for one: after ``isolate(old_leader)``, ``leader(among=rest)``
        waits for the majority to elect a new one."""
        from zkpy.testing.servers import ensemble_leader

        chosen = list(among) if among is not None else [m for m in self.members if m.running]
        leader = ensemble_leader([m.process for m in chosen], deadline_s)
        return next(m for m in self.members if m.process is leader)

    def followers(self) -> list[ZkServer]:
        return [m for m in self.members if m.mode() == "follower"]

    def wait_serving(self, members: Iterable[ZkServer] | None = None, deadline_s: float = 60.0) -> None:
        """Wait until each of ``members`` (default: every running one) serves as leader or follower."""
        from zkpy.testing.servers import wait_ensemble_serving

        chosen = list(members) if members is not None else [m for m in self.members if m.running]
        wait_ensemble_serving([m.process for m in chosen], deadline_s)

    def partition(self, *groups: Iterable[ZkServer], mode: CutMode = "blackhole") -> None:
        """Cut every peer link between members of different groups; members named in no group form
        one more group. ``mode`` is the proxy's: ``blackhole`` (bytes vanish, as in a real split)
        or ``reset`` (connections are refused at once)."""
        side: dict[int, int] = {}
        for g, group in enumerate(groups):
            for m in group:
                side[self._myid(m)] = g
        for (i, j), pair in self._links.items():
            if side.get(i, -1) != side.get(j, -1):
                for proxy in pair:
                    proxy.cut(mode)

    def isolate(self, member: ZkServer, mode: CutMode = "blackhole") -> None:
        """Cut ``member`` off from every other member."""
        self.partition([member], mode=mode)

    def quorum_link(self, learner: ZkServer, leader: ZkServer) -> TcpProxy:
        """The proxy through which ``learner`` dials ``leader``'s quorum port, for faults of one
        link (``TcpProxy.reset_next``, ``delay``)."""
        return self._links[(self._myid(learner), self._myid(leader))][0]

    def heal(self) -> None:
        """Restore every peer link."""
        for pair in self._links.values():
            for proxy in pair:
                if proxy.is_cut:
                    proxy.restore()

    def cleanup(self) -> None:
        from zkpy.testing.servers import cleanup_ensemble

        for m in self.members:
            m.resume()
        cleanup_ensemble([m.process for m in self.members])
        self._stop_proxies()

    def _myid(self, member: ZkServer) -> int:
        if member.myid is None or self.member(member.myid) is not member:
            raise ValueError(f"{member!r} is not a member of this ensemble")
        return member.myid

    def _stop_proxies(self) -> None:
        for pair in self._links.values():
            for proxy in pair:
                proxy.stop()

    def __repr__(self) -> str:
        return f"<ZkEnsemble {self.hosts}>"


def _node_name(request: pytest.FixtureRequest) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name)[:60].strip("-") or "test"
    return f"{name}-{uuid.uuid4().hex[:8]}"


def _start_zkpy(settings: Settings | None = None, ready_s: float = 20.0) -> ZkServer:
    from zkpy.testing.servers import start_zkpy

    return ZkServer(start_zkpy(settings, ready_s), settings)


def _client(hosts: str, **kwargs: Any) -> Client:
    from zkpy.recipes.clients import Client

    return Client(hosts, **kwargs)


@pytest.fixture(scope="session")
def zk_server() -> Iterator[ZkServer]:
    """One standalone zkpy server for the whole session (tests share it: use ``zk_hosts`` or
    ``zk_chroot`` for a tree of the test's own)."""
    server = _start_zkpy()
    yield server
    server.cleanup()


@pytest.fixture
def zk_chroot(zk_server: ZkServer, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh znode path on ``zk_server`` named after the test; it and its subtree go after the
    test. The session that makes it (and the one that removes it) is closed while the test runs."""
    path = "/" + _node_name(request)
    with _client(zk_server.hosts) as admin:
        admin.create(path)
    yield path
    if zk_server.running:
        with contextlib.suppress(Exception), _client(zk_server.hosts) as admin:
            admin.delete(path, recursive=True)


@pytest.fixture
def zk_hosts(zk_server: ZkServer, zk_chroot: str) -> str:
    """``zk_server``'s connect string chrooted at ``zk_chroot``: an empty tree for this test alone."""
    return zk_server.hosts + zk_chroot


@pytest.fixture
def zk_client(zk_hosts: str) -> Iterator[Client]:
    """A started zkpy ``Client`` on ``zk_hosts`` (kazoo's recipe factories included)."""
    client = _client(zk_hosts)
    client.start()
    yield client
    client.close()


@pytest.fixture
def zk_async_client(zk_hosts: str) -> Callable[..., contextlib.AbstractAsyncContextManager[AsyncClient]]:
    """``async with zk_async_client(**kwargs) as zk:``: a started ``AsyncClient`` on ``zk_hosts``,
    closed when the block ends (``kwargs`` go to ``AsyncClient``)."""

    @contextlib.asynccontextmanager
    async def connect(**kwargs: Any) -> AsyncIterator[AsyncClient]:
        from zkpy.recipes.clients import AsyncClient

        client = AsyncClient(zk_hosts, **kwargs)
        await client.start()
        try:
            yield client
        finally:
            await client.close()

    return connect


@pytest.fixture
def zk_server_factory() -> Iterator[Callable[..., ZkServer]]:
    """``zk_server_factory(settings=None)``: a standalone server of the test's own, with zoo.cfg
    ``settings`` on top of the test defaults; removed after the test."""
    started: list[ZkServer] = []

    def start(settings: Settings | None = None, ready_s: float = 20.0) -> ZkServer:
        server = _start_zkpy(settings, ready_s)
        started.append(server)
        return server

    yield start
    for server in started:
        server.cleanup()


@pytest.fixture
def zk_ensemble_factory() -> Iterator[Callable[..., ZkEnsemble]]:
    """``zk_ensemble_factory(n=3, settings=None, tick_ms=200)``: an ensemble serving on loopback
    (every member leader or follower); removed after the test."""
    started: list[ZkEnsemble] = []

    def start(n: int = 3, settings: Settings | None = None, *, tick_ms: int = 200,
              ready_s: float = 60.0) -> ZkEnsemble:
        ensemble = ZkEnsemble(n, settings, tick_ms=tick_ms, ready_s=ready_s)
        started.append(ensemble)
        return ensemble

    yield start
    for ensemble in started:
        ensemble.cleanup()


@pytest.fixture
def zk_ensemble(zk_ensemble_factory: Callable[..., ZkEnsemble]) -> ZkEnsemble:
    """A 3-member ensemble of the test's own (a test may kill, pause or partition its members)."""
    return zk_ensemble_factory(3)


__all__ = ["ZkEnsemble", "ZkServer", "zk_async_client", "zk_chroot", "zk_client", "zk_ensemble",
           "zk_ensemble_factory", "zk_hosts", "zk_server", "zk_server_factory"]

