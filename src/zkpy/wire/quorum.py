"""Wire formats between ZooKeeper 3.8 servers: Zab's quorum packets and fast leader election.

Pure codecs only; what a peer does with a message lives in ``zkpy.quorum``. Byte order is
big-endian throughout (Java's DataOutputStream / ByteBuffer / jute).

Sources (Apache ZooKeeper, branch-3.8):
    zookeeper-jute/src/main/resources/zookeeper.jute   module org.apache.zookeeper.server.quorum
    zookeeper-server/.../server/quorum/Leader.java              packet type constants
    zookeeper-server/.../server/quorum/Learner.java             LearnerInfo in FOLLOWERINFO, ACKEPOCH data
    zookeeper-server/.../server/quorum/LearnerHandler.java      FOLLOWERINFO parsing, LEADERINFO data
    zookeeper-server/.../server/quorum/QuorumCnxManager.java    election connection handshake, framing
    zookeeper-server/.../server/quorum/FastLeaderElection.java  notification layout (buildMsg, receiver)
    zookeeper-server/.../server/quorum/QuorumPeer.java          ServerState, OBSERVER_ID
    zookeeper-server/.../server/quorum/auth/QuorumAuth.java     QuorumAuthPacket magic and status

Quorum (learner) port — jute records written back to back, with NO length prefix:
    QuorumPacket     := type:int zxid:long data:buffer authinfo:vector<Id>
    Id               := scheme:ustring id:ustring
    LearnerInfo      := serverid:long protocolVersion:int configVersion:long      (20 bytes)
    QuorumAuthPacket := magic:long status:int token:buffer      (only with quorum SASL enabled)
  FOLLOWERINFO / OBSERVERINFO data is a serialized LearnerInfo; the leader reads the sid from the
  first 8 bytes, the protocol version from the next 4 and the config version from the next 8,
  each only if the data is long enough; null data makes the leader assign a negative sid.
  Learners send protocolVersion 0x10000 (LEARNER_PROTOCOL_VERSION). LEADERINFO data is the
  leader's protocol version as one int; ACKEPOCH data is the learner's current epoch as one int
  (-1 when it already has the new epoch), its zxid the learner's last logged zxid.

Election port — a handshake from the initiating peer, then length-framed notifications:
    handshake        := protocolVersion:long sid:long addrlen:int addr:addrlen bytes (UTF-8)
                      | sid:long                                   (pre-3.5 peer; sid >= 0)
    protocolVersion  := -65536 (V1, one "host:port") | -65535 (V2, "host:port|host:port|...")
      3.8 sends V1 unless multiAddress.enabled, so that a rolling upgrade still interoperates.
      The receiver rejects addrlen outside 1..2048 (MAX_INITIAL_MESSAGE_BYTES), an unknown
      negative version, and an address that is not host:port (IPv6 hosts are "[addr]:port");
      wildcard hosts (0.0.0.0, ::) are dropped, not rejected. sid = OBSERVER_ID (2^63-1, an
      observer without a configured id) is replaced by the receiver with a fresh negative id.
      The connection with the higher sid wins: a peer keeps a connection it initiated only if
      its own sid is larger, and answers a connection from a smaller sid by closing it and
      dialling back.
    frame            := length:int payload        (0 < length <= PACKET_MAX_SIZE = 512 KiB)
    notification     := state:int leader:long zxid:long electionEpoch:long peerEpoch:long
                        version:int configlen:int config:configlen bytes   (44 + configlen)
      3.8 always sends version 2 with the sender's quorum config (QuorumVerifier.toString(),
      UTF-8). A receiver also accepts the older layouts: 28 bytes (no peerEpoch, taken as the
      zxid's epoch; version 0), exactly 40 bytes (the version int is ignored: version 0), and
      any version <= 1 without config (bytes after the version ignored). configlen must be within 0..payload length. State is a ServerState ordinal; a
      notification with another state, or one that is short, is dropped — the connection stays.
"""

from __future__ import annotations

import dataclasses
import re
import struct
from enum import IntEnum

from zkpy.errors import ProtocolError

from .jute import INT, LONG, Buffer, Int, Long, Record, jute_record, read_ustring
from .proto import Id


class PacketType(IntEnum):
    """Leader.java's QuorumPacket types."""

    REQUEST = 1
    PROPOSAL = 2
    ACK = 3
    COMMIT = 4
    PING = 5
    REVALIDATE = 6
    SYNC = 7
    INFORM = 8
    COMMITANDACTIVATE = 9
    NEWLEADER = 10
    FOLLOWERINFO = 11
    UPTODATE = 12
    DIFF = 13
    TRUNC = 14
    SNAP = 15
    OBSERVERINFO = 16
    LEADERINFO = 17
    ACKEPOCH = 18
    INFORMANDACTIVATE = 19


