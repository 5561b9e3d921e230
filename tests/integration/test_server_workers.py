"""The guarantees of docs/design.md §2 with a server serving its port from several processes
(``serverWorkers``): each test runs with one process serving (the member) and with two worker
processes serving in front of a dedicated member that serves no client.

Which process serves a connection is the kernel's choice (SO_REUSEPORT); the tests find out:
a new session's id names the process that created it (``id % (N+1)`` with N workers, see
member.workers), and a connection's process is the one whose ``cons`` lists it beside a
connection known to be there.
"""

from __future__ import annotations

import os
import re
import signal
import time
import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from zkpy.errors import Code
from zkpy.testing.rawclient import RawClient
from zkpy.testing.servers import ServerProcess, four_letter, start_zkpy
from zkpy.wire.consts import CreateMode, EventType, OpCode
from zkpy.wire.proto import (
    ACL,
    CreateRequest,
    CreateResponse,
    ExistsRequest,
    GetDataRequest,
    GetDataResponse,
    Id,
    SetDataRequest,
    SyncRequest,
)

OPEN = [ACL(31, Id("world", "anyone"))]
FAST_TICK = {"tickTime": "200", "minSessionTimeout": "400", "maxSessionTimeout": "4000"}


class Processes:
    """A server and one open session per serving process (``probes[k]`` lives on process k):
    ``serving`` lists their indexes (the member, 0, alone; or the workers 1..N)."""

    def __init__(self, server: ServerProcess, workers: int) -> None:
        self.server = server
        self.modulus = workers + 1 if workers > 1 else 1  # the processes session ids are spread over
        self.serving = list(range(1, workers + 1)) if workers > 1 else [0]
        self.first, self.last = self.serving[0], self.serving[-1]
        self.probes: dict[int, RawClient] = {}
        spare: list[RawClient] = []
        deadline = time.monotonic() + 30  # the workers listen once their replica is loaded
        while len(self.probes) < len(self.serving):
            assert time.monotonic() < deadline, f"only processes {sorted(self.probes)} took connections"
            c = self.raw()
            k = self.creator(c.session_id)
            if k in self.probes:
                spare.append(c)
            else:
                self.probes[k] = c
        for c in spare:
            c.close()

    def pid(self, k: int) -> int:
        """The pid of worker ``k`` (the member logs each start)."""
        found = re.findall(rf"worker {k} started: pid (\d+)", self.server.log())
        assert found, f"no worker {k} in the log"
        return int(found[-1])

    def creator(self, session_id: int) -> int:
        return (session_id & 0xFFFFFFFFFFFFFFFF) % self.modulus

    def raw(self, **kwargs: object) -> RawClient:
        return RawClient("127.0.0.1", self.server.port, **kwargs)  # type: ignore[arg-type]

    def raw_on(self, k: int, **kwargs: object) -> RawClient:
        """A new session created by process ``k``."""
        deadline = time.monotonic() + 30
        while True:
            c = self.raw(**kwargs)
            if self.creator(c.session_id) == k:
                return c
            c.close()
            assert time.monotonic() < deadline

    def where(self, c: RawClient) -> int:
        """The process serving connection ``c`` (its ``cons`` lists ``c`` beside a probe)."""
        for k, probe in list(self.probes.items()):  # idle probes expire: renew them
            try:
                _ping(probe)
            except OSError:
                probe.sock.close()
                self.probes[k] = self.raw_on(k)
        mine = f":{c.sock.getsockname()[1]}["
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            answer = four_letter(self.server.port, "cons")
            if mine in answer:
                for k, probe in self.probes.items():
                    if f":{probe.sock.getsockname()[1]}[" in answer:
                        return k
        raise AssertionError(f"no process lists connection {mine}")

    def close(self) -> None:
        for c in self.probes.values():
            c.close()


@pytest.fixture(params=[1, 2], ids=["1-process", "2-workers"], scope="module")
def procs(request: pytest.FixtureRequest) -> Iterator[Processes]:
    server = start_zkpy({**FAST_TICK, "serverWorkers": str(request.param)})
    p = Processes(server, request.param)
    yield p
    p.close()
    server.cleanup()


def _ping(c: RawClient) -> None:
    """A client's ping (xid -2), keeping the notifications that come before its answer."""
    c.send(OpCode.PING, xid=-2)
    while (frame := c.recv()).header.xid != -2:
        c.notifications.append(frame)


