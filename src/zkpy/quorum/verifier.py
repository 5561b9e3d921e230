"""The majority quorum verifier (QuorumMaj): who votes, and when a set of acks is a quorum.

Invariants owned here:
- Only participants vote; observers are members but never count towards a quorum.
- A set of sids is a quorum when it holds more than half of the voting members (``half`` is
  ``len(voting) // 2``, so 3 voters need 2, 4 need 3, 5 need 3). Sids that are not voting
  members are ignored, as ZooKeeper's SyncedLearnerTracker only records acks from voters.
- Every voter weighs 1 (QuorumMaj.getWeight); hierarchical (weighted, grouped) quorums and
  the 2-node oracle (QuorumOracleMaj) are not implemented.

``config_string`` renders a configuration the way ZooKeeper 3.8's QuorumMaj.toString does; every
election notification carries it and Apache ZooKeeper parses it back (a version newer than its own
makes it reconfigure), so the bytes must be what a 3.8 server with the same zoo.cfg would send:

    config  := { "server." sid "=" member "\n" } "version=" hex(version)       (no final newline)
    member  := host ":" peerPort ":" electionPort ":" ("participant" | "observer")
               [ ";" clientHost ":" clientPort ]   (only when the line has its own ";client" part)
    host    := InetSocketAddress.getHostString(): a name as written, an IP literal as Java prints
               it (IPv6 as eight unabbreviated groups, in brackets)
    clientHost := the same, "0.0.0.0" when the ";client" part gives only a port

Members come in java.util.HashMap order over the Long sids (bucket by hash, then, for sids that
share a bucket, ascending sid, where Java would use the order zoo.cfg's properties came in).
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Iterable

from zkpy.config import LearnerType, QuorumConfig, QuorumServer


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
    """The verifier of a zoo.cfg ensemble: participants vote, observers do not."""
    return QuorumMaj.of((s.sid for s in quorum.participants), (s.sid for s in quorum.observers), version)


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


def _java_hashmap_order(sids: Iterable[int]) -> list[int]:
    """The iteration order of a java.util.HashMap<Long, _> holding ``sids`` (default capacity 16,
    doubled past a 0.75 load); sids sharing a bucket are taken in ascending order."""
    ordered = sorted(sids)
    capacity = 16
    while len(ordered) > capacity * 3 // 4:
        capacity *= 2

    def bucket(sid: int) -> int:
        v = sid & 0xFFFF_FFFF_FFFF_FFFF
        h = (v ^ (v >> 32)) & 0xFFFF_FFFF  # Long.hashCode
        return (h ^ (h >> 16)) & (capacity - 1)  # HashMap.hash, then the table index

    return sorted(ordered, key=bucket)  # stable: ascending sid within a bucket


def config_string(quorum: QuorumConfig, version: int | None = None) -> str:
    """QuorumMaj.toString of a static zoo.cfg ensemble (see the module docstring for the grammar).

    Client parts appear only for lines that carry their own ``;client`` part: ZooKeeper copies the
    static clientPort into this server's own entry but marks it as not to be printed."""
    if version is None:  # the version of the dynamic config file it came from (0 for a static zoo.cfg)
        version = quorum.config_version
    by_sid: dict[int, QuorumServer] = {s.sid: s for s in quorum.servers}
    lines = []
    for sid in _java_hashmap_order(by_sid):
        s = by_sid[sid]
        role = "observer" if s.role is LearnerType.OBSERVER else "participant"
        member = f"{delimited_host(s.host)}:{s.peer_port}:{s.election_port}:{role}"
        if s.client_port is not None:
            member += f";{delimited_host(s.client_host or '0.0.0.0')}:{s.client_port}"
        lines.append(f"server.{sid}={member}\n")
    return "".join(lines) + f"version={version & 0xFFFF_FFFF_FFFF_FFFF:x}"
