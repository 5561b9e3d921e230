"""The shell's pure half: zkCli.sh's command line grammar and its output texts (no I/O).

Owns, as ZooKeeper 3.8's ``ZooKeeperMain`` does them:
- tokenising a line (whitespace-separated words; a word wholly in ``"..."`` or ``'...'`` loses
  its quotes, so ``""`` is an empty argument);
- each command's options (commons-cli style: ``-x`` or ``-x value`` anywhere on the line, an
  unknown one is ``Unrecognized option: -x``) and its usage line, printed when the positional
  arguments do not fit;
- ``PathUtils.validatePath``'s messages, ACL text (``scheme:id:perms``), ``getAcl`` and stat
  printing, and the error texts zkCli prints for each ``KeeperException`` code.

Data is shown as text when it is valid UTF-8 and as ``hex:`` followed by lowercase hex digits
otherwise (``format_data``); null data (a node created with no data) is ``null``, as in zkCli.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from zkpy.errors import Code, ZookeeperError
from zkpy.ids import long_hex
from zkpy.wire.consts import Perms
from zkpy.wire.proto import ACL, Id, Stat


class UsageError(Exception):
    """The line does not fit the command: the message is what zkCli prints (its usage line)."""


class ShellError(Exception):
    """A command failed on the client side; the message is printed as is."""


class CommandFailed(Exception):
    """A command failed; the message is zkCli's text, ``code`` names the failure in JSON output."""

    def __init__(self, message: str, code: str = "error", printed: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.printed = printed  # the command printed its own error lines already


class Quit(Exception):
    """``quit``: the shell ends."""


# ---------------------------------------------------------------- tokenising

_ARGS = re.compile(r"\s*([^\"']\S*|\"[^\"]*\"|'[^']*')\s*")
_QUOTED = re.compile(r"^([\"'])(.*)(\1)$", re.S)


def tokenize(line: str) -> list[str]:
    """Split a command line as ZooKeeperMain does; quotes around a whole word are dropped."""
    out: list[str] = []
    for m in _ARGS.finditer(line):
        word = m.group(1)
        q = _QUOTED.match(word)
        out.append(q.group(2) if q else word)
    return out


# ---------------------------------------------------------------- commands

@dataclass(frozen=True)
class Spec:
    """One command: its usage text, its flags (no value) and its options (take a value)."""

    usage: str
    flags: str = ""
    valued: str = ""
    min_args: int = 1  # positional arguments after the command name
    max_args: int | None = None


SPECS: dict[str, Spec] = {
    "addWatch": Spec("[-m mode] path # optional mode is one of [PERSISTENT, PERSISTENT_RECURSIVE]"
                     " - default is PERSISTENT_RECURSIVE", valued="m"),
    "addauth": Spec("scheme auth", min_args=1),
    "close": Spec("", min_args=0),
    "config": Spec("[-c] [-w] [-s]", flags="cws", min_args=0),
    "connect": Spec("host:port", min_args=0),
    "create": Spec("[-s] [-e] [-c] [-t ttl] path [data] [acl]", flags="sec", valued="t"),
    "delete": Spec("[-v version] path", valued="v"),
    "deleteall": Spec("path [-b batch size]", valued="b"),
    "delquota": Spec("[-n|-b|-N|-B] path", flags="nbNB"),
    "get": Spec("[-s] [-w] path", flags="sw"),
    "getAcl": Spec("[-s] path", flags="s"),
    "getAllChildrenNumber": Spec("path"),
    "getEphemerals": Spec("path", min_args=0),
    "history": Spec("", min_args=0),
    "listquota": Spec("path"),
    "ls": Spec("[-s] [-w] [-R] path", flags="swR"),
    "printwatches": Spec("on|off", min_args=0),
    "quit": Spec("", min_args=0),
    "reconfig": Spec("[-s] [-v version] [[-file path] | [-members serverID=host:port1:port2;port3[,...]*]] | "
                     "[-add serverId=host:port1:port2;port3[,...]]* [-remove serverId[,...]*]",
                     flags="s", valued="v", min_args=0),
    "redo": Spec("cmdno"),
    "removewatches": Spec("path [-c|-d|-a] [-l]", flags="cdal"),
    "set": Spec("[-s] [-v version] path data", flags="s", valued="v", min_args=2),
    "setAcl": Spec("[-s] [-v version] [-R] path acl", flags="sR", valued="v", min_args=2),
    "setquota": Spec("-n|-b|-N|-B val path", valued="nbNB"),
    "stat": Spec("[-w] path", flags="w"),
    "sync": Spec("path"),
    "version": Spec("", min_args=0),
    "whoami": Spec("", min_args=0),
}
# reconfig's options are words, not letters
_RECONFIG_VALUED = ("-file", "-members", "-add", "-remove", "-v")

COMMANDS = sorted(SPECS)


def usage_line(name: str) -> str:
    return f"{name} {SPECS[name].usage}"


def usage_all() -> list[str]:
    """The text zkCli prints for an unknown command."""
    lines = ["ZooKeeper -server host:port -client-configuration properties-file cmd args"]
    lines += [f"\t{usage_line(name)}" for name in COMMANDS]
    return lines


@dataclass
class Parsed:
    """A command line: the name, its options (flag -> True, option -> value) and positional args."""

    name: str
    opts: dict[str, str | bool] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # deprecation notices to print first

    def flag(self, letter: str) -> bool:
        return bool(self.opts.get(letter))

    def value(self, letter: str) -> str | None:
        v = self.opts.get(letter)
        return v if isinstance(v, str) else None


class UnknownCommand(UsageError):
    pass


def parse(words: Sequence[str]) -> Parsed:
    """Parse a tokenised line; raises UnknownCommand, or UsageError with zkCli's message."""
    if not words:
        raise UsageError("")
    name, rest = words[0], list(words[1:])
    spec = SPECS.get(name)
    if spec is None:
        raise UnknownCommand(f"Command not found: Command not found {name}")
    p = Parsed(name)
    if name == "redo":  # not a commons-cli command in zkCli: "redo -1" is an index out of range
        p.args = rest
        if not rest:
            raise UsageError(usage_line(name))
        return p
    i = 0
    while i < len(rest):
        w = rest[i]
        if name == "reconfig" and w in _RECONFIG_VALUED:
            if i + 1 >= len(rest):
                raise UsageError(f"Missing argument for option: {w[1:]}")
            p.opts[w[1:]] = rest[i + 1]
            i += 2
            continue
        if len(w) >= 2 and w.startswith("-") and w != "--":
            letter = w[1:]
            if letter in spec.flags and len(letter) == 1:
                p.opts[letter] = True
            elif letter in spec.valued and len(letter) == 1:
                if i + 1 >= len(rest):
                    raise UsageError(f"Missing argument for option: {letter}")
                p.opts[letter] = rest[i + 1]
                i += 1
            else:
                raise UsageError(f"org.apache.commons.cli.UnrecognizedOptionException: Unrecognized option: {w}")
        else:
            p.args.append(w)
        i += 1
    if name == "setquota" and not any(k in p.opts for k in "nbNB"):
        raise UsageError("org.apache.commons.cli.MissingOptionException: Missing required option: "
                         "[-n num soft quota, -b bytes soft quota, -N num hard quota, -B bytes hard quota]")
    # zkCli 3.4's "get path watch" / "ls path watch" / "stat path watch" forms
    if name in ("get", "ls", "stat") and len(p.args) == 2:
        p.notes.append(f"'{name} path [watch]' has been deprecated. "
                       f"Please use '{name} [-{'s] [-' if name == 'get' else ''}w] path' instead.")
        p.args.pop()
        p.opts["w"] = True
    if name == "reconfig":
        if not any(k in p.opts for k in ("file", "members", "add", "remove")):
            raise UsageError(usage_line(name))
        return p
    if len(p.args) < spec.min_args:
        raise UsageError(usage_line(name))
    return p


# ---------------------------------------------------------------- paths

def validate_path(path: str, sequential: bool = False) -> None:
    """PathUtils.validatePath: raises ShellError with ZooKeeper's message."""
    if sequential:
        path = path + "1"
    if len(path) == 0:
        raise ShellError("Path length must be > 0")
    if path[0] != "/":
        raise ShellError("Path must start with / character")
    if len(path) == 1:
        return
    if path[-1] == "/":
        raise ShellError("Path must not end with / character")
    reason = None
    last = "/"
    for i in range(1, len(path)):
        c = path[i]
        if c == "\x00":
            reason = f"null character not allowed @{i}"
        elif c == "/" and last == "/":
            reason = f"empty node name specified @{i}"
        elif c == "." and last == "." and path[i - 2] == "/" and (i + 1 == len(path) or path[i + 1] == "/"):
            reason = f"relative paths not allowed @{i}"
        elif c == "." and path[i - 1] == "/" and (i + 1 == len(path) or path[i + 1] == "/"):
            reason = f"relative paths not allowed @{i}"
        elif ("\x00" < c <= "\x1f") or ("\x7f" <= c <= "\x9f") or ("\ud800" <= c <= "\uf8ff") or c >= "\ufff0":
            reason = f"invalid character @{i}"
        if reason:
            raise ShellError(f'Invalid path string "{path}" caused by {reason}')
        last = c


# ---------------------------------------------------------------- ACLs

_PERM_CHARS = (("c", Perms.CREATE), ("d", Perms.DELETE), ("r", Perms.READ), ("w", Perms.WRITE), ("a", Perms.ADMIN))


def parse_acl(text: str) -> tuple[list[ACL], list[str]]:
    """AclParser: ``scheme:id:perms`` entries separated by commas; the messages of bad entries
    (skipped) come back separately."""
    acls: list[ACL] = []
    messages: list[str] = []
    for entry in text.split(","):
        first, last = entry.find(":"), entry.rfind(":")
        if first == -1 or first == last:
            messages.append(f"{entry} does not have the form scheme:id:perm")
            continue
        perms = 0
        for ch in entry[last + 1:]:
            bit = dict(_PERM_CHARS).get(ch)
            if bit is None:
                messages.append(f"Unknown perm type: {ch}")
            else:
                perms |= int(bit)
        acls.append(ACL(perms, Id(entry[:first], entry[first + 1:last])))
    return acls, messages


def perm_string(perms: int) -> str:
    return "".join(ch for ch, bit in _PERM_CHARS if perms & bit)


def format_acl(acls: Sequence[ACL]) -> list[str]:
    out: list[str] = []
    for a in acls:
        out.append(f"'{a.id.scheme},'{a.id.id}")
        out.append(f": {perm_string(a.perms)}")
    return out


# ---------------------------------------------------------------- data, stat, lists

def format_data(data: bytes | None) -> str:
    """``null``, the UTF-8 text, or ``hex:`` and the bytes in lowercase hex when not UTF-8."""
    if data is None:
        return "null"
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "hex:" + data.hex()


def data_json(data: bytes | None) -> dict[str, str | None]:
    if data is None:
        return {"data": None, "encoding": None}
    try:
        return {"data": data.decode("utf-8"), "encoding": "utf-8"}
    except UnicodeDecodeError:
        return {"data": data.hex(), "encoding": "hex"}


def java_date(ms: int) -> str:
    """Date.toString() in the local time zone: ``Thu Jan 01 00:00:00 UTC 1970``."""
    t = time.localtime(ms / 1000)
    return time.strftime("%a %b %d %H:%M:%S ", t) + (t.tm_zone or "UTC") + time.strftime(" %Y", t)


def format_stat(s: Stat) -> list[str]:
    return [
        f"cZxid = 0x{s.czxid:x}",
        f"ctime = {java_date(s.ctime)}",
        f"mZxid = 0x{s.mzxid:x}",
        f"mtime = {java_date(s.mtime)}",
        f"pZxid = 0x{s.pzxid:x}",
        f"cversion = {s.cversion}",
        f"dataVersion = {s.version}",
        f"aclVersion = {s.aversion}",
        f"ephemeralOwner = 0x{long_hex(s.ephemeralOwner)}",
        f"dataLength = {s.dataLength}",
        f"numChildren = {s.numChildren}",
    ]


def stat_json(s: Stat) -> dict[str, int]:
    return {"czxid": s.czxid, "mzxid": s.mzxid, "ctime": s.ctime, "mtime": s.mtime, "version": s.version,
            "cversion": s.cversion, "aversion": s.aversion, "ephemeralOwner": s.ephemeralOwner,
            "dataLength": s.dataLength, "numChildren": s.numChildren, "pzxid": s.pzxid}


def format_list(items: Sequence[str]) -> str:
    """Java's List.toString: ``[a, b]``."""
    return "[" + ", ".join(items) + "]"


# ---------------------------------------------------------------- errors

_CODE_TEXT: dict[int, str] = {
    Code.SYSTEMERROR: "SystemError", Code.RUNTIMEINCONSISTENCY: "RuntimeInconsistency",
    Code.DATAINCONSISTENCY: "DataInconsistency", Code.CONNECTIONLOSS: "ConnectionLoss",
    Code.MARSHALLINGERROR: "MarshallingError", Code.UNIMPLEMENTED: "Unimplemented",
    Code.OPERATIONTIMEOUT: "OperationTimeout", Code.BADARGUMENTS: "BadArguments",
    Code.UNKNOWNSESSION: "Unknown session", Code.NEWCONFIGNOQUORUM: "NewConfigNoQuorum",
    Code.RECONFIGINPROGRESS: "ReconfigInProgress", Code.APIERROR: "APIError", Code.NONODE: "NoNode",
    Code.NOAUTH: "NoAuth", Code.BADVERSION: "BadVersion", Code.NOCHILDRENFOREPHEMERALS: "NoChildrenForEphemerals",
    Code.NODEEXISTS: "NodeExists", Code.NOTEMPTY: "Directory not empty", Code.SESSIONEXPIRED: "Session expired",
    Code.INVALIDCALLBACK: "Invalid callback", Code.INVALIDACL: "InvalidACL", Code.AUTHFAILED: "AuthFailed",
    Code.SESSIONMOVED: "Session moved", Code.NOTREADONLY: "Not a read-only call",
    Code.EPHEMERALONLOCALSESSION: "Ephemeral node on local session", Code.NOWATCHER: "No such watcher",
    Code.REQUESTTIMEOUT: "Request timeout", Code.RECONFIGDISABLED: "Reconfig is disabled",
    Code.SESSIONCLOSEDREQUIRESASLAUTH: "Session closed because client failed to authenticate",
    Code.QUOTAEXCEEDED: "Quota has exceeded", Code.THROTTLEDOP: "Op throttled due to high load",
}


def keeper_message(code: int, path: str | None) -> str:
    """KeeperException.getMessage(): ``KeeperErrorCode = <text>[ for <path>]``."""
    text = _CODE_TEXT.get(code, f"Unknown error {code}")
    return f"KeeperErrorCode = {text}" + (f" for {path}" if path else "")


_CLI_TEXT: dict[int, str] = {
    Code.NONODE: "Node does not exist: {}",
    Code.NOCHILDRENFOREPHEMERALS: "Ephemerals cannot have children: {}",
    Code.NODEEXISTS: "Node already exists: {}",
    Code.NOTEMPTY: "Node not empty: {}",
    Code.NOTREADONLY: "Not a read-only call: {}",
    Code.INVALIDACL: "Acl is not valid : {}",
    Code.NOAUTH: "Insufficient permission : {}",
    Code.BADARGUMENTS: "Arguments are not valid : {}",
    Code.BADVERSION: "version No is not valid : {}",
    Code.RECONFIGINPROGRESS: "Another reconfiguration is in progress -- concurrent reconfigs not supported (yet)",
    Code.NEWCONFIGNOQUORUM: "No quorum of new config is connected and up-to-date with the leader of last "
                            "commmitted config - try invoking reconfiguration after new servers are connected "
                            "and synced",
}


def cli_message(exc: ZookeeperError, path: str | None = None) -> str:
    """What zkCli prints for a KeeperException from a command (CliWrapperException)."""
    return message_for(int(exc.code), exc.path if exc.path is not None else path)


def message_for(code: int, path: str | None) -> str:
    template = _CLI_TEXT.get(code)
    if template is not None:
        return template.format("null" if path is None else path)  # Java's string of a null path
    return keeper_message(code, path)


def code_name(code: int) -> str:
    try:
        return Code(code).name
    except ValueError:
        return str(code)
