"""The shell's pure parser and formatter (zkpy.cli.shell.parse): zkCli.sh's grammar and texts."""

from __future__ import annotations

import pytest

from zkpy.cli.shell import parse as P
from zkpy.cli.shell.output import event_line
from zkpy.cli.shell.session import client_config
from zkpy.errors import BadVersionError, NoAuthError, NoNodeError, NoWatcherError, ReconfigDisabledError
from zkpy.wire.consts import EventType, KeeperState
from zkpy.wire.proto import ACL, Id, Stat


def test_tokenize_drops_quotes_around_whole_words() -> None:
    assert P.tokenize('create /a ""') == ["create", "/a", ""]
    assert P.tokenize("set /a 'two words'") == ["set", "/a", "two words"]
    assert P.tokenize('  ls   /a  ') == ["ls", "/a"]
    assert P.tokenize('set /a x"y') == ["set", "/a", 'x"y']


def test_options_anywhere_flags_and_values() -> None:
    p = P.parse(["create", "-s", "-t", "600", "/a", "data"])
    assert p.flag("s") and p.value("t") == "600" and p.args == ["/a", "data"]
    p = P.parse(["deleteall", "/a", "-b", "5"])
    assert p.value("b") == "5" and p.args == ["/a"]
    p = P.parse(["removewatches", "/a", "-d"])
    assert p.flag("d") and not p.flag("c")


def test_unknown_option_and_missing_arguments_print_zkclis_texts() -> None:
    with pytest.raises(P.UsageError, match=r"^org.apache.commons.cli.UnrecognizedOptionException: "
                                           r"Unrecognized option: -x$"):
        P.parse(["ls", "-x", "/a"])
    with pytest.raises(P.UsageError) as e:
        P.parse(["ls"])
    assert str(e.value) == "ls [-s] [-w] [-R] path"
    with pytest.raises(P.UsageError) as e:
        P.parse(["set", "/a"])
    assert str(e.value) == "set [-s] [-v version] path data"
    with pytest.raises(P.UsageError, match="MissingOptionException"):
        P.parse(["setquota", "/a"])
    with pytest.raises(P.UsageError) as e:
        P.parse(["reconfig"])
    assert str(e.value).startswith("reconfig [-s] [-v version]")


def test_unknown_command() -> None:
    with pytest.raises(P.UnknownCommand) as e:
        P.parse(["bogus", "x"])
    assert str(e.value) == "Command not found: Command not found bogus"
    usage = P.usage_all()
    assert usage[0].startswith("ZooKeeper -server host:port")
    assert usage[1] == "\taddWatch [-m mode] path # optional mode is one of [PERSISTENT, PERSISTENT_RECURSIVE]" \
                       " - default is PERSISTENT_RECURSIVE"  # Java's sort: upper case first
    assert "\tclose " in usage


def test_the_34_watch_argument_is_deprecated_but_works() -> None:
    p = P.parse(["get", "/a", "true"])
    assert p.flag("w") and p.args == ["/a"]
    assert p.notes == ["'get path [watch]' has been deprecated. Please use 'get [-s] [-w] path' instead."]
    assert P.parse(["ls", "/a", "1"]).notes == [
        "'ls path [watch]' has been deprecated. Please use 'ls [-w] path' instead."]


def test_reconfig_word_options() -> None:
    p = P.parse(["reconfig", "-add", "server.5=h:1:2;3", "-v", "1a", "-s"])
    assert p.value("add") == "server.5=h:1:2;3" and p.value("v") == "1a" and p.flag("s")


@pytest.mark.parametrize(("path", "sequential", "message"), [
    ("a", False, "Path must start with / character"),
    ("", False, "Path length must be > 0"),
    ("/a/", False, "Path must not end with / character"),
    ("/a//b", False, 'Invalid path string "/a//b" caused by empty node name specified @3'),
    ("/a/./b", False, 'Invalid path string "/a/./b" caused by relative paths not allowed @3'),
    ("/a/..", False, 'Invalid path string "/a/.." caused by relative paths not allowed @4'),
    ("/a\x01", False, 'Invalid path string "/a\x01" caused by invalid character @2'),
])
def test_path_validation_messages(path: str, sequential: bool, message: str) -> None:
    with pytest.raises(P.ShellError) as e:
        P.validate_path(path, sequential)
    assert str(e.value) == message


def test_valid_paths() -> None:
    for path in ("/", "/a", "/a/b.c", "/a/..b", "/zookeeper"):
        P.validate_path(path)
    P.validate_path("/a/", sequential=True)  # a sequential node's name may end in /


