"""Differential tests: generated operation sequences get the same answers from zkpy and Apache ZooKeeper 3.8.

Each hypothesis example is a list of operations over three client sessions (kazoo clients, kept
across examples). Every operation is sent, byte for byte the same, to zkpy and to Apache ZooKeeper
(a private pair of servers, started once for the module), and what each server answered is
compared: error code, response body and its length, Stat fields, the reply header's zxid, the
watch events every session received, and how many of them came before the reply. After each step
the runner does a sync round trip on every session, so every event of that step has arrived
before the comparison. Times are ignored; zxids are compared by rank (each server's zxids numbered
in the order the example first saw them, and at the end their numeric order must agree); session
ids by the pool slot that owns the session. Sessions that authenticated are replaced after the
example, and every example works under its own root, which it deletes at the end.

Covered: create in every mode (persistent, ephemeral, sequential, ephemeral-sequential, container,
TTL, sequential TTL) through create/create2/createContainer/createTTL, including mode/opcode/TTL
mismatches; delete and setData with right and wrong versions; multi with failing ops; multiRead;
setACL/getACL with world, digest, ip and auth ids (valid and invalid) and wrong aversions; addauth
(digest, ip); exists, getData, getChildren/getChildren2, getAllChildrenNumber, getEphemerals,
whoAmI; one-time data, exist and child watches; addWatch PERSISTENT and PERSISTENT_RECURSIVE;
checkWatches and removeWatches; reads of /zookeeper nodes; invalid paths; pipelines (requests of
one session sent back to back); closing sessions (ephemerals go, watchers fire).

Not generated, on purpose:
- one session mixing one-time, persistent and persistent-recursive watches on one path
  (ZOOKEEPER-4466: 3.8.0 lets one mode overwrite the other; zkpy keeps both, as 3.9 does);
- exists() on a node the session may not read: zkpy answers NoAuth, as 3.8.4+ does
  (ZOOKEEPER-2590); 3.8.0 answers the Stat. The runner reads the node's ACL first and skips it;
- what breaks the oracle itself: createTTL without TTL flags and ttl -1 (3.8.0 accepts it, then
  its server dies applying the txn), and TTL flags on a multi's create/create2/createContainer op
  (3.8.0 fails the multi half-way with a ClassCastException and damages its own state).
Watches over nodes the watcher may not read are generated: Debian's 3.8.0 filters their events
by READ ACL (the CVE-2024-23944 fix), as zkpy does.

Every ACL the generator sets also grants ALL to a digest identity that only the runner's admin
session holds, so each example can delete its whole tree afterwards; test sessions never
authenticate as it. The servers' container managers are slowed to once an hour, so empty
containers stay until the example's cleanup on both sides.

On failure the seed is printed (rerun with ZKPY_DIFF_SEED=<seed>), hypothesis prints the
shrunk example and a @reproduce_failure blob, and the assertion shows both servers' transcripts.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import os
import random
import struct
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState

from zkpy.testing.servers import ServerProcess, start_apache, start_zkpy

pytestmark = pytest.mark.interop

EXAMPLES = int(os.environ.get("ZKPY_DIFF_EXAMPLES", "400"))
SEED = int(os.environ.get("ZKPY_DIFF_SEED") or random.randrange(1 << 32))
SLOTS = 3
VERBOSE = bool(os.environ.get("ZKPY_DIFF_VERBOSE"))
TIMEOUT_S = 10.0

# ---- jute, just enough of it (independent of zkpy's codec) ----

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_STAT = struct.Struct(">qqqqiiiqiiq")
_MULTI_HEADER = struct.Struct(">iBi")

OP_CREATE, OP_DELETE, OP_EXISTS, OP_GET_DATA, OP_SET_DATA = 1, 2, 3, 4, 5
OP_GET_ACL, OP_SET_ACL, OP_GET_CHILDREN, OP_SYNC, OP_GET_CHILDREN2 = 6, 7, 8, 9, 12
OP_CHECK, OP_MULTI, OP_CREATE2, OP_CHECK_WATCHES, OP_REMOVE_WATCHES = 13, 14, 15, 17, 18
OP_CREATE_CONTAINER, OP_CREATE_TTL, OP_MULTI_READ = 19, 21, 22
OP_GET_EPHEMERALS, OP_GET_ALL_CHILDREN_NUMBER, OP_ADD_WATCH, OP_WHO_AM_I = 103, 104, 106, 107

PERMS_ALL = 31
MAX_TTL = 0x000000FFFFFFFFFF  # EphemeralType.TTL.maxValue()


def _string(s: str | None) -> bytes:
    if s is None:
        return _INT.pack(-1)
    raw = s.encode("utf-8")
    return _INT.pack(len(raw)) + raw


def _buffer(b: bytes | None) -> bytes:
    return _INT.pack(-1) if b is None else _INT.pack(len(b)) + b


def _acls(acl: tuple[tuple[int, str, str], ...]) -> bytes:
    return _INT.pack(len(acl)) + b"".join(_INT.pack(p) + _string(s) + _string(i) for p, s, i in acl)


def _path_watch(path: str, watch: bool) -> bytes:
    return _string(path) + (b"\x01" if watch else b"\x00")


class Reader:
    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf, self.pos = buf, pos

    def int(self) -> int:
        v = _INT.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return int(v)

    def buffer(self) -> bytes | None:
        n = self.int()
        if n < 0:
            return None
        v = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return v

    def string(self) -> str | None:
        b = self.buffer()
        return None if b is None else b.decode("utf-8")

    def stat(self) -> tuple[int, ...]:
        v = _STAT.unpack_from(self.buf, self.pos)
        self.pos += _STAT.size
        return tuple(v)

    def strings(self) -> list[str | None] | None:
        n = self.int()
        return None if n < 0 else [self.string() for _ in range(n)]

    def acls(self) -> list[tuple[int, str | None, str | None]] | None:
        n = self.int()
        return None if n < 0 else [(self.int(), self.string(), self.string()) for _ in range(n)]

    def multi_header(self) -> tuple[int, bool, int]:
        t, done, err = _MULTI_HEADER.unpack_from(self.buf, self.pos)
        self.pos += _MULTI_HEADER.size
        return t, bool(done), err


Parse = Callable[[Reader], Any]


class RawRequest:
    """A request kazoo's connection writes as is; the session's reader fills in the answer."""

    def __init__(self, opcode: int, body: bytes, parse: Parse | None) -> None:
        self.type = opcode
        self.body = body
        self.parse = parse

    def serialize(self) -> bytes:
        return self.body

    def __repr__(self) -> str:
        return f"RawRequest({self.type})"


@dataclass
class Reply:
    """What a server answered: reply header zxid and error, the parsed body, and how many of the
    session's watch events had arrived before this reply."""

    zxid: int
    err: int
    body: Any
    events_before: int
    size: int  # bytes after the reply header


