"""ACL schemes (world, auth, digest, ip, super) and ZooKeeper's permission check.

A connection's identities are ``Id(scheme, id)`` records: ``ip`` always, plus one per
successful ``addauth``; ``super`` when the digest matches superDigest.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import ipaddress
import re
from collections.abc import Collection, Iterable, Sequence

from zkpy.errors import InvalidACLError, NoAuthError
from zkpy.wire.consts import Perms
from zkpy.wire.proto import ACL, Id

ANYONE = Id("world", "anyone")
OPEN_ACL_UNSAFE = (ACL(int(Perms.ALL), ANYONE),)
READ_ACL_UNSAFE = (ACL(int(Perms.READ), ANYONE),)
_ALL = int(Perms.ALL)
SCHEMES = ("world", "digest", "ip", "auth")


def digest_id(user_password: str) -> str:
    """``user:base64(sha1(user:password))``, ZooKeeper's DigestAuthenticationProvider.generateDigest."""
    user = user_password.split(":", 1)[0]
    sha = hashlib.sha1(user_password.encode("utf-8")).digest()
    return f"{user}:{base64.b64encode(sha).decode('ascii')}"


def _java_string_hash(s: str) -> int:
    """java.lang.String.hashCode over UTF-16 code units, as an unsigned 32-bit int."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def _java_id_hash(ident: Id) -> int:
    """The jute-generated Id.hashCode(): 37 * (37 * 17 + scheme.hashCode()) + id.hashCode()."""
    h = (37 * 17 + _java_string_hash(ident.scheme or "")) & 0xFFFFFFFF
    return (37 * h + _java_string_hash(ident.id or "")) & 0xFFFFFFFF


def auth_order(ids: Sequence[Id]) -> list[Id]:
    """A connection's identities in ZooKeeper's order: its authInfo is a set backed by a
    ConcurrentHashMap, iterated bin by bin, so whoAmI lists them, and an ``auth`` ACL id
    expands to them, in hash order. Same-bin ids keep insertion order (exact below 12 ids,
    before the table first grows)."""
    n = 16
    while len(ids) >= n - (n >> 2):
        n *= 2

    def bin_of(ident: Id) -> int:
        h = _java_id_hash(ident)
        return (h ^ (h >> 16)) & 0x7FFFFFFF & (n - 1)

    return sorted(ids, key=bin_of)


def _ip_valid(spec: str) -> bool:
    try:
        ipaddress.ip_network(spec, strict=False)
    except ValueError:
        return False
    return True


@functools.lru_cache(maxsize=4096)
def _ip_matches(client_ip: str, spec: str) -> bool:
    """Whether ``client_ip`` is in the ip ACL id ``spec`` (an address or a network). Parsing both
    with ``ipaddress`` costs about 7 µs, on every check of every read and write of such a node: the
    answers for the last 4,096 pairs are kept."""
    try:
        return ipaddress.ip_address(client_ip) in ipaddress.ip_network(spec, strict=False)
    except ValueError:
        return False


# ZooKeeper's KerberosName parser: service[/host]@realm
_KERBEROS_NAME = re.compile(r"([^/@]*)(/([^/@]*))?@([^/@]*)")


def is_valid_kerberos_name(name: str) -> bool:
    """SASLAuthenticationProvider.isValid: what KerberosName accepts (a name without ``@``
    always; one with ``@`` only as ``service[/host]@realm``)."""
    return "@" not in name or _KERBEROS_NAME.fullmatch(name) is not None


def is_valid_id(ident: Id, providers: Collection[str] = ()) -> bool:
    """Whether an ACL id is well formed for its scheme (ServerAuthenticationProvider.isValid).
    ``providers``: the schemes registered beside digest and ip (``authProvider.N``); a ``sasl``
    id is valid only when SASLAuthenticationProvider is one of them, as in ZooKeeper."""
    if ident.scheme == "sasl":
        return "sasl" in providers and ident.id is not None and is_valid_kerberos_name(ident.id)
    if ident.scheme == "digest":
        return ident.id is not None and len(ident.id.split(":")) == 2
    if ident.scheme == "ip":
        return ident.id is not None and _ip_valid(ident.id)
    if ident.scheme == "x509":  # a distinguished name (X500Principal parses it): attr=value, ...
        return bool(ident.id) and all("=" in part for part in ident.id.split(","))
    return False


def fixup_acl(path: str, auth: Sequence[Id], acl: Sequence[ACL] | None,
              providers: Collection[str] = ()) -> tuple[ACL, ...]:
    """Validate a requested ACL, expanding ``auth`` to the caller's identities (PrepRequestProcessor.fixupACL):
    those of digest and of the registered ``providers`` whose ids are authenticated (sasl).
    The open ACL comes back as ``OPEN_ACL_UNSAFE`` itself, which later checks recognise by identity."""
    if acl is not None and len(acl) == 1 and is_open(acl[0]):
        return OPEN_ACL_UNSAFE
    uniq: list[ACL] = []
    for a in acl or ():
        if a not in uniq:
            uniq.append(a)
    if not uniq:
        raise InvalidACLError(path, path)
    out: list[ACL] = []
    for a in uniq:
        ident = a.id
        if ident is None or ident.scheme is None:
            raise InvalidACLError(path, path)
        if ident.scheme == "world" and ident.id == "anyone":
            out.append(a)
        elif ident.scheme == "auth":
            granted = [ACL(a.perms, cid) for cid in auth  # ids of providers that are "authenticated"
                       if cid.scheme == "digest" or (cid.scheme == "sasl" and "sasl" in providers)]
            if not granted:
                raise InvalidACLError(path, path)
            out.extend(granted)
        elif is_valid_id(ident, providers):
            out.append(a)
        else:
            raise InvalidACLError(path, path)
    return tuple(out)


def is_open(a: ACL) -> bool:
    """``a`` is world:anyone with every permission (OPEN_ACL_UNSAFE's entry), compared field by field."""
    ident = a.id
    return a.perms == _ALL and ident is not None and ident.scheme == "world" and ident.id == "anyone"


def check_acl(acl: Iterable[ACL], perm: int, auth: Sequence[Id]) -> None:
    """Raise NoAuthError unless ``auth`` grants one of ``perm``'s bits (ZooKeeperServer.checkACL)."""
    if not has_permission(acl, perm, auth):
        raise NoAuthError()


def has_permission(acl: Iterable[ACL], perm: int, auth: Sequence[Id]) -> bool:
    if acl is OPEN_ACL_UNSAFE:
        return True  # world:anyone with every permission, shared by the tree's ACL cache
    acl = tuple(acl)
    if not acl:
        return True
    for cid in auth:
        if cid.scheme == "super":
            return True
    for a in acl:
        if not a.perms & perm:
            continue
        ident = a.id
        if ident.scheme == "world" and ident.id == "anyone":
            return True
        for cid in auth:
            if cid.scheme != ident.scheme:
                continue
            if ident.scheme == "ip":
                if _ip_matches(cid.id, ident.id):
                    return True
            elif ident.scheme == "sasl" and cid.id == "super":
                return True  # SASLAuthenticationProvider.matches: the sasl id "super" matches every sasl ACL
            elif cid.id == ident.id:
                return True
    return False
