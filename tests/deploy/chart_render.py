"""Rendering the chart with Helm v4's library and validating manifests against schemas."""

from __future__ import annotations

import json
from pathlib import Path

import helm_python as helm
import jsonschema
import kubernetes_validate
import yaml

from checks import Checks

# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and the newest the
# schema package ships.
KUBE_MIN = "1.30.0"
KUBE_MAX = kubernetes_validate.latest_version()

RELEASE = "sy"
NAMESPACE = "switchyard"


def render(chart: helm.Chart, values: dict) -> dict[str, list[dict]]:
    """Template path -> manifests (NOTES.txt kept as a one-element list of {'text': ...})."""
    chart.validate_schema(values)
    out = chart.render(values=values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    docs: dict[str, list[dict]] = {}
    for path, text in out.items():
        if path.endswith("NOTES.txt"):
            docs[path] = [{"text": text}]
            continue
        docs[path] = [d for d in yaml.safe_load_all(text) if d]
    return docs


def manifests(docs: dict[str, list[dict]]) -> list[dict]:
    return [d for path, ds in docs.items() if not path.endswith("NOTES.txt") for d in ds]


def find(objs: list[dict], kind: str, suffix: str = "") -> list[dict]:
    return [
        o for o in objs if o.get("kind") == kind and o["metadata"]["name"].endswith(suffix)
    ]


def one(c: Checks, objs: list[dict], kind: str, suffix: str, label: str) -> dict | None:
    found = find(objs, kind, suffix)
    if c.check(len(found) == 1, f"{label}: exactly one {kind} *{suffix} (got {len(found)})"):
        return found[0]
    return None


# ---------------------------------------------------------------------------------------------


def validate_schemas(c: Checks, objs: list[dict], label: str, crd_dir: Path) -> None:
    crd_schemas = {}
    for f in crd_dir.glob("*.json"):
        crd_schemas[f.stem] = json.loads(f.read_text())
    for o in objs:
        name = f"{label}: {o.get('kind')}/{o.get('metadata', {}).get('name')}"
        group = o.get("apiVersion", "")
        if group.startswith("monitoring.coreos.com/"):
            key = f"{o['kind'].lower()}-monitoring-{group.split('/')[1]}"
            schema = crd_schemas.get(key)
            if not c.check(schema is not None, f"{name}: a CRD schema {key}.json"):
                continue
            errors = sorted(
                jsonschema.Draft202012Validator(schema).iter_errors(o), key=lambda e: e.path
            )
            c.check(not errors, f"{name}: CRD schema: {[e.message for e in errors][:3]}")
            continue
        for version in (KUBE_MIN, KUBE_MAX):
            try:
                kubernetes_validate.validate(o, version, strict=True)
                c.check(True, name)
            except kubernetes_validate.ValidationError as e:
                c.check(False, f"{name}: Kubernetes {version} schema: {str(e).splitlines()[0]}")
            except kubernetes_validate.SchemaNotFoundError as e:
                c.check(False, f"{name}: no Kubernetes {version} schema: {e}")