# ---- sessions ----


class Session:
    """A kazoo client whose replies to raw requests and whose watch events are recorded as they
    arrive, in the reader thread (so a completed round trip means earlier events are recorded)."""

    def __init__(self, hosts: str, name: str) -> None:
        self.name = name
        self.events: list[tuple[int, int, str]] = []
        self.lost = False
        self.client = KazooClient(hosts=hosts, timeout=30, connection_retry={"max_tries": 0})
        self.client.add_listener(self._state)
        conn = self.client._connection
        self._orig_response = conn._read_response
        conn._read_response = self._on_response
        conn._read_watch_event = self._on_event

    def _state(self, state: KazooState) -> None:
        if state != KazooState.CONNECTED:
            self.lost = True

    def _on_event(self, buf: bytes, offset: int) -> None:
        r = Reader(buf, offset)
        etype, kstate = r.int(), r.int()
        self.events.append((etype, kstate, r.string() or ""))

    def _on_response(self, header: Any, buf: bytes, offset: int) -> Any:
        client = self.client
        pending = client._pending
        if not pending or not isinstance(pending[0][0], RawRequest):
            return self._orig_response(header, buf, offset)
        request, async_object, xid = pending.popleft()
        if header.zxid and header.zxid > 0:
            client.last_zxid = header.zxid
        if header.xid != xid:
            async_object.set_exception(RuntimeError(f"xid {header.xid} answered, {xid} expected"))
            return None
        body: Any = None
        if header.err == 0 and request.parse is not None:
            try:
                body = request.parse(Reader(buf, offset))
            except Exception as exc:  # a malformed answer is a result to compare, not a crash
                body = f"unparseable: {exc!r}"
        async_object.set(Reply(header.zxid, header.err, body, len(self.events), len(buf) - offset))
        return None

    def start_async(self) -> Any:
        return self.client.start_async()

    @property
    def session_id(self) -> int:
        return int(self.client._session_id or 0)

    def send(self, request: RawRequest) -> Any:
        result = self.client.handler.async_result()
        self.client._call(request, result)
        return result

    def add_auth(self, scheme: str, credential: str) -> Any:
        return self.client.add_auth_async(scheme, credential)

    def stop(self) -> None:
        self.client.stop()
        self.client.close()


class ServerBroken(BaseException):
    """A server process died or stopped answering. Hypothesis does not catch BaseException, so
    this ends the test at once with the transcript, instead of shrinking through timeouts."""


class Side:
    """One server and the sessions the runner uses on it: SLOTS test sessions and an admin."""

    def __init__(self, kind: str, server: ServerProcess) -> None:
        self.kind = kind
        self.server = server
        self.generation = [0] * SLOTS
        self.slots: list[Session] = [Session(server.hosts, f"s{i}.0") for i in range(SLOTS)]
        self.admin = Session(server.hosts, "admin")
        self.wait_started([s.start_async() for s in [self.admin, *self.slots]])
        self.get(self.admin.add_auth("digest", ADMIN_CREDENTIAL))

    def diagnosis(self, what: str) -> str:
        rc = self.server.proc.poll()
        state = "running" if rc is None else f"exited with {rc}"
        return f"{self.kind}: {what}; server {state}; its log ends:\n{self.server.log()[-3000:]}"

    def get(self, result: Any, what: str = "request") -> Any:
        try:
            return result.get(timeout=TIMEOUT_S)
        except KazooTimeoutError:
            # a hang is not shrunk (every try would wait out the timeout): stop with the transcript
            raise ServerBroken(self.diagnosis(f"no answer to a {what} within {TIMEOUT_S}s")) from None

    def wait_started(self, events: list[Any]) -> None:
        for e in events:
            e.wait(TIMEOUT_S)
        for s in [self.admin, *self.slots]:
            if not s.client.connected:
                raise ServerBroken(self.diagnosis(f"session {s.name} could not connect"))

    def check_alive(self) -> None:
        for s in [self.admin, *self.slots]:
            if s.lost or not s.client.connected:
                raise AssertionError(self.diagnosis(f"session {s.name} lost its connection"))

    def heal(self) -> None:
        """Before an example: replace sessions a failed example broke (the example failed already)."""
        if self.server.proc.poll() is not None:
            raise ServerBroken(self.diagnosis("server process is gone"))
        waits = [self.replace(i) for i, s in enumerate(self.slots) if s.lost or not s.client.connected]
        new_admin = self.admin.lost or not self.admin.client.connected
        if new_admin:
            self.admin.stop()
            self.admin = Session(self.server.hosts, "admin")
            waits.append(self.admin.start_async())
        self.wait_started(waits)
        if new_admin:
            self.get(self.admin.add_auth("digest", ADMIN_CREDENTIAL))

    def replace(self, slot: int) -> Any:
        """Close the slot's session (closeSession) and start a new one in its place."""
        self.slots[slot].stop()
        self.generation[slot] += 1
        s = Session(self.server.hosts, f"s{slot}.{self.generation[slot]}")
        self.slots[slot] = s
        return s.start_async()

    def owner_names(self) -> dict[int, str]:
        names = {s.session_id: s.name for s in self.slots}
        names[self.admin.session_id] = "admin"
        return names

    def close(self) -> None:
        for s in [*self.slots, self.admin]:
            try:
                s.stop()
            except Exception:
                pass


