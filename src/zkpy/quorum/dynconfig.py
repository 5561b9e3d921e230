"""Dynamic configuration (ZooKeeper 3.8's reconfig): server lines, config strings, the next config.

Invariants owned here:
- One reader of a ``server.N`` value (``parse_server``): zoo.cfg, the dynamic config file, a
  reconfig's joiners and new members and a config string all go through it.
- A config's text form is ``verifier.config_string`` (what ``/zookeeper/config``, NEWLEADER and
  every election notification carry); ``parse_config_data`` reads it back, version included.
- The version of a config made by reconfig is the zxid of the reconfig txn; the first config an
  ensemble with reconfigEnabled establishes (version 0) takes the first NEWLEADER's zxid
  (``make_zxid(epoch, 0)``), as 3.8's Leader.lead does (ZOOKEEPER-1783).
- ``next_servers`` applies a ReconfigRequest as 3.8's PrepRequestProcessor does: incremental (the
  leaving sids removed, then each joiner added or replaced; a joiner needs its peer, election and
  client addresses and may not reuse another member's address) or non-incremental (the new
  member list, comma- or newline-separated). What 3.8 answers BadArguments raises `BadReconfig`;
  a non-numeric leaving id raises ValueError (3.8's NumberFormatException: MarshallingError).
- ``activation`` decides what a member does when a newer config becomes active (3.8's
  processReconfig and updateLearnerType): keep its role, or end its term (its role changed, or its
  leader is no voter of the new config). A member that is in no list becomes a non-voting follower.
- The dynamic config file holds the config string's server lines without the version (which is
  the file name's hex suffix); the static zoo.cfg then names it in ``dynamicConfigFile`` and loses
  its server lines and the clientPort/clientPortAddress the server line now holds.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re

from zkpy.config import LearnerType, QuorumConfig, QuorumServer
from zkpy.ids import ServerId

from .verifier import QuorumVerifier, config_string, quorum_verifier

CONFIG_NODE = "/zookeeper/config"
SERVER_FORM = "expected host:peerPort:electionPort[:participant|observer][;[clientHost:]clientPort]"
_DIGITS = re.compile(r"[0-9]+")


class BadReconfig(ValueError):
    """A reconfig request 3.8 answers with BadArguments."""


def _host_and_port(text: str) -> list[str]:
    """``host:port[:...]`` split on colons, with an IPv6 host in brackets kept whole (unbracketed)."""
    if not text.startswith("["):
        return text.split(":")
    end = text.find("]")
    if end < 0:
        raise ValueError(f"{text!r} starts with '[' but has no ']'")
    if end + 1 == len(text):
        return [text[1:end]]
    if text[end + 1] != ":" or end + 2 == len(text):
        raise ValueError(f"{text!r} has no port after ']:'")
    return [text[1:end], *text[end + 2 :].split(":")]


def parse_server(sid: int, value: str) -> QuorumServer:
    """One ``server.N`` value, as 3.8's ``QuorumServer`` reads it (no name resolution); ValueError
    saying what is wrong."""
    parts = value.split(";")
    if len(parts) > 2:
        raise ValueError(f"more than one ';' ({SERVER_FORM})")
    if "|" in parts[0]:
        raise ValueError("several addresses joined by '|' (multiAddress.enabled) are not supported: zkpy reads "
                         "one address per server")
    server_parts = _host_and_port(parts[0].strip())
    client_parts = _host_and_port(parts[1].strip()) if len(parts) == 2 else []
    if len(server_parts) not in (3, 4) or len(client_parts) > 2:
        raise ValueError(SERVER_FORM)
    host = server_parts[0].strip()
    if not host:
        raise ValueError("the host is empty")

    def port(text: str, name: str) -> int:
        text = text.strip()
        if not _DIGITS.fullmatch(text):
            raise ValueError(f"{name} {text!r} is not a number")
        number = int(text)
        if number > 65535:
            raise ValueError(f"{name} {number} is out of range")
        return number

    peer_port = port(server_parts[1], "peerPort")
    election_port = port(server_parts[2], "electionPort")
    if peer_port == election_port:
        raise ValueError(f"peerPort and electionPort are both {peer_port}; they must differ")
    role = LearnerType.PARTICIPANT
    if len(server_parts) == 4:
        name = server_parts[3].strip().lower()
        if name not in ("participant", "observer"):
            raise ValueError(f"role {server_parts[3]!r} is neither participant nor observer")
        role = LearnerType(name)
    client_host: str | None = None
    client_port: int | None = None
    if client_parts:
        client_port = port(client_parts[-1], "clientPort")
        if len(client_parts) == 2:
            client_host = client_parts[0].strip()
            if not client_host:
                raise ValueError("the client host is empty")
    return QuorumServer(ServerId(sid), host, peer_port, election_port, role, client_host, client_port)


def server_id(key: str) -> int:
    """The N of ``server.N``; ValueError if it is not a number."""
    text = key[len("server."):] if key.startswith("server.") else ""
    if not _DIGITS.fullmatch(text):
        raise ValueError(f"server id {text!r} is not a number")
    return int(text)


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def endpoint_clash(servers: list[QuorumServer] | tuple[QuorumServer, ...]) -> str | None:
    """Two listeners of the ensemble on one host and port: which (None when all differ). Hosts are
    compared as written (no DNS); a client address without a host (or a wildcard one) is on the
    server's own host."""
    seen: dict[tuple[str, int], str] = {}
    for s in servers:
        endpoints = [(s.host, s.peer_port, "peerPort"), (s.host, s.election_port, "electionPort")]
        if s.client_port is not None:
            client_host = s.client_host if s.client_host and not _is_wildcard(s.client_host) else s.host
            endpoints.append((client_host, s.client_port, "clientPort"))
        for host, port, name in endpoints:
            if port == 0:
                continue
            norm = host.lower()
            try:
                norm = str(ipaddress.ip_address(host))
            except ValueError:
                pass
            what = f"server.{s.sid} {name}"
            if (norm, port) in seen:
                return f"{what} and {seen[norm, port]} both use {host}:{port}"
            seen[norm, port] = what
    return None


