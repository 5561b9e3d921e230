"""A raw-socket ZooKeeper client for tests that need exact bytes: handshake, frames, deadlines.

Nothing here sleeps: every read waits on the socket with the time left before a deadline,
and a peer that closes (EOF or reset) is reported as ``None`` rather than an exception.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass

from zkpy.wire.proto import ConnectRequest, ConnectResponse, ReplyHeader

INT = struct.Struct(">i")
PING_XID = -2
PING_OP = 11


class Deadline:
    """A point in monotonic time; ``left()`` is what remains of it (never negative)."""

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.at - time.monotonic())


def connect_request_bytes(timeout_ms: int = 30000, session_id: int = 0, passwd: bytes = bytes(16),
                          last_zxid: int = 0, read_only: bool | None = False) -> bytes:
    """A ConnectRequest payload; ``read_only=None`` leaves out the trailing readOnly byte (old client)."""
    body = ConnectRequest(0, last_zxid, timeout_ms, session_id, passwd).to_bytes()
    return body if read_only is None else body + bytes([int(read_only)])


def frame(payload: bytes) -> bytes:
    return INT.pack(len(payload)) + payload


@dataclass
class Reply:
    """One server frame split into its ReplyHeader and the bytes after it."""

    header: ReplyHeader
    body: bytes

    @property
    def err(self) -> int:
        return self.header.err


class RawConn:
    """One TCP connection to a server, driven frame by frame."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 5.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self._buf = bytearray()
        self.eof = False
        self.session_id = 0
        self.passwd = b""

    def __enter__(self) -> RawConn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    # ---- sending ----

    def send(self, data: bytes) -> bool:
        """Write raw bytes; False when the peer has already closed the connection."""
        try:
            self.sock.sendall(data)
            return True
        except (BrokenPipeError, ConnectionResetError):
            return False

    def send_frame(self, payload: bytes) -> bool:
        return self.send(frame(payload))

    def send_request(self, xid: int, op: int, body: bytes = b"") -> bool:
        return self.send_frame(INT.pack(xid) + INT.pack(op) + body)

    # ---- receiving ----

    def _fill(self, n: int, deadline: Deadline) -> bool:
        """Buffer at least ``n`` bytes; False on EOF. TimeoutError when the deadline passes."""
        while len(self._buf) < n:
            if self.eof:
                return False
            left = deadline.left()
            if left <= 0:
                raise TimeoutError(f"no data within the deadline ({len(self._buf)} of {n} bytes)")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                raise TimeoutError(f"no data within the deadline ({len(self._buf)} of {n} bytes)") from None
            except (ConnectionResetError, ConnectionAbortedError):
                chunk = b""
            if not chunk:
                self.eof = True
                return False
            self._buf += chunk
        return True

    def read_frame(self, seconds: float | None = None) -> bytes | None:
        """The next whole frame's payload, or None if the server closed the connection."""
        deadline = Deadline(self.timeout if seconds is None else seconds)
        if not self._fill(4, deadline):
            return None
        (n,) = INT.unpack_from(self._buf, 0)
        if not self._fill(4 + n, deadline):
            return None
        payload = bytes(self._buf[4 : 4 + n])
        del self._buf[: 4 + n]
        return payload

    def read_reply(self, seconds: float | None = None) -> Reply | None:
        payload = self.read_frame(seconds)
        if payload is None:
            return None
        hdr, pos = ReplyHeader.read(payload, 0)
        return Reply(hdr, payload[pos:])

    def wait_closed(self, seconds: float | None = None) -> list[bytes]:
        """Read until the server closes; the frames it sent first. TimeoutError if it stays open."""
        frames = []
        while True:
            payload = self.read_frame(seconds)
            if payload is None:
                return frames
            frames.append(payload)

    # ---- protocol steps ----

    def handshake(self, timeout_ms: int = 30000, session_id: int = 0, passwd: bytes = bytes(16),
                  read_only: bool | None = False) -> ConnectResponse:
        """Send a ConnectRequest and read the ConnectResponse (AssertionError if the server closed)."""
        self.send_frame(connect_request_bytes(timeout_ms, session_id, passwd, read_only=read_only))
        payload = self.read_frame()
        assert payload is not None, "server closed the connection during the handshake"
        rsp = ConnectResponse.from_bytes(payload)
        self.session_id, self.passwd = rsp.sessionId, rsp.passwd or b""
        return rsp

    def ping_outcome(self, seconds: float | None = None) -> tuple[list[Reply], bool]:
        """Send a ping and read up to its answer: the replies that came before it, and whether the
        connection is still open (True: the ping was answered; False: the server closed)."""
        before: list[Reply] = []
        self.send_request(PING_XID, PING_OP)
        while True:
            reply = self.read_reply(seconds)
            if reply is None:
                return before, False
            if reply.header.xid == PING_XID:
                return before, True
            before.append(reply)