def _path(kind: str) -> str:
    return f"/{kind}-{uuid.uuid4().hex[:8]}"


def test_each_process_answers_pipelined_reads_after_the_sessions_own_writes(procs: Processes) -> None:
    """Per-session FIFO and read-your-writes, with the writes forwarded from a worker."""
    for k in procs.serving:
        root = _path(f"fifo{k}")
        c = procs.raw_on(k)
        try:
            assert c.call(OpCode.CREATE, CreateRequest(root, b"", OPEN, 0)).header.err == 0
            xids = []
            for i in range(100):
                xids.append(c.send(OpCode.CREATE, CreateRequest(f"{root}/n{i}", b"0", OPEN, 0)))
                xids.append(c.send(OpCode.SET_DATA, SetDataRequest(f"{root}/n{i}", str(i).encode(), -1)))
                xids.append(c.send(OpCode.GET_DATA, GetDataRequest(f"{root}/n{i}", False)))
            replies = [c.recv() for _ in xids]
            assert [r.header.xid for r in replies] == xids  # in request order
            for i in range(100):
                got = replies[3 * i + 2]
                assert got.header.err == 0
                assert GetDataResponse.from_bytes(got.body).data == str(i).encode(), f"process {k}, node {i}"
        finally:
            c.close()


def test_watch_event_precedes_the_read_that_shows_a_change_made_through_another_process(procs: Processes) -> None:
    path = _path("order")
    watcher = procs.raw_on(procs.last)
    writer = procs.raw_on(procs.first)
    try:
        assert writer.call(OpCode.CREATE, CreateRequest(path, b"0", OPEN, 0)).header.err == 0
        assert watcher.call(OpCode.SYNC, SyncRequest(path)).header.err == 0
        assert watcher.call(OpCode.GET_DATA, GetDataRequest(path, True)).header.err == 0
        for i in range(1, 201):
            value = str(i).encode()
            watcher.notifications.clear()
            assert writer.call(OpCode.SET_DATA, SetDataRequest(path, value, -1)).header.err == 0
            if i % 2:  # odd rounds sync first: the read must show the change
                assert watcher.call(OpCode.SYNC, SyncRequest(path)).header.err == 0
            reply = watcher.call(OpCode.GET_DATA, GetDataRequest(path, True))
            events = [(f.event().type, f.event().path) for f in watcher.notifications]
            data = GetDataResponse.from_bytes(reply.body).data
            if i % 2:
                assert data == value, f"round {i}: a read after sync missed the write"
            if data == value:  # the read shows the change: its event came first
                assert events == [(EventType.NODE_DATA_CHANGED, path)], f"round {i}"
            else:  # the replica is behind: the event comes later, then the watch is set again
                assert events == [], f"round {i}"
                frame = watcher.recv()
                assert frame.is_notification and frame.event().path == path
                assert GetDataResponse.from_bytes(watcher.call(OpCode.GET_DATA, GetDataRequest(path, True)).body).data \
                    == value
    finally:
        watcher.close()
        writer.close()


@pytest.mark.parametrize("sync", [True, False], ids=["after-sync", "without-sync"])
def test_a_read_on_one_process_sees_a_write_acknowledged_by_another(procs: Processes, sync: bool) -> None:
    """With sync, as on any ZooKeeper server; without, as on one standalone server: a worker's
    read waits for what the member had applied when it arrived."""
    path = _path("sync")
    writer = procs.raw_on(procs.first)
    reader = procs.raw_on(procs.last)
    try:
        assert writer.call(OpCode.CREATE, CreateRequest(path, b"0", OPEN, 0)).header.err == 0
        # the reader's worker is stopped while the write is acknowledged, and gets the reader's
        # sync and read with the txn: whichever it takes first, the read must show the write
        stopped = procs.pid(procs.last) if procs.last != 0 else None
        for i in range(1, 101):
            value = str(i).encode()
            if stopped is not None and i % 4 == 0:
                os.kill(stopped, signal.SIGSTOP)
            try:
                assert writer.call(OpCode.SET_DATA, SetDataRequest(path, value, -1)).header.err == 0
                if sync:
                    reader.send(OpCode.SYNC, SyncRequest(path))
                read = reader.send(OpCode.GET_DATA, GetDataRequest(path, False))
                time.sleep(0.002 if stopped is not None and i % 4 == 0 else 0)  # both reach its sockets
            finally:
                if stopped is not None:
                    os.kill(stopped, signal.SIGCONT)
            while (frame := reader.recv()).header.xid != read:
                pass
            assert frame.header.err == 0 and GetDataResponse.from_bytes(frame.body).data == value, f"round {i}"
    finally:
        writer.close()
        reader.close()


