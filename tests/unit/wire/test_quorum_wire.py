"""Quorum wire formats: Zab's QuorumPacket family and fast leader election's handshake,
notifications and frames round-trip, have ZooKeeper 3.8's exact byte layouts and limits, and
Apache's own classes write the same bytes and accept what zkpy sends."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.jute_strategies import strategy_for
from zkpy.errors import ProtocolError
from zkpy.wire.proto import Id
from zkpy.wire.quorum import (
    LEARNER_PROTOCOL_VERSION,
    MAX_INITIAL_MESSAGE_BYTES,
    OBSERVER_ID,
    PACKET_MAX_SIZE,
    PROTOCOL_VERSION_V1,
    PROTOCOL_VERSION_V2,
    QUORUM_AUTH_MAGIC,
    InitialMessage,
    LearnerInfo,
    Notification,
    NotificationError,
    PacketType,
    QuorumAuthPacket,
    QuorumAuthStatus,
    QuorumPacket,
    ServerState,
    decode_initial_message,
    decode_notification,
    encode_initial_message,
    encode_notification,
    frame,
    read_frame,
    read_quorum_packet,
)

INT64 = st.integers(-(2**63), 2**63 - 1)
MAXBUF = 0xFFFFF

# the examples Apache serializes in the golden test below
PACKET = QuorumPacket(PacketType.PROPOSAL, 0x100000001, b"\x01\x02\x03", [Id("digest", "u:p"), Id("ip", "10.0.0.1")])
PACKET_HEX = ("00000002" "0000000100000001" "00000003010203" "00000002"
              "00000006646967657374" "00000003753a70" "000000026970" "0000000831302e302e302e31")
CONFIG = b"server.1=127.0.0.1:2888:3888:participant\nversion=100000000"
NOTIFICATION = Notification(ServerState.FOLLOWING, 3, 0x200000007, 4, 2, CONFIG)
NOTIFICATION_HEX = ("00000001" "0000000000000003" "0000000200000007" "0000000000000004" "0000000000000002"
                    "00000002" "0000003a" + CONFIG.hex())


# ---------------------------------------------------------------- quorum port records


def test_packet_types_have_leader_java_values() -> None:
    assert [(t.name, t.value) for t in PacketType] == [
        ("REQUEST", 1), ("PROPOSAL", 2), ("ACK", 3), ("COMMIT", 4), ("PING", 5), ("REVALIDATE", 6),
        ("SYNC", 7), ("INFORM", 8), ("COMMITANDACTIVATE", 9), ("NEWLEADER", 10), ("FOLLOWERINFO", 11),
        ("UPTODATE", 12), ("DIFF", 13), ("TRUNC", 14), ("SNAP", 15), ("OBSERVERINFO", 16),
        ("LEADERINFO", 17), ("ACKEPOCH", 18), ("INFORMANDACTIVATE", 19)]


def test_quorum_packet_bytes_are_jute_fields_in_order() -> None:
    assert PACKET.to_bytes().hex() == PACKET_HEX
    assert QuorumPacket.from_bytes(bytes.fromhex(PACKET_HEX)) == PACKET


def test_quorum_packet_null_data_and_authinfo() -> None:
    data = QuorumPacket(PacketType.PING, -1, None, None).to_bytes()  # type: ignore[arg-type]
    assert data.hex() == "00000005" + "ff" * 16
    assert QuorumPacket.from_bytes(data) == QuorumPacket(PacketType.PING, -1, None, [])


def test_learner_info_is_20_bytes_sid_version_config_version() -> None:
    info = LearnerInfo(5, LEARNER_PROTOCOL_VERSION, 0x100000000)
    assert info.to_bytes().hex() == "0000000000000005" "00010000" "0000000100000000"
    assert LearnerInfo.from_bytes(info.to_bytes()) == info


def test_quorum_auth_packet_layout() -> None:
    packet = QuorumAuthPacket(QUORUM_AUTH_MAGIC, QuorumAuthStatus.SUCCESS, b"\x09")
    assert packet.to_bytes().hex() == "5f2435013501edcc" "00000001" "0000000109"
    assert QUORUM_AUTH_MAGIC == 2**64 - 0xA0DBCAFECAFE1234  # Java's -0xa0dbcafecafe1234L


@pytest.mark.parametrize("cls", [QuorumPacket, LearnerInfo, QuorumAuthPacket], ids=lambda c: c.__name__)
@given(data=st.data())
def test_quorum_records_round_trip(cls: Any, data: st.DataObject) -> None:
    rec = cls(*(data.draw(strategy_for(t)) for _, t in cls.JUTE_FIELDS))
    assert cls.from_bytes(rec.to_bytes()) == rec


@given(st.lists(strategy_for(QuorumPacket), max_size=4), st.integers(0, 60))
def test_unframed_packet_stream_reads_back_whole_packets_only(packets: list[QuorumPacket], cut: int) -> None:
    stream = b"".join(p.to_bytes() for p in packets)
    got, pos = [], 0
    while (res := read_quorum_packet(stream, pos, MAXBUF)) is not None:
        pkt, pos = res
        got.append(pkt)
    assert got == packets and pos == len(stream)
    if packets:
        last = packets[-1].to_bytes()
        partial = stream[: len(stream) - len(last) + min(cut, len(last) - 1)]
        assert read_quorum_packet(partial, len(stream) - len(last), MAXBUF) is None


def test_packet_stream_rejects_lengths_jute_rejects() -> None:
    over = struct.pack(">iqi", 2, 1, MAXBUF + 1)
    with pytest.raises(ProtocolError):
        read_quorum_packet(over, 0, MAXBUF)
    bad_count = struct.pack(">iqii", 2, 1, -1, -2)
    with pytest.raises(ProtocolError):
        read_quorum_packet(bad_count, 0, MAXBUF)
    assert read_quorum_packet(struct.pack(">iqii", 2, 1, -1, -1), 0, MAXBUF) == (
        QuorumPacket(2, 1, None, []), 20)


# ---------------------------------------------------------------- election handshake


def test_v1_handshake_is_version_sid_length_address() -> None:
    msg = InitialMessage(3, ("127.0.0.1:3888",))
    data = encode_initial_message(msg)
    assert data.hex() == "ffffffffffff0000" "0000000000000003" "0000000e" + b"127.0.0.1:3888".hex()
    assert decode_initial_message(data + b"next") == (msg, len(data))


def test_v2_handshake_joins_addresses_with_a_bar() -> None:
    msg = InitialMessage(2, ("10.0.0.2:3888", "[::1]:3889"), PROTOCOL_VERSION_V2)
    data = encode_initial_message(msg)
    assert data[:8] == struct.pack(">q", -65535)
    assert data[20:] == b"10.0.0.2:3888|[::1]:3889"
    assert decode_initial_message(data) == (msg, len(data))


def test_v1_carries_exactly_one_address() -> None:
    with pytest.raises(ValueError):
        encode_initial_message(InitialMessage(2, ("a:1", "b:2"), PROTOCOL_VERSION_V1))


def test_handshake_waits_for_every_byte() -> None:
    data = encode_initial_message(InitialMessage(7, ("zk7.example:3888",)))
    for n in range(len(data)):
        assert decode_initial_message(data[:n]) is None


def test_pre_35_handshake_is_a_bare_sid() -> None:
    assert decode_initial_message(struct.pack(">q", 4)) == (InitialMessage(4, (), None), 8)
    assert encode_initial_message(InitialMessage(4, (), None)) == struct.pack(">q", 4)


def test_address_string_limit_is_2048_bytes() -> None:
    host = "h" * (MAX_INITIAL_MESSAGE_BYTES - len(":3888"))
    at_limit = encode_initial_message(InitialMessage(1, (host + ":3888",)))
    assert decode_initial_message(at_limit) is not None
    with pytest.raises(ValueError):
        encode_initial_message(InitialMessage(1, ("h" + host + ":3888",)))
    over = struct.pack(">qqi", PROTOCOL_VERSION_V1, 1, MAX_INITIAL_MESSAGE_BYTES + 1)
    with pytest.raises(ProtocolError):
        decode_initial_message(over)  # rejected before the address arrives


@pytest.mark.parametrize("head", [
    struct.pack(">qqi", PROTOCOL_VERSION_V1, 1, 0),
    struct.pack(">qqi", PROTOCOL_VERSION_V1, 1, -1),
    struct.pack(">q", -65534),
], ids=["empty-address", "negative-length", "unknown-version"])
def test_handshake_rejections(head: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_initial_message(head)


@pytest.mark.parametrize("address", ["host", "a:b:3888", "host:port", "[::1]3888", "host:70000"])
def test_handshake_rejects_what_is_not_host_port(address: str) -> None:
    data = address.encode()
    with pytest.raises(ProtocolError):
        decode_initial_message(struct.pack(">qqi", PROTOCOL_VERSION_V1, 1, len(data)) + data)


def test_observer_without_sid_sends_long_max() -> None:
    msg = InitialMessage(OBSERVER_ID, ("127.0.0.1:3888",))
    data = encode_initial_message(msg)
    assert data[8:16] == b"\x7f" + b"\xff" * 7
    decoded, _ = decode_initial_message(data)  # type: ignore[misc]
    assert decoded.is_observer and not InitialMessage(3, ("a:1",)).is_observer


# ---------------------------------------------------------------- notifications and frames


def test_notification_layout_is_44_bytes_plus_config() -> None:
    data = encode_notification(NOTIFICATION)
    assert data.hex() == NOTIFICATION_HEX
    assert len(data) == 44 + len(CONFIG)
    assert decode_notification(data) == NOTIFICATION


@given(st.sampled_from(ServerState), INT64, INT64, INT64, INT64, st.binary(max_size=300))
def test_notification_round_trips(state: ServerState, leader: int, zxid: int, election_epoch: int,
                                  peer_epoch: int, config: bytes) -> None:
    n = Notification(state, leader, zxid, election_epoch, peer_epoch, config)
    assert decode_notification(encode_notification(n)) == n


def test_older_notification_layouts_are_accepted() -> None:
    head28 = struct.pack(">iqqq", 0, 1, 0x500000009, 7)
    assert decode_notification(head28) == Notification(ServerState.LOOKING, 1, 0x500000009, 7, 5, None, 0)
    head36 = head28 + struct.pack(">q", 6)
    for version in (1, 2):  # at exactly 40 bytes (3.4's buildMsg) the version is not read
        assert decode_notification(head36 + struct.pack(">i", version)) == Notification(
            ServerState.LOOKING, 1, 0x500000009, 7, 6, None, 0)
    v1 = head36 + struct.pack(">i", 1) + b"ignored"
    assert decode_notification(v1) == Notification(ServerState.LOOKING, 1, 0x500000009, 7, 6, None, 1)


@pytest.mark.parametrize("payload", [
    b"\x00" * 27,
    b"\x00" * 36,
    b"\x00" * 36 + struct.pack(">i", 2) + b"\x00",
    b"\x00" * 36 + struct.pack(">ii", 2, 5) + b"abcd",
    b"\x00" * 36 + struct.pack(">ii", 2, -1),
    struct.pack(">iqqqqii", 4, 0, 0, 0, 0, 2, 0),
], ids=["short", "between-layouts", "no-config-length", "config-runs-past", "negative-config", "unknown-state"])
def test_malformed_notifications_are_dropped(payload: bytes) -> None:
    with pytest.raises(NotificationError):
        decode_notification(payload)


def test_frames_are_int_length_prefixed_up_to_512_kib() -> None:
    assert frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert read_frame(frame(b"abc") + b"\x00") == (b"abc", 7)
    assert read_frame(frame(b"abc")[:6]) is None
    assert read_frame(frame(b"x" * PACKET_MAX_SIZE)) is not None
    for n in (0, -1, PACKET_MAX_SIZE + 1):
        with pytest.raises(ProtocolError):
            read_frame(struct.pack(">i", n))
    for payload in (b"", b"x" * (PACKET_MAX_SIZE + 1)):
        with pytest.raises(ValueError):
            frame(payload)


# ---------------------------------------------------------------- Apache ZooKeeper 3.8


# Prints Leader/QuorumCnxManager/QuorumPeer constants, jute-serialized examples, a notification
# from FastLeaderElection.buildMsg, and what InitialMessage.parse makes of each hex argument.
QUORUM_TOOL = r"""
import java.io.*;
import java.lang.reflect.*;
import java.util.*;
import org.apache.jute.*;
import org.apache.zookeeper.data.Id;
import org.apache.zookeeper.server.quorum.*;

