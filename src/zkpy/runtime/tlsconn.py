"""TLS for one client connection, over memory BIOs (the standard library's ``ssl``).

The client port feeds each chunk it reads to ``receive`` and writes what ``take_output`` and
``encrypt`` return. Doing TLS here rather than in the event loop's transport gives both listeners
one code path: the secure port (every connection is TLS) and the plain port with
``client.portUnification`` (a connection whose first byte opens a TLS record is TLS).
"""

from __future__ import annotations

import ssl

TLS_HANDSHAKE_RECORD = 0x16  # the first byte of a TLS ClientHello


def looks_like_tls(first: bytes) -> bool:
    """Whether a connection's first bytes open a TLS handshake record (0x16 0x03 ...)."""
    return len(first) >= 2 and first[0] == TLS_HANDSHAKE_RECORD and first[1] == 0x03


class TlsConnection:
    """The server side of one TLS session. ``receive`` raises ``ssl.SSLError`` on a failed
    handshake or a broken record; ``handshake_done`` turns true once, when the peer is known."""

    __slots__ = ("_incoming", "_outgoing", "_tls", "handshake_done", "closed")

    def __init__(self, context: ssl.SSLContext) -> None:
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self.handshake_done = False
        self.closed = False  # the peer sent close_notify

    def receive(self, data: bytes) -> bytes:
        """The plaintext in ``data`` (empty while the handshake goes on)."""
        self._incoming.write(data)
        if not self.handshake_done:
            try:
                self._tls.do_handshake()
            except ssl.SSLWantReadError:
                return b""
            self.handshake_done = True
        chunks = []
        while True:
            try:
                chunk = self._tls.read(262144)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                self.closed = True
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)

    def take_output(self) -> bytes:
        """TLS records to send (handshake messages, alerts)."""
        return self._outgoing.read()

    def encrypt(self, data: bytes) -> bytes:
        self._tls.write(data)
        return self._outgoing.read()

    def peer_certificate(self) -> bytes | None:
        """The client's certificate (DER), or None when it sent none."""
        return self._tls.getpeercert(binary_form=True)

    @property
    def version(self) -> str | None:
        return self._tls.version()
