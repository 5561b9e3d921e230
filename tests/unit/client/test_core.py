"""ClientCore as transcripts: bytes and now_ms in, bytes and events out; no sockets, no clock."""

from __future__ import annotations

import random
import re

import pytest

from zkpy.client.core import (
    RW_PROBE_MAX_MS,
    RW_PROBE_MIN_MS,
    SET_WATCHES_MAX_LENGTH,
    ClientCore,
    ClientState,
    Connected,
    Reply,
    RequestFailed,
    StateChanged,
    WatchedEvent,
    WatchFired,
    WatchRegistration,
    WatchRemoval,
    parse_hosts,
)
from zkpy.errors import (
    AuthFailedError,
    ConnectionClosedError,
    ConnectionLoss,
    InvariantError,
    NoNodeError,
    ProtocolError,
    SessionExpiredError,
)
from zkpy.wire.consts import EventType, KeeperState, OpCode, WatcherType, Xid
from zkpy.wire.framing import FrameDecoder
from zkpy.wire.jute import INT
from zkpy.wire.multi import Op, OpResult, read_multi_request, write_multi_response
from zkpy.wire.proto import (
    AuthPacket,
    ConnectRequest,
    ConnectResponse,
    CreateRequest,
    CreateResponse,
    ExistsRequest,
    GetDataRequest,
    GetDataResponse,
    ReplyHeader,
    RequestHeader,
    SetWatches,
    SetWatches2,
    Stat,
    WatcherEvent,
)

STAT = Stat(1, 2, 3, 4, 5, 6, 7, 0, 1, 0, 9)
PASSWD = b"p" * 16


def frame(payload: bytes) -> bytes:
    return INT.pack(len(payload)) + payload


def connect_response(timeout: int = 9000, session_id: int = 0x55, read_only: bool = False) -> bytes:
    return frame(ConnectResponse(0, timeout, session_id, PASSWD).to_bytes() + (b"\x01" if read_only else b"\x00"))


def reply(xid: int, zxid: int = 0, err: int = 0, body: bytes = b"") -> bytes:
    return frame(ReplyHeader(xid, zxid, err).to_bytes() + body)


def notification(etype: EventType, path: str) -> bytes:
    return reply(Xid.NOTIFICATION, -1, 0, WatcherEvent(int(etype), int(KeeperState.SYNC_CONNECTED), path).to_bytes())


def sent_frames(data: bytes) -> list[bytes]:
    d = FrameDecoder(1 << 30)
    d.feed(data)
    return d.frames()


def connected_core(hosts: str = "h1:1", **kw: object) -> ClientCore:
    core = ClientCore(hosts, session_timeout_ms=9000, **kw)  # type: ignore[arg-type]
    core.connection_made(0)
    core.receive(connect_response(), 0)
    return core


def events_of(events: list, cls: type) -> list:
    return [e for e in events if isinstance(e, cls)]


# ---------------------------------------------------------------- hosts


def test_connect_string_parses_hosts_ports_and_chroot() -> None:
    assert parse_hosts("a:1,b:2/app/x") == ([("a", 1), ("b", 2)], "/app/x")
    assert parse_hosts("a,[::1]:3/") == ([("a", 2181), ("::1", 3)], None)
    with pytest.raises(ValueError):
        parse_hosts("a:1/app/")


def test_connect_string_defaults_the_port_and_takes_ipv6_bare_or_in_brackets() -> None:
    assert parse_hosts("a:,[::1]:,::1,[fe80::1]:2182") == ([("a", 2181), ("::1", 2181), ("::1", 2181),
                                                             ("fe80::1", 2182)], None)


@pytest.mark.parametrize(("text", "message"), [
    ("", "no host:port given"),
    (" , /app", "no host:port given"),
    ("a:x", "'a:x' has no valid port"),
    ("a:0", "'a:0' has no valid port"),
    ("a:65536", "'a:65536' has no valid port"),
    ("[::1", "'[::1' has '[' and no ']'"),
    ("[::1]x", "'[::1]x' is not host:port"),
    (":2181", "':2181' is not host:port"),
])
def test_a_malformed_connect_string_names_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        parse_hosts(text)


