"""A blocking raw-protocol client for tests: exact control of frames, order and timing.

It speaks the 3.8 handshake and sends any record with any opcode, and returns replies
and notifications in the order the server wrote them, which is what ordering tests need.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

from zkpy.wire.consts import OpCode, Xid
from zkpy.wire.jute import INT, Record
from zkpy.wire.proto import ConnectRequest, ConnectResponse, ReplyHeader, RequestHeader, WatcherEvent


@dataclass
class Frame:
    """One frame from the server: its reply header and the bytes after it."""

    header: ReplyHeader
    body: bytes

    @property
    def is_notification(self) -> bool:
        return self.header.xid == Xid.NOTIFICATION

    def event(self) -> WatcherEvent:
        return WatcherEvent.from_bytes(self.body)


class RawClient:
    def __init__(self, host: str, port: int, timeout_ms: int = 10000, session_id: int = 0,
                 passwd: bytes = bytes(16), read_only_byte: bool = True, deadline_s: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=deadline_s)
        self.deadline_s = deadline_s
        self._buf = bytearray()
        self._xid = 0
        self.notifications: list[Frame] = []
        payload = ConnectRequest(0, 0, timeout_ms, session_id, passwd).to_bytes() + (b"\x00" if read_only_byte else b"")
        self.send_raw(INT.pack(len(payload)) + payload)
        data = self.read_frame()
        self.connect_response = ConnectResponse.from_bytes(data)

    @property
    def session_id(self) -> int:
        return int(self.connect_response.sessionId)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, op: int, record: Record | None = None, xid: int | None = None) -> int:
        """Send one request; returns its xid."""
        if xid is None:
            self._xid += 1
            xid = self._xid
        payload = RequestHeader(xid, int(op)).to_bytes() + (record.to_bytes() if record is not None else b"")
        self.send_raw(INT.pack(len(payload)) + payload)
        return xid

    def read_frame(self) -> bytes:
        """The next whole frame's payload; raises ConnectionError when the server closed."""
        deadline = time.monotonic() + self.deadline_s
        while True:
            if len(self._buf) >= 4:
                (n,) = INT.unpack_from(self._buf, 0)
                if len(self._buf) >= 4 + n:
                    data = bytes(self._buf[4 : 4 + n])
                    del self._buf[: 4 + n]
                    return data
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no frame from the server before the deadline")
            self.sock.settimeout(remaining)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self._buf += chunk

    def recv(self) -> Frame:
        data = self.read_frame()
        header, pos = ReplyHeader.read(data, 0)
        return Frame(header, data[pos:])

    def call(self, op: int, record: Record | None = None) -> Frame:
        """Send a request and return its reply, skipping (and keeping) notifications."""
        xid = self.send(op, record)
        while True:
            frame = self.recv()
            if frame.header.xid == xid:
                return frame
            self.notifications.append(frame)

    def closed_by_server(self) -> bool:
        """True when the server has closed the connection (reads EOF before the deadline)."""
        try:
            self.read_frame()
        except ConnectionError:
            return True
        except (TimeoutError, OSError):
            return False
        return False

    def close(self) -> None:
        try:
            self.send(OpCode.CLOSE_SESSION)
        except OSError:
            pass
        self.sock.close()
