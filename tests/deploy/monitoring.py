"""The Grafana dashboard and the alert rules: topics, metric names, promtool parsing."""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from pathlib import Path

import yaml

from checks import Checks

# Metrics that cluster mode adds (not yet in docs/metrics.md); dashboards and alerts may
# use them.
CLUSTER_METRICS = {
    "switchyard_redis_command_duration_seconds",
    "switchyard_redis_errors_total",
    "switchyard_redis_state",
    "switchyard_cluster_degraded",
    "switchyard_cluster_propagation_delay_seconds",
    "switchyard_cluster_events_total",
    "switchyard_cluster_permits_held",
}


def known_metrics(repo: Path) -> set[str]:
    text = (repo / "docs/metrics.md").read_text()
    return set(re.findall(r"`(switchyard_[a-z0-9_]+)`", text)) | CLUSTER_METRICS


def metric_names(expr: str) -> set[str]:
    names = set(re.findall(r"\b(switchyard_[a-z0-9_]+)", expr))
    return {re.sub(r"_(bucket|sum|count)$", "", n) for n in names}


def check_dashboard_and_rules(c: Checks, repo: Path, promtool: str) -> None:
    known = known_metrics(repo)
    dash = json.loads((repo / "deploy/grafana/switchyard-dashboard.json").read_text())
    exprs = [
        t["expr"]
        for p in dash["panels"]
        for t in p.get("targets", [])
        if "expr" in t
    ]
    c.check(len(exprs) >= 20, f"dashboard has its queries ({len(exprs)})")
    titles = " ".join(p["title"].lower() for p in dash["panels"])
    for topic in ("request rate", "error rate", "overhead", "breaker", "cooling", "lockouts",
                  "queue depth", "redis command latency", "propagation"):
        c.check(topic in titles, f"dashboard has a panel on {topic}")
    ids = [p["id"] for p in dash["panels"]]
    c.check(len(ids) == len(set(ids)), "dashboard panel ids are unique")
    for e in exprs:
        unknown = metric_names(e) - known
        c.check(not unknown, f"dashboard query uses only exported metrics: {sorted(unknown)}")
    alerts = yaml.safe_load((repo / "deploy/prometheus/alerts.yaml").read_text())
    names = []
    for g in alerts["groups"]:
        for r in g["rules"]:
            names.append(r["alert"])
            unknown = metric_names(r["expr"]) - known
            c.check(not unknown, f"alert {r['alert']} uses only exported metrics: {sorted(unknown)}")
    for want in ("SwitchyardBreakerOpen", "SwitchyardProviderAllConnectionsCooling",
                 "SwitchyardRedisErrors", "SwitchyardClusterDegraded",
                 "SwitchyardPropagationDelayHigh"):
        c.check(want in names, f"alert {want} exists")

    if not promtool:
        c.note("SKIPPED promtool parse of the dashboard queries: promtool not installed "
               "(Debian package prometheus; .ci/run installs it)")
        return
    # Each dashboard query as a recording rule, so promtool parses it with Prometheus's parser.
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}",
         "expr": e.replace("$__rate_interval", "5m").replace("$instance", ".*")}
        for i, e in enumerate(exprs)]}]}
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "dashboard-rules.yaml"
        path.write_text(yaml.safe_dump(rules))
        out = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True,
                             text=True, timeout=60)
        c.check(out.returncode == 0, f"promtool parses every dashboard query: {out.stdout}{out.stderr}")