def test_hosts_are_shuffled_once_by_the_injected_rng_and_tried_round_robin() -> None:
    a = ClientCore("a:1,b:2,c:3,d:4", rng=random.Random(7))
    b = ClientCore("a:1,b:2,c:3,d:4", rng=random.Random(7))
    assert a.hosts == b.hosts and sorted(a.hosts) == [("a", 1), ("b", 2), ("c", 3), ("d", 4)]
    tried = [a.next_host() for _ in range(8)]
    assert tried[:4] == a.hosts and tried[4:] == a.hosts


def test_backoff_only_after_every_host_failed() -> None:
    core = ClientCore("a:1,b:2")
    core.next_host()
    assert core.backoff_ms() == 0
    core.next_host()
    assert core.backoff_ms() > 0


# ---------------------------------------------------------------- handshake


def test_handshake_sends_connect_request_with_read_only_byte_and_reaches_connected() -> None:
    core = ClientCore("h:1", session_timeout_ms=9000, read_only=True)
    (payload,) = sent_frames(core.connection_made(0))
    req, pos = ConnectRequest.read(payload, 0)
    assert req == ConnectRequest(0, 0, 9000, 0, bytes(16))
    assert payload[pos:] == b"\x01"
    events = core.receive(connect_response(timeout=6000, session_id=0x99), 5)
    assert events[0] == StateChanged(ClientState.CONNECTING, ClientState.CONNECTED)
    assert isinstance(events[1], Connected) and events[1].session_id == 0x99 and events[1].setup == b""
    assert core.negotiated_timeout_ms == 6000 and core.session_passwd == PASSWD


def test_read_only_server_gives_connected_read_only() -> None:
    core = ClientCore("h:1", read_only=True)
    core.connection_made(0)
    events = core.receive(connect_response(read_only=True), 0)
    assert events[0].new is ClientState.CONNECTED_READ_ONLY


def test_a_read_only_client_probes_the_other_hosts_with_backoff_and_moves_to_a_read_write_one() -> None:
    """ClientCnxn.pingRwServer: the first probe 100 ms after connecting read-only, then at doubling
    intervals (capped at a minute), never the host connected to; the host that answers rw is the
    next one connected to, with a new session (the read-only one was local to its server)."""
    core = ClientCore("h1:1,h2:2,h3:3", read_only=True)
    connected_to = core.next_host()
    core.connection_made(0)
    core.receive(connect_response(read_only=True, session_id=0x77), 0)
    assert core.next_rw_probe_ms() == RW_PROBE_MIN_MS
    assert core.rw_probe(RW_PROBE_MIN_MS - 1) is None
    probed: list[tuple[str, int]] = []
    t = RW_PROBE_MIN_MS
    for _ in range(12):
        host = core.rw_probe(t)
        assert host is not None and host != connected_to
        probed.append(host)
        t = core.next_rw_probe_ms()  # type: ignore[assignment]
    assert set(probed) == {h for h in core.hosts if h != connected_to}
    intervals = []
    last = core.next_rw_probe_ms()
    for _ in range(3):
        assert core.rw_probe(last) is not None
        nxt = core.next_rw_probe_ms()
        assert nxt is not None
        intervals.append(nxt - last)
        last = nxt
    assert intervals == [RW_PROBE_MAX_MS] * 3
    core.rw_server_found(probed[0])
    core.connection_lost()
    assert core.next_rw_probe_ms() is None  # not connected: no probe
    assert core.next_host() == probed[0]
    request = core.connection_made(10)
    assert ConnectRequest.read(request[4:], 0)[0].sessionId == 0  # only ever had a read-only session
    core.receive(connect_response(session_id=0x88), 10)
    assert core.state is ClientState.CONNECTED and core.session_id == 0x88
    assert core.next_rw_probe_ms() is None


def test_session_refused_with_a_bare_reply_header_is_a_protocol_error_naming_the_code() -> None:
    # Apache 3.8's read-only server without local sessions answers createSession with NOTREADONLY
    core = ClientCore("h:1", read_only=True)
    core.connection_made(0)
    with pytest.raises(ProtocolError, match="NotReadOnlyCallError"):
        core.receive(frame(ReplyHeader(0, 1 << 32, -119).to_bytes()), 0)
    assert core.state is ClientState.CONNECTING
    assert core.connection_lost() == []


