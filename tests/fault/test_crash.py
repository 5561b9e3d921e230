"""Acknowledged writes survive SIGKILL (guarantees 4, 6 and 7), with real processes and fsync.

A writer keeps hundreds of creates, setData and sequential creates outstanding on one session
and records every acknowledgement. The server is killed with SIGKILL at varied moments: at a
random time, while a snapshot is being written, and right after the log rolled. After each
restart:
- every acknowledged write is there, with its data and a version at least the acknowledged one
  (a later, unacknowledged write may have reached the log too);
- a sequential name is never handed out twice;
- the server recovered exactly the tree a fresh replay of a copy of its files gives (digest).
The seed is printed; ``ZKPY_CRASH_SEED`` replays a run.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import shutil
import signal
import time
from dataclasses import dataclass, field

import pytest
from bench.client import OPEN_ACL_UNSAFE as OPEN_ACL
from bench.client import RawSession, create_body, set_data_body

from zkpy.runtime.osdisk import OsDisk
from zkpy.storage.files import DataDirs
from zkpy.storage.recovery import recover
from zkpy.testing.servers import ServerProcess, start_zkpy
from zkpy.wire.consts import CreateMode, OpCode
from zkpy.wire.multi import Op, write_multi_request
from zkpy.wire.proto import CreateRequest, CreateResponse, GetDataRequest, SetDataResponse, Stat

KEYS = 64  # setData targets
BULK_NODES = 20000  # makes each snapshot take long enough to be killed in the middle of
OUTSTANDING = 300
SETTINGS = {"snapCount": "600", "preAllocSize": "256", "tickTime": "500", "maxSessionTimeout": "4000"}
RECOVERED = re.compile(r"recovered zxid 0x([0-9a-f]+), (\d+) znodes, \d+ sessions, digest 0x([0-9a-f]+)")


@dataclass
class Acked:
    """What the server acknowledged: the model every restart is checked against."""

    versions: dict[str, int] = field(default_factory=dict)  # setData key -> highest acknowledged version
    created: dict[str, bytes] = field(default_factory=dict)  # created path -> data
    sequential: set[str] = field(default_factory=set)  # every sequential name ever handed out


def key_data(key: str, version: int) -> bytes:
    return f"{key}@{version}".encode()


async def _populate(port: int) -> None:
    s = await RawSession.connect("127.0.0.1", port)
    for path in ("/k", "/c", "/seq", "/bulk"):
        await s.call(OpCode.CREATE, create_body(path, b""))
    await asyncio.gather(*(s.call(OpCode.CREATE, create_body(f"/k/{i}", key_data(str(i), 0))) for i in range(KEYS)))
    payload = b"x" * 100
    for start in range(0, BULK_NODES, 1000):
        ops = [Op(OpCode.CREATE, CreateRequest(f"/bulk/{i}", payload, OPEN_ACL, 0)) for i in range(start, start + 1000)]
        body = bytearray()
        write_multi_request(body, ops)
        err, _ = await s.call(OpCode.MULTI, bytes(body))
        assert err == 0
    await s.close()


async def _current_versions(s: RawSession) -> dict[str, int]:
    out = {}
    replies = await asyncio.gather(*(s.call(OpCode.GET_DATA, GetDataRequest(f"/k/{i}", False).to_bytes())
                                     for i in range(KEYS)))
    for i, (err, body) in enumerate(replies):
        assert err == 0
        n = int.from_bytes(body[:4], "big", signed=True)
        out[str(i)] = Stat.from_bytes(body[4 + max(n, 0):]).version
    return out


async def _write_until_killed(server: ServerProcess, acked: Acked, rng: random.Random, cycle: int,
                              trigger: str) -> int:
    """Keep OUTSTANDING writes in flight; SIGKILL the server when ``trigger`` fires. Returns acks seen."""
    s = await RawSession.connect("127.0.0.1", server.port)
    versions = await _current_versions(s)
    issued = dict(versions)
    count = 0
    stop = asyncio.Event()

    def done(kind: str, arg: object, fut: asyncio.Future[tuple[int, bytes]]) -> None:
        nonlocal count
        if fut.cancelled() or fut.exception() is not None:
            return
        err, body = fut.result()
        assert err == 0, f"{kind} {arg} failed with {err}"
        count += 1
        if kind == "set":
            key = str(arg)
            version = SetDataResponse.from_bytes(body).stat.version
            acked.versions[key] = max(acked.versions.get(key, 0), version)
        elif kind == "create":
            path = str(arg)
            acked.created[path] = path.encode()
        else:
            name = CreateResponse.from_bytes(body).path
            assert name not in acked.sequential, f"sequential name {name} handed out twice"
            acked.sequential.add(name)

    n = 0

    def issue() -> None:
        nonlocal n
        n += 1
        roll = rng.random()
        if roll < 0.5:
            key = str(rng.randrange(KEYS))
            issued[key] += 1
            fut = s.call(OpCode.SET_DATA, set_data_body(f"/k/{key}", key_data(key, issued[key])))
            fut.add_done_callback(lambda f, k=key: done("set", k, f))
        elif roll < 0.8:
            path = f"/c/{cycle}-{n}"
            fut = s.call(OpCode.CREATE, create_body(path, path.encode()))
            fut.add_done_callback(lambda f, p=path: done("create", p, f))
        else:
            fut = s.call(OpCode.CREATE, create_body("/seq/s-", b"", CreateMode.PERSISTENT_SEQUENTIAL))
            fut.add_done_callback(lambda f: done("seq", None, f))

    async def pump() -> None:
        while not stop.is_set() and s.transport is not None:
            while s.outstanding < OUTSTANDING and s.transport is not None:
                issue()
            await asyncio.sleep(0.001)

    pumping = asyncio.ensure_future(pump())
    await _wait_for_trigger(server, trigger, rng)
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(10)
    stop.set()
    await asyncio.wait_for(asyncio.shield(s.closed), 10)  # type: ignore[arg-type]
    await pumping
    return count


async def _wait_for_trigger(server: ServerProcess, trigger: str, rng: random.Random) -> None:
    """Random time; a snapshot in progress (its tmp file exists); or just after a log roll."""
    snap_dir = os.path.join(server.workdir, "data", "version-2")
    deadline = time.monotonic() + 15
    if trigger == "random":
        await asyncio.sleep(rng.uniform(0.05, 1.0))
        return
    before = set(os.listdir(snap_dir))
    while time.monotonic() < deadline:
        names = set(os.listdir(snap_dir))
        if trigger == "snapshot" and any(n.startswith("tmp.snapshot.") for n in names):
            await asyncio.sleep(rng.uniform(0, 0.03))
            return
        if trigger == "roll" and any(n.startswith("log.") for n in names - before):
            return
        await asyncio.sleep(0.002)
    pytest.fail(f"no {trigger} happened within 15 s")


async def _verify(server: ServerProcess, acked: Acked) -> None:
    s = await RawSession.connect("127.0.0.1", server.port)
    versions = await _current_versions(s)
    for key, version in acked.versions.items():
        assert versions[key] >= version, f"/k/{key}: version {versions[key]} < acknowledged {version}"
    for key in versions:
        err, body = await s.call(OpCode.GET_DATA, GetDataRequest(f"/k/{key}", False).to_bytes())
        n = int.from_bytes(body[:4], "big", signed=True)
        assert body[4:4 + n] == key_data(key, versions[key]), f"/k/{key} holds {body[4:4 + n]!r}"
    paths = list(acked.created) + sorted(acked.sequential)
    replies = await asyncio.gather(*(s.call(OpCode.GET_DATA, GetDataRequest(p, False).to_bytes()) for p in paths))
    missing = [p for p, (err, _) in zip(paths, replies, strict=True) if err != 0]
    assert not missing, f"{len(missing)} acknowledged creates lost, e.g. {missing[:5]}"
    for path, (_, body) in zip(acked.created, replies, strict=False):
        n = int.from_bytes(body[:4], "big", signed=True)
        assert body[4:4 + n] == acked.created[path]
    # a new sequential name must be new, even though some handed-out names may have been lost
    err, body = await s.call(OpCode.CREATE, create_body("/seq/s-", b"", CreateMode.PERSISTENT_SEQUENTIAL))
    assert err == 0
    name = CreateResponse.from_bytes(body).path
    assert name not in acked.sequential, f"sequential name {name} reused after restart"
    assert all(name > old for old in acked.sequential), f"{name} is not past every earlier name"
    acked.sequential.add(name)
    await s.close()


def _replayed_digest(workdir: str, scratch: str) -> tuple[int, int, int]:
    """(zxid, znodes, digest) of a fresh replay of a copy of the server's files."""
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(os.path.join(workdir, "data"), scratch)
    tree = recover(OsDisk(), DataDirs.of(scratch)).tree
    return tree.last_processed_zxid, tree.node_count(), tree.digest


