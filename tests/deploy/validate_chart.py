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
- compose.yaml: services, mounts and the environment every config `*_env` key needs.
- The Dockerfile: hadolint, no findings.

Run by tests/tests/deploy_chart.rs. Exit status 0 when every check passes; each failure is
printed with what was being checked.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import helm_python as helm
import jsonschema
import kubernetes_validate
import yaml

# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and the newest the
# schema package ships.
KUBE_MIN = "1.30.0"
KUBE_MAX = kubernetes_validate.latest_version()

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

RELEASE = "sy"
NAMESPACE = "switchyard"


class Checks:
    """Collects failures instead of stopping at the first one."""

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.passed = 0

    def check(self, ok: bool, what: str) -> bool:
        if ok:
            self.passed += 1
        else:
            self.failures.append(what)
            print(f"FAIL: {what}", flush=True)
        return ok

    def note(self, text: str) -> None:
        print(text, flush=True)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repo", type=Path, required=True, help="repository root")
    p.add_argument("--node-bin", type=Path, required=True, help="switchyard-node binary")
    p.add_argument("--promtool", default=shutil.which("promtool") or "", help="promtool path")
    return p.parse_args()


# ---------------------------------------------------------------------------------------------
# Rendering


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
# Kubernetes schemas


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


# ---------------------------------------------------------------------------------------------
# Invariants of the rendered chart


def env_names(config: object) -> set[str]:
    """Every environment variable a config names through a `*_env` key."""
    names: set[str] = set()
    if isinstance(config, dict):
        for k, v in config.items():
            if k.endswith("_env") and isinstance(v, str) and v:
                names.add(v)
            else:
                names |= env_names(v)
    elif isinstance(config, list):
        for v in config:
            names |= env_names(v)
    return names


