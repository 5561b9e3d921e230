"""Every dotted name that a docstring in src/zkpy cites in double backticks names something real.

A docstring that says ``member.peer.PeerCore`` or ``server.requests.Requests.run`` points the reader
at code; when the code moves and the sentence does not, the pointer is wrong. This check reads the
docstrings of every module, class and function with ``ast`` (nothing is imported to find them),
keeps the ``double-backticked`` names that are dotted and start with a zkpy name, and resolves each:

- the first component is ``zkpy``, a top-level entry of src/zkpy (read from the directory), or a
  sibling module of the docstring's own package (in ``zkpy/testing/sim/node.py``, ``checker.Checker``
  is ``zkpy.testing.sim.checker.Checker``; in a package's ``__init__.py``, its own modules); a name
  that resolves either way is accepted;
- the longest prefix that imports as a module is imported, the rest is walked with ``getattr``; on a
  class, a name is also accepted when it is a dataclass field, an annotation in the class body, or
  assigned as ``self.<name>`` anywhere in the class (or a base class defined in zkpy);
- a call written inside the backticks is stripped first: ``recover(...)`` is ``recover``.

An instance is cited by its class (``Counter.value``, ``TcpProxy.port``), not by a variable name
that a reader cannot look up and that may be a zkpy module's name too (``counter``, ``proxy``).

A bare name in double backticks is checked too when it is written the way Python names are and
ZooKeeper's are not (snake_case, with an underscore: ``report_touches``, ``_answers``): it must be
a name the code of src/zkpy uses somewhere (a function, a method, an attribute, a variable), a
word of one of its strings that are not docstrings (a metric, a command, a JSON field), or a name
of a module it imports (an ``mntr`` key is its name with ``zk_`` in front), so a docstring cannot
go on citing a method that was renamed or removed.
ZooKeeper's own names (``maxClientCnxns``, ``fastForwardDataBase``) are camelCase and left alone.

Not checked, because they are not Python references:

- text with ``/``, ``=``, whitespace, or a component that is not an identifier (``admin.*``,
  ``server.``): paths, settings, commands, families of keys;
- file names: a last component that is a file suffix (``quota.py``, ``zoo.cfg``, ``.jar``, ``.txt``)
  or digits (``zoo.cfg.dynamic.100000000``);
- zoo.cfg keys, which share their first word with zkpy packages (``server.N``, ``admin.serverPort``,
  ``client.portUnification``, ``quorum.auth.enableSasl``): a name that ``cli.zoocfg_keys.rule_for``
  knows as a key is a key.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import io
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from zkpy.cli.zoocfg_keys import rule_for

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "zkpy"

FILE_SUFFIXES = frozenset({"py", "pyx", "cfg", "txt", "jar", "md", "json", "log", "out", "pem", "jks", "p12",
                           "gz", "tmp", "bak", "sh"})
BACKTICKED = re.compile(r"``(.+?)``", re.S)


def top_level_names() -> frozenset[str]:
    """``zkpy`` and every module or package directly under src/zkpy."""
    names = {"zkpy"}
    for entry in PACKAGE.iterdir():
        if entry.is_dir() and (entry / "__init__.py").exists():
            names.add(entry.name)
        elif entry.suffix == ".py" and entry.stem != "__init__":
            names.add(entry.stem)
    names.discard("__main__")
    return frozenset(names)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_of(path: Path) -> tuple[str, Path]:
    """The package a module's relative names are read in: its own for an ``__init__.py``."""
    directory = path.parent
    return module_name(directory / "__init__.py"), directory


