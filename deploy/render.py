"""Render the Helm chart (deploy/helm/zkpy) with its default values into the plain manifests
(deploy/kubernetes/zkpy.yaml), without helm: ``python deploy/render.py`` writes them,
``--check`` fails when they differ from what is committed (tests/test_deploy.py runs it).

The chart's templates keep to a subset of Go's text/template that this renders as helm does:
``{{ .Values.a.b }}``, ``{{ .Release.Name }}``, ``{{ .Release.Namespace }}``, ``{{ .Chart.AppVersion }}``
and ``{{ if .Values.x }}`` ... ``{{ end }}`` (nested or not), with ``{{-`` and ``-}}`` trimming
the white space beside them; anything else in a template is an error here, so a template that
needs more fails its test before it reaches a cluster with another meaning.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parent / "helm" / "zkpy"
MANIFESTS = Path(__file__).resolve().parent / "kubernetes" / "zkpy.yaml"
RELEASE = {"Name": "zkpy", "Namespace": "default"}
_ACTION = re.compile(r"\{\{(-?)\s*(.*?)\s*(-?)\}\}", re.S)


class TemplateError(ValueError):
    pass


def render(text: str, values: dict[str, Any], chart: dict[str, Any], name: str = "template") -> str:
    """``text`` rendered (the subset in the module doc)."""
    out: list[str] = []
    shown = [True]  # one entry per open if: whether its body is rendered
    pos = 0
    for match in _ACTION.finditer(text):
        left, action, right = match.groups()
        chunk = text[pos:match.start()]
        if left:
            chunk = chunk.rstrip(" \t\r\n")
        if all(shown):
            out.append(chunk)
        pos = match.end()
        if right:
            while pos < len(text) and text[pos] in " \t\r\n":
                pos += 1
        if action.startswith("if "):
            shown.append(_truthy(_lookup(action[3:].strip(), values, chart, name)))
        elif action == "end":
            if len(shown) == 1:
                raise TemplateError(f"{name}: {{{{ end }}}} without an if")
            shown.pop()
        elif all(shown):
            out.append(str(_lookup(action, values, chart, name)))
    if len(shown) != 1:
        raise TemplateError(f"{name}: an if without its end")
    out.append(text[pos:])
    return "".join(out)


def _lookup(ref: str, values: dict[str, Any], chart: dict[str, Any], name: str) -> Any:
    roots = {"Values": values, "Release": RELEASE, "Chart": {"AppVersion": chart.get("appVersion")}}
    parts = ref.split(".")
    if len(parts) < 3 or parts[0] != "" or parts[1] not in roots:
        raise TemplateError(f"{name}: {{{{ {ref} }}}} is outside the subset deploy/render.py renders")
    node: Any = roots[parts[1]]
    for part in parts[2:]:
        if not isinstance(node, dict) or part not in node:
            raise TemplateError(f"{name}: {ref} is not in the values")
        node = node[part]
    return node


def _truthy(value: Any) -> bool:
    return bool(value) and value != 0


def render_chart() -> str:
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    docs = []
    for path in sorted((CHART / "templates").glob("*.yaml")):
        rendered = render(path.read_text(encoding="utf-8"), values, chart, path.name).strip()
        if rendered and any(not line.startswith("#") for line in rendered.splitlines() if line.strip()):
            docs.append(f"# Source: zkpy/templates/{path.name}\n{rendered}\n")
    head = ("# zkpy on Kubernetes: a 3-member ensemble, rendered from deploy/helm/zkpy with its default values\n"
            "# by `python deploy/render.py` (do not edit by hand). docs/operations.md, \"Running in containers\n"
            "# and Kubernetes\".\n")
    return head + "---\n".join(docs)


def main(argv: list[str]) -> int:
    text = render_chart()
    if argv[1:] == ["--check"]:
        if not MANIFESTS.exists() or MANIFESTS.read_text(encoding="utf-8") != text:
            print(f"{MANIFESTS} is out of date: run `python deploy/render.py`", file=sys.stderr)
            return 1
        return 0
    MANIFESTS.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
