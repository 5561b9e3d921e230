"""One client connection as the server sees it: framing, handshake state, identities, output.

Sans-I/O: bytes are fed in, replies accumulate in ``out`` for the shell to write. The states
and the only ways between them are ``TRANSITIONS`` (``Connection.transition`` refuses any
other): AWAIT_CONNECT -> (AWAIT_SESSION ->) ESTABLISHED, and CLOSING from any of them; a
four-letter word is recognised only as the very first four bytes, as ZooKeeper does.

Bounds (back-pressure, as ZooKeeper stops reading a connection it cannot keep up with): a
connection's requests are taken from its decoder one frame at a time, and none is taken while
its queued output (``queued``: replies and events in ``out``, what the shell has written and the
socket has not taken yet, ``unsent``, and the expected replies of reads waiting behind the
session's writes, ``owed``) is ``MAX_QUEUED_OUTPUT`` bytes or more, or while it
has ``MAX_OUTSTANDING`` requests in flight; it is then ``paused`` until ``can_resume``: its
queued output is down to ``RESUME_QUEUED_OUTPUT`` and its requests in flight to half the limit.
The shell stops reading the socket meanwhile, so what waits is bounded by the decoder's buffer.
At most ``MAX_FRAMES_PER_TURN`` requests are taken per call, so that one greedy client cannot
stall the others: the shell gives the loop a turn and calls again. Watch events are not requests:
they are queued whatever the bound, so a client that never reads while other sessions' writes
fire its watches is closed by the shell once ``MAX_UNREAD_OUTPUT`` bytes wait for it (its session
lives on; reconnecting, its client sets its watches again, and the server fires what it missed).
"""

from __future__ import annotations

from enum import Enum

from zkpy.server.sasl import DigestMD5Server, NoSaslServer
from zkpy.tree.acl import auth_order
from zkpy.wire.consts import FOUR_LETTER_WORDS
from zkpy.wire.framing import FrameDecoder
from zkpy.wire.proto import Id

_FOUR_LETTER_BYTES = {w.encode("ascii"): w for w in FOUR_LETTER_WORDS}

MAX_QUEUED_OUTPUT = 4 * 1024 * 1024  # bytes of replies and events queued: take no request past it
RESUME_QUEUED_OUTPUT = 1024 * 1024  # ... until they are down to this
MAX_OUTSTANDING = 1000  # requests in flight per connection: take no request past it (resume at half)
MAX_FRAMES_PER_TURN = 128  # requests taken from one connection before the loop gets a turn
MAX_UNREAD_OUTPUT = 16 * MAX_QUEUED_OUTPUT  # bytes written and not read (watch events): close past it


class ConnState(Enum):
    AWAIT_CONNECT = "await-connect"
    AWAIT_SESSION = "await-session"  # its session's createSession txn, or the leader's word on it, in flight
    ESTABLISHED = "established"
    CLOSING = "closing"


TRANSITIONS: dict[ConnState, frozenset[ConnState]] = {  # state -> the states it may move to
    ConnState.AWAIT_CONNECT: frozenset({ConnState.AWAIT_SESSION, ConnState.ESTABLISHED, ConnState.CLOSING}),
    ConnState.AWAIT_SESSION: frozenset({ConnState.ESTABLISHED, ConnState.CLOSING}),
    ConnState.ESTABLISHED: frozenset({ConnState.CLOSING}),
    ConnState.CLOSING: frozenset(),
}