# ---- identities and ACLs ----


def digest(user_password: str) -> str:
    user = user_password.split(":", 1)[0]
    return f"{user}:{base64.b64encode(hashlib.sha1(user_password.encode()).digest()).decode()}"


ADMIN_CREDENTIAL = "zkdiff-admin:secret"
ADMIN_ACL = (PERMS_ALL, "digest", digest(ADMIN_CREDENTIAL))
OPEN_ACL = ((PERMS_ALL, "world", "anyone"),)
ACL_IDS = [
    ("world", "anyone"), ("digest", digest("u1:p1")), ("digest", digest("u2:p2")), ("ip", "127.0.0.1"),
    ("ip", "127.0.0.0/8"), ("ip", "10.0.0.0/8"), ("auth", ""),
    # invalid ids: InvalidACL
    ("ip", "not-an-address"), ("digest", "no-colon"), ("world", "someone"), ("nosuchscheme", "x"),
]
AUTHS = [("digest", "u1:p1"), ("digest", "u2:p2"), ("digest", "u1:wrong"), ("ip", "127.0.0.1")]


def granted(acl: list[Any], perm: int, ids: list[tuple[str, str]]) -> bool:
    """Whether ``ids`` hold ``perm`` under ``acl`` (ZooKeeper's checkACL), for the exists() probe."""
    for perms, scheme, ident in acl:
        if not perms & perm:
            continue
        if scheme == "world" and ident == "anyone":
            return True
        for s, i in ids:
            if s != scheme:
                continue
            if s == "ip":
                try:
                    if ipaddress.ip_address(i) in ipaddress.ip_network(ident, strict=False):
                        return True
                except ValueError:
                    continue
            elif i == ident:
                return True
    return False


# ---- operations (data; paths are indexes into the example's known paths) ----
# A path reference ``p >= 0`` is the p-th last known path (modulo their number): the example's root,
# a few likely names, then every path a create returned; negative ones are invalid paths.

ROOT = 99  # the path reference of the example's root
SYSTEM_PATHS = {100: "/", 101: "/zookeeper", 102: "/zookeeper/config", 103: "/zookeeper/quota"}  # reads only
BAD_PATHS = ["{root}/a/", "{root}//a", "{root}/./a", "{root}/a/.."]


@dataclass(frozen=True)
class Create:
    slot: int
    parent: int
    name: str  # "" makes the path end with "/" (valid only for sequential nodes)
    opcode: int
    flags: int
    data: bytes | None
    acl: tuple[tuple[int, str, str], ...] | None  # None: world:anyone ALL
    ttl: int


@dataclass(frozen=True)
class Delete:
    slot: int
    path: int
    version: int


@dataclass(frozen=True)
class SetData:
    slot: int
    path: int
    data: bytes | None
    version: int


@dataclass(frozen=True)
class Check:
    slot: int
    path: int
    version: int


@dataclass(frozen=True)
class Read:
    slot: int
    opcode: int  # getData, exists, getChildren, getChildren2, getACL, getAllChildrenNumber, sync
    path: int
    watch: bool


@dataclass(frozen=True)
class SetACL:
    slot: int
    path: int
    acl: tuple[tuple[int, str, str], ...] | None
    version: int


@dataclass(frozen=True)
class Multi:
    slot: int
    ops: tuple[Create | Delete | SetData | Check, ...]


@dataclass(frozen=True)
class MultiRead:
    slot: int
    ops: tuple[tuple[int, int, bool], ...]  # (getData | getChildren, path, watch)


@dataclass(frozen=True)
class AddAuth:
    slot: int
    scheme: str
    credential: str


@dataclass(frozen=True)
class AddWatch:
    slot: int
    path: int
    mode: int


@dataclass(frozen=True)
class WatchCheck:
    slot: int
    opcode: int  # checkWatches or removeWatches
    path: int
    type: int


@dataclass(frozen=True)
class Session_:
    slot: int
    what: str  # "whoami", "ephemerals[ prefix]", "close"


@dataclass(frozen=True)
class Pipeline:
    """Ops of one session sent back to back, each without waiting for the one before (their
    own slot is ignored): replies must come in order, reads seeing the writes before them."""

    slot: int
    ops: tuple[Create | Delete | SetData | Read | SetACL | Multi, ...]


