"""Sessions and their ephemerals across a crash (guarantee 5), and fail-stop on disk errors (guarantee 6).

Sessions are in the snapshot and the log with their timeouts: after a restart a session whose
client is gone expires after its timeout and its ephemerals go; a client that comes back in
time resumes its session. A disk that fails (ENOSPC, EIO) stops the server without another
acknowledgement, and everything it acknowledged is there after a restart.
"""

from __future__ import annotations

import asyncio
import signal
import time

import pytest
from bench.client import RawSession, SessionClosed, create_body

from zkpy.testing.rawclient import RawClient
from zkpy.testing.servers import ServerProcess, start_zkpy
from zkpy.wire.consts import CreateMode, OpCode, Xid
from zkpy.wire.proto import ExistsRequest, GetDataRequest

SETTINGS = {"tickTime": "200", "minSessionTimeout": "400", "maxSessionTimeout": "3000"}


def _exists(server: ServerProcess, path: str) -> bool:
    c = RawClient("127.0.0.1", server.port)
    try:
        return c.call(OpCode.EXISTS, ExistsRequest(path, False)).header.err == 0
    finally:
        c.close()


def _kill_and_restart(server: ServerProcess, settings: dict[str, str]) -> ServerProcess:
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(10)
    return start_zkpy(settings, workdir=server.workdir, port=server.port)


def test_sessions_of_gone_clients_expire_after_restart_and_take_their_ephemerals() -> None:
    server = start_zkpy(SETTINGS)
    try:
        owner = RawClient("127.0.0.1", server.port, timeout_ms=2000)
        assert owner.call(OpCode.CREATE, _ephemeral("/gone")).header.err == 0
        server = _kill_and_restart(server, SETTINGS)
        restarted = time.monotonic()
        assert _exists(server, "/gone"), "the ephemeral is there while its session may still come back"
        deadline = restarted + 2.0 + 3.0
        while _exists(server, "/gone"):
            assert time.monotonic() < deadline, "the restored session never expired"
            time.sleep(0.05)
        assert time.monotonic() - restarted >= 2.0 - 0.2, "the session expired before its timeout"
        owner.sock.close()
    finally:
        server.cleanup()


def test_a_client_resumes_its_session_after_restart() -> None:
    server = start_zkpy(SETTINGS)
    try:
        owner = RawClient("127.0.0.1", server.port, timeout_ms=2000)
        assert owner.call(OpCode.CREATE, _ephemeral("/kept")).header.err == 0
        sid, passwd = owner.session_id, owner.connect_response.passwd
        owner.sock.close()
        server = _kill_and_restart(server, SETTINGS)
        again = RawClient("127.0.0.1", server.port, timeout_ms=2000, session_id=sid, passwd=passwd)
        assert again.connect_response.timeOut > 0 and again.session_id == sid
        until = time.monotonic() + 3.0  # past the timeout, pinging as a client does
        while time.monotonic() < until:
            again.send(OpCode.PING, xid=Xid.PING)
            assert again.recv().header.xid == Xid.PING
            time.sleep(0.3)
        assert _exists(server, "/kept")
        again.close()
    finally:
        server.cleanup()


def _ephemeral(path: str) -> object:
    from zkpy.wire.proto import ACL, CreateRequest, Id

    return CreateRequest(path, b"e", [ACL(31, Id("world", "anyone"))], int(CreateMode.EPHEMERAL))


@pytest.mark.parametrize("fault", ["enospc-after=400000", "eio-after=400000", "eio-on-sync=200"])
def test_disk_failure_stops_the_server_without_losing_an_acknowledged_write(fault: str) -> None:
    settings = {"preAllocSize": "16"}
    server = start_zkpy(settings, args=("--fault", fault))
    acked: list[str] = []

    async def write() -> None:
        s = await RawSession.connect("127.0.0.1", server.port)
        pending: set[asyncio.Future[tuple[int, bytes]]] = set()
        n = 0
        while s.transport is not None:
            while len(pending) < 200 and s.transport is not None:
                n += 1
                path = f"/w{n}"
                fut = s.call(OpCode.CREATE, create_body(path, b"x" * 500))
                fut.add_done_callback(lambda f, p=path: acked.append(p) if not f.exception() and f.result()[0] == 0
                                      else None)
                pending.add(fut)
            done, pending = await asyncio.wait(pending, timeout=10, return_when=asyncio.FIRST_COMPLETED)
            assert done, "the server neither answered nor stopped"
            if any(isinstance(f.exception(), SessionClosed) for f in done):
                break

    try:
        asyncio.run(write())
        assert server.proc.wait(15) == 3, "a disk failure stops the server with exit status 3"
        out = server.log()
        assert "cannot write the txn log" in out and "injected fault" in out, out[-2000:]
        assert acked, "some writes were acknowledged before the disk failed"
        server = start_zkpy(settings, workdir=server.workdir, port=server.port)
        client = RawClient("127.0.0.1", server.port)
        lost = [p for p in acked if client.call(OpCode.GET_DATA, GetDataRequest(p, False)).header.err != 0]
        assert not lost, f"{len(lost)} of {len(acked)} acknowledged creates were lost: {lost[:5]}"
        client.close()
    finally:
        server.cleanup()
