"""``zkpy shell`` as a user runs it: interactively in a pseudo-terminal (completion, history,
watch events above the prompt) and non-interactively (-c, a script on stdin, --json, exit codes)."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from zkpy.client.sync import Client
from zkpy.testing.servers import ServerProcess, free_port, start_zkpy
from zkpy.wire.proto import ACL, Id

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]")
SHELL = [sys.executable, "-m", "zkpy.cli.main", "shell"]


class Terminal:
    """The shell in a pseudo-terminal; ``expect`` waits (with a deadline) for text on the screen
    (escape sequences removed) and returns everything read up to it."""

    def __init__(self, args: list[str], home: Path) -> None:
        self.master, slave = pty.openpty()
        env = dict(os.environ, HOME=str(home), TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1",
                   ZKPY_SHELL_HISTORY=str(home / "history"))
        self.proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
        os.close(slave)
        self.buf = b""  # read, not yet matched
        self.rest = ""  # screen text after the last match

    def send(self, keys: str) -> None:
        os.write(self.master, keys.encode("utf-8"))

    def expect(self, text: str, timeout: float = 15.0) -> str:
        deadline = time.monotonic() + timeout
        while text not in self.rest + self._screen():
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.master], [], [], max(0.0, left))
            if not ready:
                raise AssertionError(f"no {text!r} on the screen within {timeout}s; saw:\n"
                                     f"{(self.rest + self._screen())[-2000:]}")
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # the shell ended: its pty is gone
                chunk = b""
            if not chunk:
                raise AssertionError(f"the shell ended before {text!r}; saw:\n"
                                     f"{(self.rest + self._screen())[-2000:]}")
            self.buf += chunk
        screen = self.rest + self._screen()
        end = screen.index(text) + len(text)
        self.buf, self.rest = b"", screen[end:]
        return screen[:end]

    def _screen(self) -> str:
        return ANSI.sub(b"", self.buf).decode("utf-8", "replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        os.close(self.master)


@pytest.fixture
def terminal(zkpy_server: ServerProcess, tmp_path: Path) -> Iterator[Terminal]:
    term = Terminal([*SHELL, zkpy_server.hosts], tmp_path)
    yield term
    term.close()


def test_interactive_completion_history_and_watch_events(terminal: Terminal, zkpy_server: ServerProcess,
                                                         tmp_path: Path) -> None:
    t = terminal
    t.expect("WatchedEvent state:SyncConnected type:None path:null")
    t.expect("(CONNECTED) 0]")
    t.send("create /pty-completion-node hi\r")
    t.expect("Created /pty-completion-node")
    t.expect("(CONNECTED) 1]")
    # TAB completes a command name...
    t.send("getAllChil\t")
    t.expect("getAllChildrenNumber")
    # ...and a znode path, asked of the server
    t.send("/pty-comp\t")
    t.expect("/pty-completion-node")
    t.send("\r")
    assert "0\r\n" in t.expect("(CONNECTED) 2]")
    # a watch event prints while the shell waits at the prompt
    t.send("get -w /pty-completion-node\r")
    t.expect("(CONNECTED) 3]")
    with Client(zkpy_server.hosts) as other:
        other.set("/pty-completion-node", b"changed")
        t.expect("WatchedEvent state:SyncConnected type:NodeDataChanged path:/pty-completion-node")
    # history, and redo of an entry
    t.send("history\r")
    screen = t.expect("(CONNECTED) 4]")
    assert "0 - create /pty-completion-node hi" in screen and "3 - history" in screen
    t.send("redo 2\r")
    assert "changed" in t.expect("(CONNECTED) 5]")
    # the line history: Up recalls the last line, and it is kept in a file for the next shell
    t.send("delete /pty-completion-node\r")
    t.expect("(CONNECTED) 6]")
    t.send("\x1b[A")  # Up recalls the last line
    t.expect("delete /pty-completion-node")
    t.send("\r")
    t.expect("Node does not exist: /pty-completion-node")
    t.expect("(CONNECTED) 7]")
    t.send("quit\r")
    assert t.proc.wait(15) == 0
    assert "delete /pty-completion-node" in (tmp_path / "history").read_text()


def test_interactive_close_connect_and_end_of_input(terminal: Terminal, zkpy_server: ServerProcess) -> None:
    t = terminal
    t.expect("(CONNECTED) 0]")
    t.send("close\r")
    t.expect("WatchedEvent state:Closed type:None path:null")
    t.expect("(CLOSED) 1]")
    t.send("ls /\r")
    t.expect("Not connected")
    t.send(f"connect {zkpy_server.hosts}\r")
    t.expect("(CONNECTED) 3]")
    t.send("ls /zookeeper\r")
    t.expect("[config, quota]")
    t.expect("(CONNECTED) 4]")  # keys typed before the prompt reads them go to the tty's line editor
    t.send("\x04")  # Ctrl-D on an empty line ends the shell
    assert t.proc.wait(15) == 0


def test_interactive_prompts_at_once_and_connects_when_the_server_comes(tmp_path: Path) -> None:
    """As zkCli: against a server that is down the prompt comes at once (CONNECTING) and the
    client keeps trying; once the server starts, the session is established and commands run."""
    port = free_port()
    term = Terminal([*SHELL, f"127.0.0.1:{port}"], tmp_path)
    server = None
    try:
        term.expect("(CONNECTING) 0]", timeout=10)
        term.send("version\r")
        term.expect("ZooKeeper CLI version: 3.8.5-zkpy-")
        server = start_zkpy(port=port)
        term.expect("WatchedEvent state:SyncConnected type:None path:null", timeout=30)
        term.send("ls /zookeeper\r")
        term.expect("[config, quota]")
        term.expect("(CONNECTED) 2]")  # keys typed before the prompt reads them go to the tty's line editor
        term.send("\x04")
        assert term.proc.wait(15) == 0
    finally:
        term.close()
        if server is not None:
            server.cleanup()


def run(args: list[str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SHELL, *args], input=stdin, capture_output=True, text=True, timeout=60, check=False)


def test_commands_exit_codes_and_binary_data(zkpy_server: ServerProcess) -> None:
    hosts = zkpy_server.hosts
    ok = run([hosts, "-c", "create /sh-cli abc", "-c", "get /sh-cli"])
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines() == ["Created /sh-cli", "abc"]  # no connection event: just the output
    failed = run(["-server", hosts, "-c", "get /sh-cli-missing", "-c", "get /sh-cli"])
    assert failed.returncode == 1
    assert failed.stderr.strip() == "Node does not exist: /sh-cli-missing"
    assert failed.stdout.splitlines()[-1] == "abc"  # a failure does not stop the script
    with Client(hosts) as c:
        c.set("/sh-cli", b"\xff\x00binary")
    script = run([hosts], "get /sh-cli\nset -v abc /sh-cli x\ndeleteall /sh-cli\n")
    assert script.returncode == 1
    assert "hex:ff0062696e617279" in script.stdout.splitlines()
    assert "version must be a number: abc" in script.stderr
    nowhere = run(["127.0.0.1:1", "--connect-timeout", "1", "-c", "ls /"])
    assert nowhere.returncode == 2
    assert nowhere.stderr.startswith("Unable to connect to 127.0.0.1:1")
    bad = run(["not a host:port", "-c", "ls /"])
    assert bad.returncode == 2 and bad.stderr.startswith("Unable to connect to not a host:port")


def test_json_output_one_document_per_command_and_event(zkpy_server: ServerProcess) -> None:
    out = run([zkpy_server.hosts, "--json"],
              "create /sh-json\nset /sh-json \"a b\"\nget -s -w /sh-json\nset /sh-json z\nls /sh-json-missing\n"
              "deleteall /sh-json\n")
    assert out.returncode == 1
    docs = [json.loads(line) for line in out.stdout.splitlines()]
    commands = [d for d in docs if "command" in d]
    assert [d["ok"] for d in commands] == [True, True, True, True, False, True]
    assert commands[0]["result"] == {"path": "/sh-json"}
    get = commands[2]["result"]
    assert get["data"] == "a b" and get["encoding"] == "utf-8" and get["stat"]["version"] == 1
    assert commands[4]["error"] == {"code": "NONODE", "message": "Node does not exist: /sh-json-missing"}
    events = [d["event"] for d in docs if "event" in d]
    assert {"state": "SyncConnected", "type": "NodeDataChanged", "path": "/sh-json"} in events


def test_partial_failures_report_each_node_once(zkpy_server: ServerProcess) -> None:
    hosts = zkpy_server.hosts
    out = run([hosts, "-c", "create /sh-part", "-c", "create /sh-part/locked x world:anyone:r",
               "-c", "setAcl -R /sh-part world:anyone:cra", "-c", "getAcl /sh-part", "-c", "deleteall /sh-part"])
    assert out.returncode == 1
    # setAcl -R sets what it may and names what refused; deleteall's multi fails as a whole
    # (no delete permission on /sh-part), and each failure is one line
    assert out.stderr.splitlines() == ["KeeperErrorCode = NoAuth for /sh-part/locked",
                                       "Failed to delete some node(s) in the subtree!"]
    assert "'world,'anyone\n: cra\n" in out.stdout
    with Client(hosts) as c:
        assert c.exists("/sh-part/locked") is not None
        c.set_acl("/sh-part", [ACL(31, Id("world", "anyone"))])
        c.delete("/sh-part/locked")
        c.delete("/sh-part")


def test_a_piped_script_runs_line_by_line(zkpy_server: ServerProcess) -> None:
    proc = subprocess.Popen([*SHELL, zkpy_server.hosts], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(b"create /sh-stream x\n")
        proc.stdin.flush()
        seen = b""
        deadline = time.monotonic() + 20
        while b"Created /sh-stream" not in seen:  # the first line ran while the pipe is still open
            ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"no result before the input ended; saw {seen!r}"
            chunk = os.read(proc.stdout.fileno(), 4096)
            assert chunk, f"the shell ended early; saw {seen!r}"
            seen += chunk
        proc.stdin.write(b"delete /sh-stream\n")
        proc.stdin.close()
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_docs_json_example_is_what_the_shell_prints(tmp_path: Path) -> None:
    """docs/shell.md's --json example, run on a fresh server holding /app: each line the page
    shows is a line the shell prints, ``...`` standing for what the page leaves out."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "shell.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```console\n(.*?)```", page, re.S) if "--json" in b)
    command, *shown = block.strip().splitlines()
    args = shlex.split(command.removeprefix("$ "))
    assert args[:2] == ["zkpy", "shell"]
    server = start_zkpy()
    try:
        with Client(server.hosts) as c:
            c.create("/app", b"x")
        out = run([server.hosts, *args[2:]])
    finally:
        server.cleanup()
    printed = out.stdout.splitlines()
    assert len(printed) == len(shown), out.stdout
    for want, got in zip(shown, printed):
        pattern = ".*".join(re.escape(part) for part in want.split("..."))
        assert re.fullmatch(pattern, got), (want, got)
