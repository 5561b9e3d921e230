"""has_permission, as ZooKeeperServer.checkACL decides: the permission bits, world, digest and ip
ids (addresses and networks, IPv4 and IPv6), super; plain-int and IntFlag permissions alike."""

from __future__ import annotations

import pytest

from zkpy.tree.acl import OPEN_ACL_UNSAFE, has_permission
from zkpy.wire.consts import PermNum, Perms
from zkpy.wire.proto import ACL, Id

CASES = [  # (acl, client's ids, permission, granted?)
    ((ACL(1, Id("ip", "10.0.0.0/8")),), [Id("ip", "10.1.2.3")], PermNum.READ, True),
    ((ACL(1, Id("ip", "10.0.0.0/8")),), [Id("ip", "11.1.2.3")], PermNum.READ, False),
    ((ACL(1, Id("ip", "10.0.0.0/8")),), [Id("ip", "10.1.2.3")], PermNum.WRITE, False),  # no WRITE bit
    ((ACL(31, Id("ip", "127.0.0.1")),), [Id("ip", "127.0.0.1")], PermNum.ADMIN, True),
    ((ACL(31, Id("ip", "127.0.0.1")),), [Id("ip", "127.0.0.2")], PermNum.ADMIN, False),
    ((ACL(31, Id("ip", "::1")),), [Id("ip", "::1")], PermNum.READ, True),
    ((ACL(31, Id("ip", "not-an-address")),), [Id("ip", "127.0.0.1")], PermNum.READ, False),
    ((ACL(31, Id("ip", "127.0.0.0/8")),), [Id("ip", "garbage")], PermNum.READ, False),
    ((ACL(2, Id("digest", "bob:x=")),), [Id("digest", "bob:x=")], PermNum.WRITE, True),
    ((ACL(2, Id("digest", "bob:x=")),), [Id("digest", "eve:y=")], PermNum.WRITE, False),
    ((ACL(2, Id("digest", "bob:x=")),), [Id("super", "")], PermNum.ADMIN, True),
    ((ACL(4, Id("world", "anyone")),), [], PermNum.CREATE, True),
    ((ACL(4, Id("world", "anyone")),), [], PermNum.DELETE, False),
    (OPEN_ACL_UNSAFE, [], PermNum.ADMIN, True),
]


@pytest.mark.parametrize(("acl", "auth", "perm", "granted"), CASES)
def test_has_permission(acl: tuple[ACL, ...], auth: list[Id], perm: int, granted: bool) -> None:
    for _ in range(2):  # the second time from the ip match's memo
        assert has_permission(acl, perm, auth) is granted
        assert has_permission(acl, Perms(perm), auth) is granted