Op = Pipeline | Create | Delete | SetData | Check | Read | SetACL | Multi | MultiRead | AddAuth | AddWatch | WatchCheck | Session_

def weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of the strategies, picked with the given weights (st.one_of picks uniformly)."""
    expanded = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.sampled_from(expanded).flatmap(lambda strategy: strategy)


slots = st.integers(0, SLOTS - 1)
# small references name the paths created last, which most likely exist
paths = weighted((7, st.integers(0, 12)), (2, st.just(ROOT)), (1, st.integers(-len(BAD_PATHS), -1)))
read_paths = weighted((12, paths), (1, st.sampled_from(sorted(SYSTEM_PATHS))))
versions = st.sampled_from([-1, -1, -1, 0, 0, 1, 2, 3])
datas = st.sampled_from([b"", b"x", b"data", b"\x00\xff", None])
perms = weighted((3, st.just(PERMS_ALL)), (2, st.sampled_from([0, 1, 2, 4, 8, 16, 3, 17, 30])),
                 (1, st.integers(0, PERMS_ALL)))
acl_entries = st.tuples(perms, weighted((6, st.sampled_from(ACL_IDS[:7])), (1, st.sampled_from(ACL_IDS[7:])))).map(
    lambda t: (t[0], *t[1]))
acls = weighted((4, st.none()), (3, st.lists(acl_entries, min_size=1, max_size=3).map(tuple)), (1, st.just(())))
ttls = weighted((6, st.sampled_from([3_600_000, 86_400_000, MAX_TTL])), (1, st.sampled_from([0, -1, MAX_TTL + 1])))
names = weighted((10, st.sampled_from(["a", "b", "c"])), (1, st.just("")))
# (opcode, flags) pairs: mostly the ones clients send, some mismatched
create_kinds = weighted(
    (8, st.tuples(st.sampled_from([OP_CREATE, OP_CREATE2]), st.sampled_from([0, 0, 1, 2, 3]))),
    (2, st.tuples(st.just(OP_CREATE_CONTAINER), st.just(4))),
    (2, st.tuples(st.just(OP_CREATE_TTL), st.sampled_from([5, 6]))),
    (1, st.tuples(st.sampled_from([OP_CREATE, OP_CREATE2, OP_CREATE_CONTAINER, OP_CREATE_TTL]), st.integers(0, 7))),
)


def _make_create(slot: int, parent: int, name: str, kind: tuple[int, int], data: bytes | None,
                 acl: Any, ttl: int, in_multi: bool) -> Create:
    opcode, flags = kind
    if in_multi and flags in (5, 6):
        # TTL flags under another create header make 3.8.0 fail the multi half-way with a
        # ClassCastException that leaves its own state damaged (digest mismatches): not generated
        opcode = OP_CREATE_TTL
    if not in_multi and opcode == OP_CREATE_TTL and flags not in (5, 6) and ttl < 0:
        # 3.8.0 accepts this and then dies applying a TTL txn without a TTL: not generated
        ttl = 0
    return Create(slot, parent, name, opcode, flags, data, acl, ttl)


def _create(slot: Any, in_multi: bool = False) -> st.SearchStrategy[Create]:
    return st.builds(_make_create, slot, paths, names, create_kinds, datas, acls, ttls, st.just(in_multi))


sub_ops = st.one_of(
    _create(st.just(0), in_multi=True),
    st.builds(Delete, st.just(0), paths, versions),
    st.builds(SetData, st.just(0), paths, datas, versions),
    st.builds(Check, st.just(0), paths, versions),
)
read_opcodes = st.sampled_from([OP_GET_DATA, OP_EXISTS, OP_GET_CHILDREN, OP_GET_CHILDREN2, OP_GET_DATA, OP_EXISTS,
                                OP_GET_CHILDREN2, OP_GET_ACL, OP_GET_ALL_CHILDREN_NUMBER, OP_SYNC])

operations: st.SearchStrategy[Op] = weighted(
    (6, _create(slots)),
    (2, st.builds(Delete, slots, paths, versions)),
    (3, st.builds(SetData, slots, paths, datas, versions)),
    (5, st.builds(Read, slots, read_opcodes, read_paths, st.booleans())),
    (2, st.builds(SetACL, slots, paths, acls, st.sampled_from([-1, -1, 0, 1]))),
    (2, st.builds(Multi, slots, st.lists(sub_ops, min_size=1, max_size=4).map(tuple))),
    (1, st.builds(MultiRead, slots, st.lists(st.tuples(st.sampled_from([OP_GET_DATA, OP_GET_CHILDREN]), read_paths,
                                                       st.booleans()), min_size=1, max_size=3).map(tuple))),
    (1, st.builds(lambda s, a: AddAuth(s, *a), slots, st.sampled_from(AUTHS))),
    (2, st.builds(AddWatch, slots, paths, weighted((6, st.sampled_from([0, 1])), (1, st.just(2))))),
    (1, st.builds(WatchCheck, slots, st.sampled_from([OP_CHECK_WATCHES, OP_REMOVE_WATCHES]), paths,
                  st.sampled_from([1, 2, 3]))),
    (2, st.builds(Pipeline, slots, st.tuples(st.lists(weighted(
        (3, _create(st.just(0))),
        (1, st.builds(Delete, st.just(0), paths, versions)),
        (2, st.builds(SetData, st.just(0), paths, datas, versions)),
        (2, st.builds(Read, st.just(0), st.sampled_from([OP_GET_DATA, OP_GET_CHILDREN2, OP_GET_ACL]), paths,
                      st.booleans())),  # no exists: the runner's ACL probe cannot see ahead
        (1, st.builds(Multi, st.just(0), st.lists(sub_ops, min_size=1, max_size=3).map(tuple))),
    ), min_size=1, max_size=4), st.one_of(st.none(), st.builds(SetACL, st.just(0), paths, acls, st.just(-1))))
        # setACL only last: a write prepped before a setACL is applied is checked against the old
        # ACL (in both servers), and when it is applied depends on timing
        .map(lambda t: tuple(t[0]) + ((t[1],) if t[1] is not None else ())))),
    (1, st.builds(Session_, slots, st.sampled_from(["whoami", "ephemerals", "ephemerals /", "ephemerals a",
                                                     "ephemerals null", "close", "close", "close"]))),
)
programs = st.lists(operations, min_size=10, max_size=50)


# ---- the runner ----


@dataclass
class Normalizer:
    """Makes one server's answers comparable: zxids by first-seen rank, session ids by slot."""

    side: Side
    zxids: dict[int, int] = field(default_factory=dict)

    def zxid(self, z: int) -> int:
        if z <= 0:
            return z
        return self.zxids.setdefault(z, len(self.zxids))

    def stat(self, st_: tuple[int, ...] | None) -> Any:
        if st_ is None:
            return None
        czxid, mzxid, _ctime, _mtime, version, cversion, aversion, owner, data_len, children, pzxid = st_
        names = self.side.owner_names()
        return {"czxid": self.zxid(czxid), "mzxid": self.zxid(mzxid), "pzxid": self.zxid(pzxid),
                "version": version, "cversion": cversion, "aversion": aversion,
                "ephemeralOwner": names.get(owner, owner), "dataLength": data_len, "numChildren": children}

    def zxid_order(self) -> list[int]:
        """The ranks sorted by the server's zxids: equal on both sides iff the order of the txns agrees."""
        return [rank for _z, rank in sorted(self.zxids.items())]


