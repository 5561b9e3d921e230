"""Quorum verifiers: who votes, and when a set of acks is a quorum; the majority one (QuorumMaj).

``QuorumVerifier`` is the protocol every caller that counts a quorum is typed against (the election,
the leader's discovery, NEWLEADER, commit and sync-limit checks); ``quorum_verifier`` picks the
verifier a zoo.cfg asks for: ``hierarchical.QuorumHierarchical`` with group or weight lines, as
ZooKeeper 3.8 does, QuorumMaj otherwise.

Invariants owned by QuorumMaj:
- Only participants vote; observers are members but never count towards a quorum.
- A set of sids is a quorum when it holds more than half of the voting members (``half`` is
  ``len(voting) // 2``, so 3 voters need 2, 4 need 3, 5 need 3). Sids that are not voting
  members are ignored, as ZooKeeper's SyncedLearnerTracker only records acks from voters.
- Every voter weighs 1 (QuorumMaj.getWeight). The 2-node oracle (QuorumOracleMaj) is not implemented.

``config_string`` renders a configuration the way ZooKeeper 3.8's QuorumVerifier.toString does; every
election notification carries it and Apache ZooKeeper parses it back (a version newer than its own
makes it reconfigure), so the bytes must be what a 3.8 server with the same zoo.cfg would send:

    config  := { "server." sid "=" member "\n" } [ hierarchy ] "version=" hex(version)  (no final newline)
    member  := host ":" peerPort ":" electionPort ":" ("participant" | "observer")
               [ ";" clientHost ":" clientPort ]   (only when the line has its own ";client" part)
    host    := InetSocketAddress.getHostString(): a name as written, an IP literal as Java prints
               it (IPv6 as eight unabbreviated groups, in brackets)
    clientHost := the same, "0.0.0.0" when the ";client" part gives only a port

    hierarchy  := QuorumHierarchical's group and weight lines (``hierarchical.config_lines``)

Members come in java.util.HashMap order over the Long sids (``java_order``).
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Iterable
from typing import Protocol

from zkpy.config import LearnerType, QuorumConfig, QuorumServer

from .hierarchical import QuorumHierarchical, config_lines
from .java_order import java_hashmap_order


class QuorumVerifier(Protocol):
    """What ZooKeeper's QuorumVerifier answers: the members, their weights, and whether a set of
    sids is a quorum (only voters count). QuorumMaj and QuorumHierarchical implement it."""

    @property
    def voting(self) -> frozenset[int]: ...

    @property
    def observers(self) -> frozenset[int]: ...

    @property
    def version(self) -> int: ...

    @property
    def members(self) -> frozenset[int]: ...

    def is_voter(self, sid: int) -> bool: ...

    def weight(self, sid: int) -> int: ...

    def contains_quorum(self, acks: Iterable[int]) -> bool: ...


@dataclasses.dataclass(frozen=True, slots=True)
class QuorumMaj:
    """A majority quorum over ``voting`` sids; ``observers`` are members without a vote.

    ``version`` is the configuration version (zoo.cfg.dynamic's ``version=``, hex there)."""

    voting: frozenset[int]
    observers: frozenset[int] = frozenset()
    version: int = 0

    def __post_init__(self) -> None:
        if not self.voting:
            raise ValueError("a quorum needs at least one voting member")
        both = self.voting & self.observers
        if both:
            raise ValueError(f"sids {sorted(both)} are both voters and observers")

    @classmethod
    def of(cls, voting: Iterable[int], observers: Iterable[int] = (), version: int = 0) -> QuorumMaj:
        return cls(frozenset(voting), frozenset(observers), version)

    @property
    def half(self) -> int:
        return len(self.voting) // 2

    @property
    def members(self) -> frozenset[int]:
        return self.voting | self.observers

    def is_voter(self, sid: int) -> bool:
        return sid in self.voting

    def weight(self, sid: int) -> int:
        """QuorumMaj gives every server weight 1, voter or not."""
        return 1

    def contains_quorum(self, acks: Iterable[int]) -> bool:
        """Whether the voters among ``acks`` are more than half of the voting members."""
        return len(self.voting.intersection(acks)) > self.half


def quorum_maj(quorum: QuorumConfig, version: int = 0) -> QuorumMaj:
    """The majority verifier of a zoo.cfg ensemble: participants vote, observers do not."""
    return QuorumMaj.of((s.sid for s in quorum.participants), (s.sid for s in quorum.observers), version)


def quorum_verifier(quorum: QuorumConfig, version: int = 0) -> QuorumVerifier:
    """The verifier a zoo.cfg ensemble asks for: QuorumHierarchical when it has group or weight
    lines (raises ``hierarchical.HierarchyError`` for ones ZooKeeper would not run), else QuorumMaj."""
    if quorum.hierarchical:
        return QuorumHierarchical.of_config(quorum, version)
    return quorum_maj(quorum, version)


def host_string(host: str) -> str:
    """InetSocketAddress.getHostString for a host written in zoo.cfg: names stay as written, IP
    literals come out as Java prints them (IPv6 unabbreviated, IPv4-mapped IPv6 as IPv4)."""
    name, _, scope = host.partition("%")
    try:
        ip = ipaddress.ip_address(name)
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv4Address):
        return str(ip)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    groups = ":".join(f"{int(g, 16):x}" for g in ip.exploded.split(":"))
    return f"{groups}%{scope}" if scope else groups


def delimited_host(host: str) -> str:
    """QuorumServer.delimitedHostString: the host string, bracketed when it holds a colon (IPv6)."""
    text = host_string(host)
    return f"[{text}]" if ":" in text else text


def address_string(host: str, port: int) -> str:
    """NetUtils.formatInetAddr: ``host:port`` with an IPv6 host in brackets (election handshakes)."""
    return f"{delimited_host(host)}:{port}"


def config_string(quorum: QuorumConfig, version: int | None = None) -> str:
    """QuorumVerifier.toString of a zoo.cfg ensemble (see the module docstring for the grammar).

    Client parts appear only for lines that carry their own ``;client`` part: ZooKeeper copies the
    static clientPort into this server's own entry but marks it as not to be printed."""
    if version is None:  # the version of the dynamic config file it came from (0 for a static zoo.cfg)
        version = quorum.config_version
    by_sid: dict[int, QuorumServer] = {s.sid: s for s in quorum.servers}
    lines = []
    for sid in java_hashmap_order(by_sid):
        s = by_sid[sid]
        role = "observer" if s.role is LearnerType.OBSERVER else "participant"
        member = f"{delimited_host(s.host)}:{s.peer_port}:{s.election_port}:{role}"
        if s.client_port is not None:
            member += f";{delimited_host(s.client_host or '0.0.0.0')}:{s.client_port}"
        lines.append(f"server.{sid}={member}\n")
    return "".join(lines) + config_lines(quorum) + f"version={version & 0xFFFF_FFFF_FFFF_FFFF:x}"