def test_acl_parse_and_format() -> None:
    acls, messages = P.parse_acl("world:anyone:cdrwa,digest:bob:x=:rwa,ip:10.0.0.0/8:r")
    assert messages == []
    assert acls == [ACL(31, Id("world", "anyone")), ACL(19, Id("digest", "bob:x=")), ACL(1, Id("ip", "10.0.0.0/8"))]
    assert P.format_acl(acls[:2]) == ["'world,'anyone", ": cdrwa", "'digest,'bob:x=", ": rwa"]
    acls, messages = P.parse_acl("nocolon,world:anyone:rz")
    assert messages == ["nocolon does not have the form scheme:id:perm", "Unknown perm type: z"]
    assert acls == [ACL(1, Id("world", "anyone"))]


def test_data_is_text_when_utf8_else_hex() -> None:
    assert P.format_data(None) == "null"
    assert P.format_data(b"") == ""
    assert P.format_data("héllo".encode()) == "héllo"
    assert P.format_data(b"\xff\x00\x10") == "hex:ff0010"
    assert P.data_json(b"\xff") == {"data": "ff", "encoding": "hex"}
    assert P.data_json(b"hi") == {"data": "hi", "encoding": "utf-8"}
    assert P.data_json(None) == {"data": None, "encoding": None}


def test_stat_lines() -> None:
    stat = Stat(czxid=0x10, mzxid=0x11, ctime=0, mtime=0, version=2, cversion=3, aversion=1,
                ephemeralOwner=0x1000ab, dataLength=5, numChildren=0, pzxid=0x12)
    lines = P.format_stat(stat)
    assert [line.split(" = ")[0] for line in lines] == [
        "cZxid", "ctime", "mZxid", "mtime", "pZxid", "cversion", "dataVersion", "aclVersion", "ephemeralOwner",
        "dataLength", "numChildren"]
    assert lines[0] == "cZxid = 0x10" and lines[6] == "dataVersion = 2" and lines[8] == "ephemeralOwner = 0x1000ab"
    assert P.java_date(0).endswith("1970") or P.java_date(0).endswith("1969")


def test_error_texts() -> None:
    assert P.cli_message(NoNodeError("", "/x")) == "Node does not exist: /x"
    assert P.cli_message(BadVersionError("", "/x")) == "version No is not valid : /x"
    assert P.cli_message(NoWatcherError("", "/x")) == "KeeperErrorCode = No such watcher for /x"
    assert P.cli_message(ReconfigDisabledError("", None)) == "KeeperErrorCode = Reconfig is disabled"
    assert P.cli_message(NoAuthError("", None)) == "Insufficient permission : null"  # reconfig's NoAuth


def test_event_lines_and_client_config() -> None:
    assert event_line(KeeperState.SYNC_CONNECTED, EventType.NONE, None) == \
        "WatchedEvent state:SyncConnected type:None path:null"
    assert event_line(KeeperState.SYNC_CONNECTED, EventType.NODE_CHILDREN_CHANGED, "/a") == \
        "WatchedEvent state:SyncConnected type:NodeChildrenChanged path:/a"
    cfg = "server.1=10.0.0.1:2888:3888:participant;0.0.0.0:2181\nserver.2=h2:2888:3888;2182\nversion=100000000"
    assert client_config(cfg) == "100000000 0.0.0.0:2181,h2:2182"


def test_redo_takes_its_index_verbatim() -> None:
    assert P.parse(["redo", "-1"]).args == ["-1"]  # zkCli: "Command index out of range"
    with pytest.raises(P.UsageError):
        P.parse(["redo"])


def test_completer_offers_commands_options_and_modes() -> None:
    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document

    from zkpy.cli.shell.output import Output
    from zkpy.cli.shell.repl import ShellCompleter
    from zkpy.cli.shell.session import Shell

    completer = ShellCompleter(Shell("127.0.0.1:1", Output()))  # never connected: no paths offered

    def complete(text: str) -> list[str]:
        return [c.text for c in completer.get_completions(Document(text), CompleteEvent(completion_requested=True))]

    assert complete("get") == ["get ", "getAcl ", "getAllChildrenNumber ", "getEphemerals "]
    assert complete("ls -") == ["-s ", "-w ", "-R "]
    assert complete("addWatch -m PERSISTENT_") == ["PERSISTENT_RECURSIVE"]
    assert complete("ls /zoo") == []