def test_an_ephemeral_goes_on_every_process_when_its_session_closes_elsewhere(procs: Processes) -> None:
    path = _path("eph")
    owner = procs.raw_on(procs.last)
    watchers = [procs.raw_on(k) for k in procs.serving]
    try:
        assert owner.call(OpCode.CREATE, CreateRequest(path, b"", OPEN, 1)).header.err == 0
        for w in watchers:
            w.call(OpCode.SYNC, SyncRequest(path))
            assert w.call(OpCode.EXISTS, ExistsRequest(path, True)).header.err == 0
        owner.close()
        for w in watchers:
            while not w.notifications:
                w.notifications.append(w.recv())
            assert [(f.event().type, f.event().path) for f in w.notifications] == [(EventType.NODE_DELETED, path)]
            assert w.call(OpCode.EXISTS, ExistsRequest(path, False)).header.err == Code.NONODE
    finally:
        for w in watchers:
            w.close()


def test_a_worker_keeps_its_sessions_alive_and_the_member_expires_them(procs: Processes) -> None:
    path = _path("expire")
    timeout_ms = 800
    owner = procs.raw_on(procs.last, timeout_ms=timeout_ms)
    watcher = procs.raw_on(procs.first)
    try:
        assert owner.call(OpCode.CREATE, CreateRequest(path, b"", OPEN, 1)).header.err == 0
        alive_until = time.monotonic() + 2 * timeout_ms / 1000
        while time.monotonic() < alive_until:  # pings on the worker keep the session alive on the member
            _ping(owner)
            time.sleep(timeout_ms / 4000)
        watcher.call(OpCode.SYNC, SyncRequest(path))
        assert watcher.call(OpCode.EXISTS, ExistsRequest(path, True)).header.err == 0
        # silence: the member expires the session; every process drops it
        deadline = time.monotonic() + 10
        while not watcher.notifications and time.monotonic() < deadline:
            _ping(watcher)
            time.sleep(0.05)
        assert [(f.event().type, f.event().path) for f in watcher.notifications] == [(EventType.NODE_DELETED, path)]
        assert owner.closed_by_server()
        again = procs.raw(session_id=owner.session_id, passwd=owner.connect_response.passwd)
        assert again.connect_response.sessionId == 0  # expired, wherever it asks
        again.sock.close()
    finally:
        watcher.close()
        owner.sock.close()


def test_a_session_moves_between_processes_with_its_ephemeral(procs: Processes) -> None:
    path = _path("move")
    first = procs.raw_on(procs.last)
    sid, pw = first.session_id, first.connect_response.passwd
    assert first.call(OpCode.CREATE, CreateRequest(path, b"0", OPEN, 1)).header.err == 0
    first.sock.close()  # the connection goes, the session stays
    seen = {procs.last}
    for attempt in range(40):
        wrong = procs.raw(session_id=sid, passwd=bytes(16))
        assert wrong.connect_response.sessionId == 0  # a wrong password is refused by any process
        wrong.sock.close()
        again = procs.raw(session_id=sid, passwd=pw)
        try:
            assert again.session_id == sid
            value = str(attempt).encode()
            assert again.call(OpCode.SET_DATA, SetDataRequest(path, value, -1)).header.err == 0
            got = again.call(OpCode.GET_DATA, GetDataRequest(path, False))
            assert GetDataResponse.from_bytes(got.body).data == value
            seen.add(procs.where(again))
        finally:
            again.sock.close()
        if len(seen) == len(procs.serving) and attempt >= 2:
            break
    assert seen == set(procs.serving)
    check = procs.raw_on(procs.first)
    try:
        assert check.call(OpCode.EXISTS, ExistsRequest(path, False)).header.err == 0  # the ephemeral lives
    finally:
        check.close()