@jute_record
class LearnerInfo(Record):
    serverid: Long
    protocolVersion: Int
    configVersion: Long


@jute_record
class QuorumPacket(Record):
    type: Int
    zxid: Long
    data: Buffer
    authinfo: list[Id] | None


@jute_record
class QuorumAuthPacket(Record):
    magic: Long
    status: Int
    token: Buffer


class QuorumAuthStatus(IntEnum):
    IN_PROGRESS = 0
    SUCCESS = 1
    ERROR = -1


QUORUM_AUTH_MAGIC = 0x5F2435013501EDCC  # QuorumAuth.QUORUM_AUTH_MAGIC_NUMBER, Java's -0xa0dbcafecafe1234L
LEARNER_PROTOCOL_VERSION = 0x10000  # Learner / LearnerHandler: LearnerInfo and LEADERINFO version


def read_quorum_packet(buf: bytes | memoryview, pos: int, max_buffer: int) -> tuple[QuorumPacket, int] | None:
    """The QuorumPacket starting at ``pos`` and the position after it, or None until all of it is in.

    The learner port has no frames, so completeness is judged from the record's own lengths.
    ProtocolError when a buffer or string length is below -1 or above ``max_buffer`` (as jute's
    checkLength), or the authinfo count is negative other than -1. The packet is built straight
    from the lengths just checked (its authinfo's Ids too: a REQUEST carries its session's)."""
    end = len(buf)
    at = skip_length(buf, pos + 12, end, max_buffer)  # type, zxid, then data
    if at is None:
        return None
    after = authinfo_end(buf, at, end, max_buffer)
    if after is None:
        return None
    typ, zxid, n = _PACKET_HEAD.unpack_from(buf, pos)
    data = None if n < 0 else bytes(buf[pos + 16 : pos + 16 + n])
    return QuorumPacket(typ, zxid, data, read_authinfo(buf, at) if after - at > 4 else []), after


def authinfo_end(buf: bytes | memoryview | bytearray, at: int, end: int, max_buffer: int) -> int | None:
    """The position past the authinfo vector at ``at`` (its count, then each Id's scheme and id),
    or None until all of it is in; ProtocolError where jute refuses a length or the count."""
    if end - at < 4:
        return None
    (count,) = INT.unpack_from(buf, at)
    if count < -1:
        raise ProtocolError(f"negative authinfo count {count}")
    p = at + 4
    for _ in range(2 * count):  # scheme and id of each Id
        past = skip_length(buf, p, end, max_buffer)
        if past is None:
            return None
        p = past
    return p if p <= end else None


def read_authinfo(buf: bytes | memoryview, at: int) -> list[Id]:
    """The Ids of the whole authinfo vector at ``at``, whose lengths ``authinfo_end`` checked."""
    (count,) = INT.unpack_from(buf, at)
    at += 4
    ids = []
    for _ in range(count):
        scheme, at = read_ustring(buf, at)
        ident, at = read_ustring(buf, at)
        ids.append(Id(scheme, ident))
    return ids


_PACKET_HEAD = struct.Struct(">iqi")  # a QuorumPacket's type, zxid and data length


def skip_length(buf: bytes | memoryview | bytearray, p: int, end: int, max_buffer: int) -> int | None:
    """The position past the buffer or ustring at ``p`` (None: its length is not all in)."""
    if end - p < 4:
        return None
    (n,) = INT.unpack_from(buf, p)
    if n < -1 or n > max_buffer:
        raise ProtocolError(f"length {n} is negative or larger than jute.maxbuffer={max_buffer}")
    return p + 4 + (n if n > 0 else 0)


# --------------------------------------------------------------------------- fast leader election


class QuorumPacketReader:
    """Incremental reader of a quorum connection's stream of QuorumPackets (no length prefix:
    each packet ends where its jute record does)."""

    def __init__(self, max_buffer: int) -> None:
        self.buf = bytearray()
        self.pos = 0
        self.max_buffer = max_buffer

    def feed(self, data: bytes) -> None:
        if self.pos > 65536 and self.pos * 2 > len(self.buf):
            del self.buf[:self.pos]
            self.pos = 0
        self.buf += data

    def next(self) -> QuorumPacket | None:
        """The next complete packet, or None until more bytes arrive; ProtocolError if malformed."""
        got = read_quorum_packet(self.buf, self.pos, self.max_buffer)  # type: ignore[arg-type]
        if got is None:
            return None
        packet, self.pos = got
        return packet

    def take_rest(self) -> bytes:
        """Every byte not yet read as a packet (a SNAP's snapshot follows its packet unframed)."""
        rest = bytes(self.buf[self.pos:])
        self.buf = bytearray()
        self.pos = 0
        return rest


