"""Reply frames captured from a real Apache ZooKeeper 3.8 (golden/apache-3.8.txt, made by
golden/capture.py): zkpy decodes each to the expected records, consuming every byte, and
re-encodes the identical bytes. kazoo's deserializers, an independent reader, agree.

Times, zxids and session ids change with each capture, so they are checked against each other
(a create's czxid is its reply's zxid, an ephemeral's owner is the connect response's session),
never against constants.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kazoo.protocol import serialization as ks

from zkpy.wire.consts import EventType, KeeperState, OpCode, Xid
from zkpy.wire.multi import OpResult, read_multi_response, write_multi_response
from zkpy.wire.proto import (
    ACL,
    ConnectResponse,
    Create2Response,
    CreateResponse,
    ErrorResponse,
    ExistsResponse,
    GetACLResponse,
    GetAllChildrenNumberResponse,
    GetChildren2Response,
    GetChildrenResponse,
    GetDataResponse,
    GetEphemeralsResponse,
    Id,
    ReplyHeader,
    SetACLResponse,
    SetDataResponse,
    Stat,
    SyncResponse,
    WatcherEvent,
    WhoAmIResponse,
)

GOLDEN = Path(__file__).parent / "golden" / "apache-3.8.txt"


def load() -> dict[str, bytes]:
    frames = {}
    for line in GOLDEN.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            name, hexdata = line.split()
            frames[name] = bytes.fromhex(hexdata)
    return frames


FRAMES = load()

_MULTI = "multi"
# the record after the ReplyHeader of each captured reply (None: the header only)
BODY: dict[str, Any] = {
    "create_response": CreateResponse,
    "create2_response": Create2Response,
    "create2_ephemeral_response": Create2Response,
    "create_sequential_response": CreateResponse,
    "get_data_response": GetDataResponse,
    "get_children_response": GetChildrenResponse,
    "get_children2_response": GetChildren2Response,
    "exists_response": ExistsResponse,
    "exists_no_node": None,
    "get_acl_response": GetACLResponse,
    "set_data_response": SetDataResponse,
    "notification_node_data_changed": WatcherEvent,
    "error_bad_version": None,
    "error_node_exists": None,
    "error_not_empty": None,
    "error_no_node": None,
    "error_no_auth": None,
    "error_bad_arguments": None,
    "create_child_response": CreateResponse,
    "notification_node_children_changed": WatcherEvent,
    "multi_response": _MULTI,
    "multi_error_response": _MULTI,
    "multi_read_response": _MULTI,
    "sync_response": SyncResponse,
    "ping_response": None,
    "set_acl_response": SetACLResponse,
    "get_all_children_number_response": GetAllChildrenNumberResponse,
    "get_ephemerals_response": GetEphemeralsResponse,
    "add_watch_response": ErrorResponse,
    "auth_response": None,
    "who_am_i_response": WhoAmIResponse,
    "delete_response": None,
    "notification_persistent_node_deleted": WatcherEvent,
    "exists_watch_on_ephemeral": ExistsResponse,
    "close_session_response": None,
    "notification_node_deleted": WatcherEvent,
    "error_unimplemented": None,
}
CONNECT = ("connect_response", "connect_response_old_client", "connect_response_invalid_session")


def decode(name: str) -> tuple[ReplyHeader, Any]:
    """The reply's header and body record (a list of OpResult for multis), every byte consumed,
    and the same bytes when zkpy encodes them again."""
    data = FRAMES[name]
    hdr, pos = ReplyHeader.read(data, 0)
    kind = BODY[name]
    out = bytearray(hdr.to_bytes())
    if kind is None:
        body: Any = None
    elif kind == _MULTI:
        body, pos = read_multi_response(data, pos)
        write_multi_response(out, body)
    else:
        body, pos = kind.read(data, pos)
        body.write(out)
    assert pos == len(data), f"{name}: {len(data) - pos} bytes left over"
    assert bytes(out) == data, f"{name}: zkpy re-encodes different bytes"
    return hdr, body


def test_the_golden_file_and_this_test_name_the_same_frames() -> None:
    assert set(FRAMES) == set(BODY) | set(CONNECT)


@pytest.mark.parametrize("name", sorted(BODY))
def test_reply_decodes_and_re_encodes_identically(name: str) -> None:
    decode(name)


@pytest.mark.parametrize("name", CONNECT)
def test_connect_response_decodes_and_re_encodes_identically(name: str) -> None:
    data = FRAMES[name]
    rsp, pos = ConnectResponse.read(data, 0)
    assert rsp.to_bytes() == data[:pos]
    # a client that sent the readOnly byte gets one back (false); an old client does not
    assert data[pos:] == (b"" if name == "connect_response_old_client" else b"\x00")
    assert rsp.protocolVersion == 0
    assert len(rsp.passwd or b"") == 16
    if name == "connect_response_invalid_session":
        assert (rsp.timeOut, rsp.sessionId, rsp.passwd) == (0, 0, bytes(16))
    else:
        assert rsp.timeOut == 30000 and rsp.sessionId != 0


def session_a() -> int:
    return ConnectResponse.from_bytes(FRAMES["connect_response"]).sessionId


def test_creates_report_their_path_and_stat() -> None:
    hdr, rsp = decode("create_response")
    assert (hdr.xid, hdr.err, rsp.path) == (1, 0, "/golden")
    hdr, rsp = decode("create2_response")
    s = rsp.stat
    assert rsp.path == "/golden/a"
    assert s.czxid == s.mzxid == s.pzxid == hdr.zxid
    assert s.ctime == s.mtime > 1_600_000_000_000
    assert (s.version, s.cversion, s.aversion, s.ephemeralOwner, s.dataLength, s.numChildren) == (0, 0, 0, 0, 5, 0)
    hdr, rsp = decode("create2_ephemeral_response")
    assert rsp.stat.ephemeralOwner == session_a()
    assert decode("create_sequential_response")[1].path == "/golden/s-0000000002"


def test_reads_show_what_was_written() -> None:
    created = decode("create2_response")[1].stat
    hdr, rsp = decode("get_data_response")
    assert (rsp.data, rsp.stat) == (b"hello", created)
    assert sorted(decode("get_children_response")[1].children) == ["a", "e", "s-0000000002"]
    hdr, rsp = decode("get_children2_response")
    assert sorted(rsp.children) == ["a", "e", "s-0000000002"]
    root = rsp.stat
    assert (root.czxid, root.numChildren, root.cversion, root.dataLength) == (decode("create_response")[0].zxid, 3, 3, 4)
    assert decode("exists_response")[1].stat == created
    hdr, rsp = decode("get_acl_response")
    assert rsp.acl == [ACL(1, Id("world", "anyone"))]
    assert rsp.stat.ephemeralOwner == 0
    assert decode("exists_watch_on_ephemeral")[1].stat.ephemeralOwner == session_a()


def test_writes_report_the_new_stat() -> None:
    created = decode("create2_response")[1].stat
    hdr, rsp = decode("set_data_response")
    assert (rsp.stat.version, rsp.stat.dataLength, rsp.stat.mzxid, rsp.stat.czxid) == (1, 5, hdr.zxid, created.czxid)
    hdr, rsp = decode("set_acl_response")
    assert (rsp.stat.aversion, rsp.stat.version) == (1, 0)


@pytest.mark.parametrize("name, err", [
    ("exists_no_node", -101), ("error_bad_version", -103), ("error_node_exists", -110),
    ("error_not_empty", -111), ("error_no_node", -101), ("error_no_auth", -102),
    ("error_bad_arguments", -8), ("error_unimplemented", -6),
])
def test_error_replies_are_a_bare_header(name: str, err: int) -> None:
    hdr, body = decode(name)
    assert (hdr.err, body, len(FRAMES[name])) == (err, None, 16)


def test_unimplemented_reply_carries_zxid_minus_one() -> None:
    assert decode("error_unimplemented")[0].zxid == -1


@pytest.mark.parametrize("name, event, path", [
    ("notification_node_data_changed", EventType.NODE_DATA_CHANGED, "/golden/a"),
    ("notification_node_children_changed", EventType.NODE_CHILDREN_CHANGED, "/golden"),
    ("notification_persistent_node_deleted", EventType.NODE_DELETED, "/golden/c"),
    ("notification_node_deleted", EventType.NODE_DELETED, "/golden/e"),
])
def test_watch_notifications(name: str, event: int, path: str) -> None:
    hdr, ev = decode(name)
    assert hdr == ReplyHeader(Xid.NOTIFICATION, -1, 0)
    assert ev == WatcherEvent(event, KeeperState.SYNC_CONNECTED, path)


def test_multi_results() -> None:
    hdr, results = decode("multi_response")
    assert hdr.err == 0
    # ZooKeeper 3.8 reads a create2 inside a multi as a plain create: path only, no stat
    assert [(r.type, r.err, r.path) for r in results] == [
        (OpCode.CHECK, 0, None), (OpCode.CREATE, 0, "/golden/m"), (OpCode.CREATE, 0, "/golden/m2"),
        (OpCode.SET_DATA, 0, None), (OpCode.DELETE, 0, None)]
    assert results[3].stat is not None and results[3].stat.version == 1 and results[3].stat.mzxid == hdr.zxid
    hdr, results = decode("multi_error_response")
    assert hdr.err == 0  # the failure is in the results, not the header
    assert results == [OpResult(OpCode.ERROR, 0), OpResult(OpCode.ERROR, -103), OpResult(OpCode.ERROR, -2)]
    hdr, results = decode("multi_read_response")
    assert [(r.type, r.err) for r in results] == [(OpCode.GET_DATA, 0), (OpCode.GET_CHILDREN, 0), (OpCode.ERROR, -101)]
    assert results[0].data == b"world" and results[0].stat is not None and results[0].stat.version == 1
    assert results[1].children == []


def test_the_other_replies() -> None:
    assert decode("sync_response")[1] == SyncResponse("/golden")
    hdr, _ = decode("ping_response")
    assert (hdr.xid, hdr.err) == (Xid.PING, 0)
    assert decode("get_all_children_number_response")[1] == GetAllChildrenNumberResponse(5)
    assert decode("get_ephemerals_response")[1] == GetEphemeralsResponse(["/golden/e"])
    assert decode("add_watch_response")[1] == ErrorResponse(0)
    assert decode("auth_response")[0] == ReplyHeader(Xid.AUTH, 0, 0)
    infos = decode("who_am_i_response")[1].clientInfo
    assert [(i.authScheme, i.user) for i in infos] == [("ip", "127.0.0.1"), ("digest", "user")]
    assert decode("delete_response")[0].err == 0
    assert decode("close_session_response")[0].err == 0


# ---- an independent reader: kazoo's deserializers agree with zkpy's decoding ----


def _kstat(stat: Stat) -> tuple[int, ...]:
    return tuple(getattr(stat, f) for f in ("czxid", "mzxid", "ctime", "mtime", "version", "cversion",
                                            "aversion", "ephemeralOwner", "dataLength", "numChildren", "pzxid"))


def test_kazoo_reads_the_golden_frames_as_zkpy_does() -> None:
    def body(name: str) -> bytes:
        return FRAMES[name][16:]

    for name in BODY:
        assert tuple(ks.ReplyHeader.deserialize(FRAMES[name], 0)[0]) == tuple(
            getattr(decode(name)[0], f) for f in ("xid", "zxid", "err"))
    data, stat = ks.GetData.deserialize(body("get_data_response"), 0)
    rsp = decode("get_data_response")[1]
    assert (data, tuple(stat)) == (rsp.data, _kstat(rsp.stat))
    path, stat = ks.Create2.deserialize(body("create2_response"), 0)
    rsp = decode("create2_response")[1]
    assert (path, tuple(stat)) == (rsp.path, _kstat(rsp.stat))
    children, stat = ks.GetChildren2.deserialize(body("get_children2_response"), 0)
    rsp = decode("get_children2_response")[1]
    assert (children, tuple(stat)) == (rsp.children, _kstat(rsp.stat))
    acls, stat = ks.GetACL.deserialize(body("get_acl_response"), 0)
    assert [(a.perms, a.id.scheme, a.id.id) for a in acls] == [(1, "world", "anyone")]
    assert tuple(ks.Exists.deserialize(body("exists_response"), 0)) == _kstat(decode("exists_response")[1].stat)
    assert ks.GetChildren.deserialize(body("get_children_response"), 0) == decode("get_children_response")[1].children
    ev = decode("notification_node_data_changed")[1]
    assert tuple(ks.Watch.deserialize(body("notification_node_data_changed"), 0)[0]) == (ev.type, ev.state, ev.path)
    results = ks.Transaction.deserialize(body("multi_response"), 0)
    assert results[1:3] == ["/golden/m", "/golden/m2"]
    connect, _ = ks.Connect.deserialize(FRAMES["connect_response"], 0)
    rsp = ConnectResponse.from_bytes(FRAMES["connect_response"])
    assert (connect.time_out, connect.session_id, connect.passwd, connect.read_only) == (
        rsp.timeOut, rsp.sessionId, rsp.passwd, False)