def parse_config_data(data: bytes | str) -> tuple[tuple[QuorumServer, ...], int]:
    """A config string (``server.N=...`` lines and ``version=<hex>``) read back: its servers in
    sid order and its version. ValueError for anything else."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    servers: dict[int, QuorumServer] = {}
    version = 0
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ValueError(f"{line!r} is not key=value")
        key = key.strip()
        if key == "version":
            version = int(value.strip(), 16)
        elif key.startswith("server."):
            sid = server_id(key)
            servers[sid] = parse_server(sid, value.strip())
        else:
            raise ValueError(f"{key}: a config string holds only server.N lines and version")
    return tuple(servers[s] for s in sorted(servers)), version


def config_version(data: bytes) -> int:
    """The version of a config string (its last line, ``version=<hex>``); -1 when it has none."""
    last = data.rsplit(b"\n", 1)[-1]
    if not last.startswith(b"version="):
        return -1
    try:
        return int(last[len(b"version="):], 16)
    except ValueError:
        return -1


def with_servers(quorum: QuorumConfig, servers: tuple[QuorumServer, ...], version: int) -> QuorumConfig:
    """``quorum`` with another server list and version (my role follows my line; none: participant,
    a non-voting follower). The new list is a majority config: a reconfig never carries group or
    weight lines (see ``member.leading``)."""
    me = next((s for s in servers if s.sid == quorum.my_id), None)
    role = me.role if me is not None else LearnerType.PARTICIPANT
    return dataclasses.replace(quorum, servers=servers, config_version=version, peer_type=role, groups=(),
                               weights=())


def config_data(quorum: QuorumConfig) -> bytes:
    """The config string of ``quorum`` at its version, as bytes."""
    return config_string(quorum).encode("utf-8")


def verifier_of(quorum: QuorumConfig) -> QuorumVerifier:
    """The verifier of ``quorum`` at its config version (hierarchical with group or weight lines)."""
    return quorum_verifier(quorum, quorum.config_version)


# ---------------------------------------------------------------- the next config of a reconfig


def next_servers(current: tuple[QuorumServer, ...], joining: str | None, leaving: str | None,
                 new_members: str | None, *, standalone_enabled: bool) -> tuple[QuorumServer, ...]:
    """The server list a ReconfigRequest asks for (see the module docstring)."""
    if new_members is not None:
        servers = _non_incremental(new_members, standalone_enabled)
    else:
        servers = _incremental(current, joining, leaving)
    voting = [s for s in servers if s.role is LearnerType.PARTICIPANT]
    if standalone_enabled and len(voting) < 2:
        raise BadReconfig("Reconfig failed - new configuration must include at least 2 followers")
    if not voting:
        raise BadReconfig("Reconfig failed - new configuration must include at least 1 follower")
    return servers


def _split(text: str) -> list[str]:
    """StringUtils.split on commas: trimmed, empty pieces dropped."""
    return [p.strip() for p in text.split(",") if p.strip()]


def _incremental(current: tuple[QuorumServer, ...], joining: str | None,
                 leaving: str | None) -> tuple[QuorumServer, ...]:
    servers: dict[int, QuorumServer] = {int(s.sid): s for s in current}
    for sid_text in _split(leaving or ""):
        servers.pop(int(sid_text), None)  # a non-number: ValueError, as Long.parseLong throws
    for joiner in _split(joining or ""):
        parts = [p.strip() for p in joiner.split("=") if p.strip()]
        if len(parts) != 2:
            raise BadReconfig("Wrong format of server string")
        sid = int(parts[0][parts[0].rfind(".") + 1:])  # a non-number: ValueError
        try:
            joined = parse_server(sid, parts[1])
        except ValueError:
            raise BadReconfig("Reconfiguration failed") from None
        if joined.client_port is None:
            raise BadReconfig("Wrong format of server string - each server should have 3 ports specified")
        others = [s for s in servers.values() if s.sid != sid]
        if endpoint_clash([*others, joined]) is not None and endpoint_clash(others) is None:
            raise BadReconfig("Reconfiguration failed")
        servers[sid] = joined
    return tuple(servers[s] for s in sorted(servers))


def _non_incremental(new_members: str, standalone_enabled: bool) -> tuple[QuorumServer, ...]:
    servers: dict[int, QuorumServer] = {}
    for line in new_members.replace(",", "\n").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if key == "version":
            continue
        if key.startswith(("group", "weight")):
            raise BadReconfig(f"{key}: hierarchical quorums are not supported by zkpy's reconfig")
        if not key.startswith("server."):
            raise BadReconfig(f"Unrecognised parameter: {key}")
        try:
            sid = server_id(key)
            servers[sid] = parse_server(sid, value)
        except ValueError as exc:
            raise BadReconfig(str(exc)) from None
    listed = tuple(servers[s] for s in sorted(servers))
    clash = endpoint_clash(listed)
    if clash is not None:
        raise BadReconfig(clash)
    # parseDynamicConfig's IllegalArgumentExceptions, which 3.8 answers MarshallingError
    voters = sum(1 for s in listed if s.role is LearnerType.PARTICIPANT)
    observers = len(listed) - voters
    if voters == 0 and (not standalone_enabled or observers):
        raise ValueError("a member list without a participant")
    if voters == 1 and standalone_enabled and observers:
        raise ValueError("observers without a quorum")
    return listed


# ---------------------------------------------------------------- activation


@dataclasses.dataclass(frozen=True, slots=True)
class Activation:
    """What a member does with a newer config: ``quorum`` is its new config; ``restart`` says why
    its term must end (None: it keeps its role under the same leader)."""

    quorum: QuorumConfig
    restart: str | None


def activation(current: QuorumConfig, data: bytes, *, leader: int, designated: int | None) -> Activation | None:
    """The config ``data`` (a config string) becoming active at a member whose config is ``current``
    and whose leader is ``leader``; None when it is not newer than ``current`` (nothing changes).
    ``designated``: the leader the reconfig's leader named (COMMITANDACTIVATE), if any."""
    if config_version(data) <= current.config_version:  # before parsing: a hierarchical config's
        return None                                     # group lines are not read back here
    servers, version = parse_config_data(data)
    new = with_servers(current, servers, version)
    old_me, new_me = current.me, new.me
    old_role = old_me.role if old_me is not None else LearnerType.PARTICIPANT
    new_role = new_me.role if new_me is not None else LearnerType.PARTICIPANT
    restart = None
    if old_role is not new_role:
        restart = f"my role changes from {old_role.value} to {new_role.value} in config 0x{version:x}"
    elif designated is not None:
        if designated != leader:
            restart = f"config 0x{version:x} designates server {designated} as the leader"
    elif leader != current.my_id:
        old_leader, new_leader = current.server(leader), new.server(leader)
        if (old_leader is None or new_leader is None or new_leader.role is not LearnerType.PARTICIPANT
                or (old_leader.host, old_leader.peer_port) != (new_leader.host, new_leader.peer_port)):
            restart = f"my leader {leader} is no voter at the same address in config 0x{version:x}"
    return Activation(new, restart)


