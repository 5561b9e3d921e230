"""Quorum SASL, the side that is connected to (pure): a member's election port, and its quorum port
while it leads, check who connects before a byte of the election or of Zab is read.

The exchange is ZooKeeper 3.8's (``SaslQuorumAuthServer``), DIGEST-MD5 for protocol
``zookeeper-quorum`` and server name ``zk-quorum-sasl-md5``, in ``QuorumAuthPacket`` records
(magic, status, token) with no length prefix::

    member:  IN_PROGRESS (empty token)       me: IN_PROGRESS challenge
    member:  IN_PROGRESS digest-response     me: SUCCESS rspauth       (passed: the rest is election or Zab)
    any failure                              me: ERROR (empty)         (refused, or passed if not required)

A connection whose first 8 bytes are not the magic number did not try to authenticate: it is refused
when ``quorum.auth.serverRequireSasl`` is true and passed on untouched otherwise (a rolling upgrade
to quorum SASL goes through that state). At most ``MAX_ROUNDS`` challenges are sent, and a token is
at most ``MAX_TOKEN`` bytes, so a peer cannot keep the exchange going or grow its buffer.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from enum import Enum

from zkpy.server.sasl import DigestMD5Server, SaslError
from zkpy.wire.quorum import QUORUM_AUTH_MAGIC, QuorumAuthStatus

SERVICE = "zookeeper-quorum"  # QuorumAuth.QUORUM_SERVER_PROTOCOL_NAME
SERVER_NAME = "zk-quorum-sasl-md5"  # QuorumAuth.QUORUM_SERVER_SASL_DIGEST (the DIGEST-MD5 realm)
MAX_ROUNDS = 5  # SaslQuorumAuthServer.MAX_RETRIES
MAX_TOKEN = 64 * 1024
_HEAD = struct.Struct(">qii")  # magic, status, token length (-1: null)
_MAGIC = struct.Struct(">q")
MAGIC = QUORUM_AUTH_MAGIC  # (positive: Java negates a literal that is already negative)


class Verdict(Enum):
    PENDING = "pending"
    PASSED = "passed"  # authenticated, or let through because authentication is not required
    REFUSED = "refused"


def encode_auth_packet(status: QuorumAuthStatus, token: bytes | None) -> bytes:
    """One QuorumAuthPacket as ZooKeeper writes it (``writeRecord``: the fields, no length prefix)."""
    if token is None:
        return _HEAD.pack(MAGIC, int(status), -1)
    return _HEAD.pack(MAGIC, int(status), len(token)) + token


def decode_auth_packet(buf: bytes | bytearray) -> tuple[int, QuorumAuthStatus, bytes | None, int] | None:
    """(magic, status, token, bytes used) of the packet at the start of ``buf``, or None when it is
    not all there yet. ValueError for a token longer than ``MAX_TOKEN`` or an unknown status."""
    if len(buf) < _HEAD.size:
        return None
    magic, status, length = _HEAD.unpack_from(buf, 0)
    if length > MAX_TOKEN:
        raise ValueError(f"a quorum auth token of {length} bytes (at most {MAX_TOKEN})")
    size = _HEAD.size + max(length, 0)
    if len(buf) < size:
        return None
    try:
        parsed = QuorumAuthStatus(status)
    except ValueError:
        raise ValueError(f"quorum auth status {status} is unknown") from None
    token = None if length < 0 else bytes(buf[_HEAD.size:size])
    return magic, parsed, token, size


class QuorumAuthServer:
    """One incoming connection's quorum SASL check. Feed what arrives to ``receive`` and send what it
    returns; once ``verdict`` is not PENDING, ``leftover`` holds the bytes that followed the exchange
    (the peer's first election or Zab bytes) and ``user`` who authenticated (None: nobody)."""

    def __init__(self, users: Mapping[str, str], nonce: bytes, required: bool) -> None:
        self._mechanism = DigestMD5Server(users, nonce, service=SERVICE, server_name=SERVER_NAME)
        self._required = required
        self._buf = bytearray()
        self._rounds = 0
        self._started = False
        self.verdict = Verdict.PENDING
        self.leftover = b""
        self.user: str | None = None
        self.reason = ""  # why it was refused, or passed without authentication

    def receive(self, data: bytes) -> bytes:
        """What to send back for ``data`` (empty while waiting for more)."""
        if self.verdict is not Verdict.PENDING:
            raise RuntimeError("the quorum auth exchange is over")
        self._buf += data
        if not self._started:
            if len(self._buf) < _MAGIC.size:
                return b""
            if _MAGIC.unpack_from(self._buf, 0)[0] != MAGIC:
                return self._end_unauthenticated("the peer did not try to authenticate")
            self._started = True
        out: list[bytes] = []
        while self.verdict is Verdict.PENDING:
            try:
                packet = decode_auth_packet(self._buf)
            except ValueError as exc:
                return b"".join(out) + self._fail(str(exc))
            if packet is None:
                break
            _, _, token, used = packet
            del self._buf[:used]
            try:
                answer = self._mechanism.evaluate(token or b"")
            except SaslError as exc:
                return b"".join(out) + self._fail(str(exc))
            if self._mechanism.complete:
                self.verdict = Verdict.PASSED
                self.user = self._mechanism.user
                self.leftover = bytes(self._buf)
                out.append(encode_auth_packet(QuorumAuthStatus.SUCCESS, answer))
            else:
                self._rounds += 1
                if self._rounds > MAX_ROUNDS:
                    return b"".join(out) + self._fail(f"more than {MAX_ROUNDS} rounds")
                out.append(encode_auth_packet(QuorumAuthStatus.IN_PROGRESS, answer))
        return b"".join(out)

    def _fail(self, why: str) -> bytes:
        reply = encode_auth_packet(QuorumAuthStatus.ERROR, b"")
        self._buf.clear()  # the exchange's bytes: nothing of the election or of Zab follows a failed one
        self._end_unauthenticated(f"SASL failed: {why}")
        return reply

    def _end_unauthenticated(self, why: str) -> bytes:
        self.reason = why
        if self._required:
            self.verdict = Verdict.REFUSED
        else:
            self.verdict = Verdict.PASSED
            self.leftover = bytes(self._buf)
        return b""