class ServerState(IntEnum):
    """QuorumPeer.ServerState; notifications carry its ordinal."""

    LOOKING = 0
    FOLLOWING = 1
    LEADING = 2
    OBSERVING = 3


PROTOCOL_VERSION_V1 = -65536  # QuorumCnxManager: one election address
PROTOCOL_VERSION_V2 = -65535  # QuorumCnxManager: "|"-separated addresses (multiAddress.enabled)
MAX_INITIAL_MESSAGE_BYTES = 2048  # QuorumCnxManager.maxBuffer: the address string's byte limit
PACKET_MAX_SIZE = 512 * 1024  # QuorumCnxManager.PACKETMAXSIZE: election frame limit
OBSERVER_ID = 2**63 - 1  # QuorumPeer.OBSERVER_ID: an observer that has no sid of its own
NOTIFICATION_VERSION = 2  # FastLeaderElection.Notification.CURRENTVERSION

_PORT = re.compile(r"[+-]?[0-9]{1,6}")
_HANDSHAKE = struct.Struct(">qqi")  # protocolVersion, sid, address length
_NOTIFICATION = struct.Struct(">iqqqqii")  # state ... peerEpoch, version, config length
_NOTIFICATION_28 = struct.Struct(">iqqq")  # before peerEpoch
_NOTIFICATION_36 = struct.Struct(">iqqqq")  # with peerEpoch, before version


@dataclasses.dataclass(frozen=True, slots=True)
class InitialMessage:
    """The election connection handshake. ``protocol_version`` None is a pre-3.5 sid-only one."""

    sid: int
    addresses: tuple[str, ...]  # "host:port" as sent; IPv6 hosts bracketed
    protocol_version: int | None = PROTOCOL_VERSION_V1

    @property
    def is_observer(self) -> bool:
        """An observer without a sid: the receiver must give the connection its own negative id."""
        return self.sid == OBSERVER_ID


def split_host_port(address: str) -> tuple[str, int]:
    """``host:port`` or ``[ipv6]:port`` into host and port, as the receiver accepts them."""
    if address.startswith("["):
        close = address.find("]")
        if close < 0 or address[close + 1 : close + 2] != ":":
            raise ProtocolError(f"badly formed address: {address!r}")
        host, port = address[1:close], address[close + 2 :]
    else:
        parts = address.split(":")
        if len(parts) != 2:
            raise ProtocolError(f"badly formed address: {address!r}")
        host, port = parts
    if not _PORT.fullmatch(port) or not 0 <= int(port) <= 65535:
        raise ProtocolError(f"bad port number in {address!r}")
    return host, int(port)


def encode_initial_message(msg: InitialMessage) -> bytes:
    """The bytes an initiating peer sends first on the election port."""
    if msg.protocol_version is None:
        if msg.sid < 0:
            raise ValueError("a sid-only handshake needs a sid >= 0")
        return LONG.pack(msg.sid)
    if msg.protocol_version == PROTOCOL_VERSION_V1 and len(msg.addresses) != 1:
        raise ValueError("protocol version V1 carries exactly one address")
    if msg.protocol_version not in (PROTOCOL_VERSION_V1, PROTOCOL_VERSION_V2) or not msg.addresses:
        raise ValueError(f"cannot send protocol version {msg.protocol_version} with {msg.addresses!r}")
    for address in msg.addresses:
        split_host_port(address)
    data = "|".join(msg.addresses).encode("utf-8")
    if len(data) > MAX_INITIAL_MESSAGE_BYTES:
        raise ValueError(f"address string of {len(data)} bytes is over {MAX_INITIAL_MESSAGE_BYTES}")
    return _HANDSHAKE.pack(msg.protocol_version, msg.sid, len(data)) + data


