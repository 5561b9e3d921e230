"""The Kubernetes manifests and the Helm chart (deploy/), checked without a cluster and without
helm: the chart renders (``deploy/render.py``, the subset of Go templates it uses) into the
committed plain manifests; its values match values.schema.json; every object, with the options
off and on, is valid against Kubernetes' own schemas (kubernetes-validate, strict); and what the
objects say of the image agrees with the Dockerfile and with zkpy (ports, entrypoint, probes, the
variables read, a zoo.cfg zkpy loads without a WARN)."""

from __future__ import annotations

import importlib.util
import json
import logging
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from zkpy.cli.container import CONTAINER_ADDRESSES, IMAGE_DEFAULTS, with_statefulset, zoo_cfg_text
from zkpy.cli.jvmflags import as_zoo_cfg
from zkpy.cli.main import main
from zkpy.cli.properties import parse_properties
from zkpy.cli.zoocfg import config_from_properties
from zkpy.cli.zoocfg_keys import rule_for

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "deploy" / "helm" / "zkpy"
K8S_VERSION = "1.30.0"
_spec = importlib.util.spec_from_file_location("deploy_render", ROOT / "deploy" / "render.py")
assert _spec is not None and _spec.loader is not None
render_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render_module)


def values(**overrides: Any) -> dict[str, Any]:
    base = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    return {**base, **overrides}


def objects(vals: dict[str, Any]) -> list[dict[str, Any]]:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    docs = []
    for path in sorted((CHART / "templates").glob("*.yaml")):
        text = render_module.render(path.read_text(encoding="utf-8"), vals, chart, path.name)
        docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


ALL_ON = {"tlsSecret": "zkpy-tls", "superDigestSecret": "zkpy-super", "serviceMonitor": True}


def test_the_plain_manifests_are_the_chart_rendered_with_its_defaults() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "deploy" / "render.py"), "--check"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    committed = [d for d in yaml.safe_load_all((ROOT / "deploy" / "kubernetes" / "zkpy.yaml").read_text()) if d]
    assert committed == objects(values())


def test_the_values_and_their_schema() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(values(), schema)
    jsonschema.validate(values(**ALL_ON), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(values(replicas=0), schema)
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    assert chart["apiVersion"] == "v2" and chart["name"] == "zkpy" and chart["appVersion"] == values()["image"]["tag"]


@pytest.mark.parametrize("options", [{}, ALL_ON], ids=["defaults", "tls-super-servicemonitor"])
def test_every_object_is_valid_for_kubernetes(options: dict[str, Any]) -> None:
    kinds = []
    for obj in objects(values(**options)):
        kinds.append(obj["kind"])
        if obj["apiVersion"].startswith("monitoring.coreos.com/"):  # a CRD: no schema in Kubernetes itself
            assert obj["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics"}]
            continue
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    expected = ["PodDisruptionBudget", "Service", "Service", "StatefulSet"]
    assert sorted(kinds) == sorted(expected + (["ServiceMonitor"] if options else []))


def _statefulset(vals: dict[str, Any]) -> dict[str, Any]:
    return next(o for o in objects(vals) if o["kind"] == "StatefulSet")


def _dockerfile() -> str:
    return (ROOT / "Dockerfile").read_text(encoding="utf-8")


def test_the_objects_agree_with_the_image() -> None:
    sts = _statefulset(values(**ALL_ON))
    pod = sts["spec"]["template"]["spec"]
    [container] = pod["containers"]
    exposed = {int(p) for p in re.search(r"^EXPOSE (.+)$", _dockerfile(), re.M).group(1).split()}  # type: ignore[union-attr]
    assert {p["containerPort"] for p in container["ports"]} == exposed
    assert pod["securityContext"]["runAsUser"] == 1000 and "--uid=1000" in _dockerfile()
    assert 'ENTRYPOINT ["tini", "--", "zkpy", "server", "--from-env"]' in _dockerfile()
    assert "command" not in container and "args" not in container  # the image's entrypoint runs
    for probe in (container["livenessProbe"], container["readinessProbe"]):
        command = probe["exec"]["command"]
        assert command[:2] == ["zkpy", "probe"]
        parsed = main.get_command(None, "probe").make_context("probe", command[2:])  # type: ignore[arg-type,union-attr]
        assert parsed.params["kind"] in ("live", "ready")
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {IMAGE_DEFAULTS["ZOO_DATA_DIR"], IMAGE_DEFAULTS["ZOO_DATA_LOG_DIR"], "/tls"} <= mounts
    assert sts["spec"]["serviceName"] == "zkpy-hs" and pod["affinity"]["podAntiAffinity"]
    pdb = next(o for o in objects(values()) if o["kind"] == "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    names = {e["name"] for e in container["env"]}
    official = {*IMAGE_DEFAULTS, "ZOO_MY_ID", "ZOO_SERVERS", "ZOO_4LW_COMMANDS_WHITELIST", "ZOO_CFG_EXTRA"}
    assert names <= official | {"ZKPY_REPLICAS", "ZKPY_PEER_SERVICE", "SERVER_JVMFLAGS", "SUPER_DIGEST"}


def _pod_zoo_cfg(vals: dict[str, Any]) -> dict[str, str]:
    env = {e["name"]: e["value"] for e in _statefulset(vals)["spec"]["template"]["spec"]["containers"][0]["env"]
           if "value" in e}
    return parse_properties(zoo_cfg_text(with_statefulset({**env, "HOSTNAME": "zkpy-1"})))


def test_a_pod_gets_a_zoo_cfg_zkpy_loads_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    props = _pod_zoo_cfg(values())
    assert props["server.3"] == "zkpy-2.zkpy-hs:2888:3888;2181"
    with caplog.at_level(logging.WARNING, logger="zkpy.config"):
        config = config_from_properties(props, "zoo.cfg", lambda _path: "2\n",
                                        flags=as_zoo_cfg({}, CONTAINER_ADDRESSES))  # as --from-env reads it
    assert [r.getMessage() for r in caplog.records] == []
    assert config.quorum is not None and config.quorum.my_id == 2 and config.metrics_http_port == 7000
    assert (config.client_port, config.client_port_address, config.quorum.quorum_listen_on_all_ips) == (
        2181, "0.0.0.0", True)
    tls = _pod_zoo_cfg(values(**ALL_ON))
    unknown = [key for key in tls if rule_for(key) is None and not key.startswith("server.")]
    assert unknown == [] and tls["ssl.keyStore.type"] == "PEM" and tls["sslQuorum"] == "true"


def test_the_renderer_trims_as_go_templates_and_refuses_the_rest() -> None:
    chart = {"appVersion": "1"}
    text = "a:\n{{- if .Values.on }}\n  b: {{ .Values.x.y }}\n{{- end }}\nc: {{ .Release.Name }}\n"
    assert render_module.render(text, {"on": True, "x": {"y": 5}}, chart) == "a:\n  b: 5\nc: zkpy\n"
    assert render_module.render(text, {"on": False, "x": {"y": 5}}, chart) == "a:\nc: zkpy\n"
    for bad in ("{{ toYaml .Values.x }}", "{{ .Values.missing }}", "{{- if .Values.on }}", "{{ end }}"):
        with pytest.raises(render_module.TemplateError):
            render_module.render(bad, {"on": True, "x": {}}, chart)


def test_the_probe_commands_run() -> None:
    result = CliRunner().invoke(main, ["probe", "ready", "--port", "1", "--timeout", "0.5", "--quiet"])
    assert result.exit_code == 3 and result.output == ""