def test_truncated_connect_response_is_a_protocol_error() -> None:
    core = ClientCore("h:1")
    core.connection_made(0)
    with pytest.raises(ProtocolError):
        core.receive(frame(connect_response()[4:14]), 0)


def test_handshake_split_across_reads_waits_for_the_whole_frame() -> None:
    core = ClientCore("h:1")
    core.connection_made(0)
    data = connect_response()
    assert core.receive(data[:7], 0) == []
    assert core.state is ClientState.CONNECTING
    assert len(core.receive(data[7:], 0)) == 2


def test_reconnect_sends_session_id_password_and_last_zxid() -> None:
    core = connected_core()
    core.receive(b"", 0)
    core.request(OpCode.GET_DATA, GetDataRequest("/a", False), "h")
    core.receive(reply(1, zxid=0x42, body=GetDataResponse(b"", STAT).to_bytes()), 0)
    assert core.last_zxid == 0x42
    assert core.connection_lost() == [StateChanged(ClientState.CONNECTED, ClientState.SUSPENDED)]
    (payload,) = sent_frames(core.connection_made(10))
    req, _ = ConnectRequest.read(payload, 0)
    assert (req.sessionId, req.passwd, req.lastZxidSeen) == (0x55, PASSWD, 0x42)
    events = core.receive(connect_response(), 10)
    assert events[0] == StateChanged(ClientState.SUSPENDED, ClientState.CONNECTED)


def test_timeout_zero_in_connect_response_means_expired_once() -> None:
    core = connected_core()
    seen: list[WatchedEvent] = []
    core.request(OpCode.GET_DATA, GetDataRequest("/a", True), "get", watch=WatchRegistration("data", "/a", seen.append))
    core.receive(reply(1, body=GetDataResponse(b"", STAT).to_bytes()), 0)
    core.connection_lost()
    core.connection_made(1)
    events = core.receive(connect_response(timeout=0), 1)
    assert events[0] == StateChanged(ClientState.SUSPENDED, ClientState.EXPIRED)
    (fired,) = events_of(events, WatchFired)
    assert fired.event == WatchedEvent(EventType.NONE, KeeperState.EXPIRED, None)
    assert fired.callbacks == (seen.append,)
    assert core.watches("data") == {}
    assert not core.has_connection
    with pytest.raises(SessionExpiredError):
        core.request(OpCode.GET_DATA, GetDataRequest("/a", False), "x")
    with pytest.raises(InvariantError):
        core.connection_made(2)


# ---------------------------------------------------------------- requests and FIFO


def test_requests_get_increasing_xids_and_replies_match_in_fifo_order() -> None:
    core = connected_core()
    f1 = sent_frames(core.request(OpCode.GET_DATA, GetDataRequest("/a", False), "first"))[0]
    f2 = sent_frames(core.request(OpCode.EXISTS, ExistsRequest("/b", False), "second"))[0]
    assert RequestHeader.read(f1, 0)[0] == RequestHeader(1, OpCode.GET_DATA)
    assert RequestHeader.read(f2, 0)[0] == RequestHeader(2, OpCode.EXISTS)
    events = core.receive(reply(1, 7, 0, GetDataResponse(b"v", STAT).to_bytes()) + reply(2, 7, -101), 0)
    first, second = events
    assert isinstance(first, Reply) and first.handle == "first" and first.response == GetDataResponse(b"v", STAT)
    assert isinstance(second, Reply) and second.handle == "second" and isinstance(second.error, NoNodeError)
    assert core.pending_count == 0


def test_reply_out_of_order_is_a_protocol_error() -> None:
    core = connected_core()
    core.request(OpCode.GET_DATA, GetDataRequest("/a", False), "h")
    with pytest.raises(ProtocolError):
        core.receive(reply(5), 0)


def test_xid_wraps_to_one() -> None:
    core = connected_core()
    core._xid = 0x7FFFFFFF
    data = core.request(OpCode.GET_DATA, GetDataRequest("/a", False), "h")
    assert RequestHeader.read(sent_frames(data)[0], 0)[0].xid == 1