def node_check(c: Checks, node_bin: Path, toml_text: str, label: str) -> None:
    """`switchyard-node --check` on a config, with a dummy value for every variable it names."""
    config = tomllib.loads(toml_text)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for i, name in enumerate(sorted(env_names(config))):
        env[name] = f"dummy-secret-value-{i:04d}-for-the-check"
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "switchyard.toml"
        path.write_text(toml_text)
        try:
            out = subprocess.run(
                [str(node_bin), "--config", str(path), "--check"],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            c.check(
                out.returncode == 0,
                f"{label}: switchyard-node --check exit {out.returncode}: {out.stderr.strip()}",
            )
        except OSError as e:
            c.check(False, f"{label}: cannot run {node_bin}: {e}")


def check_release(
    c: Checks, docs: dict[str, list[dict]], values: dict, label: str, node_bin: Path
) -> None:
    objs = manifests(docs)
    v = values
    c.check(not find(objs, "Secret"), f"{label}: the chart renders no Secret")

    cm = one(c, objs, "ConfigMap", "-config", label)
    config: dict = {}
    if cm is not None:
        toml_text = cm["data"]["switchyard.toml"]
        try:
            config = tomllib.loads(toml_text)
        except tomllib.TOMLDecodeError as e:
            c.check(False, f"{label}: rendered config is not TOML: {e}")
        else:
            cl = config.get("cluster", {})
            c.check(cl.get("mode") == "redis", f"{label}: cluster.mode = redis")
            want_url = v["redis"]["url"] or (
                f"redis://{RELEASE}-switchyard-redis.{NAMESPACE}.svc:6379/0"
                if v["redis"]["bundled"]["enabled"]
                else None
            )
            if want_url:
                c.check(cl.get("redis_url") == want_url, f"{label}: redis_url {cl.get('redis_url')}")
            srv = config.get("server", {})
            c.check(
                srv.get("listen") == f"0.0.0.0:{v['node']['ports']['client']}"
                and srv.get("admin_listen") == f"0.0.0.0:{v['node']['ports']['admin']}",
                f"{label}: listeners on the pod's ports",
            )
            node_check(c, node_bin, toml_text, label)

    dep = one(c, objs, "Deployment", "-node", label)
    if dep is not None:
        spec = dep["spec"]
        pod = spec["template"]["spec"]
        ctr = pod["containers"][0]
        hpa_on = v["node"]["autoscaling"]["enabled"]
        c.check(("replicas" in spec) != hpa_on, f"{label}: replicas set iff no HPA")
        ports = {p["name"]: p["containerPort"] for p in ctr["ports"]}
        c.check(
            ctr["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "admin"}
            and ctr["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "admin"},
            f"{label}: readiness /readyz and liveness /healthz on the admin port",
        )
        c.check(
            ports.get("admin") == v["node"]["ports"]["admin"]
            and ports.get("http") == v["node"]["ports"]["client"],
            f"{label}: container ports",
        )
        # Drain safety: SIGKILL comes only after preStop + shutdown_grace_ms.
        grace_ms = config.get("server", {}).get("shutdown_grace_ms", 30000)
        pre = ctr.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
        c.check(
            pre == v["node"]["preStopSleepSeconds"],
            f"{label}: preStop sleeps {v['node']['preStopSleepSeconds']} s (got {pre})",
        )
        c.check(
            pod["terminationGracePeriodSeconds"] >= pre + math.ceil(grace_ms / 1000) + 1,
            f"{label}: terminationGracePeriodSeconds {pod['terminationGracePeriodSeconds']} "
            f"covers preStop {pre} s + shutdown_grace_ms {grace_ms}",
        )
        strategy = spec["strategy"]["rollingUpdate"]
        c.check(strategy["maxUnavailable"] == 0, f"{label}: rolling update never drops capacity")
        sc, psc = ctr["securityContext"], pod["securityContext"]
        c.check(
            psc.get("runAsNonRoot") is True
            and psc.get("runAsUser", 0) != 0
            and sc.get("readOnlyRootFilesystem") is True
            and sc.get("allowPrivilegeEscalation") is False
            and sc.get("capabilities", {}).get("drop") == ["ALL"],
            f"{label}: non-root, read-only root fs, no privilege escalation, no capabilities",
        )
        ann = spec["template"]["metadata"]["annotations"]
        c.check(
            re.fullmatch(r"[0-9a-f]{64}", ann.get("checksum/config", "")) is not None,
            f"{label}: checksum/config annotation",
        )
        mode = v["node"]["podAntiAffinity"]
        aff = pod.get("affinity", {}).get("podAntiAffinity", {})
        if mode == "hard":
            c.check("requiredDuringSchedulingIgnoredDuringExecution" in aff, f"{label}: hard anti-affinity")
        elif mode == "soft":
            c.check("preferredDuringSchedulingIgnoredDuringExecution" in aff, f"{label}: soft anti-affinity")
        else:
            c.check(not aff, f"{label}: no anti-affinity when turned off")
        env = {e["name"]: e for e in ctr.get("env", [])}
        c.check(
            env.get("HOSTNAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
            == "metadata.name",
            f"{label}: node id from the pod name",
        )
        # Every secret the config names is provided by a Secret reference, never a value.
        mgmt = v["secrets"]["management"]
        if mgmt["existingSecret"]:
            ref = env.get("SWITCHYARD_MANAGEMENT_KEY", {}).get("valueFrom", {}).get("secretKeyRef")
            c.check(
                ref == {"name": mgmt["existingSecret"], "key": mgmt["key"]},
                f"{label}: management key from Secret {mgmt['existingSecret']}",
            )
        if v["redis"]["existingSecret"]:
            ref = env.get("SWITCHYARD_REDIS_URL", {}).get("valueFrom", {}).get("secretKeyRef")
            c.check(
                ref == {"name": v["redis"]["existingSecret"], "key": v["redis"]["existingSecretKey"]},
                f"{label}: Redis URL from Secret",
            )
        from_secret = [e["secretRef"]["name"] for e in ctr.get("envFrom", []) if "secretRef" in e]
        named = env_names(config) - {"SWITCHYARD_MANAGEMENT_KEY"}
        if named:
            c.check(
                from_secret == [v["secrets"]["keysSecret"]],
                f"{label}: keys {sorted(named)} come from Secret {v['secrets']['keysSecret']}",
            )
        c.check(
            all("value" not in e for n, e in env.items() if n in env_names(config)),
            f"{label}: no secret value inline in the pod spec",
        )

    hpa = find(objs, "HorizontalPodAutoscaler")
    if v["node"]["autoscaling"]["enabled"]:
        if c.check(len(hpa) == 1, f"{label}: HPA rendered"):
            kinds = [m["type"] for m in hpa[0]["spec"]["metrics"]]
            want = ["Resource"] + (["Pods"] if v["node"]["autoscaling"]["inFlight"]["enabled"] else [])
            c.check(kinds == want, f"{label}: HPA metrics {kinds}")
    else:
        c.check(not hpa, f"{label}: no HPA")

    pdbs = find(objs, "PodDisruptionBudget", "-node")
    c.check(len(pdbs) == int(v["node"]["pdb"]["enabled"]), f"{label}: node PDB iff enabled")

    svc = one(c, objs, "Service", f"{RELEASE}-switchyard", label)
    admin = one(c, objs, "Service", "-admin", label)
    if svc is not None and admin is not None:
        c.check([p["targetPort"] for p in svc["spec"]["ports"]] == ["http"], f"{label}: client Service")
        c.check(
            [p["targetPort"] for p in admin["spec"]["ports"]] == ["admin"]
            and admin["spec"]["type"] == "ClusterIP",
            f"{label}: admin Service, cluster-internal",
        )

    coord = find(objs, "Deployment", "-coordinator")
    if v["coordinator"]["enabled"]:
        if c.check(len(coord) == 1, f"{label}: coordinator Deployment"):
            cs = coord[0]["spec"]
            args = cs["template"]["spec"]["containers"][0]["args"]
            c.check(cs["replicas"] == v["coordinator"]["replicas"], f"{label}: coordinator replicas")
            c.check(
                args == ["--config", "/etc/switchyard/switchyard.toml", "--listen",
                         f"0.0.0.0:{v['coordinator']['port']}"],
                f"{label}: coordinator command line {args}",
            )
            c.check(len(find(objs, "Service", "-coordinator")) == 1, f"{label}: coordinator Service")
    else:
        c.check(not coord, f"{label}: no coordinator")

    redis = find(objs, "Deployment", "-redis")
    if v["redis"]["bundled"]["enabled"]:
        if c.check(len(redis) == 1, f"{label}: bundled Redis"):
            c.check(
                redis[0]["metadata"]["annotations"].get("switchyard.io/not-for-production") == "true",
                f"{label}: bundled Redis labelled not for production",
            )
        notes = next((d[0]["text"] for p, d in docs.items() if p.endswith("NOTES.txt")), "")
        c.check("for trials only" in notes, f"{label}: NOTES warn about the bundled Redis")
    else:
        c.check(not redis, f"{label}: no bundled Redis")

    notes = next((d[0]["text"] for p, d in docs.items() if p.endswith("NOTES.txt")), "")
    c.check("/readyz" in notes and "/metrics" in notes, f"{label}: NOTES tell how to reach health and metrics")

    nps = find(objs, "NetworkPolicy")
    if v["networkPolicy"]["enabled"]:
        node_np = find(nps, "NetworkPolicy", "-node")
        if c.check(len(node_np) == 1, f"{label}: node NetworkPolicy"):
            rules = node_np[0]["spec"]["ingress"]
            admin_rules = [r for r in rules if any(p["port"] == "admin" for p in r["ports"])]
            c.check(
                len(admin_rules) == 1
                and admin_rules[0]["from"][0].get("namespaceSelector")
                == v["networkPolicy"]["monitoringNamespaceSelector"]
                and all("ipBlock" not in f for f in admin_rules[0]["from"]),
                f"{label}: admin port only from the monitoring namespace (and the coordinator)",
            )
    else:
        c.check(not nps, f"{label}: no NetworkPolicy")

    m = v["metrics"]
    c.check(len(find(objs, "ServiceMonitor")) == int(m["serviceMonitor"]["enabled"]), f"{label}: ServiceMonitor iff enabled")
    c.check(len(find(objs, "PrometheusRule")) == int(m["prometheusRule"]["enabled"]), f"{label}: PrometheusRule iff enabled")
    c.check(len(find(objs, "ConfigMap", "-dashboard")) == int(m["dashboard"]["enabled"]), f"{label}: dashboard iff enabled")


def check_shipped_files(c: Checks, repo: Path, objs: list[dict]) -> None:
    """The dashboard and rules the chart ships equal the ones in deploy/."""
    dash = json.loads((repo / "deploy/grafana/switchyard-dashboard.json").read_text())
    alerts = yaml.safe_load((repo / "deploy/prometheus/alerts.yaml").read_text())
    for cm in find(objs, "ConfigMap", "-dashboard"):
        c.check(json.loads(cm["data"]["switchyard-dashboard.json"]) == dash, "chart dashboard == deploy/grafana")
    for pr in find(objs, "PrometheusRule"):
        c.check(pr["spec"] == alerts, "chart PrometheusRule == deploy/prometheus/alerts.yaml")
    for name in ("alerts.yaml", "switchyard-dashboard.json"):
        src = repo / ("deploy/prometheus" if name.endswith("yaml") else "deploy/grafana") / name
        c.check(
            (repo / "helm/switchyard/files" / name).read_bytes() == src.read_bytes(),
            f"helm/switchyard/files/{name} is a byte copy of {src.relative_to(repo)}",
        )


# ---------------------------------------------------------------------------------------------
# The config renderer: the reference example round-trips


def check_config_round_trip(c: Checks, chart: helm.Chart, repo: Path, node_bin: Path) -> None:
    example = tomllib.loads((repo / "deploy/examples/switchyard.example.toml").read_text())
    config = copy.deepcopy(example)
    for owned in ("listen", "admin_listen", "shutdown_grace_ms"):
        config["server"].pop(owned, None)
    config["auth"].pop("management_key_env", None)
    config.pop("cluster", None)
    docs = render(chart, {"config": config})
    cm = find(manifests(docs), "ConfigMap", "-config")[0]
    rendered = tomllib.loads(cm["data"]["switchyard.toml"])
    for section in ("api_keys", "providers", "connections", "combos", "resilience"):
        c.check(
            rendered.get(section) == example.get(section),
            f"round trip: [{section}] of the reference example survives values -> TOML",
        )
    c.check(
        {k: rendered["server"][k] for k in config["server"]} == config["server"],
        "round trip: [server] keys survive",
    )
    node_check(c, node_bin, cm["data"]["switchyard.toml"], "round trip")

    # A config change changes the checksum that rolls the pods.
    other = copy.deepcopy(config)
    other["providers"][0]["models"] = ["gpt-4o-mini"]
    a = find(manifests(docs), "Deployment", "-node")[0]
    b = find(manifests(render(chart, {"config": other})), "Deployment", "-node")[0]
    key = "checksum/config"
    c.check(
        a["spec"]["template"]["metadata"]["annotations"][key]
        != b["spec"]["template"]["metadata"]["annotations"][key],
        "a config change changes checksum/config",
    )


def check_refusals(c: Checks, chart: helm.Chart) -> None:
    """Values the chart must refuse, with a message that says what to do."""
    cases = [
        ({"redis": {"bundled": {"enabled": True}, "url": "redis://r:6380/0"}}, "not both"),
        ({"redis": {"bundled": {"enabled": False}}}, "redis.url"),
        ({"config": {"server": {"listen": "0.0.0.0:1"}}}, "listen"),
        ({"config": {"cluster": {"mode": "embedded"}}}, "cluster"),
        ({"node": {"podAntiAffinity": "sometimes"}}, "podAntiAffinity"),
        ({"provider_keys": {"openai": "sk-live"}}, "provider_keys"),
    ]
    for values, word in cases:
        try:
            render(chart, values)
            c.check(False, f"refused: {values}")
        except helm.HelmError as e:
            c.check(word in str(e), f"refused {values} naming {word!r}: {e}")


# ---------------------------------------------------------------------------------------------
# Dashboard and alert rules


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


# ---------------------------------------------------------------------------------------------
# compose.yaml and the Dockerfile


def check_compose(c: Checks, repo: Path) -> None:
    path = repo / "deploy/compose.yaml"
    compose = yaml.safe_load(path.read_text())  # PyYAML resolves the `<<` merge keys
    services = compose.get("services", {})
    for s in ("redis", "mock-upstream", "node-1", "node-2", "node-3", "coordinator"):
        c.check(s in services, f"compose: service {s}")
    for name, svc in services.items():
        for vol in svc.get("volumes", []):
            src = vol.split(":")[0]
            if src.startswith("."):
                c.check((path.parent / src).exists(), f"compose: {name} mounts {src}, which exists")
        for port in svc.get("ports", []):
            c.check(str(port).startswith("127.0.0.1:"), f"compose: {name} binds {port} to loopback only")
        if "build" in svc:
            c.check(svc["build"].get("dockerfile") == "deploy/Dockerfile", f"compose: {name} builds deploy/Dockerfile")
    node_cfg = tomllib.loads((repo / "deploy/examples/cluster-node.toml").read_text())
    for s in ("node-1", "node-2", "node-3", "coordinator"):
        env = services.get(s, {}).get("environment", {})
        missing = env_names(node_cfg) - set(env)
        c.check(not missing, f"compose: {s} sets every variable the config names (missing {sorted(missing)})")
        c.check("SWITCHYARD_REDIS_URL" in env, f"compose: {s} gets the Redis URL")


def check_dockerfile(c: Checks, repo: Path) -> None:
    dockerfile = repo / "deploy/Dockerfile"
    text = dockerfile.read_text()
    hadolint = Path(sys.executable).parent / "hadolint"
    out = subprocess.run([str(hadolint), "--no-color", str(dockerfile)], capture_output=True,
                         text=True, timeout=120)
    c.check(out.returncode == 0, f"hadolint deploy/Dockerfile: {out.stdout}{out.stderr}")
    c.check("HEALTHCHECK" not in re.sub(r"#.*", "", text), "Dockerfile: no HEALTHCHECK")
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    c.check(bool(users) and all(not u.startswith("0") and u != "root" for u in users), f"Dockerfile: non-root USER {users}")
    for b in ("switchyard-node", "switchyard-coordinator"):
        c.check(f"/out/{b} /usr/local/bin/{b}" in text, f"Dockerfile: runtime image has {b}")
    c.check(re.search(r"^LABEL ", text, re.M) is not None, "Dockerfile: labels")
    ignore = (repo / ".dockerignore").read_text().split()
    c.check("target/" in ignore and ".git/" in ignore, ".dockerignore keeps target/ and .git/ out")
    check_build_context(c, repo, text, ignore)
    channel = tomllib.loads((repo / "rust-toolchain.toml").read_text())["toolchain"]["channel"]
    c.check(
        f"ARG RUST_VERSION={channel}\n" in text,
        f"Dockerfile builds with the toolchain of rust-toolchain.toml ({channel})",
    )


def check_build_context(c: Checks, repo: Path, dockerfile: str, ignore: list[str]) -> None:
    """Every file the build embeds (include_str!/include_bytes!) is copied into the build
    stage and not excluded by .dockerignore."""
    copied = [m for m in re.findall(r"^COPY\s+(?!--)(.+?)\s+\S+$", dockerfile, re.M)]
    sources = [Path(p) for line in copied for p in line.split()]

    def excluded(rel: str) -> bool:
        out = False
        for pat in ignore:
            if pat.startswith("#"):
                continue
            neg = pat.startswith("!")
            pat = pat.lstrip("!").removeprefix("**/")
            if rel == pat.rstrip("/") or rel.startswith(pat if pat.endswith("/") else pat + "/"):
                out = not neg
        return out

    def is_copied(rel: Path) -> bool:
        return any(rel == s or s in rel.parents for s in sources)

    crates = [s for s in sources if (repo / s / "Cargo.toml").exists()]
    c.check(len(crates) >= 4, f"Dockerfile copies the workspace crates ({[str(s) for s in crates]})")
    for crate in crates:
        for rs in (repo / crate / "src").rglob("*.rs"):
            for inc in re.findall(r'include_(?:str|bytes)!\(\s*"([^"]+)"', rs.read_text()):
                target = (rs.parent / inc).resolve().relative_to(repo)
                c.check(
                    is_copied(target) and not excluded(str(target)),
                    f"Dockerfile build context has {target} (embedded by {rs.relative_to(repo)})",
                )


# ---------------------------------------------------------------------------------------------


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
