"""Write docs/api.md, the API reference, from the public modules' docstrings and signatures.

    python docs/apidoc.py           # regenerate docs/api.md
    python docs/apidoc.py --check   # exit 1 if docs/api.md is not what the code says

No dependency beyond the standard library (inspect): the output is Markdown that a repository
browser renders, and it is the same on every machine for the same code, so it is committed and a
test (tests/test_project.py) checks that it is up to date. Each module lists what its ``__all__``
names (or, without one, its public classes and functions defined there), in that order; each class
its public methods and properties, each with its signature and docstring.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

MODULES = [
    "zkpy",
    "zkpy.client.sync",
    "zkpy.client.aio",
    "zkpy.client.retry",
    "zkpy.errors",
    "zkpy.recipes",
    "zkpy.testing.pytest_plugin",
    "zkpy.testing.servers",
    "zkpy.testing.proxy",
]
OUT = Path(__file__).resolve().parent / "api.md"
HEADER = """# API reference

Generated from the docstrings by `python docs/apidoc.py` (do not edit by hand; a test checks that
it is up to date). The guides: [client.md](client.md), [recipes.md](recipes.md),
[testing.md](testing.md), [operations.md](operations.md).
"""


def _doc(obj: object) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.strip()


class _Raw(str):
    """An annotation as written (``from __future__ import annotations`` keeps them strings)."""

    def __repr__(self) -> str:
        return str(self)


def _signature(obj: object) -> str:
    try:
        sig = inspect.signature(obj)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "(...)"
    params = [p.replace(annotation=_Raw(p.annotation)) if isinstance(p.annotation, str) else p
              for p in sig.parameters.values()]
    ret = sig.return_annotation
    sig = sig.replace(parameters=params, return_annotation=_Raw(ret) if isinstance(ret, str) else ret)
    return re.sub(r" at 0x[0-9a-f]+>", ">", str(sig))  # a default's address differs from run to run


def _public_names(module: object) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    return [name for name, obj in vars(module).items()
            if not name.startswith("_") and (inspect.isclass(obj) or inspect.isfunction(obj))
            and getattr(obj, "__module__", None) == module.__name__]  # type: ignore[attr-defined]


def _members(cls: type) -> list[str]:
    lines = []
    for name, obj in vars(cls).items():
        if name.startswith("_") and name != "__init__":
            continue
        if isinstance(obj, property):
            lines.append(f"- **`{name}`** (property)" + (f": {_doc(obj).splitlines()[0]}" if _doc(obj) else ""))
        elif inspect.isfunction(obj) or isinstance(obj, (staticmethod, classmethod)):
            fn = obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
            text = _doc(fn) if name != "__init__" or _doc(fn) != _doc(cls) else ""
            entry = f"- **`{name}{_signature(fn)}`**"
            if text:
                entry += "\n\n" + "\n".join("  " + line if line else "" for line in text.splitlines())
            lines.append(entry)
    return lines


def _entry(qualname: str, obj: object) -> list[str]:
    if inspect.isclass(obj):
        bases = [b.__name__ for b in obj.__bases__ if b is not object]
        head = f"### class `{qualname}`" + (f"({', '.join(bases)})" if bases else "")
        out = [head, ""]
        if _doc(obj):
            out += [_doc(obj), ""]
        if issubclass(obj, BaseException):
            return out
        members = _members(obj)
        if members:
            out += members + [""]
        return out
    if callable(obj):
        fixture = getattr(obj, "_fixture_function_marker", None)
        if fixture is not None:  # a pytest fixture: its scope, the function under it
            fn = getattr(obj, "_get_wrapped_function", lambda: obj)()
            return [f"### fixture `{qualname}` (scope: {fixture.scope})", "", _doc(fn), ""]
        return [f"### `{qualname}{_signature(obj)}`", "", _doc(obj), ""]
    return [f"### `{qualname}`", "", f"`{obj!r}`" if not isinstance(obj, str) else f"`{obj}`", ""]


def render() -> str:
    out = [HEADER]
    for name in MODULES:
        module = importlib.import_module(name)
        out += [f"## `{name}`", ""]
        if _doc(module):
            out += [_doc(module), ""]
        for attr in _public_names(module):
            out += _entry(attr, getattr(module, attr))
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if OUT.read_text(encoding="utf-8") != text:
            print("docs/api.md is out of date: run `python docs/apidoc.py`", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
