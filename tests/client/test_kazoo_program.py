"""A kazoo program runs against zkpy's Client after the renames docs/client.md lists, and no others.

kazoo_docs_program.py is written with kazoo's names from the API calls of kazoo's documentation.
It runs once as it is (kazoo's KazooClient) and once after `RENAMES` (each of which must be a
row of the migration table in docs/client.md) against the same zkpy server, and both runs must
observe the same things; the same runs against Apache ZooKeeper 3.8 must observe them too.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

from zkpy.testing.servers import ServerProcess

HERE = Path(__file__).parent
DOC = HERE.parent.parent / "docs" / "client.md"

# (pattern, replacement, the kazoo and zkpy cells of the migration-table row that lists it)
RENAMES: list[tuple[str, str, str, str]] = [
    (r"from kazoo\.client import KazooClient, KazooState", "from zkpy import Client, KazooState",
     "`kazoo.client.KazooClient`", "`zkpy.Client`"),
    (r"KazooClient\((.*?)\btimeout=", r"Client(\1session_timeout=",
     "`KazooClient(hosts, timeout=10.0)`", "`Client(hosts, session_timeout=10.0)`"),
    (r"== KazooState\.", "in KazooState.",
     "`state == KazooState.LOST`", "`state in KazooState.LOST`"),
    (r"from kazoo\.exceptions import", "from zkpy.errors import",
     "`kazoo.exceptions`", "`zkpy.errors`"),
    (r"from kazoo\.protocol\.states import EventType", "from zkpy.wire.consts import EventType",
     "`kazoo.protocol.states.EventType`", "`zkpy.wire.consts.EventType`"),
    (r"from kazoo\.retry import KazooRetry", "from zkpy import KazooRetry",
     "`kazoo.retry.KazooRetry`", "`zkpy.KazooRetry`"),
]


def migrated_source() -> str:
    text = (HERE / "kazoo_docs_program.py").read_text()
    for pattern, replacement, _, _ in RENAMES:
        text, n = re.subn(pattern, replacement, text)
        assert n, f"rename {pattern!r} matched nothing"
    assert "kazoo" not in re.sub(r"#.*|\"\"\"[\s\S]*?\"\"\"", "", text), "kazoo is still used after the renames"
    return text


def run_program(source: str, hosts: str, root: str) -> list[Any]:
    namespace: dict[str, Any] = {"__name__": "kazoo_docs_program"}
    exec(compile(source, "kazoo_docs_program.py", "exec"), namespace)
    return namespace["main"](hosts, root)  # type: ignore[no-any-return]


def test_every_rename_is_in_the_migration_table() -> None:
    rows = [line for line in DOC.read_text().splitlines() if line.startswith("|")]
    for _, _, kazoo_cell, zkpy_cell in RENAMES:
        assert any(kazoo_cell in row and zkpy_cell in row for row in rows), \
            f"docs/client.md has no migration row {kazoo_cell} -> {zkpy_cell}"


def test_kazoo_program_gives_the_same_results_on_kazoo_and_zkpy(any_server: ServerProcess) -> None:
    """On a zkpy server (the acceptance) and, the same, on Apache ZooKeeper 3.8."""
    original = (HERE / "kazoo_docs_program.py").read_text()
    root = f"/kazoo-program-{uuid.uuid4().hex[:8]}"  # the program deletes it at its end
    with_kazoo = run_program(original, any_server.hosts, root)
    with_zkpy = run_program(migrated_source(), any_server.hosts, root)
    for got_kazoo, got_zkpy in zip(with_kazoo, with_zkpy):
        assert got_zkpy == got_kazoo
    assert len(with_zkpy) == len(with_kazoo)
    # the program observed what kazoo's documentation says it would (not merely the same)
    assert ("connected", True) in with_kazoo
    assert ("stopped, the listener saw LOST twice", True) in with_kazoo


def _section(title: str) -> str:
    text = DOC.read_text()
    start = text.index(title)
    end = text.find("\n#", start + len(title))
    return text[start:] if end < 0 else text[start:end]


def test_the_migration_table_covers_every_kazooclient_member() -> None:
    from kazoo.client import KazooClient

    table = _section("### KazooClient, member by member")
    client = KazooClient()  # not started: only its attributes are read
    members = {n for n in dir(client) if not n.startswith("_")} | \
              {n for n in vars(KazooClient) if not n.startswith("_")}
    missing = sorted(n for n in members if not re.search(rf"`[^`]*\b{n}\b", table))
    assert not missing, f"docs/client.md's KazooClient table lacks {missing}"
    # every method and property of KazooClient is there under its own name
    from zkpy import Client

    absent = sorted(n for n in vars(KazooClient) if not n.startswith("_") and not hasattr(Client, n))
    assert not absent, f"zkpy.Client lacks kazoo's {absent}"


def test_the_migration_table_covers_every_kazoo_recipe() -> None:
    import importlib
    import inspect
    import pkgutil

    import kazoo.recipe

    table = _section("### Recipes")
    missing = []
    for info in pkgutil.iter_modules(kazoo.recipe.__path__):
        module = importlib.import_module(f"kazoo.recipe.{info.name}")
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and obj.__module__ == module.__name__ and not name.startswith("_") \
                    and not issubclass(obj, BaseException) and not name.startswith("Base"):
                if not re.search(rf"`{info.name}\.{name}`|`{name}`", table):
                    missing.append(f"{info.name}.{name}")
    assert not missing, f"docs/client.md's recipe table lacks {missing}"