def _parse_create2(r: Reader) -> Any:
    return r.string(), r.stat()


def _parse_get_data(r: Reader) -> Any:
    return r.buffer(), r.stat()


def _parse_children2(r: Reader) -> Any:
    return sorted(r.strings() or []), r.stat()  # child order is unspecified


def _parse_acl(r: Reader) -> Any:
    return r.acls(), r.stat()


def _parse_multi(r: Reader) -> Any:
    """Each result as (type, header err, fields...), then the closing header."""
    out: list[Any] = []
    while True:
        t, done, err = r.multi_header()
        if done:
            out.append(("done", t, err))
            return out
        if t == OP_CREATE:
            out.append((t, err, r.string()))
        elif t in (OP_CREATE2, OP_CREATE_TTL, OP_CREATE_CONTAINER):
            out.append((t, err, *_parse_create2(r)))
        elif t == OP_SET_DATA:
            out.append((t, err, r.stat()))
        elif t == OP_GET_DATA:
            out.append((t, err, *_parse_get_data(r)))
        elif t == OP_GET_CHILDREN:
            out.append((t, err, sorted(r.strings() or [])))
        elif t == -1:
            out.append((t, err, r.int()))
        else:
            out.append((t, err))


READ_PARSERS: dict[int, Parse] = {
    OP_GET_DATA: _parse_get_data,
    OP_EXISTS: lambda r: r.stat(),
    OP_GET_CHILDREN: lambda r: sorted(r.strings() or []),
    OP_GET_CHILDREN2: _parse_children2,
    OP_GET_ACL: _parse_acl,
    OP_GET_ALL_CHILDREN_NUMBER: lambda r: r.int(),
    OP_SYNC: lambda r: r.string(),
}


