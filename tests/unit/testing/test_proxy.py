"""TcpProxy: forwards, cuts (reset or blackhole), heals and retargets; kazoo keeps its session
across a cut shorter than the session timeout."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from zkpy.testing.proxy import TcpProxy
from zkpy.testing.servers import ServerProcess, four_letter

DEADLINE = 10.0


def wait_for(condition: Callable[[], bool], what: str, deadline_s: float = DEADLINE) -> None:
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {deadline_s}s waiting for {what}")
        time.sleep(0.01)


class EchoServer:
    """A loopback server that answers every chunk with ``tag`` + the chunk."""

    def __init__(self, tag: bytes) -> None:
        self.tag = tag
        self.received: list[bytes] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    def _echo(self, conn: socket.socket) -> None:
        with conn:
            try:
                while data := conn.recv(65536):
                    self.received.append(data)
                    conn.sendall(self.tag + data)
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer(b"A:")
    yield server
    server.close()


@pytest.fixture
def proxy(echo: EchoServer) -> Iterator[TcpProxy]:
    with TcpProxy("127.0.0.1", echo.port) as p:
        yield p


def roundtrip(port: int, payload: bytes, timeout: float = 2.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(payload)
        return s.recv(65536)


def assert_dropped(port: int) -> None:
    """A new connection is closed or reset by the proxy without any answer."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"x")
            assert s.recv(100) == b""
    except (ConnectionResetError, BrokenPipeError):
        pass


def test_forwards_both_ways(proxy: TcpProxy) -> None:
    assert proxy.port != 0
    assert roundtrip(proxy.port, b"hello") == b"A:hello"
    big = bytes(range(256)) * 4096
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as s:
        s.sendall(big)
        got = b""
        while len(got) < len(big):  # the echo may prefix each chunk; count payload bytes only
            got += s.recv(1 << 20).replace(b"A:", b"")
    assert got == big


def test_reset_cut_kills_open_connections_and_refuses_new_ones(proxy: TcpProxy) -> None:
    s = socket.create_connection(("127.0.0.1", proxy.port), timeout=2)
    s.sendall(b"x")
    assert s.recv(100) == b"A:x"
    proxy.cut("reset")
    with pytest.raises((ConnectionResetError, BrokenPipeError)):
        s.sendall(b"y")  # the RST may land on the send or on the recv
        if not s.recv(100):
            raise ConnectionResetError("closed")
    s.close()
    assert_dropped(proxy.port)
    proxy.restore()
    assert roundtrip(proxy.port, b"back") == b"A:back"


def test_blackhole_cut_freezes_open_connections_and_holds_new_ones(proxy: TcpProxy) -> None:
    s = socket.create_connection(("127.0.0.1", proxy.port), timeout=2)
    s.sendall(b"x")
    assert s.recv(100) == b"A:x"
    proxy.cut("blackhole")
    s.settimeout(0.3)
    s.sendall(b"dropped")
    with pytest.raises(socket.timeout):
        s.recv(100)
    held = socket.create_connection(("127.0.0.1", proxy.port), timeout=0.3)  # accepted...
    held.sendall(b"never")
    with pytest.raises(socket.timeout):
        held.recv(100)  # ...but never forwarded
    accepted = proxy.accepted
    proxy.restore()  # frozen and held connections are reset on restore
    for sock in (s, held):
        sock.settimeout(2)
        try:
            assert sock.recv(100) == b""
        except ConnectionResetError:
            pass
        sock.close()
    assert proxy.accepted == accepted
    assert roundtrip(proxy.port, b"back") == b"A:back"
    wait_for(lambda: proxy.connection_count() == 0, "closed connections to be forgotten")


def test_retarget_moves_new_connections_only(proxy: TcpProxy) -> None:
    other = EchoServer(b"B:")
    try:
        old = socket.create_connection(("127.0.0.1", proxy.port), timeout=2)
        old.sendall(b"1")
        assert old.recv(100) == b"A:1"
        proxy.retarget("127.0.0.1", other.port)
        assert proxy.target == ("127.0.0.1", other.port)
        assert roundtrip(proxy.port, b"2") == b"B:2"
        old.sendall(b"3")
        assert old.recv(100) == b"A:3"
        old.close()
    finally:
        other.close()


def test_unreachable_target_resets_the_client(proxy: TcpProxy) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        dead_port = unused.getsockname()[1]
    proxy.retarget("127.0.0.1", dead_port)
    assert_dropped(proxy.port)


def test_stop_closes_the_listener(echo: EchoServer) -> None:
    proxy = TcpProxy("127.0.0.1", echo.port).start()
    port = proxy.port
    assert roundtrip(port, b"x") == b"A:x"
    proxy.stop()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_four_letter_words_pass_through(zkpy_server: ServerProcess) -> None:
    with TcpProxy("127.0.0.1", zkpy_server.port) as p:
        assert four_letter(p.port, "srvr").startswith("Zookeeper version")


class StateLog:
    def __init__(self) -> None:
        self.states: list[KazooState] = []
        self.changed = threading.Condition()

    def __call__(self, state: KazooState) -> None:
        with self.changed:
            self.states.append(state)
            self.changed.notify_all()

    def wait_for(self, state: KazooState, count: int = 1) -> None:
        with self.changed:
            ok = self.changed.wait_for(lambda: self.states.count(state) >= count, DEADLINE)
        assert ok, f"kazoo never reached {state} x{count}: {self.states}"


