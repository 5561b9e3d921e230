"""member.quorum_auth: the side of quorum SASL that is connected to, driven by pure-sasl's DIGEST-MD5
client (the client zkpy's connecting side uses; Apache's Java client is checked against it in
tests/interop/test_quorum_security.py)."""

from __future__ import annotations

import struct

from puresasl.client import SASLClient  # type: ignore[import-untyped]

from zkpy.member.quorum_auth import (
    MAGIC,
    SERVER_NAME,
    SERVICE,
    QuorumAuthServer,
    Verdict,
    decode_auth_packet,
    encode_auth_packet,
)
from zkpy.wire.quorum import QuorumAuthStatus

USERS = {"member": "quorum-secret"}
NONCE = bytes(range(30))


def run_exchange(server: QuorumAuthServer, password: str, trailing: bytes = b"") -> list[QuorumAuthStatus]:
    """A learner's side against ``server``; the statuses it received. ``trailing`` follows its last packet."""
    client = SASLClient(SERVER_NAME, SERVICE, mechanism="DIGEST-MD5", username="member", password=password)
    statuses = []
    out = server.receive(encode_auth_packet(QuorumAuthStatus.IN_PROGRESS, b""))
    while True:
        packet = decode_auth_packet(out)
        assert packet is not None
        magic, status, token, used = packet
        assert magic == MAGIC and used == len(out)
        statuses.append(status)
        if status is not QuorumAuthStatus.IN_PROGRESS:
            if status is QuorumAuthStatus.SUCCESS:
                client.process(token)
                assert client.complete  # the server proved it knows the password too (rspauth)
            return statuses
        response = client.process(token)
        out = server.receive(encode_auth_packet(QuorumAuthStatus.IN_PROGRESS, response) + trailing)


def test_a_member_with_the_password_passes_and_what_follows_is_kept() -> None:
    server = QuorumAuthServer(USERS, NONCE, required=True)
    assert run_exchange(server, "quorum-secret", trailing=b"zab!") == [QuorumAuthStatus.IN_PROGRESS,
                                                                       QuorumAuthStatus.SUCCESS]
    assert server.verdict is Verdict.PASSED and server.user == "member"
    assert server.leftover == b"zab!"


def test_a_wrong_password_is_answered_with_error_and_refused_when_required() -> None:
    server = QuorumAuthServer(USERS, NONCE, required=True)
    assert run_exchange(server, "wrong")[-1] is QuorumAuthStatus.ERROR
    assert server.verdict is Verdict.REFUSED and server.user is None
    assert "wrong" not in server.reason


def test_a_wrong_password_is_let_through_unauthenticated_when_not_required() -> None:
    server = QuorumAuthServer(USERS, NONCE, required=False)
    assert run_exchange(server, "wrong")[-1] is QuorumAuthStatus.ERROR
    assert server.verdict is Verdict.PASSED and server.user is None


def test_a_peer_that_does_not_authenticate_is_refused_or_passed_untouched() -> None:
    election_bytes = struct.pack(">i", 28) + bytes(28)
    required = QuorumAuthServer(USERS, NONCE, required=True)
    assert required.receive(election_bytes[:5]) == b""  # not yet 8 bytes: waits
    assert required.verdict is Verdict.PENDING
    assert required.receive(election_bytes[5:]) == b""
    assert required.verdict is Verdict.REFUSED
    relaxed = QuorumAuthServer(USERS, NONCE, required=False)
    relaxed.receive(election_bytes)
    assert relaxed.verdict is Verdict.PASSED and relaxed.leftover == election_bytes


def test_a_peer_cannot_keep_the_exchange_going_or_send_a_huge_token() -> None:
    endless = QuorumAuthServer(USERS, NONCE, required=True)
    replies = b"".join(endless.receive(encode_auth_packet(QuorumAuthStatus.IN_PROGRESS, b"")) for _ in range(2))
    assert endless.verdict is Verdict.REFUSED  # the second token is not a digest-response
    assert decode_auth_packet(replies) is not None
    huge = QuorumAuthServer(USERS, NONCE, required=True)
    reply = huge.receive(struct.pack(">qii", MAGIC, 0, 10**9))
    assert huge.verdict is Verdict.REFUSED
    assert decode_auth_packet(reply)[1] is QuorumAuthStatus.ERROR  # type: ignore[index]
