"""The shell's commands run against a ZooKeeper session (zkpy's blocking ``Client``).

``Shell.execute(line)`` runs one zkCli.sh command line and reports through an ``Output``
(``output.py``): what zkCli prints, or with ``--json`` one document per command
(``{"command", "ok", "result" | "error", "output"}``). Quotas are in ``quota.py``.

Invariants owned here:
- one watcher per shell, as zkCli's default watcher: every ``-w`` registers the same callback,
  so a node watched twice fires once; events print as ``WATCHER::`` / ``WatchedEvent ...``;
- the events a command causes for this session print before the next command starts (and,
  with ``--json``, before the command's document): the server sends them before the reply, so
  waiting for the dispatch thread to catch up after each command is enough;
- the history numbers commands from 0 in the order they were entered, ``redo`` included
  (it stores the command it re-runs), as ZooKeeperMain does.

Commands use the client's public API, except two that need what it folds away: ``get`` and
``config`` (null data, which ``Client.get`` returns as ``b""``) and ``create`` (null data, as
zkCli sends for ``create /path``) send their request records through ``AsyncClient._call``,
registering the shell's watcher as the sync client wraps it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zkpy.client.core import ClientState, WatchedEvent, WatchRegistration
from zkpy.client.sync import Client
from zkpy.errors import ConnectionClosedError, ZookeeperError
from zkpy.wire.consts import AddWatchMode, CreateMode, EventType, KeeperState, OpCode, Perms, WatcherType
from zkpy.wire.proto import (
    ACL,
    CreateRequest,
    CreateTTLRequest,
    GetDataRequest,
    Id,
    Stat,
)

from . import parse as P
from . import quota
from .output import Output
from .parse import CommandFailed, Quit

OPEN_ACL = [ACL(int(Perms.ALL), Id("world", "anyone"))]
CONFIG_NODE = "/zookeeper/config"
DEFAULT_BATCH = 1000

_STATE_OF_CLIENT = {
    ClientState.CONNECTED: KeeperState.SYNC_CONNECTED, ClientState.CONNECTED_READ_ONLY: KeeperState.CONNECTED_READ_ONLY,
    ClientState.SUSPENDED: KeeperState.DISCONNECTED, ClientState.EXPIRED: KeeperState.EXPIRED,
    ClientState.AUTH_FAILED: KeeperState.AUTH_FAILED, ClientState.CLOSED: KeeperState.CLOSED,
}


class Shell:
    """One shell: a connection (or none), the history and the command handlers."""

    def __init__(self, hosts: str, output: Output, session_timeout: float = 30.0,
                 connect_timeout: float = 15.0, read_only: bool = False) -> None:
        self.hosts = hosts
        self.read_only = read_only
        self.output = output
        self.session_timeout = session_timeout
        self.connect_timeout = connect_timeout
        self.keep_trying = False  # connect() returns at once and the client keeps trying (interactive)
        self.client: Client | None = None
        self.history: list[str] = []
        self._watcher: Any = None
        self._handlers: dict[str, Callable[[P.Parsed], Any]] = {
            "ls": self._ls, "get": self._get, "set": self._set, "create": self._create, "delete": self._delete,
            "deleteall": self._deleteall, "stat": self._stat, "getAcl": self._get_acl, "setAcl": self._set_acl,
            "addauth": self._addauth, "sync": self._sync, "addWatch": self._add_watch,
            "removewatches": self._removewatches, "whoami": self._whoami, "getEphemerals": self._get_ephemerals,
            "getAllChildrenNumber": self._children_number, "config": self._config, "reconfig": self._reconfig,
            "listquota": self._listquota, "setquota": self._setquota, "delquota": self._delquota,
            "history": self._history, "redo": self._redo, "connect": self._connect, "close": self._close,
            "quit": self._quit, "printwatches": self._printwatches, "version": self._version,
        }

    # ------------------------------------------------------------------ connection

    def connect(self, hosts: str | None = None) -> None:
        """Close the current session (a Closed event) and open one to ``hosts``; CommandFailed
        when the connect string is bad or no server accepts a session in time. With
        ``keep_trying`` (the interactive shell, as zkCli) it returns at once and the client keeps
        trying until a server accepts the session or the shell closes it."""
        if hosts is not None:
            self.hosts = hosts
        self.close_session()
        try:
            client = Client(self.hosts, session_timeout=self.session_timeout, read_only=self.read_only)
        except ValueError as exc:  # a connect string that does not parse
            raise CommandFailed(f"Unable to connect to {self.hosts}: {exc}", "BAD_ARGUMENT") from None
        self._watcher = client._wrap(self._on_event)

        def on_state(state: ClientState) -> None:
            ks = _STATE_OF_CLIENT.get(state)
            if ks is not None:
                self.output.event(ks, EventType.NONE, None)

        client.add_listener(lambda state: client.dispatch(on_state, state))
        self.client = client
        if self.keep_trying:
            client.start_async(timeout=None)
            return
        try:
            client.start(timeout=self.connect_timeout)
        except ZookeeperError as exc:
            self.client = None
            client.close()
            raise CommandFailed(f"Unable to connect to {self.hosts}: {exc}", "NOT_CONNECTED") from None

    def close_session(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            client.close()

    def drain(self) -> None:
        """Wait until every watch event received so far is printed."""
        client = self.client
        if client is not None and not client.closed:
            try:
                client.dispatch(lambda: None).result(timeout=5)
            except Exception:  # noqa: BLE001 - a closed client has nothing left to print
                pass

    def _on_event(self, event: WatchedEvent) -> None:
        self.output.event(event.state, event.type, event.path)

    def _client(self) -> Client:
        """The session's client; while it reconnects, requests wait for it (or fail with
        ConnectionLoss), as zkCli's do. No session at all is "Not connected"."""
        c = self.client
        if c is None or c.closed:
            raise CommandFailed("Not connected", "NOT_CONNECTED")
        return c

    def _call(self, op: int, record: Any, path: str | None, watch: WatchRegistration | None = None) -> Any:
        c = self._client()
        return c.run(c.aio._call, op, record, path, watch)

    # ------------------------------------------------------------------ running lines

    def execute(self, line: str) -> bool:
        """Run one command line; True when it succeeded (an empty line succeeds)."""
        words = P.tokenize(line)
        if not words:
            return True
        self.history.append(line)
        return self._execute_words(line, words)

    def _execute_words(self, line: str, words: list[str]) -> bool:
        out = self.output
        ok = True
        result: Any = None
        error: dict[str, str] | None = None
        try:
            parsed = P.parse(words)
            for note in parsed.notes:
                out.line(note, error=True)
            result = self._handlers[parsed.name](parsed)
        except Quit:
            raise
        except P.UnknownCommand as exc:
            for u in P.usage_all():
                out.line(u, error=True)
            out.line(str(exc), error=True)
            ok, error = False, {"code": "UNKNOWN_COMMAND", "message": str(exc)}
        except P.UsageError as exc:
            out.line(str(exc), error=True)
            ok, error = False, {"code": "USAGE", "message": str(exc)}
        except P.ShellError as exc:
            out.line(str(exc), error=True)
            ok, error = False, {"code": "BAD_ARGUMENT", "message": str(exc)}
        except CommandFailed as exc:
            if not exc.printed:
                out.line(str(exc), error=True)
            ok, error = False, {"code": exc.code, "message": str(exc)}
        except ConnectionClosedError:
            out.line("Not connected", error=True)
            ok, error = False, {"code": "NOT_CONNECTED", "message": "Not connected"}
        except ValueError as exc:  # the client refused an argument the shell let through
            out.line(str(exc), error=True)
            ok, error = False, {"code": "BAD_ARGUMENT", "message": str(exc)}
        except ZookeeperError as exc:
            msg = P.cli_message(exc)
            out.line(msg, error=True)
            ok, error = False, {"code": P.code_name(int(exc.code)), "message": msg}
        # the events the command caused (the server sends them before its reply) print now,
        # under the printwatches setting they arrived under, before the next command runs
        self.drain()
        if out.json_mode:
            doc: dict[str, Any] = {"command": line, "ok": ok}
            if ok:
                doc["result"] = result
            else:
                doc["error"] = error
            doc["output"] = out.take_lines()
            out.document(doc)
        return ok

    # ------------------------------------------------------------------ helpers

    def _path(self, p: P.Parsed, index: int = 0, sequential: bool = False) -> str:
        path = p.args[index]
        P.validate_path(path, sequential)
        return path

    def _version(self, p: P.Parsed) -> dict[str, str]:
        from zkpy.admin.fourletter import full_version

        v = full_version().split(",", 1)[0]  # the server's, without the build date
        self.output.line(f"ZooKeeper CLI version: {v}")
        return {"version": v}

    @staticmethod
    def _int(text: str, what: str) -> int:
        try:
            return int(text)
        except ValueError:
            raise CommandFailed(f"{what} must be a number: {text}", "BAD_ARGUMENT") from None

    def _get_data(self, path: str, watch: bool) -> tuple[bytes | None, Stat]:
        reg = WatchRegistration("data", path, self._watcher) if watch else None
        resp = self._call(OpCode.GET_DATA, GetDataRequest(path, watch), path, reg)
        return resp.data, resp.stat

    def _children(self, path: str, watch: bool = False) -> list[str]:
        return self._client().get_children(path, self._on_event if watch else None)

    def _tree_bfs(self, path: str, sort: bool = False) -> list[str]:
        """ZKUtil.listSubTreeBFS: the node, then its children level by level (in the server's
        order, or sorted at each level as ``ls -R`` prints them)."""
        out = [path]
        i = 0
        while i < len(out):
            node = out[i]
            i += 1
            children = self._children(node)
            for child in sorted(children) if sort else children:
                out.append(("" if node == "/" else node) + "/" + child)
        return out

    def _print_stat(self, stat: Stat) -> None:
        for line in P.format_stat(stat):
            self.output.line(line)

    # ------------------------------------------------------------------ reads

    def _ls(self, p: P.Parsed) -> Any:
        path = self._path(p)
        c = self._client()
        if p.flag("R"):
            nodes = self._tree_bfs(path, sort=True)
            for node in nodes:
                self.output.line(node)
            return {"paths": nodes}
        watch = self._on_event if p.flag("w") else None
        if p.flag("s"):
            children, stat = c.get_children(path, watch, include_stat=True)
        else:
            children, stat = c.get_children(path, watch), None
        children = sorted(children)
        self.output.line(P.format_list(children))
        result: dict[str, Any] = {"children": children}
        if stat is not None:
            self._print_stat(stat)
            result["stat"] = P.stat_json(stat)
        return result

    def _get(self, p: P.Parsed) -> Any:
        path = self._path(p)
        data, stat = self._get_data(path, p.flag("w"))
        self.output.line(P.format_data(data))
        result: dict[str, Any] = dict(P.data_json(data))
        if p.flag("s"):
            self._print_stat(stat)
            result["stat"] = P.stat_json(stat)
        return result

    def _stat(self, p: P.Parsed) -> Any:
        path = self._path(p)
        stat = self._client().exists(path, self._on_event if p.flag("w") else None)
        if stat is None:
            raise CommandFailed(f"Node does not exist: {path}", "NONODE")
        self._print_stat(stat)
        return {"stat": P.stat_json(stat)}

    def _get_acl(self, p: P.Parsed) -> Any:
        path = self._path(p)
        acl, stat = self._client().get_acl(path)
        for line in P.format_acl(acl):
            self.output.line(line)
        result: dict[str, Any] = {"acl": [{"scheme": a.id.scheme, "id": a.id.id, "perms": P.perm_string(a.perms)}
                                          for a in acl]}
        if p.flag("s"):
            self._print_stat(stat)
            result["stat"] = P.stat_json(stat)
        return result

    def _get_ephemerals(self, p: P.Parsed) -> Any:
        path = p.args[0] if p.args else "/"
        nodes = self._client().get_ephemerals(path)
        self.output.line(P.format_list(nodes))
        return {"paths": nodes}

    def _children_number(self, p: P.Parsed) -> Any:
        path = self._path(p)
        n = self._client().get_all_children_number(path)
        self.output.line(str(n))
        return {"count": n}

    def _whoami(self, p: P.Parsed) -> Any:
        infos = self._client().whoami()
        self.output.line("Auth scheme: User")
        for info in infos:
            self.output.line(f"{info.authScheme}: {info.user}")
        return {"identities": [{"scheme": i.authScheme, "user": i.user} for i in infos]}

    def _sync(self, p: P.Parsed) -> Any:
        path = self._path(p)
        try:
            self._client().sync(path)
        except ZookeeperError as exc:
            raise CommandFailed(f"Sync has failed. rc={int(exc.code)}", P.code_name(int(exc.code))) from None
        self.output.line("Sync is OK")
        return {"path": path}

    # ------------------------------------------------------------------ writes

    def _create(self, p: P.Parsed) -> Any:
        e, s, c, ttl_text = p.flag("e"), p.flag("s"), p.flag("c"), p.value("t")
        if c and (e or s):
            raise CommandFailed("-c cannot be combined with -s or -e. Containers cannot be ephemeral or sequential.",
                                "BAD_ARGUMENT")
        if ttl_text is not None and e:
            raise CommandFailed("TTLs cannot be used with Ephemeral znodes", "BAD_ARGUMENT")
        if ttl_text is not None and c:
            raise CommandFailed("TTLs cannot be used with Container znodes", "BAD_ARGUMENT")
        path = self._path(p, sequential=s)
        data = p.args[1].encode("utf-8") if len(p.args) > 1 else None
        acl = OPEN_ACL
        if len(p.args) > 2:
            acl, messages = P.parse_acl(p.args[2])
            for m in messages:
                self.output.line(m, error=True)
        record: Any
        if ttl_text is not None:
            ttl = self._int(ttl_text, "ttl")
            mode = CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL if s else CreateMode.PERSISTENT_WITH_TTL
            op, record = OpCode.CREATE_TTL, CreateTTLRequest(path, data, acl, int(mode), ttl)
        elif c:
            op, record = OpCode.CREATE_CONTAINER, CreateRequest(path, data, acl, int(CreateMode.CONTAINER))
        else:
            mode = {(False, False): CreateMode.PERSISTENT, (False, True): CreateMode.PERSISTENT_SEQUENTIAL,
                    (True, False): CreateMode.EPHEMERAL, (True, True): CreateMode.EPHEMERAL_SEQUENTIAL}[(e, s)]
            op, record = OpCode.CREATE, CreateRequest(path, data, acl, int(mode))
        try:
            resp = self._call(op, record, path)
        except ZookeeperError as exc:
            if int(exc.code) == -114:  # zkCli prints InvalidACL twice: the exception, then its own text
                self.output.line(P.keeper_message(-114, path), error=True)
            raise
        self.output.line(f"Created {resp.path}")
        return {"path": resp.path}

    def _set(self, p: P.Parsed) -> Any:
        path = self._path(p)
        version = self._int(p.value("v") or "-1", "version")
        stat = self._client().set(path, p.args[1].encode("utf-8"), version)
        result: dict[str, Any] = {"path": path}
        if p.flag("s"):
            self._print_stat(stat)
            result["stat"] = P.stat_json(stat)
        return result

    def _delete(self, p: P.Parsed) -> Any:
        path = self._path(p)
        version = self._int(p.value("v") or "-1", "version")
        self._client().delete(path, version)
        return {"path": path}

    def _deleteall(self, p: P.Parsed) -> Any:
        path = self._path(p)
        batch = self._int(p.value("b") or str(DEFAULT_BATCH), "batch size")
        nodes = self._tree_bfs(path)
        nodes.reverse()
        c = self._client()
        failed = False
        if batch <= 0:  # zkCli sends a batch when it reaches the size: never, until the end
            batch = len(nodes)
        for i in range(0, len(nodes), batch):  # every batch is tried, as zkCli does
            tx = c.transaction()
            for node in nodes[i:i + batch]:
                tx.delete(node)
            if any(isinstance(r, ZookeeperError) for r in tx.commit()):
                failed = True
        if failed:
            raise CommandFailed("Failed to delete some node(s) in the subtree!", "DELETE_FAILED")
        return {"deleted": len(nodes)}

    def _set_acl(self, p: P.Parsed) -> Any:
        path = self._path(p)
        version = self._int(p.value("v") or "-1", "version")
        acl, messages = P.parse_acl(p.args[1])
        for m in messages:
            self.output.line(m, error=True)
        c = self._client()
        if p.flag("R"):  # as zkCli: a node that refuses is reported, the others are still set
            failed: list[str] = []
            for node in self._tree_bfs(path):
                try:
                    c.set_acl(node, acl, version)
                except ZookeeperError as exc:
                    self.output.line(P.keeper_message(int(exc.code), node), error=True)
                    failed.append(node)
            if failed:
                raise CommandFailed(f"setAcl -R failed on {', '.join(failed)}", "PARTIAL", printed=True)
            return {"path": path}
        stat = c.set_acl(path, acl, version)
        result: dict[str, Any] = {"path": path}
        if p.flag("s"):
            self._print_stat(stat)
            result["stat"] = P.stat_json(stat)
        return result

    def _addauth(self, p: P.Parsed) -> Any:
        cred = p.args[1].encode("utf-8") if len(p.args) > 1 else b""
        self._client().add_auth(p.args[0], cred)
        return {"scheme": p.args[0]}

    # ------------------------------------------------------------------ watches

    def _add_watch(self, p: P.Parsed) -> Any:
        mode_name = p.value("m") or "PERSISTENT_RECURSIVE"
        modes = {"PERSISTENT": AddWatchMode.PERSISTENT, "PERSISTENT_RECURSIVE": AddWatchMode.PERSISTENT_RECURSIVE}
        if mode_name not in modes:
            raise P.UsageError(P.usage_line("addWatch"))
        path = self._path(p)
        self._client().add_watch(path, self._on_event, modes[mode_name] == AddWatchMode.PERSISTENT_RECURSIVE)
        return {"path": path, "mode": mode_name}

    def _removewatches(self, p: P.Parsed) -> Any:
        path = self._path(p)
        kind = WatcherType.CHILDREN if p.flag("c") else WatcherType.DATA if p.flag("d") else WatcherType.ANY
        self._client().remove_watches(path, kind)
        return {"path": path, "type": kind.name}

    def _printwatches(self, p: P.Parsed) -> Any:
        if p.args and p.args[0] in ("on", "off"):
            self.output.print_watches = p.args[0] == "on"
        else:
            self.output.line(f"printwatches is {'on' if self.output.print_watches else 'off'}")
        return {"printwatches": self.output.print_watches}

    # ------------------------------------------------------------------ config

    def _config(self, p: P.Parsed) -> Any:
        data, stat = self._get_data(CONFIG_NODE, p.flag("w"))
        text = (data or b"").decode("utf-8", "replace")
        if p.flag("c"):
            text = client_config(text)
        return self._config_result(p, text, stat)

    def _config_result(self, p: P.Parsed, text: str, stat: Any) -> dict[str, Any]:
        """Print a config (and its Stat with -s), as config and reconfig do; the JSON result."""
        self.output.line(text)
        result: dict[str, Any] = {"config": text}
        if p.flag("s"):
            self._print_stat(stat)
            result["stat"] = P.stat_json(stat)
        return result

    def _reconfig(self, p: P.Parsed) -> Any:
        joining = p.value("add")
        leaving = p.value("remove")
        members = p.value("members")
        if p.value("file") is not None:
            try:
                with open(p.value("file") or "", encoding="utf-8") as f:
                    members = ",".join(line.strip() for line in f
                                       if line.strip().startswith("server.") or line.strip().startswith("version"))
            except OSError as exc:
                raise CommandFailed(str(exc), "BAD_ARGUMENT") from None
        version = -1
        if p.value("v") is not None:
            try:
                version = int(p.value("v") or "", 16)
            except ValueError:
                raise CommandFailed(f"-v must be a hex number: {p.value('v')}", "BAD_ARGUMENT") from None
        try:
            data, stat = self._client().reconfig(joining, leaving, members, version)
        except ZookeeperError as exc:  # zkCli's reconfig errors name no path
            code = int(exc.code)
            raise CommandFailed(P.message_for(code, None), P.code_name(code)) from None
        text = data.decode("utf-8", "replace")
        self.output.line("Committed new configuration:")
        return self._config_result(p, text, stat)

    # ------------------------------------------------------------------ quotas

    def _listquota(self, p: P.Parsed) -> Any:
        return quota.listquota(self._client(), self.output, self._path(p))

    def _setquota(self, p: P.Parsed) -> Any:
        limits = {key: self._int(p.value(letter) or "", "quota")
                  for letter, key in quota.OPTIONS if p.value(letter) is not None}
        return quota.setquota(self._client(), self._path(p), limits)

    def _delquota(self, p: P.Parsed) -> Any:
        return quota.delquota(self._client(), self._path(p), [key for letter, key in quota.OPTIONS if p.flag(letter)])

    # ------------------------------------------------------------------ the shell itself

    def _history(self, p: P.Parsed) -> Any:
        first = max(0, len(self.history) - 11)
        entries = [(i, self.history[i]) for i in range(first, len(self.history))]
        for i, cmd in entries:
            self.output.line(f"{i} - {cmd}")
        return {"history": [{"index": i, "command": cmd} for i, cmd in entries]}

    def _redo(self, p: P.Parsed) -> Any:
        index = self._int(p.args[0], "cmdno")
        if index < 0 or index >= len(self.history) - 1:
            raise CommandFailed("Command index out of range", "BAD_ARGUMENT")
        line = self.history[index]
        words = P.tokenize(line)
        if words[0] == "redo":
            raise CommandFailed("No redoing redos", "BAD_ARGUMENT")
        self.history[-1] = line
        parsed = P.parse(words)
        for note in parsed.notes:
            self.output.line(note, error=True)
        return self._handlers[parsed.name](parsed)

    def _connect(self, p: P.Parsed) -> Any:
        self.connect(p.args[0] if p.args else None)
        return {"hosts": self.hosts}

    def _close(self, p: P.Parsed) -> Any:
        self.close_session()
        return None

    def _quit(self, p: P.Parsed) -> Any:
        raise Quit()


def client_config(text: str) -> str:
    """``config -c``: the version and the client addresses of the servers (ConfigUtils)."""
    version = ""
    addrs: list[str] = []
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key == "version":
            version = value
        elif key.startswith("server.") and ";" in value:
            client = value.split(";", 1)[1]
            host = value.split(":", 1)[0]
            addrs.append(client if ":" in client else f"{host}:{client}")
    return f"{version} {','.join(addrs)}"