public class QuorumTool {
    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) s.append(String.format("%02x", x));
        return s.toString();
    }
    static byte[] unhex(String s) {
        byte[] b = new byte[s.length() / 2];
        for (int i = 0; i < b.length; i++) b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        return b;
    }
    static String ser(org.apache.jute.Record r) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        BinaryOutputArchive.getArchive(out).writeRecord(r, "r");
        return hex(out.toByteArray());
    }
    static Object field(Class<?> c, String name) throws Exception {
        Field f = c.getDeclaredField(name);
        f.setAccessible(true);
        return f.get(null);
    }
    public static void main(String[] args) throws Exception {
        String[] names = {"REQUEST", "PROPOSAL", "ACK", "COMMIT", "PING", "REVALIDATE", "SYNC", "INFORM",
            "COMMITANDACTIVATE", "NEWLEADER", "FOLLOWERINFO", "UPTODATE", "DIFF", "TRUNC", "SNAP", "OBSERVERINFO",
            "LEADERINFO", "ACKEPOCH", "INFORMANDACTIVATE"};
        for (String n : names) System.out.println("const " + n + " " + field(Leader.class, n));
        System.out.println("const OBSERVER_ID " + field(QuorumPeer.class, "OBSERVER_ID"));
        System.out.println("const maxBuffer " + field(QuorumCnxManager.class, "maxBuffer"));
        System.out.println("const PACKETMAXSIZE " + field(QuorumCnxManager.class, "PACKETMAXSIZE"));
        System.out.println("const PROTOCOL_VERSION_V1 " + QuorumCnxManager.PROTOCOL_VERSION_V1);
        System.out.println("const PROTOCOL_VERSION_V2 " + QuorumCnxManager.PROTOCOL_VERSION_V2);
        System.out.println("const QUORUM_AUTH_MAGIC_NUMBER " + org.apache.zookeeper.server.quorum.auth.QuorumAuth.QUORUM_AUTH_MAGIC_NUMBER);
        List<Id> auth = Arrays.asList(new Id("digest", "u:p"), new Id("ip", "10.0.0.1"));
        System.out.println("packet " + ser(new QuorumPacket(2, 0x100000001L, new byte[] {1, 2, 3}, auth)));
        System.out.println("packet_null " + ser(new QuorumPacket(5, -1L, null, null)));
        System.out.println("learnerinfo " + ser(new LearnerInfo(5, 0x10000, 0x100000000L)));
        System.out.println("authpacket " + ser(new QuorumAuthPacket(
            org.apache.zookeeper.server.quorum.auth.QuorumAuth.QUORUM_AUTH_MAGIC_NUMBER, 1, new byte[] {9})));
        Method build = FastLeaderElection.class.getDeclaredMethod("buildMsg",
            int.class, long.class, long.class, long.class, long.class, byte[].class);
        build.setAccessible(true);
        java.nio.ByteBuffer msg = (java.nio.ByteBuffer) build.invoke(null, 1, 3L, 0x200000007L, 4L, 2L,
            "server.1=127.0.0.1:2888:3888:participant\nversion=100000000".getBytes("UTF-8"));
        System.out.println("notification " + hex(msg.array()));
        for (int i = 0; i < args.length; i++) {
            DataInputStream din = new DataInputStream(new ByteArrayInputStream(unhex(args[i])));
            long version = din.readLong();
            try {
                QuorumCnxManager.InitialMessage m = QuorumCnxManager.InitialMessage.parse(version, din);
                System.out.println("initial " + i + " " + m.sid + " " + m.electionAddr);
            } catch (QuorumCnxManager.InitialMessage.InitialMessageException | IOException e) {
                System.out.println("initial " + i + " rejected");
            }
        }
    }
}
"""


def _quorum_tool(tmp_path: Path, *args: str) -> dict[str, str]:
    from tests.conftest import require_apache

    require_apache()
    from zkpy.testing.servers import ZK_JAR

    java = shutil.which("java")
    assert java is not None
    source = tmp_path / "QuorumTool.java"
    source.write_text(QUORUM_TOOL)
    proc = subprocess.run([java, "-cp", ZK_JAR, str(source), *args], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    out = {}
    for line in proc.stdout.decode().splitlines():
        key, _, value = line.partition(" ")
        if key in ("const", "initial"):
            key, _, value = value.partition(" ")
            key = f"{line.split()[0]}.{key}"
        out[key] = value
    return out


def test_apache_agrees_on_constants_and_bytes(tmp_path: Path) -> None:
    accepted = [InitialMessage(3, ("127.0.0.1:3888",)),
                InitialMessage(OBSERVER_ID, ("127.0.0.1:3888", "127.0.0.2:3889"), PROTOCOL_VERSION_V2)]
    rejected = [struct.pack(">qqi", PROTOCOL_VERSION_V1, 1, MAX_INITIAL_MESSAGE_BYTES + 1),
                struct.pack(">qqi", PROTOCOL_VERSION_V1, 1, 9) + b"host:port"]
    args = [encode_initial_message(m).hex() for m in accepted] + [b.hex() for b in rejected]
    out = _quorum_tool(tmp_path, *args)
    for t in PacketType:
        assert out[f"const.{t.name}"] == str(t.value)
    assert out["const.OBSERVER_ID"] == str(OBSERVER_ID)
    assert out["const.maxBuffer"] == str(MAX_INITIAL_MESSAGE_BYTES)
    assert out["const.PACKETMAXSIZE"] == str(PACKET_MAX_SIZE)
    assert out["const.PROTOCOL_VERSION_V1"] == str(PROTOCOL_VERSION_V1)
    assert out["const.PROTOCOL_VERSION_V2"] == str(PROTOCOL_VERSION_V2)
    assert out["const.QUORUM_AUTH_MAGIC_NUMBER"] == str(QUORUM_AUTH_MAGIC)
    assert out["packet"] == PACKET.to_bytes().hex()
    assert out["packet_null"] == QuorumPacket(PacketType.PING, -1, None, None).to_bytes().hex()  # type: ignore[arg-type]
    assert out["learnerinfo"] == LearnerInfo(5, LEARNER_PROTOCOL_VERSION, 0x100000000).to_bytes().hex()
    assert out["authpacket"] == QuorumAuthPacket(QUORUM_AUTH_MAGIC, 1, b"\x09").to_bytes().hex()
    assert out["notification"] == encode_notification(NOTIFICATION).hex()
    assert decode_notification(bytes.fromhex(out["notification"])) == NOTIFICATION
    assert out["initial.0"].startswith("3 [")
    assert out["initial.1"].startswith(f"{OBSERVER_ID} [") and out["initial.1"].count(":") == 2
    assert out["initial.2"] == out["initial.3"] == "rejected"
