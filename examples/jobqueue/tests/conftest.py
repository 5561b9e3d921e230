"""The application's tests get their ZooKeeper from zkpy's pytest plugin (loaded by itself once
zkpy-server is installed): one server for the whole run, and ``zk_hosts``, a connect string whose
chroot is fresh for every test. ``client`` runs each test with kazoo and with zkpy's client."""

from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient

from zkpy import Client


@pytest.fixture(params=["kazoo", "zkpy"])
def client(request: pytest.FixtureRequest, zk_hosts: str) -> Iterator[Any]:
    if request.param == "kazoo":
        kz = KazooClient(zk_hosts)
        kz.start()
        yield kz
        kz.stop()
        kz.close()
    else:
        with Client(zk_hosts) as zk:
            yield zk
