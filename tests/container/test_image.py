"""The container image (``Dockerfile``) built and run as a 3-member ensemble: marked ``container``
and left out of the default run (it needs a Docker daemon and a base image); run it with
``python -m pytest -m container tests/container``.

``ZKPY_IMAGE_BASE`` names the base image (default the Dockerfile's ``python:3.12-slim-bookworm``;
where no registry is reachable, one made from Debian's packages: ``debootstrap --variant=minbase
--include=python3,python3-venv,tini,ca-certificates bookworm ROOT`` and ``tar -C ROOT -c . |
docker import - zkpy-base``). The dependencies are built here (``pip wheel``) into the build
context, so the build downloads nothing. The members run with the host's network on loopback
addresses and ports of their own (``ZOO_SERVERS``), configured by the official image's variables
alone: they elect a leader, serve a write on one member and the read on another, answer ``zkpy
probe ready`` inside the container, and end with status 0 on ``docker stop`` (SIGTERM)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from zkpy.testing.servers import four_letter, free_ports

pytestmark = [pytest.mark.container, pytest.mark.timeout(900)]
ROOT = Path(__file__).resolve().parents[2]


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=check)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if shutil.which("docker") is None or docker("info", check=False).returncode != 0:
        pytest.fail("the container test needs a running Docker daemon (docker info failed)")
    context = tmp_path_factory.mktemp("image")
    for name in ("Dockerfile", ".dockerignore", "pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, context / name)
    shutil.copytree(ROOT / "src", context / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "-w", str(context / "wheels"), str(context)],
                   check=True, timeout=600)
    tag = f"zkpy-test:{uuid.uuid4().hex[:8]}"
    base = os.environ.get("ZKPY_IMAGE_BASE")
    build = ["build", "--network", "host", "-t", tag, *(["--build-arg", f"BASE={base}"] if base else []), str(context)]
    result = docker(*build, timeout=900, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    yield tag
    docker("rmi", "-f", tag, check=False)


def test_three_members_from_the_official_variables(image: str) -> None:
    ports = free_ports(9)
    client = [ports[3 * i] for i in range(3)]
    servers = " ".join(f"server.{i + 1}=127.0.0.1:{ports[3 * i + 1]}:{ports[3 * i + 2]};127.0.0.1:{client[i]}"
                       for i in range(3))
    names = [f"zkpy-test-{uuid.uuid4().hex[:6]}-{i + 1}" for i in range(3)]
    try:
        for i, name in enumerate(names):
            docker("run", "-d", "--name", name, "--network", "host",
                   "-e", f"ZOO_MY_ID={i + 1}", "-e", f"ZOO_SERVERS={servers}", "-e", "ZOO_TICK_TIME=500",
                   "-e", "ZOO_ADMINSERVER_ENABLED=false", "-e", "ZOO_STANDALONE_ENABLED=false", image)
        modes = sorted(_wait_mode(port, names) for port in client)
        assert modes == ["follower", "follower", "leader"]
        writer, reader = KazooClient(f"127.0.0.1:{client[0]}"), KazooClient(f"127.0.0.1:{client[2]}")
        for kz in (writer, reader):
            kz.start(timeout=30)
        writer.create("/from-the-image", b"hello")
        reader.sync("/")
        assert reader.get("/from-the-image")[0] == b"hello"
        for kz in (writer, reader):
            kz.stop()
            kz.close()
        probe = docker("exec", names[0], "zkpy", "probe", "ready", "--port", str(client[0]), check=False)
        assert probe.returncode == 0, probe.stdout + probe.stderr
        user = docker("exec", names[0], "id", "-u").stdout.strip()
        assert user == "1000"
        started = time.monotonic()
        docker("stop", "-t", "30", names[0], timeout=60)
        state = json.loads(docker("inspect", names[0]).stdout)[0]["State"]
        assert state["ExitCode"] == 0, docker("logs", names[0]).stderr[-3000:]
        assert time.monotonic() - started < 30  # ended on SIGTERM, not killed after the grace period
    finally:
        for name in names:
            docker("rm", "-f", name, check=False)


def _wait_mode(port: int, names: list[str], deadline_s: float = 120) -> str:
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            answer = four_letter(port, "srvr", timeout=1.0)
        except OSError:
            answer = ""
        mode = next((line.split(":", 1)[1].strip() for line in answer.splitlines() if line.startswith("Mode:")), "")
        if mode in ("leader", "follower"):
            return mode
        if time.monotonic() > deadline:
            logs = "\n".join(docker("logs", n, check=False).stderr[-1500:] for n in names)
            raise AssertionError(f"no mode on port {port} within {deadline_s}s:\n{logs}")
        time.sleep(0.2)
