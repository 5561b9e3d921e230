"""Shared fixtures: a zkpy server and an Apache ZooKeeper 3.8 server, each a real process."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings
from tests.helpers import ensemble_workload

from zkpy.testing import servers as started_servers
from zkpy.testing.servers import ServerProcess, apache_available, start_apache, start_zkpy

# No per-example deadline and no too-slow health check: on a loaded CI machine an example that
# takes 250 ms is not a bug, and a timing failure is not a property failure. print_blob gives
# the reproduction of a failing example.
settings.register_profile("zkpy", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
settings.load_profile("zkpy")


def require(missing: str | None) -> None:
    """A test needs what ``missing`` says is absent (None: nothing is): in CI, where ``.ci/run``
    installs everything, that is a failure; elsewhere a skip that says why."""
    if missing is None:
        return
    if os.environ.get("CI"):
        pytest.fail(missing)
    pytest.skip(missing)


def require_apache() -> None:
    """Interop tests need Debian's zookeeper package; in CI its absence is a failure, not a skip."""
    if not apache_available():
        if os.environ.get("CI"):
            pytest.fail("Apache ZooKeeper 3.8 (Debian's zookeeper package) is not installed")
        pytest.skip("Apache ZooKeeper 3.8 is not installed (apt-get install -y zookeeper)")


@pytest.fixture(scope="session")
def zkpy_server() -> Iterator[ServerProcess]:
    server = start_zkpy()
    yield server
    server.cleanup()


@pytest.fixture(scope="session")
def zkpy_workers_server() -> Iterator[ServerProcess]:
    """A zkpy server serving its port from 2 worker processes (serverWorkers) in front of a
    dedicated member."""
    server = start_zkpy({"serverWorkers": "2"})
    yield server
    server.cleanup()


@pytest.fixture(scope="session")
def apache_server() -> Iterator[ServerProcess]:
    require_apache()
    server = start_apache()
    yield server
    server.cleanup()


@pytest.fixture(params=["zkpy", "apache"])
def any_server(request: pytest.FixtureRequest) -> ServerProcess:
    """The same test against zkpy and against Apache ZooKeeper."""
    return request.getfixturevalue(f"{request.param}_server")  # type: ignore[no-any-return]


@pytest.fixture(autouse=True)
def _close_writers() -> Iterator[None]:
    yield
    if ensemble_workload.LIVE_WRITERS:
        ensemble_workload.close_writers()


_LOG_MARKS = pytest.StashKey[tuple[int, dict[int, int]]]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """How many servers were started before the test, and where the logs of the running ones
    (shared servers included) stand."""
    running = {id(s): s.log_size() for s in started_servers.STARTED if s.proc.poll() is None}
    item.stash[_LOG_MARKS] = (len(started_servers.STARTED), running)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failing test's report ends with the tail of what each server wrote during the test:
    the data dirs of the servers it started are gone after teardown, and a CI failure must be
    diagnosable from its output."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when != "call" or not report.failed:
        return
    first_new, running = item.stash.get(_LOG_MARKS, (len(started_servers.STARTED), {}))
    for i, server in enumerate(started_servers.STARTED):
        if i < first_new and id(server) not in running:
            continue  # an earlier test's server, gone before this one began
        log = server.log(running.get(id(server), 0))
        name = f"{server.kind} server {server.extra.get('myid', server.port)} log during the test (tail)"
        report.sections.append((name, "\n".join(log.splitlines()[-200:])))