class Example:
    """One generated program run against both sides in lock step."""

    def __init__(self, sides: list[Side]) -> None:
        self.sides = sides
        self.root = f"/zkdiff-{uuid.uuid4().hex[:12]}"
        self.known: list[str] = [f"{self.root}/a", self.root]
        self.created: list[str] = [self.root]
        self.watch_kind: dict[tuple[str, str], str] = {}  # (session name, path) -> one-time/persistent/recursive
        self.auth: list[list[tuple[str, str]]] = [[("ip", "127.0.0.1")] for _ in range(SLOTS)]
        self.norms = [Normalizer(s) for s in sides]
        self.authed: set[int] = set()  # slots whose session added identities: replaced afterwards
        self.transcript: list[str] = []

    # -- paths and bookkeeping --

    def path(self, ref: int) -> str:
        if ref < 0:
            return BAD_PATHS[-ref - 1].format(root=self.root)
        if ref == ROOT:
            return self.root
        if ref in SYSTEM_PATHS:
            return SYSTEM_PATHS[ref]
        return self.known[-1 - ref % len(self.known)]

    def create_path(self, op: Create) -> str:
        return f"{self.path(op.parent)}/{op.name}"

    def learn(self, path: Any) -> None:
        if isinstance(path, str) and path.startswith(self.root):
            if path not in self.known:
                self.known.append(path)
            if path not in self.created:
                self.created.append(path)

    def watch_allowed(self, slot: int, path: str, kind: str) -> bool:
        """ZOOKEEPER-4466: one session never mixes watch modes on one path (the first one wins)."""
        key = (self.sides[0].slots[slot].name, path)
        return self.watch_kind.setdefault(key, kind) == kind

    # -- requests --

    def encode_create(self, op: Create) -> RawRequest:
        path = self.create_path(op)
        acl = OPEN_ACL if op.acl is None else (op.acl + (ADMIN_ACL,) if op.acl else ())
        body = _string(path) + _buffer(op.data) + _acls(acl) + _INT.pack(op.flags)
        if op.opcode == OP_CREATE_TTL:
            body += _LONG.pack(op.ttl)
        return RawRequest(op.opcode, body, (lambda r: r.string()) if op.opcode == OP_CREATE else _parse_create2)

    def encode_sub(self, op: Create | Delete | SetData | Check) -> tuple[int, bytes]:
        if isinstance(op, Create):
            req = self.encode_create(op)
            return req.type, req.body
        if isinstance(op, Delete):
            return OP_DELETE, _string(self.path(op.path)) + _INT.pack(op.version)
        if isinstance(op, SetData):
            return OP_SET_DATA, _string(self.path(op.path)) + _buffer(op.data) + _INT.pack(op.version)
        return OP_CHECK, _string(self.path(op.path)) + _INT.pack(op.version)

    def request(self, op: Op) -> RawRequest | None:
        if isinstance(op, Create):
            return self.encode_create(op)
        if isinstance(op, Delete):
            return RawRequest(OP_DELETE, self.encode_sub(op)[1], None)
        if isinstance(op, SetData):
            return RawRequest(OP_SET_DATA, self.encode_sub(op)[1], lambda r: r.stat())
        if isinstance(op, Read):
            path = self.path(op.path)
            if op.opcode in (OP_GET_ACL, OP_GET_ALL_CHILDREN_NUMBER, OP_SYNC):
                return RawRequest(op.opcode, _string(path), READ_PARSERS[op.opcode])
            return RawRequest(op.opcode, _path_watch(path, op.watch), READ_PARSERS[op.opcode])
        if isinstance(op, SetACL):
            acl = OPEN_ACL if op.acl is None else (op.acl + (ADMIN_ACL,) if op.acl else ())
            return RawRequest(OP_SET_ACL, _string(self.path(op.path)) + _acls(acl) + _INT.pack(op.version),
                              lambda r: r.stat())
        if isinstance(op, Multi):
            body = b"".join(_MULTI_HEADER.pack(t, 0, -1) + b for t, b in map(self.encode_sub, op.ops))
            return RawRequest(OP_MULTI, body + _MULTI_HEADER.pack(-1, 1, -1), _parse_multi)
        if isinstance(op, MultiRead):
            body = b"".join(_MULTI_HEADER.pack(t, 0, -1) + _path_watch(self.path(p), w) for t, p, w in op.ops)
            return RawRequest(OP_MULTI_READ, body + _MULTI_HEADER.pack(-1, 1, -1), _parse_multi)
        if isinstance(op, AddWatch):
            return RawRequest(OP_ADD_WATCH, _string(self.path(op.path)) + _INT.pack(op.mode), lambda r: r.int())
        if isinstance(op, WatchCheck):
            return RawRequest(op.opcode, _string(self.path(op.path)) + _INT.pack(op.type), None)
        if isinstance(op, Session_) and op.what == "whoami":
            return RawRequest(OP_WHO_AM_I, b"", lambda r: [(r.string(), r.string()) for _ in range(r.int())])
        if isinstance(op, Session_) and op.what.startswith("ephemerals"):
            prefix = {"ephemerals": self.root, "ephemerals /": "/", "ephemerals a": f"{self.root}/a",
                      "ephemerals null": None}[op.what]
            return RawRequest(OP_GET_EPHEMERALS, _string(prefix), lambda r: sorted(r.strings() or []))
        return None

    def adjust(self, op: Op) -> Op | str:
        """Rewrite or skip what the generator may not send (see the module doc); deterministic, so
        both sides get the same."""
        if isinstance(op, Read) and op.watch and op.opcode in (OP_GET_DATA, OP_EXISTS, OP_GET_CHILDREN,
                                                                 OP_GET_CHILDREN2):
            if not self.watch_allowed(op.slot, self.path(op.path), "one-time"):
                op = Read(op.slot, op.opcode, op.path, False)
        if isinstance(op, MultiRead):
            op = MultiRead(op.slot, tuple((t, p, w and self.watch_allowed(op.slot, self.path(p), "one-time"))
                                          for t, p, w in op.ops))
        if isinstance(op, AddWatch) and op.mode in (0, 1):
            kind = "persistent" if op.mode == 0 else "recursive"
            if not self.watch_allowed(op.slot, self.path(op.path), kind):
                return f"skipped: {kind} watch on a path with another watch mode"
        return op

    # -- running --

    def send_all(self, make: Callable[[Side], Any]) -> list[Any]:
        pending = [(side, make(side)) for side in self.sides]
        return [side.get(p) for side, p in pending]

    def step(self, op: Op) -> None:
        adjusted = self.adjust(op)
        results: list[Any]
        if isinstance(adjusted, str):
            results = [adjusted, adjusted]
        elif isinstance(adjusted, AddAuth):
            results = []
            for side in self.sides:
                try:
                    side.get(side.slots[adjusted.slot].add_auth(adjusted.scheme, adjusted.credential), "addauth")
                    results.append("ok")
                except KazooException as exc:
                    results.append(repr(exc))
            self.authed.add(adjusted.slot)
            ident = digest(adjusted.credential) if adjusted.scheme == "digest" else adjusted.credential
            if (adjusted.scheme, ident) not in self.auth[adjusted.slot]:
                self.auth[adjusted.slot].append((adjusted.scheme, ident))
        elif isinstance(adjusted, Session_) and adjusted.what == "close":
            for side in self.sides:
                side.wait_started([side.replace(adjusted.slot)])
            self.auth[adjusted.slot] = [("ip", "127.0.0.1")]
            self.authed.discard(adjusted.slot)
            results = ["closed", "closed"]
        elif isinstance(adjusted, Pipeline):
            subs = [self.adjust(replace(o, slot=adjusted.slot)) for o in adjusted.ops]
            requests = [self.request(o) for o in subs if not isinstance(o, str)]
            pending = [(side, [side.slots[adjusted.slot].send(RawRequest(r.type, r.body, r.parse))
                               for r in requests if r is not None]) for side in self.sides]
            replies = [[side.get(p) for p in ps] for side, ps in pending]
            ops = [o for o in subs if not isinstance(o, str)]
            results = [[self.normalize(o, reply, norm) for o, reply in zip(ops, side_replies)]
                       for side_replies, norm in zip(replies, self.norms)]
            for o, reply in zip(ops, replies[0]):
                self.learn_from(o, reply)
        elif isinstance(adjusted, Read) and adjusted.opcode == OP_EXISTS and self.unreadable(adjusted):
            results = ["skipped: exists on a node the session may not read"] * 2
        else:
            request = self.request(adjusted)
            assert request is not None
            replies = self.send_all(lambda side: side.slots[adjusted.slot].send(
                RawRequest(request.type, request.body, request.parse)))
            results = [self.normalize(adjusted, reply, norm) for reply, norm in zip(replies, self.norms)]
            self.learn_from(adjusted, replies[0])
        events = self.round_trip()
        if isinstance(adjusted, Session_) and adjusted.what == "close":
            # A closeSession deletes the session's ephemerals in the order of the txn's path list,
            # which Apache takes from a Java HashSet: an order ZooKeeper does not specify.
            events = [{name: sorted(evs) for name, evs in side.items()} for side in events]
        record = [{"result": r, "events": e} for r, e in zip(results, events)]
        self.transcript.append(f"{op!r}\n    zkpy:   {record[0]}\n    apache: {record[1]}")
        STATS.note(op, record[1])
        if record[0] != record[1]:
            raise AssertionError(self.report("answers differ"))

    def unreadable(self, op: Read) -> bool:
        """Probe (getACL by the admin) whether exists() would meet ZOOKEEPER-2590."""
        path = self.path(op.path)
        replies = self.send_all(lambda side: side.admin.send(RawRequest(OP_GET_ACL, _string(path), _parse_acl)))
        for reply in replies:
            if reply.err == 0 and not granted(reply.body[0], 1, self.auth[op.slot]):
                return True
        return False

    def learn_from(self, op: Op, reply: Reply) -> None:
        if reply.err != 0:
            return
        if isinstance(op, Create):
            path = reply.body if op.opcode == OP_CREATE else reply.body[0]
            self.learn(path)
        elif isinstance(op, Multi):
            for sub, res in zip(op.ops, reply.body):
                if isinstance(sub, Create) and res[0] != -1:
                    self.learn(res[2])

    def normalize(self, op: Op, reply: Reply, norm: Normalizer) -> Any:
        body = reply.body
        if reply.err == 0 and body is not None:
            body = self.normalize_body(op, body, norm)
        return {"zxid": norm.zxid(reply.zxid), "err": reply.err, "body": body, "size": reply.size,
                "events_before": reply.events_before}

    def normalize_body(self, op: Op, body: Any, norm: Normalizer) -> Any:
        def fix(x: Any) -> Any:
            if isinstance(x, tuple) and len(x) == 11 and all(isinstance(v, int) for v in x):
                return norm.stat(x)
            if isinstance(x, (list, tuple)):
                return [fix(v) for v in x]
            return x
        return fix(body)

    def round_trip(self) -> list[dict[str, Any]]:
        """A sync on every session of both sides; then every event of the step has arrived."""
        pending = [(side, s.send(RawRequest(OP_SYNC, _string("/"), None))) for side in self.sides for s in side.slots]
        for side, p in pending:
            side.get(p, "sync")
        out = []
        for side in self.sides:
            side.check_alive()
            events = {}
            for s in side.slots:
                if s.events:
                    events[s.name] = list(s.events)
                    s.events.clear()
            out.append(events)
        return out

    def setup(self) -> None:
        for side in self.sides:
            side.heal()
        for reply in self.send_all(lambda side: side.admin.send(RawRequest(
                OP_CREATE, _string(self.root) + _buffer(b"") + _acls(OPEN_ACL) + _INT.pack(0), None))):
            assert reply.err == 0, reply
        self.round_trip()

    def finish(self) -> None:
        orders = [n.zxid_order() for n in self.norms]
        if orders[0] != orders[1]:
            raise AssertionError(self.report(f"zxid order differs: zkpy {orders[0]} apache {orders[1]}"))

    def cleanup(self) -> None:
        """Delete every node the example created, deepest first, as the admin; drop the events."""
        doomed = sorted(set(self.created), key=lambda p: (-p.count("/"), p))
        for side in self.sides:
            pending = [side.admin.send(RawRequest(OP_DELETE, _string(p) + _INT.pack(-1), None)) for p in doomed]
            for p in pending:
                side.get(p)
            # anything left (nodes created by sessions we did not learn about): walk and delete
            self.sweep(side, self.root)
        self.round_trip()
        # identities outlive the example: such sessions are replaced, so the next one starts clean
        for side in self.sides:
            side.wait_started([side.replace(slot) for slot in sorted(self.authed)])

    def sweep(self, side: Side, path: str) -> None:
        reply = side.get(side.admin.send(RawRequest(OP_GET_CHILDREN, _path_watch(path, False),
                                                    READ_PARSERS[OP_GET_CHILDREN])))
        if reply.err != 0:
            return
        for child in reply.body:
            self.sweep(side, f"{path}/{child}")
        side.get(side.admin.send(RawRequest(OP_DELETE, _string(path) + _INT.pack(-1), None)))

    def report(self, what: str) -> str:
        lines = "\n".join(self.transcript[-40:])
        return f"{what} (seed {SEED}; ZKPY_DIFF_SEED={SEED} reruns this)\nroot {self.root}\n{lines}"


