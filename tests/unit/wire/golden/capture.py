"""Capture reply frames from a real Apache ZooKeeper 3.8 into apache-3.8.txt (the golden file).

    python tests/unit/wire/golden/capture.py            # starts Debian's ZooKeeper, writes the file

Two raw sessions on 127.0.0.1 send a fixed script of requests (paths, data, ACLs and versions
are constants, so every reply has the same shape on every run); each reply frame is stored as
hex, its 4-byte length prefix stripped. Times, zxids, session ids and passwords differ from run
to run: test_wire_golden.py checks them against each other (a create's czxid is its reply's zxid,
an ephemeral's owner is the connect response's session id), never against constants.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # tests/, for helpers.rawzk

from helpers.rawzk import RawConn, connect_request_bytes  # noqa: E402
from zkpy.testing.servers import ZK_JAR, four_letter, start_apache  # noqa: E402
from zkpy.wire.consts import AddWatchMode, OpCode  # noqa: E402
from zkpy.wire.multi import Op, write_multi_request  # noqa: E402
from zkpy.wire.proto import (  # noqa: E402
    ACL,
    AddWatchRequest,
    AuthPacket,
    CheckVersionRequest,
    CreateRequest,
    DeleteRequest,
    ExistsRequest,
    GetACLRequest,
    GetAllChildrenNumberRequest,
    GetChildren2Request,
    GetChildrenRequest,
    GetDataRequest,
    GetEphemeralsRequest,
    Id,
    SetACLRequest,
    SetDataRequest,
    SyncRequest,
)

GOLDEN = HERE / "apache-3.8.txt"
OPEN = [ACL(31, Id("world", "anyone"))]
READ_ONLY = [ACL(1, Id("world", "anyone"))]


def _multi(*ops: Op) -> bytes:
    out = bytearray()
    write_multi_request(out, list(ops))
    return bytes(out)


class Recorder:
    def __init__(self) -> None:
        self.frames: list[tuple[str, bytes]] = []

    def add(self, name: str, payload: bytes | None) -> None:
        assert payload is not None, f"{name}: the server closed the connection"
        self.frames.append((name, payload))

    def call(self, conn: RawConn, name: str, xid: int, op: int, body: bytes = b"") -> None:
        """Send one request and record its reply (notifications before it are an error here)."""
        conn.send_request(xid, op, body)
        payload = conn.read_frame()
        self.add(name, payload)


def capture(port: int) -> list[tuple[str, bytes]]:
    rec = Recorder()
    a = RawConn(port)
    a.send_frame(connect_request_bytes(timeout_ms=30000))
    rec.add("connect_response", a.read_frame())
    b = RawConn(port)
    b.send_frame(connect_request_bytes(timeout_ms=30000, read_only=None))
    rec.add("connect_response_old_client", b.read_frame())

    rec.call(a, "create_response", 1, OpCode.CREATE, CreateRequest("/golden", b"root", OPEN, 0).to_bytes())
    rec.call(a, "create2_response", 2, OpCode.CREATE2, CreateRequest("/golden/a", b"hello", OPEN, 0).to_bytes())
    rec.call(a, "create2_ephemeral_response", 3, OpCode.CREATE2,
             CreateRequest("/golden/e", b"", OPEN, 1).to_bytes())
    rec.call(a, "create_sequential_response", 4, OpCode.CREATE,
             CreateRequest("/golden/s-", None, READ_ONLY, 2).to_bytes())
    rec.call(a, "get_data_response", 5, OpCode.GET_DATA, GetDataRequest("/golden/a", True).to_bytes())
    rec.call(a, "get_children_response", 6, OpCode.GET_CHILDREN, GetChildrenRequest("/golden", False).to_bytes())
    rec.call(a, "get_children2_response", 7, OpCode.GET_CHILDREN2,
             GetChildren2Request("/golden", True).to_bytes())
    rec.call(a, "exists_response", 8, OpCode.EXISTS, ExistsRequest("/golden/a", False).to_bytes())
    rec.call(a, "exists_no_node", 9, OpCode.EXISTS, ExistsRequest("/golden/missing", False).to_bytes())
    rec.call(a, "get_acl_response", 10, OpCode.GET_ACL, GetACLRequest("/golden/s-0000000002").to_bytes())
    # b changes /golden/a: a's data watch fires before b's reply could be seen by a
    rec.call(b, "set_data_response", 1, OpCode.SET_DATA, SetDataRequest("/golden/a", b"world", 0).to_bytes())
    rec.add("notification_node_data_changed", a.read_frame())
    rec.call(b, "error_bad_version", 2, OpCode.SET_DATA, SetDataRequest("/golden/a", b"x", 99).to_bytes())
    rec.call(b, "error_node_exists", 3, OpCode.CREATE, CreateRequest("/golden/a", b"", OPEN, 0).to_bytes())
    rec.call(b, "error_not_empty", 4, OpCode.DELETE, DeleteRequest("/golden", -1).to_bytes())
    rec.call(b, "error_no_node", 5, OpCode.GET_DATA, GetDataRequest("/golden/missing", False).to_bytes())
    rec.call(b, "error_no_auth", 6, OpCode.SET_DATA, SetDataRequest("/golden/s-0000000002", b"", -1).to_bytes())
    rec.call(b, "error_bad_arguments", 7, OpCode.CREATE, CreateRequest("/golden/", b"", OPEN, 0).to_bytes())
    # b creates a child of /golden: a's child watch (getChildren2 above) fires
    rec.call(b, "create_child_response", 8, OpCode.CREATE, CreateRequest("/golden/c", b"", OPEN, 0).to_bytes())
    rec.add("notification_node_children_changed", a.read_frame())
    rec.call(a, "multi_response", 11, OpCode.MULTI, _multi(
        Op(OpCode.CHECK, CheckVersionRequest("/golden/a", 1)),
        Op(OpCode.CREATE, CreateRequest("/golden/m", b"m", OPEN, 0)),
        Op(OpCode.CREATE2, CreateRequest("/golden/m2", b"", OPEN, 0)),
        Op(OpCode.SET_DATA, SetDataRequest("/golden/m", b"mm", 0)),
        Op(OpCode.DELETE, DeleteRequest("/golden/m", 1))))
    rec.call(a, "multi_error_response", 12, OpCode.MULTI, _multi(
        Op(OpCode.CREATE, CreateRequest("/golden/x", b"", OPEN, 0)),
        Op(OpCode.CHECK, CheckVersionRequest("/golden/a", 99)),
        Op(OpCode.DELETE, DeleteRequest("/golden/a", -1))))
    rec.call(a, "multi_read_response", 13, OpCode.MULTI_READ, _multi(
        Op(OpCode.GET_DATA, GetDataRequest("/golden/a", False)),
        Op(OpCode.GET_CHILDREN, GetChildrenRequest("/golden/m2", False)),
        Op(OpCode.GET_DATA, GetDataRequest("/golden/missing", False))))
    rec.call(a, "sync_response", 14, OpCode.SYNC, SyncRequest("/golden").to_bytes())
    rec.call(a, "ping_response", -2, OpCode.PING)
    rec.call(a, "set_acl_response", 15, OpCode.SET_ACL, SetACLRequest("/golden/c", READ_ONLY, 0).to_bytes())
    rec.call(a, "get_all_children_number_response", 16, OpCode.GET_ALL_CHILDREN_NUMBER,
             GetAllChildrenNumberRequest("/golden").to_bytes())
    rec.call(a, "get_ephemerals_response", 17, OpCode.GET_EPHEMERALS, GetEphemeralsRequest("/golden").to_bytes())
    rec.call(a, "add_watch_response", 18, OpCode.ADD_WATCH,
             AddWatchRequest("/golden/c", AddWatchMode.PERSISTENT).to_bytes())
    rec.call(a, "auth_response", -4, OpCode.AUTH, AuthPacket(0, "digest", b"user:secret").to_bytes())
    rec.call(a, "who_am_i_response", 19, OpCode.WHO_AM_I)
    # a's persistent watch on /golden/c fires on b's delete (a persistent watch sees every change)
    rec.call(b, "delete_response", 9, OpCode.DELETE, DeleteRequest("/golden/c", -1).to_bytes())
    rec.add("notification_persistent_node_deleted", a.read_frame())
    rec.call(b, "exists_watch_on_ephemeral", 10, OpCode.EXISTS, ExistsRequest("/golden/e", True).to_bytes())
    # a closes: its ephemeral goes, b's exists watch fires
    rec.call(a, "close_session_response", 20, OpCode.CLOSE_SESSION)
    rec.add("notification_node_deleted", b.read_frame())
    rec.call(b, "error_unimplemented", 11, 999)
    a.close()
    b.close()

    c = RawConn(port)
    c.send_frame(connect_request_bytes(session_id=0x0FEDCBA987654321, passwd=b"p" * 16))
    rec.add("connect_response_invalid_session", c.read_frame())
    c.close()
    return rec.frames


def write_golden(frames: list[tuple[str, bytes]], version: str) -> None:
    lines = [
        "# Reply frames captured from a real Apache ZooKeeper, by tests/unit/wire/golden/capture.py.",
        f"# Server: {version} (Debian's zookeeper package, {os.path.realpath(ZK_JAR)}),",
        "# standalone on 127.0.0.1, started by zkpy.testing.servers.start_apache(); two raw sessions",
        "# send a fixed script of requests (see capture.py) and each reply frame is recorded as",
        f"# hex, without its 4-byte length prefix. Captured {time.strftime('%Y-%m-%d', time.gmtime())}.",
        "# Format: <name> <hex>",
    ]
    lines += [f"{name} {payload.hex()}" for name, payload in frames]
    GOLDEN.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    server = start_apache()
    try:
        version = four_letter(server.port, "srvr").splitlines()[0].removeprefix("Zookeeper version: ")
        frames = capture(server.port)
    finally:
        server.cleanup()
    write_golden(frames, f"Apache ZooKeeper {version.split(',')[0]}")
    print(f"wrote {len(frames)} frames to {GOLDEN}")


if __name__ == "__main__":
    main()