def _last_recovery(server: ServerProcess) -> tuple[int, int, int]:
    found = RECOVERED.findall(server.log())
    assert found, "the server did not log its recovery"
    zxid, nodes, digest = found[-1]
    return int(zxid, 16), int(nodes), int(digest, 16)


def _crash_cycles(kills: int, args: tuple[str, ...], tmp_path: object, settings: dict[str, str] = SETTINGS) -> None:
    seed = int(os.environ.get("ZKPY_CRASH_SEED", random.randrange(1 << 32)))
    print(f"crash test seed {seed} (ZKPY_CRASH_SEED={seed} replays it)")
    rng = random.Random(seed)
    server = start_zkpy(settings, args=args)
    scratch = os.path.join(str(tmp_path), "replay")
    acked = Acked()
    triggers = ["random", "snapshot", "roll"]
    try:
        asyncio.run(_populate(server.port))
        for cycle in range(kills):
            trigger = triggers[cycle % len(triggers)]
            acks = asyncio.run(_write_until_killed(server, acked, rng, cycle, trigger))
            expected = _replayed_digest(server.workdir, scratch)
            server = start_zkpy(settings, workdir=server.workdir, port=server.port, args=args)
            assert _last_recovery(server) == expected, f"seed {seed} cycle {cycle}: recovery differs from a replay"
            asyncio.run(_verify(server, acked))
            print(f"cycle {cycle} ({trigger}): {acks} acks, recovered {expected[1]} znodes at zxid 0x{expected[0]:x}")
        assert server.stop() == 0
        log = server.log()
        assert "Traceback" not in log, log[-3000:]
    except BaseException:
        print(f"seed {seed}; server log tail:\n{server.log()[-3000:]}")
        raise
    finally:
        server.cleanup()


def test_acknowledged_writes_survive_sigkill(tmp_path: object) -> None:
    _crash_cycles(21, (), tmp_path)


def test_acknowledged_writes_survive_losing_unsynced_bytes(tmp_path: object) -> None:
    _crash_cycles(9, ("--fault", "lose-unsynced"), tmp_path)


def test_acknowledged_writes_survive_sigkill_of_a_server_with_worker_processes(tmp_path: object) -> None:
    """serverWorkers=2: the session writes through one of the two workers (the kernel's pick at
    each restart); the member is killed, its workers go with it, and nothing acknowledged is lost."""
    _crash_cycles(3, (), tmp_path, {**SETTINGS, "serverWorkers": "2"})
