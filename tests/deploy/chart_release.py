"""What a rendered release must be: probes, drain safety, security, secrets by reference,
optional objects exactly when enabled; and the config renderer's round trip."""

from __future__ import annotations

import copy
import json
import math
import re
import tomllib
from pathlib import Path

import helm_python as helm
import yaml

from chart_render import NAMESPACE, RELEASE, find, manifests, one, render
from checks import Checks, env_names, node_check


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

    # Every key beyond the contract (extensions.toml shows them all) can be set through the
    # chart's values and reaches the node unchanged.
    extensions = tomllib.loads((repo / "deploy/examples/extensions.toml").read_text())
    ext_values = copy.deepcopy(extensions)
    ext_values["auth"].pop("management_key_env", None)
    ext_docs = render(chart, {"config": ext_values})
    ext_cm = find(manifests(ext_docs), "ConfigMap", "-config")[0]
    ext_rendered = tomllib.loads(ext_cm["data"]["switchyard.toml"])
    for section in sorted(set(extensions) - {"server", "auth"}):
        c.check(
            ext_rendered.get(section) == extensions[section],
            f"round trip: [{section}] of extensions.toml survives values -> TOML",
        )
    node_check(c, node_bin, ext_cm["data"]["switchyard.toml"], "extensions round trip")

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
