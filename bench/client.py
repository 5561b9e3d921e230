"""A minimal pipelining ZooKeeper client for load generation, built on zkpy's wire codec.

Not a general client: no watches, no reconnect, no auth. One ``RawSession`` is one TCP
connection and one session; any number of requests may be outstanding on it, and replies
come back in the order the requests were sent (ZooKeeper's per-session FIFO), so the
pending requests are a deque matched by xid.

Two ways to issue requests:

* ``call(op, body)`` returns a future of ``(err, reply_body)`` (setup, create/delete mode);
* ``send(op, body, tag)`` + ``on_reply(tag, err, sent_ns, now_ns)`` is the callback path of
  the closed-loop throughput driver: the callback may ``send`` again, and everything sent
  while a batch of replies is handled goes out in one ``write`` after the batch.

Hot-path encoding: request bodies are encoded once with zkpy's records (``GetDataRequest``,
``SetDataRequest``, ...) and reused; only the ``RequestHeader`` (xid, type) is packed per
request, with a ``struct.Struct`` that has exactly ``RequestHeader``'s layout (checked at
import). Replies are parsed with ``ReplyHeader``'s layout the same way; bodies are not decoded
on the hot path.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from zkpy.wire.consts import PROTOCOL_VERSION, OpCode, Perms, Xid
from zkpy.wire.jute import INT
from zkpy.wire.proto import (
    ACL,
    ConnectRequest,
    ConnectResponse,
    CreateRequest,
    DeleteRequest,
    GetDataRequest,
    Id,
    ReplyHeader,
    RequestHeader,
    SetDataRequest,
)

# length prefix + RequestHeader(xid, type), packed in one go
_FRAMED_HEADER = struct.Struct(">iii")
_REPLY_HEADER = struct.Struct(">iqi")  # ReplyHeader(xid, zxid, err)
_HEADER_SIZE = 8  # RequestHeader

assert RequestHeader(7, 4).to_bytes() == _FRAMED_HEADER.pack(0, 7, 4)[4:]
assert ReplyHeader.from_bytes(_REPLY_HEADER.pack(-2, 9, -101)) == ReplyHeader(-2, 9, -101)

OPEN_ACL_UNSAFE = [ACL(int(Perms.ALL), Id("world", "anyone"))]

OnReply = Callable[[Any, int, int, int], None]  # (tag, err, sent_ns, now_ns)


def get_data_body(path: str) -> bytes:
    return GetDataRequest(path, False).to_bytes()


def set_data_body(path: str, data: bytes, version: int = -1) -> bytes:
    return SetDataRequest(path, data, version).to_bytes()


def create_body(path: str, data: bytes, flags: int = 0) -> bytes:
    return CreateRequest(path, data, OPEN_ACL_UNSAFE, flags).to_bytes()


def delete_body(path: str, version: int = -1) -> bytes:
    return DeleteRequest(path, version).to_bytes()


class SessionClosed(ConnectionError):
    pass


class RawSession(asyncio.Protocol):
    """One connection and session; see the module docstring."""

    def __init__(self, on_reply: OnReply | None = None) -> None:
        self.on_reply = on_reply
        self.transport: asyncio.Transport | None = None
        self.session_id = 0
        self.timeout_ms = 0
        self._buf = bytearray()
        self._out: list[bytes] = []
        self._batching = False
        self._xid = 0
        # (xid, tag or future, sent_ns); tag ``None`` is not used
        self._pending: deque[tuple[int, Any, int]] = deque()
        self._connected: asyncio.Future[ConnectResponse] | None = None
        self.closed: asyncio.Future[None] | None = None
        self.unexpected = 0  # replies that matched no request (should stay 0)

    # --- connection setup ---

    @classmethod
    async def connect(cls, host: str, port: int, timeout_ms: int = 30000,
                      on_reply: OnReply | None = None, ssl_context: ssl.SSLContext | None = None) -> RawSession:
        loop = asyncio.get_running_loop()
        _, proto = await loop.create_connection(lambda: cls(on_reply), host, port, ssl=ssl_context,
                                                server_hostname=host if ssl_context is not None else None)
        await asyncio.wait_for(proto._handshake(timeout_ms), 10)
        return proto

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        loop = asyncio.get_running_loop()
        self._connected = loop.create_future()
        self.closed = loop.create_future()

    async def _handshake(self, timeout_ms: int) -> None:
        assert self.transport is not None and self._connected is not None
        body = bytearray()
        ConnectRequest(PROTOCOL_VERSION, 0, timeout_ms, 0, b"\x00" * 16).write(body)
        body += b"\x00"  # readOnly = false (3.4+ clients send it)
        self.transport.write(INT.pack(len(body)) + bytes(body))
        resp = await self._connected
        if resp.timeOut <= 0:
            raise SessionClosed("server refused the session")
        self.session_id = resp.sessionId
        self.timeout_ms = resp.timeOut

    def connection_lost(self, exc: Exception | None) -> None:
        err = SessionClosed(f"connection lost: {exc}")
        if self._connected is not None and not self._connected.done():
            self._connected.set_exception(err)
        while self._pending:
            _, tag, _ = self._pending.popleft()
            if isinstance(tag, asyncio.Future) and not tag.done():
                tag.set_exception(err)
        if self.closed is not None and not self.closed.done():
            self.closed.set_result(None)
        self.transport = None

    # --- requests ---

    @property
    def outstanding(self) -> int:
        return len(self._pending)

    def send(self, op: int, body: bytes, tag: Any, now_ns: int) -> None:
        """Queue a request; written at the end of the current reply batch, or now."""
        self._xid += 1
        xid = self._xid
        self._pending.append((xid, tag, now_ns))
        self._out.append(_FRAMED_HEADER.pack(_HEADER_SIZE + len(body), xid, op))
        self._out.append(body)
        if not self._batching:
            self.flush()

    def flush(self) -> None:
        if self._out and self.transport is not None:
            self.transport.write(b"".join(self._out))
        self._out.clear()

    def call(self, op: int, body: bytes) -> asyncio.Future[tuple[int, bytes]]:
        """Send one request; the future gives ``(err, reply body)``."""
        if self.transport is None:
            raise SessionClosed("not connected")
        fut: asyncio.Future[tuple[int, bytes]] = asyncio.get_running_loop().create_future()
        self.send(op, body, fut, time.monotonic_ns())
        return fut

    async def close(self) -> None:
        """Close the session (closeSession), then the connection."""
        if self.transport is None:
            return
        try:
            await asyncio.wait_for(self.call(OpCode.CLOSE_SESSION, b""), 5)
        except (SessionClosed, TimeoutError):
            pass
        if self.transport is not None:
            self.transport.close()
        if self.closed is not None:
            await asyncio.wait_for(asyncio.shield(self.closed), 5)

    # --- replies ---

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        end = len(buf)
        pos = 0
        if self._connected is not None and not self._connected.done():
            if end < 4:
                return
            (n,) = INT.unpack_from(buf, 0)
            if end < 4 + n:
                return
            self._connected.set_result(ConnectResponse.from_bytes(bytes(buf[4:4 + n])))
            pos = 4 + n
        now = time.monotonic_ns()
        pending = self._pending
        on_reply = self.on_reply
        unpack_len = INT.unpack_from
        unpack_hdr = _REPLY_HEADER.unpack_from
        self._batching = True
        try:
            while end - pos >= 4:
                (n,) = unpack_len(buf, pos)
                if end - pos - 4 < n:
                    break
                xid, _zxid, err = unpack_hdr(buf, pos + 4)
                start = pos
                pos += 4 + n
                if xid < 0 and xid in (Xid.NOTIFICATION, Xid.PING):
                    continue
                if not pending or pending[0][0] != xid:
                    self.unexpected += 1
                    continue
                _, tag, sent = pending.popleft()
                if isinstance(tag, asyncio.Future):
                    if not tag.done():
                        tag.set_result((err, bytes(buf[start + 20:pos])))
                elif on_reply is not None:
                    on_reply(tag, err, sent, now)
        finally:
            self._batching = False
            if pos:
                del buf[:pos]
        self.flush()