def _children(pid: int, program: bytes = b"zkpy.runtime.worker") -> list[int]:
    """The live children of ``pid`` running ``program``: its workers (default) or its fsync helper."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    command = f.read()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z" and program in command:
                out.append(int(entry))
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_kazoo_keeps_its_session_when_a_worker_dies_and_workers_die_with_the_member() -> None:
    server = start_zkpy({"serverWorkers": "2"})
    clients: list[KazooClient] = []
    try:
        deadline = time.monotonic() + 30
        while len(workers := _children(server.proc.pid)) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        for i in range(6):
            zk = KazooClient(server.hosts, timeout=4)
            zk.start(timeout=15)
            zk.create(f"/k{i}", b"v", ephemeral=True)
            clients.append(zk)
        sessions = [zk.client_id[0] for zk in clients]
        os.kill(workers[0], signal.SIGKILL)
        while len(set(_children(server.proc.pid)) - {workers[0]}) < 2:  # it is started again
            assert time.monotonic() < deadline + 30
            time.sleep(0.05)
        for i, zk in enumerate(clients):  # clients of the dead worker reconnect and keep their session
            zk.retry(zk.set, f"/k{i}", b"w")
            assert zk.retry(zk.get, f"/k{i}")[0] == b"w"
            assert zk.client_id[0] == sessions[i]
        assert sorted(clients[0].get_children("/")) == sorted(["zookeeper", *(f"k{i}" for i in range(6))])
        workers = _children(server.proc.pid) + _children(server.proc.pid, b"zkpy.runtime.fsync_child")
        assert len(workers) == 3
        server.proc.kill()  # no orphans: the workers and the fsync helper go with the member
        server.proc.wait()
        deadline = time.monotonic() + 15
        while any(_alive(w) for w in workers):
            assert time.monotonic() < deadline, "a worker or the fsync helper outlived its member"
            time.sleep(0.05)
    finally:
        for zk in clients:
            zk.stop()
            zk.close()
        server.cleanup()


def test_writes_through_every_process_are_totally_ordered(procs: Processes) -> None:
    """Compare-and-set increments and sequential creates from sessions on every process: no
    update is lost and no sequence number is given twice (linearizable writes, guarantee 1 and 4)."""
    root = _path("cas")
    clients = [procs.raw_on(procs.serving[k % len(procs.serving)]) for k in range(6)]
    try:
        assert clients[0].call(OpCode.CREATE, CreateRequest(root, b"0", OPEN, 0)).header.err == 0
        names: list[str] = []
        done = 0
        while done < 60:
            for c in clients:  # each reads (after a sync) and writes with the version it read
                c.call(OpCode.SYNC, SyncRequest(root))
                got = c.call(OpCode.GET_DATA, GetDataRequest(root, False))
                stat_version = GetDataResponse.from_bytes(got.body).stat.version
                value = int(GetDataResponse.from_bytes(got.body).data or b"0")
                reply = c.call(OpCode.SET_DATA, SetDataRequest(root, str(value + 1).encode(), stat_version))
                assert reply.header.err in (0, Code.BADVERSION)
                done += reply.header.err == 0
                made = c.call(OpCode.CREATE, CreateRequest(f"{root}/s-", b"", OPEN, int(CreateMode.PERSISTENT_SEQUENTIAL)))
                assert made.header.err == 0
                names.append(CreateResponse.from_bytes(made.body).path)
        final = clients[-1].call(OpCode.GET_DATA, GetDataRequest(root, False))
        assert int(GetDataResponse.from_bytes(final.body).data or b"0") == done  # no increment lost
        assert len(set(names)) == len(names)  # no suffix twice
    finally:
        for c in clients:
            c.close()


def test_a_dedicated_member_takes_no_client() -> None:
    """With two workers every connection lands on a worker: no session is created by the member
    (``id % 3 == 0``) and no four-letter word is answered by its process."""
    server = start_zkpy({"serverWorkers": "2"})
    try:
        procs = Processes(server, 2)  # waits until both workers took a connection
        try:
            clients = [procs.raw() for _ in range(30)]
            assert {procs.creator(c.session_id) for c in clients} == {1, 2}
            for c in clients:
                c.close()
            answered = {re.search(r"process\.id=(\d+)", four_letter(server.port, "envi")).group(1)  # type: ignore[union-attr]
                        for _ in range(30)}
            assert str(server.proc.pid) not in answered and len(answered) == 2, answered
        finally:
            procs.close()
    finally:
        server.cleanup()