class Connection:
    """Per-connection protocol state and counters (the ``cons`` four-letter word reads them)."""

    __slots__ = ("conn_id", "ip", "port", "decoder", "state", "session_id", "timeout_ms", "auth", "sasl",
                 "out", "old_client", "close_reason", "received", "sent", "outstanding", "established_ms",
                 "last_cxid", "last_zxid", "last_op", "last_response_ms", "last_latency", "min_latency",
                 "max_latency", "total_latency", "latency_count", "paused", "out_bytes", "unsent", "owed",
                 "closing", "touched_ms")

    def __init__(self, conn_id: int, ip: str, port: int, max_buffer: int) -> None:
        self.conn_id = conn_id
        self.ip = ip
        self.port = port
        self.decoder = FrameDecoder(max_buffer)
        self.state = ConnState.AWAIT_CONNECT
        self.session_id = 0
        self.timeout_ms = 0
        self.auth: list[Id] = [Id("ip", ip)]
        self.sasl: DigestMD5Server | NoSaslServer | None = None  # from the first SASL packet on
        self.out: list[bytes] = []
        self.old_client = True
        self.close_reason: str | None = None
        self.received = 0
        self.sent = 0
        self.outstanding = 0
        self.established_ms = 0
        self.last_cxid = -1
        self.last_zxid = -1
        self.last_op = "NA"
        self.last_response_ms = 0
        self.last_latency = 0
        self.min_latency = -1
        self.max_latency = 0
        self.total_latency = 0
        self.latency_count = 0
        self.paused = False  # no request is taken until ``can_resume`` (see the module's doc)
        self.out_bytes = 0  # bytes in ``out``
        self.unsent = 0  # bytes the shell wrote that the socket has not taken yet (the shell keeps it)
        self.owed = 0  # bytes expected of the replies to reads queued behind this session's writes
        self.closing = False  # state is CLOSING (a plain flag: it is read several times per request)
        self.touched_ms = -1  # when a request on it last kept its session alive (once per ms is enough)

    def queue(self, data: bytes) -> None:
        """Append one framed packet to the output."""
        self.out.append(data)
        self.out_bytes += len(data)

    def take_output(self) -> list[bytes]:
        """The output queued so far, for the shell to write; ``out`` is empty after."""
        out, self.out = self.out, []
        self.out_bytes = 0
        return out

    @property
    def queued(self) -> int:
        """Bytes of output not yet taken by the socket (``out`` and ``unsent``), and expected of
        the replies to reads waiting behind writes (``owed``)."""
        return self.out_bytes + self.unsent + self.owed

    @property
    def over_limit(self) -> bool:
        """Too much output queued, or too many requests in flight, to take another request."""
        return self.queued >= MAX_QUEUED_OUTPUT or self.outstanding >= MAX_OUTSTANDING

    @property
    def can_resume(self) -> bool:
        """A paused connection's output and requests in flight are down to the low-water marks."""
        return self.queued <= RESUME_QUEUED_OUTPUT and self.outstanding <= MAX_OUTSTANDING // 2

    def four_letter_word(self) -> str | None:
        """The four-letter word this connection opened with, if it is one."""
        if self.state is not ConnState.AWAIT_CONNECT or self.received or self.decoder.buffered < 4:
            return None
        head = self.decoder.peek(4)
        return _FOUR_LETTER_BYTES.get(head)

    def transition(self, to: ConnState) -> None:
        """Move to state ``to``; a move ``TRANSITIONS`` does not list is a bug of the pipeline."""
        if to not in TRANSITIONS[self.state]:
            raise AssertionError(f"connection {self.conn_id}: no transition from {self.state.value} to {to.value}")
        self.state = to

    def close(self, reason: str) -> None:
        """Start closing (once: a second close keeps the first reason)."""
        if self.state is not ConnState.CLOSING:
            self.transition(ConnState.CLOSING)
            self.closing = True
            self.close_reason = reason

    def add_auth(self, ident: Id) -> None:
        if ident not in self.auth:
            self.auth = auth_order([*self.auth, ident])

    def reset_stats(self) -> None:
        """Zero the counters (the ``crst`` four-letter word)."""
        self.received = self.sent = 0
        self.last_cxid = self.last_zxid = -1
        self.last_op = "NA"
        self.last_response_ms = self.last_latency = 0
        self.min_latency = -1
        self.max_latency = self.total_latency = self.latency_count = 0

    def record_latency(self, ms: int) -> None:
        self.last_latency = ms
        if ms < self.min_latency or self.min_latency < 0:  # comparisons, not min()/max(): once per request
            self.min_latency = ms
        if ms > self.max_latency:
            self.max_latency = ms
        self.total_latency += ms
        self.latency_count += 1