def decode_initial_message(buf: bytes | memoryview) -> tuple[InitialMessage, int] | None:
    """The handshake at the start of ``buf`` and its length, or None until all of it is in.

    ProtocolError (close the connection) for an unknown negative version, an address length
    outside 1..MAX_INITIAL_MESSAGE_BYTES, or an address that is not host:port."""
    if len(buf) < 8:
        return None
    (version,) = LONG.unpack_from(buf, 0)
    if version >= 0:
        return InitialMessage(version, (), None), 8
    if version not in (PROTOCOL_VERSION_V1, PROTOCOL_VERSION_V2):
        raise ProtocolError(f"unrecognized election protocol version {version}")
    if len(buf) < _HANDSHAKE.size:
        return None
    _, sid, n = _HANDSHAKE.unpack_from(buf, 0)
    if n <= 0 or n > MAX_INITIAL_MESSAGE_BYTES:
        raise ProtocolError(f"unreasonable address length {n}")
    end = _HANDSHAKE.size + n
    if len(buf) < end:
        return None
    text = bytes(buf[_HANDSHAKE.size : end]).decode("utf-8", "replace")
    addresses = tuple(text.split("|"))
    for address in addresses:
        split_host_port(address)
    return InitialMessage(sid, addresses, version), end


class NotificationError(ProtocolError):
    """A notification that FastLeaderElection drops; the connection stays open."""


@dataclasses.dataclass(frozen=True, slots=True)
class Notification:
    """A vote: the sender's state, and the leader, zxid and epochs it proposes."""

    state: ServerState
    leader: int
    zxid: int
    election_epoch: int
    peer_epoch: int
    config: bytes | None = b""  # the sender's quorum config; None in layouts before version 2
    version: int = NOTIFICATION_VERSION


def encode_notification(n: Notification) -> bytes:
    """The 3.8 layout (version 2, config included); unframed."""
    if n.version < NOTIFICATION_VERSION:
        raise ValueError(f"notification version {n.version} carries no config; 3.8 sends {NOTIFICATION_VERSION}")
    config = n.config or b""
    head = _NOTIFICATION.pack(int(n.state), n.leader, n.zxid, n.election_epoch, n.peer_epoch, n.version, len(config))
    return head + config


def decode_notification(payload: bytes | memoryview) -> Notification:
    """One notification from one frame's payload, any layout a 3.8 receiver accepts."""
    size = len(payload)
    if size < _NOTIFICATION_28.size:
        raise NotificationError(f"notification of {size} bytes is short")
    version = 0
    config: bytes | None = None
    if size == _NOTIFICATION_28.size:
        state, leader, zxid, election_epoch = _NOTIFICATION_28.unpack_from(payload, 0)
        peer_epoch = zxid >> 32
    else:
        if size < _NOTIFICATION_36.size:
            raise NotificationError(f"notification of {size} bytes is partial")
        state, leader, zxid, election_epoch, peer_epoch = _NOTIFICATION_36.unpack_from(payload, 0)
        if size != 40:  # at exactly 40 bytes the version int is present but ignored
            if size < _NOTIFICATION_36.size + 4:
                raise NotificationError(f"notification of {size} bytes has no version")
            (version,) = INT.unpack_from(payload, _NOTIFICATION_36.size)
            if version > 1:
                if size < _NOTIFICATION.size:
                    raise NotificationError(f"notification of {size} bytes has no config length")
                (length,) = INT.unpack_from(payload, _NOTIFICATION.size - 4)
                if length < 0 or _NOTIFICATION.size + length > size:
                    raise NotificationError(f"config length {length} in a notification of {size} bytes")
                config = bytes(payload[_NOTIFICATION.size : _NOTIFICATION.size + length])
    try:
        server_state = ServerState(state)
    except ValueError:
        raise NotificationError(f"unknown server state {state}") from None
    return Notification(server_state, leader, zxid, election_epoch, peer_epoch, config, version)


def frame(payload: bytes | bytearray) -> bytes:
    """An election message as QuorumCnxManager sends it: int length, then the payload."""
    if not 0 < len(payload) <= PACKET_MAX_SIZE:
        raise ValueError(f"election message of {len(payload)} bytes is outside 1..{PACKET_MAX_SIZE}")
    return INT.pack(len(payload)) + payload


def read_frame(buf: bytes | memoryview, pos: int = 0) -> tuple[bytes, int] | None:
    """The election frame at ``pos`` and the position after it, or None until all of it is in.

    ProtocolError (close the connection) for a length outside 1..PACKET_MAX_SIZE."""
    if len(buf) - pos < 4:
        return None
    (n,) = INT.unpack_from(buf, pos)
    if n <= 0 or n > PACKET_MAX_SIZE:
        raise ProtocolError(f"election frame length {n} is outside 1..{PACKET_MAX_SIZE}")
    end = pos + 4 + n
    if len(buf) < end:
        return None
    return bytes(buf[pos + 4 : end]), end