class Stats:
    """What the run exercised, printed at the end: a cheap check that the generator reaches things."""

    def __init__(self) -> None:
        self.examples = self.steps = self.events = self.skipped = 0
        self.event_types: dict[int, int] = {}
        self.ops: dict[str, int] = {}
        self.errors: dict[int, int] = {}
        self.last: Example | None = None  # for a server that breaks between examples

    def last_report(self) -> str:
        return self.last.report("transcript") if self.last is not None else ""

    def note(self, op: Op, record: dict[str, Any]) -> None:
        self.steps += 1
        name = type(op).__name__.rstrip("_")
        self.ops[name] = self.ops.get(name, 0) + 1
        result = record["result"]
        if isinstance(result, dict):
            self.errors[result["err"]] = self.errors.get(result["err"], 0) + 1
        self.events += sum(len(v) for v in record["events"].values())
        for evs in record["events"].values():
            for etype, _state, _path in evs:
                self.event_types[etype] = self.event_types.get(etype, 0) + 1
        if isinstance(result, str) and result.startswith("skipped"):
            self.skipped += 1

    def __str__(self) -> str:
        return (f"{self.examples} examples, {self.steps} steps, {self.events} watch events "
                f"{dict(sorted(self.event_types.items()))}, {self.skipped} ops skipped; "
                f"ops {dict(sorted(self.ops.items()))}; error codes {dict(sorted(self.errors.items()))}")


