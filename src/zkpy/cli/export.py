"""``zkpy export`` and ``zkpy import``: a subtree to and from JSON (format: ``export_format``).

Both use zkpy's own AsyncClient and keep thousands of requests in flight instead of one round
trip per node: export reads a level of the tree at a time, every node's ACL at once and the data
and children in multi-reads of up to ``READ_OPS`` nodes; import sends multi batches (at most ``BATCH_OPS`` ops and about ``BATCH_BYTES``
bytes each, ``BATCHES_IN_FLIGHT`` in flight). A session's requests are applied in order, so a
batch that creates a parent always lands before the batches that create its children.

Import, in order: (1) the whole file is read and checked; (2) the missing ancestors of the
target root are created (empty, the client's default ACL, as ``mkdir -p``); (3) which target
nodes exist is read; with ``--existing fail`` (the default) any existing one stops the import
before anything is written, naming them; (4) batches are sent; a failed batch is atomic (a
multi) and stops the import, naming the node and the error; (5) ACLs are set that a create
could not set (see below) and, with ``overwrite``, the ACLs of the existing nodes.
``skip`` leaves existing nodes as they are (their missing children are still created);
``overwrite`` sets their data and ACL; nodes the file does not name are never deleted. The root
node "/" always exists: it is never a conflict, and only ``overwrite`` changes it.

A node the file gives children but whose ACL grants no-one-in-particular CREATE (no
``world:anyone`` entry with "c") is created with its ACL plus ``ip:<this client's address>``
with all permissions, so that its children can be created under it; its own ACL is set once all
nodes exist. The window never opens the node to anyone but the importing host.

Not restored: stat fields (zxids, times, versions: the server assigns them), ephemeral nodes
(never exported), container and TTL kinds (clients cannot see them: they come back persistent).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import click

from zkpy.cli.export_format import (
    Export,
    FormatError,
    NodeRecord,
    child_path,
    parent_of,
    preorder,
    read_export,
    relocate,
    stat_fields,
    within,
    write_export,
)
from zkpy.cli.progress import ProgressBar, progress_wanted
from zkpy.client import AsyncClient
from zkpy.errors import NoAuthError, NoNodeError, ZookeeperError
from zkpy.wire.consts import Perms
from zkpy.wire.proto import ACL, Id, Stat

READ_OPS = 1000
READ_BYTES = 1024 * 1024  # data (or children's names, guessed) per multi-read
BATCH_OPS = 1000
BATCH_BYTES = 512 * 1024  # well under jute.maxbuffer (1 MiB) for the whole multi
BATCHES_IN_FLIGHT = 8
Progress = Callable[[int, int | None], None]  # (done, total or None)


class ImportConflict(Exception):
    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        super().__init__(f"{len(paths)} node(s) exist already: {shown} (nothing was written; "
                         f"--existing skip or --existing overwrite to import anyway)")


class RedactedACL(ValueError):
    """ZooKeeper 3.6+ shows ``user:x`` for a digest id to a session without ADMIN on the node:
    exporting it would lose the hash and lock the node on import, so export stops instead."""


class ImportStopped(Exception):
    """A batch failed: the message names the node, the error and how much was written."""


# ---------------------------------------------------------------------------- export


async def export_tree(client: AsyncClient, root: str, *, stats: bool = True,
                      progress: Progress = lambda _d, _t: None) -> Export:
    """The subtree at ``root`` as an Export (ephemerals skipped, /zookeeper left out).

    Level by level: every node's ACL (with its Stat) is asked for at once, then the data and the
    children in multi-reads of up to ``READ_OPS`` nodes and about ``READ_BYTES`` of data each."""
    if within(root, "/zookeeper"):
        raise ValueError(f"{root}: the /zookeeper subtree is the server's own; it is not exported")
    total: int | None
    try:
        total = await client.get_all_children_number(root) + 1
    except NoNodeError:
        raise
    except ZookeeperError:
        total = None
    records: dict[str, NodeRecord] = {}
    children: dict[str, list[str]] = {}
    skipped: list[str] = []
    level = [root]
    while level:
        acls = await asyncio.gather(*(client.get_acl(p) for p in level), return_exceptions=True)
        alive: list[tuple[str, list[ACL], Stat]] = []
        for path, got in zip(level, acls):
            if isinstance(got, NoNodeError) and path != root:
                continue  # deleted while the export ran
            if isinstance(got, BaseException):
                raise got
            acl, stat = got
            if stat.ephemeralOwner:
                skipped.append(path)
                continue
            if any(a.id.scheme == "digest" and a.id.id.endswith(":x") for a in acl):
                raise RedactedACL(f"{path}: the server hid the digest hash of its ACL (the session has READ but "
                                  f"not ADMIN there): export as an identity with ADMIN on it (--auth) or as a super "
                                  f"user")
            alive.append((path, acl, stat))
        data = await _multi_read(client, "get", [(p, s.dataLength) for p, _, s in alive])
        parents = [(p, s.numChildren) for p, _, s in alive if s.numChildren]
        names = await _multi_read(client, "children", parents)
        level = []
        for path, acl, _stat in alive:
            got = data[path]
            if isinstance(got, NoNodeError) and path != root:
                continue
            if isinstance(got, BaseException):
                raise got
            value, data_stat = got
            records[path] = NodeRecord(path, value, acl, stat_fields(data_stat) if stats else None)
            kids = names.get(path, [])
            if isinstance(kids, NoNodeError):
                continue
            if isinstance(kids, BaseException):
                raise kids
            if path == "/":
                kids = [n for n in kids if n != "zookeeper"]
            if kids:
                children[path] = kids
                level.extend(child_path(path, n) for n in kids)
        progress(len(records) + len(skipped), total)
    progress(len(records) + len(skipped), len(records) + len(skipped))
    return Export(root, [records[p] for p in preorder(root, children) if p in records], sorted(skipped))


async def _multi_read(client: AsyncClient, kind: str, items: list[tuple[str, int]]) -> dict[str, Any]:
    """``kind`` ("get" or "children") for each (path, size hint) in multi-reads, all in flight at
    once: path -> the result or the ZookeeperError of that path."""
    chunks: list[list[str]] = []
    size = 0
    for path, hint in items:
        cost = 64 + len(path) + (hint if kind == "get" else 32 * hint)
        if not chunks or len(chunks[-1]) >= READ_OPS or size + cost > READ_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append(path)
        size += cost
    replies = await asyncio.gather(*(client.multi_read([(kind, p) for p in chunk]) for chunk in chunks))
    return {p: r for chunk, results in zip(chunks, replies) for p, r in zip(chunk, results)}


# ---------------------------------------------------------------------------- import


@dataclass(slots=True)
class ImportReport:
    created: int = 0
    overwritten: int = 0
    skipped: list[str] = field(default_factory=list)  # existing nodes left as they were


def _opens_create(acl: Sequence[ACL]) -> bool:
    return any(a.id.scheme == "world" and a.id.id == "anyone" and a.perms & Perms.CREATE for a in acl)


def _op_bytes(path: str, data: bytes, acl: Sequence[ACL]) -> int:
    return 64 + len(path.encode()) + len(data) + sum(16 + len(a.id.scheme) + len(a.id.id) for a in acl)


async def import_tree(client: AsyncClient, export: Export, at: str | None = None, existing: str = "fail",
                      progress: Progress = lambda _d, _t: None) -> ImportReport:
    """Write ``export`` under ``at`` (default: its own root); see the module doc for the rules."""
    if existing not in ("fail", "skip", "overwrite"):
        raise ValueError(f"existing must be fail, skip or overwrite, not {existing!r}")
    at = export.root if at is None else at
    if within(at, "/zookeeper"):
        raise ValueError(f"{at}: the /zookeeper subtree is the server's own")
    report = ImportReport()
    if not export.nodes:
        return report
    plan = [(relocate(n.path, export.root, at), n) for n in export.nodes]
    system = [t for t, _ in plan if within(t, "/zookeeper")]
    if system:
        raise ValueError(f"{system[0]}: the /zookeeper subtree is the server's own; nothing was written")
    if at != "/" and parent_of(at) != "/":
        await client.ensure_path(parent_of(at))
    # (3) what exists: nothing below a missing root (one request), else ask for every node
    present: set[str] = set()
    if at == "/" or await _exists(client, at):
        found = await asyncio.gather(*(_exists(client, t) for t, _ in plan))
        present = {t for (t, _), there in zip(plan, found) if there}
    conflicts = sorted(present - {"/"})
    if existing == "fail" and conflicts:
        raise ImportConflict(conflicts)
    has_children = {parent_of(t) for t, _ in plan[1:]}
    temp: list[tuple[str, list[ACL]]] = []  # nodes created with the importer's ip added: (path, final ACL)
    acl_after: list[tuple[str, list[ACL]]] = []
    ops: list[tuple[str, str, bytes, list[ACL]]] = []  # (kind, path, data, acl)
    mine: ACL | None = None
    for target, node in plan:
        if target in present:
            if existing == "overwrite":
                ops.append(("set", target, node.data, node.acl))
                acl_after.append((target, node.acl))
            else:
                report.skipped.append(target)
            continue
        acl = node.acl
        if target in has_children and not _opens_create(acl):
            mine = mine or await _own_ip_acl(client)
            temp.append((target, acl))
            acl = [*acl, mine]
        ops.append(("create", target, node.data, acl))
    total = len(ops) + len(temp) + len(acl_after)
    done = await _send_batches(client, ops, report, lambda d: progress(d, total))
    late = temp + acl_after
    results = await asyncio.gather(*(client.set_acl(p, a) for p, a in late), return_exceptions=True)
    for (path, _acl), result in zip(late, results):
        if isinstance(result, BaseException):
            raise ImportStopped(f"{path}: setting its ACL failed: {result!r} (all nodes were written)")
    progress(done + len(temp) + len(acl_after), total)
    return report


async def _exists(client: AsyncClient, path: str) -> bool:
    try:
        return await client.exists(path) is not None
    except NoAuthError:  # exists needs READ on a node that is there (ZooKeeper 3.6+)
        return True


async def _own_ip_acl(client: AsyncClient) -> ACL:
    """All permissions for the address the server sees this client at (whoami)."""
    for info in await client.whoami():
        if info.authScheme == "ip":
            return ACL(int(Perms.ALL), Id("ip", info.user))
    raise ImportStopped("the server did not say this client's address (whoami): cannot create nodes under "
                        "an ACL that denies CREATE")


async def _send_batches(client: AsyncClient, ops: list[tuple[str, str, bytes, list[ACL]]],
                        report: ImportReport, progress: Callable[[int], None]) -> int:
    batches: list[list[tuple[str, str, bytes, list[ACL]]]] = []
    size = 0
    for op in ops:
        cost = _op_bytes(op[1], op[2], op[3])
        if not batches or len(batches[-1]) >= BATCH_OPS or size + cost > BATCH_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(op)
        size += cost
    in_flight: list[tuple[list[tuple[str, str, bytes, list[ACL]]], asyncio.Task[list[Any]]]] = []
    done = 0

    def start(batch: list[tuple[str, str, bytes, list[ACL]]]) -> asyncio.Task[list[Any]]:
        tx = client.transaction()
        for kind, path, data, acl in batch:
            if kind == "create":
                tx.create(path, data, acl)
            else:
                tx.set_data(path, data)
        return asyncio.ensure_future(tx.commit())

    pending = iter(batches)
    failure: str | None = None
    try:
        while True:
            while failure is None and len(in_flight) < BATCHES_IN_FLIGHT:
                batch = next(pending, None)
                if batch is None:
                    break
                in_flight.append((batch, start(batch)))
            if not in_flight:
                break
            batch, task = in_flight.pop(0)
            try:
                results = await task
            except ZookeeperError as exc:
                failure = failure or f"a batch starting at {batch[0][1]} failed: {exc!r}"
                continue
            bad = [(op, r) for op, r in zip(batch, results) if isinstance(r, ZookeeperError)
                   and r.__class__.__name__ != "RuntimeInconsistency"]
            if bad or any(isinstance(r, BaseException) for r in results):
                if failure is None:
                    op, err = bad[0] if bad else (batch[0], results[0])
                    failure = f"{op[1]}: {err!r}"
                continue
            if failure is None:
                for kind, _, _, _ in batch:
                    if kind == "create":
                        report.created += 1
                    else:
                        report.overwritten += 1
                done += len(batch)
                progress(done)
    finally:
        for _, task in in_flight:
            task.cancel()
    if failure is not None:
        raise ImportStopped(f"import stopped at {failure}; {done} of {len(ops)} writes were done "
                            f"(batches are atomic: the failed batch wrote nothing)")
    return done


# ---------------------------------------------------------------------------- the commands


def _auth_pairs(auth: Sequence[str]) -> list[tuple[str, bytes]]:
    pairs = []
    for item in auth:
        scheme, sep, credential = item.partition(":")
        if not sep or not scheme:
            raise click.BadParameter(f"{item!r}: expected SCHEME:CREDENTIAL, e.g. digest:user:password",
                                     param_hint="--auth")
        pairs.append((scheme, credential.encode()))
    return pairs


async def _with_client(server: str, auth: Sequence[tuple[str, bytes]], timeout: float, job: Any) -> Any:
    client = AsyncClient(server, auth=auth, max_outstanding=10_000)
    try:
        await client.start(timeout=timeout)
        return await job(client)
    finally:
        await client.close()


def _describe(exc: ZookeeperError) -> str:
    hint = " (the session lacks a permission: --auth SCHEME:CREDENTIAL)" if isinstance(exc, NoAuthError) else ""
    return f"{exc!r}{hint}"


def _fail(message: str, code: int = 1) -> None:
    click.echo(f"zkpy: {message}", err=True)
    sys.exit(code)


_server_option = click.option("--server", default="127.0.0.1:2181", show_default=True,
                              help="connect string: HOST:PORT[,HOST:PORT...][/chroot]")
_auth_option = click.option("--auth", multiple=True, metavar="SCHEME:CREDENTIAL",
                            help="add this auth to the session first (as zkCli.sh's addauth), "
                                 "e.g. digest:user:password (repeatable)")
_timeout_option = click.option("--timeout", type=float, default=15.0, show_default=True,
                               help="seconds to wait for a session")


@click.command("export", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("path")
@_server_option
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="write the JSON here (default: stdout)")
@click.option("--base64", "force_base64", is_flag=True, help="write all data as data_base64, also text")
@click.option("--no-stat", is_flag=True, help="leave out the (informational) stat fields")
@_auth_option
@_timeout_option
def export_command(path: str, server: str, output: str | None, force_base64: bool, no_stat: bool,
                   auth: tuple[str, ...], timeout: float) -> None:
    """Write the subtree at PATH (data, ACLs, structure) as JSON: see docs/export.md.

    Ephemeral nodes are skipped (listed in the file), /zookeeper is never exported."""
    pairs = _auth_pairs(auth)
    with ProgressBar(f"export {path}", progress_wanted(output_to_stdout=output is None)) as bar:
        try:
            export = asyncio.run(_with_client(server, pairs, timeout, lambda c: export_tree(
                c, path, stats=not no_stat, progress=bar.update)))
        except (ZookeeperError, ValueError) as exc:
            _fail(f"export {path} from {server}: {_describe(exc)}" if isinstance(exc, ZookeeperError) else str(exc))
    if output is None:
        write_export(sys.stdout, export, force_base64)
        sys.stdout.flush()
    else:
        directory = os.path.dirname(os.path.abspath(output))
        fd, tmp = tempfile.mkstemp(prefix=".zkpy-export-", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                write_export(out, export, force_base64)
            os.replace(tmp, output)
        except BaseException:
            os.unlink(tmp)
            raise
    skipped = f" ({len(export.skipped_ephemerals)} ephemeral(s) skipped)" if export.skipped_ephemerals else ""
    click.echo(f"exported {len(export.nodes)} znode(s) under {path}{skipped}", err=True)


@click.command("import", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@_server_option
@click.option("--at", help="the path the export's root becomes (default: the path it was exported from)")
@click.option("--existing", type=click.Choice(["fail", "skip", "overwrite"]), default="fail", show_default=True,
              help="nodes that exist already: fail (write nothing), skip them, or overwrite their data and ACL")
@_auth_option
@_timeout_option
def import_command(file: str, server: str, at: str | None, existing: str, auth: tuple[str, ...],
                   timeout: float) -> None:
    """Create the nodes of an export FILE ('-': stdin) with their data and ACLs: see docs/export.md."""
    pairs = _auth_pairs(auth)
    try:
        with click.open_file(file, encoding="utf-8") as f:
            export = read_export(json.load(f))
    except (OSError, ValueError) as exc:  # FormatError and JSONDecodeError are ValueErrors
        _fail(f"{file}: {exc}", 2)
    if at is not None and (not at.startswith("/") or (at != "/" and at.endswith("/"))):
        _fail(f"--at {at!r}: not an absolute znode path", 2)
    with ProgressBar(f"import {file}", progress_wanted(output_to_stdout=False)) as bar:
        try:
            report = asyncio.run(_with_client(server, pairs, timeout, lambda c: import_tree(
                c, export, at, existing, progress=bar.update)))
        except ImportConflict as exc:
            _fail(str(exc))
        except ImportStopped as exc:
            _fail(str(exc))
        except (ZookeeperError, ValueError) as exc:
            _fail(f"import into {server}: {_describe(exc)}" if isinstance(exc, ZookeeperError) else str(exc))
    target = at if at is not None else export.root
    parts = [f"{report.created} created"]
    if report.overwritten:
        parts.append(f"{report.overwritten} overwritten")
    if report.skipped:
        parts.append(f"{len(report.skipped)} existing skipped")
    click.echo(f"imported under {target}: {', '.join(parts)}", err=True)


__all__ = ["FormatError", "ImportConflict", "ImportStopped", "RedactedACL", "export_command", "export_tree", "import_command",
           "import_tree"]
