"""Quorum SASL over a member's links (the shell of ``member.quorum_auth``).

``authenticate_to`` is the connecting side (ZooKeeper's ``SaslQuorumAuthLearner``): a member
dialling a peer's election port, or a learner dialling the leader, proves who it is with the JAAS
``QuorumLearner`` user when ``quorum.auth.learnerRequireSasl`` is true; pure-sasl speaks the
DIGEST-MD5 client side. ``check_peer`` is the side connected to, over a stream, and hands back a
reader that starts where the exchange ended (the leader's quorum port feeds
``member.quorum_auth.QuorumAuthServer`` from its protocol directly).
"""

from __future__ import annotations

import asyncio
import os

from puresasl.client import SASLClient  # type: ignore[import-untyped]

from zkpy.config import QuorumSaslConfig
from zkpy.member.quorum_auth import (
    SERVER_NAME,
    SERVICE,
    QuorumAuthServer,
    Verdict,
    decode_auth_packet,
    encode_auth_packet,
)
from zkpy.server.sasl import NONCE_BYTES
from zkpy.wire.quorum import QuorumAuthStatus

MAX_ROUNDS = 5


class QuorumAuthError(Exception):
    """The quorum SASL exchange failed: the connection is dropped."""


def new_auth_server(sasl: QuorumSaslConfig) -> QuorumAuthServer:
    return QuorumAuthServer(sasl.server_users, os.urandom(NONCE_BYTES), sasl.server_required)


async def _read_packet(reader: asyncio.StreamReader) -> tuple[QuorumAuthStatus, bytes | None]:
    buf = bytearray()
    while True:
        try:
            packet = decode_auth_packet(buf)
        except ValueError as exc:
            raise QuorumAuthError(str(exc)) from None
        if packet is not None:
            return packet[1], packet[2]
        chunk = await reader.read(4096)
        if not chunk:
            raise QuorumAuthError("the peer closed the connection during quorum SASL")
        buf += chunk


async def authenticate_to(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, sasl: QuorumSaslConfig | None,
                          timeout_s: float) -> None:
    """Prove who I am to the peer just dialled, when ``quorum.auth.learnerRequireSasl`` says so.
    Raises QuorumAuthError (the caller drops the connection)."""
    if sasl is None or not sasl.learner_required:
        return
    client = SASLClient(SERVER_NAME, SERVICE, mechanism="DIGEST-MD5", username=sasl.learner_user,
                        password=sasl.learner_password)

    async def exchange() -> None:
        writer.write(encode_auth_packet(QuorumAuthStatus.IN_PROGRESS, b""))  # DIGEST-MD5: no initial response
        for _ in range(MAX_ROUNDS + 1):
            status, token = await _read_packet(reader)
            if status is QuorumAuthStatus.ERROR:
                raise QuorumAuthError("the peer refused my quorum SASL credentials")
            try:
                response = client.process(token or b"")
            except Exception as exc:  # pure-sasl raises its own kinds, and ValueError on a bad rspauth
                raise QuorumAuthError(f"quorum SASL: {exc}") from None
            if status is QuorumAuthStatus.SUCCESS:
                if not client.complete:
                    raise QuorumAuthError("the peer said SUCCESS before my quorum SASL exchange was complete")
                return
            writer.write(encode_auth_packet(QuorumAuthStatus.IN_PROGRESS, response or b""))
        raise QuorumAuthError(f"quorum SASL went on for more than {MAX_ROUNDS} rounds")

    try:
        await asyncio.wait_for(exchange(), timeout_s)
    except TimeoutError:
        raise QuorumAuthError(f"no quorum SASL answer within {timeout_s:g}s") from None


async def check_peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, sasl: QuorumSaslConfig,
                     timeout_s: float) -> tuple[asyncio.StreamReader, str | None]:
    """Check who connected (``quorum.auth.enableSasl``): the reader to go on with, starting after the
    exchange, and the authenticated user (None: let through unauthenticated). Raises QuorumAuthError
    when the peer is refused."""
    check = new_auth_server(sasl)

    async def exchange() -> None:
        while check.verdict is Verdict.PENDING:
            data = await reader.read(4096)
            if not data:
                raise QuorumAuthError("the peer closed the connection during quorum SASL")
            out = check.receive(data)
            if out:
                writer.write(out)

    try:
        await asyncio.wait_for(exchange(), timeout_s)
    except TimeoutError:
        raise QuorumAuthError(f"no quorum SASL exchange within {timeout_s:g}s") from None
    if check.verdict is Verdict.REFUSED:
        raise QuorumAuthError(check.reason)
    if not check.leftover:
        return reader, check.user
    return _prepended(check.leftover, reader), check.user


def _prepended(head: bytes, reader: asyncio.StreamReader) -> asyncio.StreamReader:
    """A reader that yields ``head`` and then everything ``reader`` yields (a peer that did not try to
    authenticate has already sent its first election bytes, which the check read)."""
    joined = asyncio.StreamReader()
    joined.feed_data(head)

    async def pump() -> None:
        try:
            while chunk := await reader.read(65536):
                joined.feed_data(chunk)
        except OSError as exc:
            joined.set_exception(exc)
            return
        joined.feed_eof()

    task = asyncio.ensure_future(pump())
    _PUMPS.add(task)
    task.add_done_callback(_PUMPS.discard)
    return joined


_PUMPS: set[asyncio.Task[None]] = set()