STATS = Stats()


@pytest.fixture(scope="module")
def sides() -> Iterator[list[Side]]:
    """A private pair of servers, started once for the module: no other test's session expires,
    nor its TTL node goes, in the middle of an example (a txn on one side only would shift that
    side's zxids). Their container managers run once an hour, so they never race an example:
    the example's empty containers stay until its cleanup, on both sides alike."""
    from tests.conftest import require_apache

    require_apache()
    props = {"znode.container.checkIntervalMs": str(3_600_000)}
    servers = [start_zkpy(props)]
    try:
        servers.append(start_apache(jvm_props=props))
        both = [Side("zkpy", servers[0]), Side("apache", servers[1])]
        yield both
        for side in both:
            side.close()
    finally:
        for server in servers:
            server.cleanup()


def run_program(both: list[Side], program: list[Op]) -> None:
    STATS.examples += 1
    if VERBOSE:
        print(STATS.last_report())
    example = Example(both)
    try:
        example.setup()
    except ServerBroken as exc:
        raise ServerBroken(f"{exc}\nthe example before:\n{STATS.last_report()}") from None
    previous, STATS.last = STATS.last, example
    try:
        for op in program:
            example.step(op)
        example.finish()
    except ServerBroken as exc:
        before = previous.report("transcript") if previous is not None else ""
        raise ServerBroken(f"{exc}\n{example.report('transcript')}\nthe example before:\n{before}") from None
    except BaseException:
        try:
            example.cleanup()
        except Exception:
            pass  # the sessions are healed before the next example
        raise
    try:
        example.cleanup()
    except ServerBroken as exc:
        raise ServerBroken(f"{exc}\nwhile cleaning up after:\n{example.report('transcript')}") from None


def test_zkpy_answers_like_apache(sides: list[Side]) -> None:
    print(f"differential test seed: {SEED} (rerun with ZKPY_DIFF_SEED={SEED})")
    started = time.monotonic()

    @seed(SEED)
    @settings(max_examples=EXAMPLES, deadline=None, print_blob=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.function_scoped_fixture])
    @given(programs)
    def check(program: list[Op]) -> None:
        run_program(sides, program)

    try:
        check()
    except ServerBroken as exc:
        where = "".join(traceback.format_tb(exc.__traceback__)[-4:])
        pytest.fail(f"differential test stopped, a server broke (seed {SEED}):\n{exc}\n{where}", pytrace=False)
    except BaseException:
        print(f"differential test failed; seed {SEED} (rerun with ZKPY_DIFF_SEED={SEED})")
        raise
    print(f"{EXAMPLES} examples in {time.monotonic() - started:.1f}s: {STATS}")
    for side in sides:  # every example cleaned up after itself
        reply = side.get(side.admin.send(RawRequest(OP_GET_CHILDREN, _path_watch("/", False),
                                                    READ_PARSERS[OP_GET_CHILDREN])))
        assert not [c for c in reply.body if c.startswith("zkdiff-")], (side.kind, reply.body)