def test_connection_loss_fails_every_pending_request_in_order() -> None:
    core = connected_core()
    core.request(OpCode.GET_DATA, GetDataRequest("/a", False), "a")
    core.request(OpCode.GET_DATA, GetDataRequest("/b", False), "b")
    events = core.connection_lost()
    failed = events_of(events, RequestFailed)
    assert [f.handle for f in failed] == ["a", "b"]
    assert all(isinstance(f.error, ConnectionLoss) for f in failed)
    with pytest.raises(ConnectionLoss):
        core.request(OpCode.GET_DATA, GetDataRequest("/a", False), "c")


def test_close_fails_pending_requests_with_connection_closed() -> None:
    core = connected_core()
    core.request(OpCode.GET_DATA, GetDataRequest("/a", False), "a")
    failed = events_of(core.close(), RequestFailed)
    assert [type(f.error) for f in failed] == [ConnectionClosedError]
    with pytest.raises(ConnectionClosedError):
        core.request(OpCode.GET_DATA, GetDataRequest("/a", False), "b")


def test_pings_are_not_matched_against_pending_requests() -> None:
    core = connected_core()
    core.request(OpCode.GET_DATA, GetDataRequest("/a", False), "a")
    events = core.receive(reply(Xid.PING, 0), 0)
    assert events == [] and core.pending_count == 1


def test_multi_is_framed_and_its_results_come_back_per_op() -> None:
    core = connected_core("h:1/app")
    data = core.request(OpCode.MULTI, [Op(OpCode.CREATE, CreateRequest("/x", b"", [], 0))], "m")
    payload = sent_frames(data)[0]
    ops, _ = read_multi_request(payload, 8)
    assert ops[0].request.path == "/app/x"
    body = bytearray()
    write_multi_response(body, [OpResult(OpCode.CREATE, 0, path="/app/x")])
    (ev,) = core.receive(reply(1, 3, 0, bytes(body)), 0)
    assert ev.response == [OpResult(OpCode.CREATE, 0, path="/x")]


def test_close_session_reply_closes() -> None:
    core = connected_core()
    core.close_request("c")
    events = core.receive(reply(1, 0, 0), 0)
    assert events[0].handle == "c" and events[1] == StateChanged(ClientState.CONNECTED, ClientState.CLOSED)


# ---------------------------------------------------------------- chroot


def test_chroot_is_prepended_going_out_and_stripped_coming_in() -> None:
    core = connected_core("h:1/app")
    payload = sent_frames(core.request(OpCode.CREATE, CreateRequest("/x", b"", [], 0), "c"))[0]
    assert CreateRequest.read(payload, 8)[0].path == "/app/x"
    payload = sent_frames(core.request(OpCode.GET_DATA, GetDataRequest("/", False), "g"))[0]
    assert GetDataRequest.read(payload, 8)[0].path == "/app"
    (ev,) = core.receive(reply(1, 1, 0, CreateResponse("/app/x").to_bytes()), 0)
    assert ev.response.path == "/x"
    assert core.client_path("/app") == "/" and core.client_path("/apple") == "/apple"


def test_watch_event_paths_are_stripped_of_the_chroot() -> None:
    core = connected_core("h:1/app")
    seen: list[WatchedEvent] = []
    core.register_watch("data", "/x", seen.append)
    (ev,) = core.receive(notification(EventType.NODE_DATA_CHANGED, "/app/x"), 0)
    assert ev.event.path == "/x" and ev.callbacks == (seen.append,)


# ---------------------------------------------------------------- watches


def _cb(name: str, log: list[str]):
    return lambda event: log.append(name)


def test_exists_registers_data_watch_if_node_exists_else_exist_watch() -> None:
    core = connected_core()
    cb = _cb("w", [])
    core.request(OpCode.EXISTS, ExistsRequest("/a", True), "1", watch=WatchRegistration("exists", "/a", cb))
    core.request(OpCode.EXISTS, ExistsRequest("/b", True), "2", watch=WatchRegistration("exists", "/b", cb))
    core.request(OpCode.GET_DATA, GetDataRequest("/c", True), "3", watch=WatchRegistration("data", "/c", cb))
    core.receive(reply(1, 1, 0, STAT.to_bytes()) + reply(2, 1, -101) + reply(3, 1, -101), 0)
    assert list(core.watches("data")) == ["/a"]
    assert list(core.watches("exist")) == ["/b"]