def sibling_modules(directory: Path) -> frozenset[str]:
    names = {p.stem for p in directory.glob("*.py") if p.stem != "__init__"}
    names |= {p.name for p in directory.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    return frozenset(names)


@dataclass(frozen=True)
class Citation:
    path: Path
    line: int
    name: str

    def where(self) -> str:
        return f"{self.path.relative_to(SRC.parent)}:{self.line}: ``{self.name}``"


def candidate(text: str) -> str | None:
    """The dotted Python name a backticked text cites, or None when it is no Python reference."""
    text = text.split("(", 1)[0]
    if not text or any(c in text for c in "/=") or any(c.isspace() for c in text):
        return None
    parts = text.split(".")
    if len(parts) < 2 or not all(p.isidentifier() for p in parts):
        # ".jar", "zoo.cfg.dynamic.100000000", "admin.*", "server."
        return None
    if parts[-1] in FILE_SUFFIXES:
        return None
    if rule_for(text) is not None:
        return None
    return text


def docstrings(source: str) -> Iterator[tuple[int, str]]:
    """(line of the docstring's first line, text) for the module and every class and function."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            yield body[0].value.lineno, body[0].value.value


def citations(path: Path, source: str) -> Iterator[Citation]:
    """Every dotted name the file's docstrings cite whose first component is a zkpy name."""
    tops = top_level_names()
    _, directory = package_of(path)
    siblings = sibling_modules(directory)
    for line, text in docstrings(source):
        for match in BACKTICKED.finditer(text):
            name = candidate(match.group(1))
            if name is None:
                continue
            first = name.split(".", 1)[0]
            if first in tops or first in siblings:
                yield Citation(path, line + text.count("\n", 0, match.start()), name)


class Resolver:
    """Resolves dotted names against the imported package; caches modules and class sources."""

    def __init__(self) -> None:
        self._class_names: dict[tuple[str, str], frozenset[str]] = {}

    def resolves(self, citation: Citation) -> bool:
        package, directory = package_of(citation.path)
        first = citation.name.split(".", 1)[0]
        bases = []
        if first in sibling_modules(directory):
            bases.append(package)
        if first in top_level_names():
            bases.append("" if first == "zkpy" else "zkpy")
        return any(self._resolve(base, citation.name) for base in bases)

    def _resolve(self, base: str, name: str) -> bool:
        parts = name.split(".")
        module: ModuleType | None = None
        rest: list[str] = []
        for cut in range(len(parts), 0, -1):
            dotted = ".".join(parts[:cut])
            qualified = f"{base}.{dotted}" if base else dotted
            try:
                module = importlib.import_module(qualified)
            except ModuleNotFoundError as exc:
                if exc.name is None or not f"{qualified}.".startswith(f"{exc.name}."):
                    raise  # the module exists, something it imports does not
                continue
            rest = parts[cut:]
            break
        if module is None:
            return False
        obj: object = module
        for index, attr in enumerate(rest):
            if hasattr(obj, attr):
                obj = getattr(obj, attr)
                continue
            # an instance attribute is the end of what can be walked: nothing may follow it
            return isinstance(obj, type) and index == len(rest) - 1 and attr in self._instance_names(obj)
        return True

    def _instance_names(self, cls: type) -> frozenset[str]:
        """Dataclass fields, class-body annotations and ``self.<name>`` assignments of a class and
        of its bases."""
        names: set[str] = set()
        for klass in cls.__mro__:
            if klass is object:
                continue
            if dataclasses.is_dataclass(klass):
                names.update(f.name for f in dataclasses.fields(klass))
            names.update(klass.__dict__.get("__annotations__", {}))
            names |= self._assigned_on_self(klass)
        return frozenset(names)

    def _assigned_on_self(self, klass: type) -> frozenset[str]:
        key = (klass.__module__, klass.__qualname__)
        if key in self._class_names:
            return self._class_names[key]
        found: set[str] = set()
        module = importlib.import_module(klass.__module__)
        file = getattr(module, "__file__", None)
        if file is not None and Path(file).suffix == ".py":
            tree = ast.parse(Path(file).read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and node.name == klass.__name__:
                    for inner in ast.walk(node):
                        targets: list[ast.expr] = []
                        if isinstance(inner, ast.Assign):
                            targets = list(inner.targets)
                        elif isinstance(inner, ast.AnnAssign | ast.AugAssign):
                            targets = [inner.target]
                        for target in targets:
                            for sub in ast.walk(target):
                                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) \
                                        and sub.value.id == "self":
                                    found.add(sub.attr)
                        if isinstance(inner, ast.AnnAssign) and isinstance(inner.target, ast.Name):
                            found.add(inner.target.id)
        self._class_names[key] = frozenset(found)
        return self._class_names[key]


def unresolved(files: list[tuple[Path, str]]) -> list[str]:
    resolver = Resolver()
    found = [c for path, source in files for c in citations(path, source) if not resolver.resolves(c)]
    return [c.where() for c in sorted(found, key=lambda c: (c.path, c.line))]


def package_files() -> list[tuple[Path, str]]:
    return [(path, path.read_text(encoding="utf-8")) for path in sorted(PACKAGE.rglob("*.py"))]


def test_every_dotted_name_a_docstring_cites_resolves() -> None:
    missing = unresolved(package_files())
    assert not missing, "docstrings cite names that do not exist:\n" + "\n".join(missing)


BARE_PYTHON_NAME = re.compile(r"_?[a-z][a-z0-9]*(?:_[a-z0-9]+)+")


def code_names(files: list[tuple[Path, str]]) -> frozenset[str]:
    """Every identifier the code uses, every word of its strings but docstrings, and every name of
    a module it imports."""
    names: set[str] = set()
    imported: set[str] = set()
    for _, source in files:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.NAME:
                names.add(token.string)
        tree = ast.parse(source)
        docs = {id(body[0].value) for node in ast.walk(tree)
                if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                and (body := node.body) and isinstance(body[0], ast.Expr)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                names.update(re.findall(r"\w+", node.value))
            elif isinstance(node, ast.Import):
                imported.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module)
    for module in imported - {m for m in imported if m.split(".")[0] == "zkpy"}:
        try:
            names.update(dir(importlib.import_module(module)))
        except ImportError:  # an optional dependency that is not installed here
            pass
    return frozenset(names)


def unknown_bare_names(files: list[tuple[Path, str]], known: frozenset[str]) -> list[str]:
    out = []
    for path, source in files:
        for line, text in docstrings(source):
            for match in BACKTICKED.finditer(text):
                name = match.group(1).split("(", 1)[0]
                if BARE_PYTHON_NAME.fullmatch(name) and name not in known and name.removeprefix("zk_") not in known:
                    out.append(Citation(path, line + text.count("\n", 0, match.start()), name).where())
    return out


def test_every_bare_python_name_a_docstring_cites_is_used_by_the_code() -> None:
    files = package_files()
    missing = unknown_bare_names(files, code_names(files))
    assert not missing, "docstrings cite names that no code uses:\n" + "\n".join(missing)


def test_a_bare_name_no_code_uses_is_reported() -> None:
    path = PACKAGE / "server" / "learner.py"
    source = '"""Touches go out through ``report_touches`` (once ``take_touches``) and ``tickTime``."""\n'
    known = code_names(package_files())
    assert unknown_bare_names([(path, source)], known) == ["src/zkpy/server/learner.py:1: ``take_touches``"]


def test_a_bogus_name_is_reported_with_its_file_and_line() -> None:
    path = PACKAGE / "member" / "peer.py"
    source = '"""The member core.\n\nIt lives in ``member.peer.PeerCore``; see ``member.nothing_here``."""\n'
    assert unresolved([(path, source)]) == ["src/zkpy/member/peer.py:3: ``member.nothing_here``"]


def test_names_relative_to_the_package_and_instance_attributes_resolve() -> None:
    path = PACKAGE / "testing" / "sim" / "node.py"
    source = ('class A:\n    """Reads ``checker.Checker``, ``terms`` and ``member.peer.PeerCore.nothing_here``,\n'
              '    not ``admin.serverPort``, ``quota.py`` or ``server.N``."""\n')
    assert unresolved([(path, source)]) == ["src/zkpy/testing/sim/node.py:2: ``member.peer.PeerCore.nothing_here``"]
