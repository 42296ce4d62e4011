//! The deployment artefacts under `deploy/` and `helm/`, checked with the real engines.
//!
//! There is no Kubernetes cluster in CI, so the chart is linted and rendered by Helm v4's own
//! library and every manifest is validated against the Kubernetes schemas; the config the chart
//! renders, and every example config, must pass `switchyard-node --check`; the alert rules go
//! through `promtool`; the Dockerfile is built where a Docker engine runs and linted everywhere.
//! The Python side lives in `tests/deploy/validate_chart.py`, in a virtualenv built from the
//! pinned `tests/deploy/requirements.txt` (only the first run pays for `pip install`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use switchyard_tests::harness::workspace_bin;
use switchyard_tests::mock_upstream::parse_script;
use switchyard_tests::prerequisite;
use switchyard_tests::python::{self, run};

/// How long the chart checks may run (they take seconds; the machine is shared).
const SCRIPT_LIMIT: Duration = Duration::from_secs(180);
/// A cold image build compiles the workspace in release mode.
const DOCKER_BUILD_LIMIT: Duration = Duration::from_secs(45 * 60);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn node_bin() -> PathBuf {
    let bin = workspace_bin("switchyard-node");
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build -p switchyard-node` (the workspace test run does)",
        bin.display()
    );
    bin
}

fn promtool() -> Option<PathBuf> {
    let (ok, _) = run(
        Command::new("promtool").arg("--version"),
        Duration::from_secs(30),
        "promtool",
    );
    ok.then(|| PathBuf::from("promtool"))
}

/// `promtool`, or `None` after [`prerequisite::require`] has skipped `test` loudly (it fails
/// the test instead under CI).
fn required_promtool(test: &str) -> Option<PathBuf> {
    let found = promtool();
    let missing = found
        .is_none()
        .then_some("`promtool` (Prometheus's rule checker)");
    if prerequisite::require(test, missing, PROMTOOL_INSTALL) {
        found
    } else {
        None
    }
}

const PROMTOOL_INSTALL: &str = "apt-get install prometheus (tests/run.sh installs it)";

#[test]
fn chart_lints_renders_and_validates_against_kubernetes_schemas() {
    let python = python::ensure_venv("deploy-venv", &repo().join("tests/deploy/requirements.txt"))
        .unwrap_or_else(|e| panic!("deploy virtualenv: {e}"));
    let mut cmd = Command::new(python);
    cmd.arg(repo().join("tests/deploy/validate_chart.py"))
        .arg("--repo")
        .arg(repo())
        .arg("--node-bin")
        .arg(node_bin())
        .arg("--promtool")
        // Without promtool (where skipping is allowed) the script skips only its dashboard
        // query parse; the banner says so.
        .arg(
            required_promtool(
                "chart_lints_renders_and_validates_against_kubernetes_schemas \
                 (its promtool parse of the dashboard queries)",
            )
            .unwrap_or_default(),
        );
    let (ok, output) = run(&mut cmd, SCRIPT_LIMIT, "validate_chart.py");
    eprintln!("{output}");
    assert!(ok, "deploy checks failed:\n{output}");
    assert!(
        output.contains(" 0 failed"),
        "the checks did not report their count:\n{output}"
    );
    for set in [
        "default values",
        "external-redis.yaml",
        "bundled-redis.yaml",
        "hpa-off.yaml",
        "sentinel-acl.yaml",
        "bundled-acl.yaml",
        "redis-cluster-acl.yaml",
    ] {
        assert!(
            output.contains(&format!("{set}: rendered")),
            "value set {set} was not rendered:\n{output}"
        );
    }
}

/// Renders the chart with `values` (YAML file under tests/deploy/values) and prints the env of
/// the node and coordinator containers and the bundled Redis's command line, as JSON.
fn rendered_redis_wiring(values: &str) -> serde_json::Value {
    let python = python::ensure_venv("deploy-venv", &repo().join("tests/deploy/requirements.txt"))
        .unwrap_or_else(|e| panic!("deploy virtualenv: {e}"));
    let script = r#"
import json, sys
from pathlib import Path
repo = Path(sys.argv[1])
sys.path.insert(0, str(repo / "tests/deploy"))
import yaml
import helm_python as helm
from chart_render import render, manifests
helm.disable_logging()
values = yaml.safe_load((repo / "tests/deploy/values" / sys.argv[2]).read_text())
objs = manifests(render(helm.Chart.load(repo / "helm/switchyard"), values))
out = {"text": yaml.safe_dump_all(objs)}
for o in objs:
    if o["kind"] != "Deployment":
        continue
    for c in o["spec"]["template"]["spec"]["containers"]:
        out[c["name"]] = {"env": c.get("env", []), "command": c.get("command", []), "args": c.get("args", [])}
print("RENDERED " + json.dumps(out))
"#;
    let mut cmd = Command::new(python);
    cmd.arg("-c").arg(script).arg(repo()).arg(values);
    let (ok, output) = run(&mut cmd, SCRIPT_LIMIT, "render");
    assert!(ok, "rendering {values} failed:\n{output}");
    let line = output
        .lines()
        .find_map(|l| l.strip_prefix("RENDERED "))
        .unwrap_or_else(|| panic!("no rendering in:\n{output}"));
    serde_json::from_str(line).unwrap()
}

fn env_of<'a>(container: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    container["env"]
        .as_array()
        .and_then(|env| env.iter().find(|e| e["name"] == name))
        .unwrap_or(&serde_json::Value::Null)
}

#[test]
fn the_chart_points_at_sentinel_with_the_acl_user_and_never_renders_its_password() {
    let r = rendered_redis_wiring("sentinel-acl.yaml");
    let names: Vec<&str> = ["node", "coordinator"]
        .into_iter()
        .filter(|c| !r[*c].is_null())
        .collect();
    assert!(names.contains(&"node"), "no node container: {r}");
    for c in names {
        let password = env_of(&r[c], "SWITCHYARD_REDIS_ACL_PASSWORD");
        assert_eq!(
            password["valueFrom"]["secretKeyRef"]["name"], "switchyard-redis-acl",
            "{c}: {r}"
        );
        let url = env_of(&r[c], "SWITCHYARD_REDIS_URL")["value"]
            .as_str()
            .unwrap_or("");
        assert_eq!(
            url,
            "redis+sentinel://switchyard:$(SWITCHYARD_REDIS_ACL_PASSWORD)@redis-sentinel-0.redis-sentinel:26379,redis-sentinel-1.redis-sentinel:26379,redis-sentinel-2.redis-sentinel:26379/mymaster/0",
            "{c}"
        );
        // Kubernetes expands $(VAR) only from variables defined before it.
        let env = r[c]["env"].as_array().unwrap();
        let at = |n: &str| env.iter().position(|e| e["name"] == n).unwrap();
        assert!(at("SWITCHYARD_REDIS_ACL_PASSWORD") < at("SWITCHYARD_REDIS_URL"));
    }
    // The config carries the sentinel URL without credentials.
    let text = r["text"].as_str().unwrap();
    assert!(
        text.contains("redis+sentinel://redis-sentinel-0.redis-sentinel:26379,"),
        "{text}"
    );

    // With the bundled Redis the chart creates the user with the documented rule.
    let r = rendered_redis_wiring("bundled-acl.yaml");
    let args = r["redis"]["args"].to_string();
    for part in [
        "--user default off",
        "--user switchyard on \\\">$REDIS_ACL_PASSWORD\\\"",
        "~switchyard:* &switchyard:events -@all",
    ] {
        assert!(args.contains(part), "{part} missing from {args}");
    }
    assert_eq!(
        env_of(&r["redis"], "REDIS_ACL_PASSWORD")["valueFrom"]["secretKeyRef"]["key"],
        "password"
    );
    let url = env_of(&r["node"], "SWITCHYARD_REDIS_URL")["value"]
        .as_str()
        .unwrap_or("");
    assert!(
        url.starts_with("redis://switchyard:$(SWITCHYARD_REDIS_ACL_PASSWORD)@sy-switchyard-redis."),
        "{url}"
    );
}

#[test]
fn the_chart_points_at_a_redis_cluster_with_tls_and_the_acl_user() {
    let r = rendered_redis_wiring("redis-cluster-acl.yaml");
    for c in ["node", "coordinator"] {
        if r[c].is_null() {
            assert_ne!(c, "node", "no node container: {r}");
            continue;
        }
        let url = env_of(&r[c], "SWITCHYARD_REDIS_URL")["value"]
            .as_str()
            .unwrap_or("");
        assert_eq!(
            url,
            "rediss+cluster://switchyard:$(SWITCHYARD_REDIS_ACL_PASSWORD)@redis-cluster-0.redis-cluster:6379,redis-cluster-1.redis-cluster:6379,redis-cluster-2.redis-cluster:6379/",
            "{c}"
        );
    }
    // The config carries the cluster URL without credentials, and no bundled Redis runs.
    let text = r["text"].as_str().unwrap();
    assert!(
        text.contains("rediss+cluster://redis-cluster-0.redis-cluster:6379,"),
        "{text}"
    );
    assert!(
        r["redis"].is_null(),
        "a bundled Redis next to the cluster: {r}"
    );
}

#[test]
fn alert_rules_pass_promtool_check_and_unit_tests() {
    let dir = repo().join("deploy/prometheus");
    let rules = std::fs::read_to_string(dir.join("alerts.yaml")).unwrap();
    assert!(rules.contains("groups:"), "alerts.yaml has no rule groups");
    // tests/run.sh installs it (Debian package `prometheus`); a developer machine may lack it.
    let Some(promtool) = required_promtool("alert_rules_pass_promtool_check_and_unit_tests") else {
        return;
    };
    let (ok, out) = run(
        Command::new(&promtool)
            .args(["check", "rules"])
            .arg(dir.join("alerts.yaml")),
        Duration::from_secs(60),
        "promtool check rules",
    );
    assert!(ok, "promtool check rules:\n{out}");
    assert!(out.contains("SUCCESS"), "{out}");
    let (ok, out) = run(
        Command::new(&promtool)
            .args(["test", "rules"])
            .arg(dir.join("alerts.test.yaml")),
        Duration::from_secs(60),
        "promtool test rules",
    );
    assert!(
        ok,
        "promtool test rules (the alerts fire as scripted):\n{out}"
    );
}

#[test]
fn example_configs_pass_the_node_check() {
    let examples = repo().join("deploy/examples");
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(&examples).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let mut cmd = Command::new(node_bin());
        cmd.arg("--config")
            .arg(&path)
            .arg("--check")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default());
        // Every variable the config names gets a dummy value, as a Secret would provide.
        for name in env_names(&text) {
            cmd.env(&name, format!("dummy-{name}-0123456789abcdef"));
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{}: switchyard-node --check failed:\n{stderr}",
            path.display()
        );
        checked.push(path.file_name().unwrap().to_string_lossy().into_owned());
    }
    checked.sort();
    for want in [
        "cluster-node.toml",
        "demo-mock.toml",
        "embedded.toml",
        "extensions.toml",
        "switchyard.example.toml",
    ] {
        assert!(
            checked.iter().any(|c| c == want),
            "{want} not checked: {checked:?}"
        );
    }
    let faults = std::fs::read(examples.join("demo-mock-faults.json")).unwrap();
    let specs = parse_script(&faults).unwrap();
    assert!(!specs.is_empty(), "the demo fault file scripts nothing");
}

/// `*_env = "NAME"` values in a TOML config.
fn env_names(toml_text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in toml_text.lines() {
        let line = line.split('#').next().unwrap_or("");
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if key.trim().ends_with("_env") {
            let name = value.trim().trim_matches('"');
            if !name.is_empty() {
                names.push(name.to_owned());
            }
        }
    }
    names
}

#[test]
fn image_builds_where_a_docker_engine_runs() {
    let dockerfile = repo().join("deploy/Dockerfile");
    let text = std::fs::read_to_string(&dockerfile).unwrap();
    let stages = parse_dockerfile(&text);
    assert!(
        stages.iter().any(|s| s == "runtime") && stages.iter().any(|s| s == "mock-upstream"),
        "Dockerfile stages: {stages:?}"
    );
    let (engine, why) = run(
        Command::new("docker").args(["info", "--format", "{{.ServerVersion}}"]),
        Duration::from_secs(30),
        "docker info",
    );
    // Neither tests/run.sh nor CI provides a Docker engine; the Dockerfile was parse-checked
    // above and is linted with hadolint by the chart test.
    let missing = (!engine).then(|| {
        format!(
            "a reachable Docker engine ({})",
            why.lines().last().unwrap_or("").trim()
        )
    });
    if !prerequisite::optional(
        "image_builds_where_a_docker_engine_runs",
        missing.as_deref(),
        "a Docker engine: https://docs.docker.com/engine/install/",
    ) {
        return;
    }
    let (ok, out) = run(
        Command::new("docker")
            .args(["build", "-f"])
            .arg(&dockerfile)
            .args(["-t", "switchyard:test", "--target", "runtime"])
            .arg(repo()),
        DOCKER_BUILD_LIMIT,
        "docker build",
    );
    assert!(ok, "docker build failed:\n{out}");
}

/// A parse check of the Dockerfile: every instruction is a known one, every `COPY --from`
/// names an earlier stage, and the stage names are returned.
fn parse_dockerfile(text: &str) -> Vec<String> {
    const KNOWN: &[&str] = &[
        "FROM",
        "RUN",
        "CMD",
        "LABEL",
        "EXPOSE",
        "ENV",
        "ADD",
        "COPY",
        "ENTRYPOINT",
        "VOLUME",
        "USER",
        "WORKDIR",
        "ARG",
        "ONBUILD",
        "STOPSIGNAL",
        "SHELL",
        // Known to Docker, so the check below (not this list) is what refuses it.
        "HEALTHCHECK",
    ];
    let mut stages: Vec<String> = Vec::new();
    let mut continued = false;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let was_continued = continued;
        continued = line.ends_with('\\');
        if was_continued || line.is_empty() || line.starts_with('#') {
            continue;
        }
        let word = line.split_whitespace().next().unwrap_or("");
        assert!(
            KNOWN.contains(&word.to_ascii_uppercase().as_str()),
            "Dockerfile line {}: unknown instruction {word:?}",
            n + 1
        );
        assert_ne!(
            word.to_ascii_uppercase(),
            "HEALTHCHECK",
            "no HEALTHCHECK: probes do it"
        );
        if word == "FROM" {
            let parts: Vec<&str> = line.split_whitespace().collect();
            if parts.len() == 4 && parts[2].eq_ignore_ascii_case("AS") {
                stages.push(parts[3].to_owned());
            }
        }
        if let Some(rest) = line.strip_prefix("COPY --from=") {
            let from = rest.split_whitespace().next().unwrap_or("");
            assert!(
                stages.iter().any(|s| s == from),
                "Dockerfile line {}: COPY --from={from} before that stage",
                n + 1
            );
        }
        if word == "USER" {
            let user = line.split_whitespace().nth(1).unwrap_or("");
            assert!(
                !user.starts_with("0") && user != "root",
                "Dockerfile line {}: runs as root",
                n + 1
            );
        }
    }
    stages
}

#[test]
#[should_panic(expected = "no HEALTHCHECK: probes do it")]
fn the_parse_check_refuses_a_healthcheck() {
    parse_dockerfile("FROM debian:bookworm AS runtime\nHEALTHCHECK CMD true\n");
}

#[test]
#[should_panic(expected = "unknown instruction")]
fn the_parse_check_refuses_an_unknown_instruction() {
    parse_dockerfile("FROM debian:bookworm AS runtime\nFETCH everything\n");
}
