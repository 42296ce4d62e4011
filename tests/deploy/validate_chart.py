#!/usr/bin/env python3
"""Checks everything under deploy/ and helm/ with the real engines, without a cluster.

- The Helm chart: `helm lint --strict` and `helm template` through Helm v4's library
  (helm-python-sdk), for the default values and every file in tests/deploy/values/; every
  rendered manifest validated against the Kubernetes JSON schemas (kubernetes-validate, the
  oldest supported and the newest shipped version, strict: unknown fields fail) or, for the
  Prometheus Operator's CRDs, against tests/deploy/schemas/; the deployment invariants (probes,
  drain-safe grace period, security context, secrets referenced and never rendered, checksum
  roll, network policy); the rendered config accepted by `switchyard-node --check`.
- The config renderer: the whole reference example round-trips through values and TOML.
- The Grafana dashboard and the alert rules: only metric names the node exports or cluster
  mode adds; every dashboard query parsed by promtool.
- compose.yaml: the Compose specification (compose-spec), services, mounts and the
  environment every config `*_env` key needs.
- The Dockerfile: hadolint, no findings.

Run by tests/tests/deploy/chart.rs. Exit status 0 when every check passes; each failure is
printed with what was being checked.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import helm_python as helm
import yaml

from chart_release import check_config_round_trip, check_refusals, check_release, check_shipped_files
from chart_render import KUBE_MAX, KUBE_MIN, NAMESPACE, manifests, render, validate_schemas
from checks import Checks
from image import check_compose, check_dockerfile
from monitoring import check_dashboard_and_rules


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repo", type=Path, required=True, help="repository root")
    p.add_argument("--node-bin", type=Path, required=True, help="switchyard-node binary")
    p.add_argument("--promtool", default=shutil.which("promtool") or "", help="promtool path")
    return p.parse_args()


def main() -> int:
    args = parse_args()
    repo = args.repo.resolve()
    chart_dir = repo / "helm/switchyard"
    c = Checks()
    helm.disable_logging()

    value_sets: list[tuple[str, dict]] = [("default values", {})]
    for f in sorted((repo / "tests/deploy/values").glob("*.yaml")):
        value_sets.append((f.name, yaml.safe_load(f.read_text()) or {}))

    chart = helm.Chart.load(chart_dir)
    all_objs: list[dict] = []
    for label, values in value_sets:
        report = helm.lint(chart_dir, values, strict=True, namespace=NAMESPACE)
        problems = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]
        c.check(not problems, f"{label}: helm lint --strict: {problems}")
        try:
            docs = render(chart, values)
        except helm.HelmError as e:
            c.check(False, f"{label}: helm template: {e}")
            continue
        objs = manifests(docs)
        all_objs += objs
        c.note(f"{label}: rendered {len(objs)} manifests: "
               + ", ".join(sorted({o['kind'] for o in objs})))
        validate_schemas(c, objs, label, repo / "tests/deploy/schemas")
        check_release(c, docs, chart.merge_values(values), label, args.node_bin)
    kinds = {o["kind"] for o in all_objs}
    for k in ("Deployment", "Service", "ConfigMap", "HorizontalPodAutoscaler", "PodDisruptionBudget",
              "ServiceAccount", "NetworkPolicy", "ServiceMonitor", "PrometheusRule"):
        c.check(k in kinds, f"some value set renders a {k}")
    check_shipped_files(c, repo, all_objs)
    check_config_round_trip(c, chart, repo, args.node_bin)
    check_refusals(c, chart)
    check_dashboard_and_rules(c, repo, args.promtool)
    check_compose(c, repo)
    check_dockerfile(c, repo)

    print(f"deploy checks: {c.passed} ok, {len(c.failures)} failed "
          f"(Kubernetes schemas {KUBE_MIN} and {KUBE_MAX})", flush=True)
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