@pytest.mark.parametrize(
    ("etype", "fired"),
    [
        (EventType.NODE_CREATED, {"data", "exist", "persistent", "recursive", "root-recursive"}),
        (EventType.NODE_DATA_CHANGED, {"data", "exist", "persistent", "recursive", "root-recursive"}),
        (EventType.NODE_CHILDREN_CHANGED, {"child", "persistent"}),
        (EventType.NODE_DELETED, {"data", "exist", "child", "persistent", "recursive", "root-recursive"}),
    ],
)
def test_materialize_follows_the_java_client(etype: EventType, fired: set[str]) -> None:
    core = connected_core()
    log: list[str] = []
    for kind, path in [("data", "/a/b"), ("exist", "/a/b"), ("child", "/a/b"), ("persistent", "/a/b"),
                       ("recursive", "/a")]:
        core.register_watch(kind, path, _cb(kind, log))
    core.register_watch("recursive", "/", _cb("root-recursive", log))
    core.register_watch("data", "/a", _cb("other-path", log))
    (ev,) = core.receive(notification(etype, "/a/b"), 0)
    for cb in ev.callbacks:
        cb(ev.event)
    assert set(log) == fired and len(log) == len(fired)
    # one-time watches are gone, persistent ones stay
    (again,) = core.receive(notification(etype, "/a/b"), 0)
    log.clear()
    for cb in again.callbacks:
        cb(again.event)
    assert set(log) == fired & {"persistent", "recursive", "root-recursive"}


def test_same_callback_on_one_path_fires_once() -> None:
    core = connected_core()
    log: list[str] = []
    cb = _cb("x", log)
    core.register_watch("data", "/a", cb)
    core.register_watch("data", "/a", cb)
    core.register_watch("persistent", "/a", cb)
    (ev,) = core.receive(notification(EventType.NODE_DATA_CHANGED, "/a"), 0)
    assert ev.callbacks == (cb,)


def test_watch_removal_reports_removed_callbacks_before_the_reply() -> None:
    core = connected_core()
    a, b = _cb("a", []), _cb("b", [])
    core.register_watch("data", "/n", a)
    core.register_watch("child", "/n", b)
    assert core.has_watch("/n", WatcherType.DATA) and not core.has_watch("/m", WatcherType.ANY)
    assert core.removal_op("/n", WatcherType.ANY, a) == OpCode.CHECK_WATCHES
    assert core.removal_op("/n", WatcherType.DATA, a) == OpCode.REMOVE_WATCHES
    core.request(OpCode.REMOVE_WATCHES, None, "r", watch=WatchRemoval("/n", WatcherType.ANY, None))
    events = core.receive(reply(1, 0, 0), 0)
    assert [type(e) for e in events] == [WatchFired, WatchFired, Reply]
    assert {e.event.type for e in events[:2]} == {EventType.DATA_WATCH_REMOVED, EventType.CHILD_WATCH_REMOVED}
    assert not core.has_watch("/n", WatcherType.ANY)


def test_notification_and_replies_keep_the_server_order() -> None:
    core = connected_core()
    cb = _cb("w", [])
    core.register_watch("data", "/a", cb)
    core.request(OpCode.GET_DATA, GetDataRequest("/a", False), "before")
    core.request(OpCode.GET_DATA, GetDataRequest("/a", False), "after")
    body = GetDataResponse(b"", STAT).to_bytes()
    events = core.receive(reply(1, 1, 0, body) + notification(EventType.NODE_DATA_CHANGED, "/a") + reply(2, 2, 0, body), 0)
    assert [getattr(e, "handle", "watch") for e in events] == ["before", "watch", "after"]


# ---------------------------------------------------------------- reconnect: auth and setWatches


def test_reconnect_replays_auth_then_restores_watches() -> None:
    core = connected_core("h:1/app", auth=[("digest", b"u:p")])
    cb = _cb("w", [])
    core.register_watch("data", "/d", cb)
    core.register_watch("exist", "/e", cb)
    core.register_watch("child", "/", cb)
    core.last_zxid = 77
    core.connection_lost()
    core.connection_made(0)
    (connected,) = events_of(core.receive(connect_response(), 0), Connected)
    auth, sw = sent_frames(connected.setup)
    assert RequestHeader.read(auth, 0)[0] == RequestHeader(Xid.AUTH, OpCode.AUTH)
    assert AuthPacket.read(auth, 8)[0] == AuthPacket(0, "digest", b"u:p")
    assert RequestHeader.read(sw, 0)[0] == RequestHeader(Xid.SET_WATCHES, OpCode.SET_WATCHES)
    assert SetWatches.read(sw, 8)[0] == SetWatches(77, ["/app/d"], ["/app/e"], ["/app"])
    # the server answers both: auth (not pending) then setWatches (pending, xid -8)
    assert core.receive(reply(Xid.AUTH) + reply(Xid.SET_WATCHES), 0) == []
    assert core.pending_count == 0