def designated_leader(me: int, new: QuorumVerifier, acked: set[int], later_acks: list[set[int]]) -> int:
    """Leader.getDesignatedLeader: me if I vote in the new config; else, of the new voters that
    acked the reconfig, one that acked the most of the proposals after it (ascending sid order
    among equals, as a HashSet of small Longs iterates)."""
    if new.is_voter(me):
        return me
    candidates = sorted((acked & new.voting) - {me})
    if not candidates:
        return me
    current = candidates[0]
    for acks in later_acks:
        candidates = [c for c in candidates if c in acks]
        if not candidates:
            return current
        current = candidates[0]
        if len(candidates) == 1:
            return current
    return current


# ---------------------------------------------------------------- files


def dynamic_file_text(quorum: QuorumConfig) -> str:
    """The dynamic config file of ``quorum``: its config string's server lines, no version."""
    return config_string(quorum).rsplit("\n", 1)[0]


def dynamic_file_name(static_name: str, version: int) -> str:
    """``zoo.cfg.dynamic.<hex version>`` beside the static file."""
    return f"{static_name}.dynamic.{version:x}"


_MOVED_KEYS = ("clientPort", "clientPortAddress")


def static_file_text(text: str, dynamic_path: str, me: QuorumServer | None) -> str:
    """The static zoo.cfg once its servers live in ``dynamic_path``: without server.N/group/weight
    lines, ``dynamicConfigFile`` naming the new file (appended if it was not there), and without
    clientPort/clientPortAddress when my server line carries the client address (3.8's
    editStaticConfig)."""
    out = []
    named = False
    for line in text.splitlines():
        key = line.split("=", 1)[0].strip() if "=" in line and not line.lstrip().startswith("#") else ""
        if key.startswith(("server.", "group.", "weight.")):
            continue
        if key in _MOVED_KEYS and me is not None and me.client_port is not None:
            continue
        if key == "dynamicConfigFile":
            out.append(f"dynamicConfigFile={dynamic_path}")
            named = True
            continue
        out.append(line)
    if not named:
        out.append(f"dynamicConfigFile={dynamic_path}")
    return "\n".join(out) + "\n"