@pytest.mark.parametrize("mode", ["reset", "blackhole"])
def test_kazoo_keeps_its_session_across_a_short_cut(zkpy_server: ServerProcess, mode: str) -> None:
    with TcpProxy("127.0.0.1", zkpy_server.port) as p:
        # 8 s session: kazoo reads with a 2/3 timeout, so a blackhole is noticed in under 6 s,
        # and it has over 2 s to get back, even on a loaded machine.
        zk = KazooClient(hosts=p.hosts, timeout=8.0,
                         connection_retry={"max_tries": -1, "delay": 0.05, "max_delay": 0.2})
        zk.start(timeout=DEADLINE)
        log = StateLog()
        zk.add_listener(log)
        try:
            session_id = zk.client_id[0]
            path = zk.create("/proxy-kazoo-", b"", ephemeral=True, sequence=True)
            p.cut(mode)  # type: ignore[arg-type]
            log.wait_for(KazooState.SUSPENDED)
            p.restore()
            log.wait_for(KazooState.CONNECTED)
            assert zk.client_id[0] == session_id
            assert zk.exists(path) is not None
            assert KazooState.LOST not in log.states
            assert p.forwarded >= 2
        finally:
            zk.stop()
            zk.close()


def test_lose_reply_applies_the_request_and_drops_only_its_reply(zkpy_server: ServerProcess) -> None:
    """The request reaches the server (the node exists), the client sees ConnectionLoss, the
    requests before it (``skip``) and after it are untouched."""
    from kazoo.exceptions import ConnectionLoss

    with TcpProxy("127.0.0.1", zkpy_server.port, zk_frames=True) as p:
        zk = KazooClient(hosts=p.hosts, timeout=8.0,
                         connection_retry={"max_tries": -1, "delay": 0.05, "max_delay": 0.2})
        zk.start(timeout=DEADLINE)
        try:
            base = f"/lose-{p.port}"
            zk.create(base)
            p.lose_reply({1}, skip=1)  # CREATE: the first passes, the second loses its reply
            zk.create(f"{base}/kept")
            with pytest.raises(ConnectionLoss):
                zk.create(f"{base}/applied")
            assert p.lost == 1
            assert sorted(zk.retry(zk.get_children, base)) == ["applied", "kept"]
            zk.create(f"{base}/after")  # nothing armed any more
            assert p.lost == 1
        finally:
            zk.stop()
            zk.close()


def test_a_delay_holds_every_chunk_each_way_and_keeps_the_order(proxy: TcpProxy) -> None:
    """delay(ms): both ways of a round trip go through the delay line (no timing is asserted),
    and many small chunks arrive whole and in order."""
    proxy.delay(150)
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
        s.sendall(b"ping")
        assert s.recv(100) == b"A:ping"
        assert proxy.delayed == 2
        sent = b"".join(b"%05d," % i for i in range(2000))
        for i in range(0, len(sent), 60):
            s.sendall(sent[i:i + 60])
        got = b""
        while len(got.replace(b"A:", b"")) < len(sent):
            got += s.recv(65536)
    assert got.replace(b"A:", b"") == sent
    proxy.delay(0)
    assert roundtrip(proxy.port, b"after") == b"A:after"


def test_a_blackhole_cut_drops_what_a_delay_still_held(proxy: TcpProxy, echo: EchoServer) -> None:
    proxy.delay(2000)
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=2) as s:
        wait_for(lambda: proxy.connection_count() == 1, "the proxy's connection to the server")
        s.sendall(b"held")
        wait_for(lambda: proxy.delayed == 1, "the chunk in the proxy's delay line")
        proxy.cut("blackhole")  # within the delay: the chunk must not reach the server
        wait_for(lambda: proxy.dropped == 1, "the delay line to drop the chunk when it fell due")
        assert b"held" not in b"".join(echo.received)
    proxy.restore()


def test_a_loss_delays_the_lost_chunks_and_those_behind_them_but_loses_no_byte(proxy: TcpProxy) -> None:
    """loss(percent): as TCP shows a lost segment, the chunk comes a retransmission timeout later
    and nothing overtakes it; every byte arrives once, in order (no timing is asserted)."""
    seed = 7
    print(f"loss seed {seed}")
    proxy.loss(30, rto_ms=10, seed=seed)  # a chunk is held 630 ms at most (six retransmissions)
    sent = b"".join(b"%05d," % i for i in range(1000))
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=60) as s:
        got = b""
        for i in range(0, len(sent), 60):
            s.sendall(sent[i:i + 60])
            time.sleep(0.001)  # separate chunks, so that each may be lost
        while len(got.replace(b"A:", b"")) < len(sent):
            got += s.recv(65536)
    assert got.replace(b"A:", b"") == sent
    assert proxy.retransmitted > 0
    with pytest.raises(ValueError):
        proxy.loss(100)
    proxy.loss(0)
    before = proxy.retransmitted
    assert roundtrip(proxy.port, b"after") == b"A:after"
    assert proxy.retransmitted == before


def test_reset_next_resets_that_many_new_connections_then_forwards(proxy: TcpProxy) -> None:
    proxy.reset_next(2)
    assert_dropped(proxy.port)
    assert_dropped(proxy.port)
    assert roundtrip(proxy.port, b"third") == b"A:third"
    assert proxy.reset_early == 2