def test_persistent_watches_use_set_watches2() -> None:
    core = connected_core()
    core.register_watch("recursive", "/r", _cb("r", []))
    ((op, rec),) = core.set_watches_records()
    assert op == OpCode.SET_WATCHES2 and rec == SetWatches2(0, [], [], [], [], ["/r"])


def test_set_watches_split_when_path_lengths_reach_128_kib() -> None:
    core = connected_core()
    cb = _cb("w", [])
    paths = [f"/{i:05d}" + "x" * 994 for i in range(300)]  # 1000 characters each
    for p in paths[:200]:
        core.register_watch("data", p, cb)
    for p in paths[200:]:
        core.register_watch("persistent", p, cb)
    records = core.set_watches_records()
    per_packet = -(-SET_WATCHES_MAX_LENGTH // 1000)  # the packet closes once the sum reaches the limit
    assert per_packet == 132
    sizes = [len(r.dataWatches) + len(getattr(r, "persistentWatches", [])) for _, r in records]
    assert sizes == [132, 132, 36]
    assert [op for op, _ in records] == [OpCode.SET_WATCHES, OpCode.SET_WATCHES2, OpCode.SET_WATCHES2]
    restored = [p for _, r in records for p in r.dataWatches + getattr(r, "persistentWatches", [])]
    assert restored == paths


def test_auth_failure_is_terminal() -> None:
    core = connected_core()
    core.auth_request("digest", b"bad", "auth")
    core.request(OpCode.GET_DATA, GetDataRequest("/a", False), "later")
    events = core.receive(reply(Xid.AUTH, 0, -115), 0)
    failed = events_of(events, RequestFailed)
    assert [f.handle for f in failed] == ["auth", "later"]
    assert all(isinstance(f.error, AuthFailedError) for f in failed)
    assert core.state is ClientState.AUTH_FAILED


def test_auth_success_completes_its_handle() -> None:
    core = connected_core()
    core.auth_request("digest", b"u:p", "auth")
    (ev,) = core.receive(reply(Xid.AUTH), 0)
    assert isinstance(ev, Reply) and ev.handle == "auth" and ev.error is None
    assert core.auth == [("digest", b"u:p")]


# ---------------------------------------------------------------- timing


def test_ping_after_a_third_of_the_timeout_without_sending() -> None:
    core = ClientCore("h:1", session_timeout_ms=30000)
    core.connection_made(0)
    core.receive(connect_response(timeout=9000), 0)
    assert core.next_ping_ms(0) == 3000
    assert not core.should_ping(2999) and core.should_ping(3000)
    core.request(OpCode.GET_DATA, GetDataRequest("/a", False), "h", now_ms=2000)
    assert not core.should_ping(3000) and core.should_ping(5000)
    (ping,) = sent_frames(core.ping(5000))
    assert RequestHeader.read(ping, 0)[0] == RequestHeader(Xid.PING, OpCode.PING)
    assert core.next_ping_ms(5000) == 8000


def test_connection_is_dead_after_two_thirds_of_the_timeout_of_silence() -> None:
    core = ClientCore("h:1", session_timeout_ms=30000)
    core.connection_made(0)
    core.receive(connect_response(timeout=9000), 100)
    assert not core.is_dead(6099) and core.is_dead(6100)
    core.receive(reply(Xid.PING), 6000)
    assert not core.is_dead(6100) and core.is_dead(12000)


def test_handshake_times_out_after_the_connect_timeout() -> None:
    core = ClientCore("a:1,b:2", session_timeout_ms=10000)
    core.connection_made(0)
    assert core.connect_timeout_ms == 5000
    assert not core.is_dead(4999) and core.is_dead(5000)
    assert not ClientCore("a:1").is_dead(10**9)  # no connection, nothing to time out
