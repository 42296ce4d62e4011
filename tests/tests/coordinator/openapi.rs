//! The coordinator's OpenAPI document against the real coordinator: it serves the
//! repository's `docs/coordinator-openapi.json`, the document is valid OpenAPI, and real
//! answers of every read route (and of the actions and typical errors) validate against the
//! document's schemas, so the document cannot drift from what the coordinator says.
//!
//! The cluster state is synthetic (written to a test Redis the way nodes write it) plus one
//! stand-in node whose admin listener serves a growing Prometheus exposition, so the history
//! has points to validate. Validation runs in Python (`jsonschema`, JSON Schema 2020-12 as
//! OpenAPI 3.1 uses) in the virtualenv of `tests/openapi/requirements.txt`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::coordinator::{CLIENT_KEY, Coordinator, config, store};
use crate::support::eventually;
use serde_json::{Value, json};
use switchyard_shared::outcome::{FailureReason, TerminalStatus};
use switchyard_store::{CooldownWrite, NodeHeartbeat};
use switchyard_tests::redis_server::RedisServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn validator_python() -> PathBuf {
    switchyard_tests::python::ensure_venv("openapi-venv", &repo_file("openapi/requirements.txt"))
        .unwrap_or_else(|e| panic!("OpenAPI validator virtualenv: {e}"))
}

/// A stand-in node admin listener: `/metrics` with counters that grow on every scrape.
async fn metrics_node() -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        // Bounded: the test ends long before this many scrapes.
        for scrape in 1..=10_000u64 {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let mut buf = vec![0u8; 4096];
            let _ = sock.read(&mut buf).await;
            let n = scrape * 10;
            let body = format!(
                "switchyard_upstream_request_duration_seconds_bucket{{provider=\"p0\",le=\"0.1\"}} {fast}\n\
                 switchyard_upstream_request_duration_seconds_bucket{{provider=\"p0\",le=\"1\"}} {n}\n\
                 switchyard_upstream_request_duration_seconds_bucket{{provider=\"p0\",le=\"+Inf\"}} {n}\n\
                 switchyard_upstream_request_duration_seconds_count{{provider=\"p0\"}} {n}\n\
                 switchyard_cooldowns_total{{provider=\"p0\",reason=\"server_error\"}} {scrape}\n",
                fast = n / 2
            );
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = sock.write_all(answer.as_bytes()).await;
        }
    });
    (addr, task)
}

/// Runs `validate_responses.py` on `samples` against the coordinator's document: (all valid,
/// its output).
async fn validate_answers(samples: &Value) -> (bool, String) {
    validate_against("../docs/coordinator-openapi.json", samples).await
}

/// Runs `validate_responses.py` on `samples` against `document` (relative to the tests
/// package): (all valid, its output).
pub(crate) async fn validate_against(document: &str, samples: &Value) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let samples_path = dir.path().join("samples.json");
    std::fs::write(&samples_path, serde_json::to_vec(samples).unwrap()).unwrap();
    let python = tokio::task::spawn_blocking(validator_python).await.unwrap();
    let mut answers = std::process::Command::new(&python);
    answers
        .arg(repo_file("openapi/validate_responses.py"))
        .arg(repo_file(document))
        .arg(&samples_path);
    switchyard_tests::python::run(&mut answers, Duration::from_secs(60), "answers")
}

/// One answer to validate: the operation (path template) and what came back.
pub(crate) fn sample(method: &str, template: &str, answer: (u16, Value)) -> Value {
    json!({"method": method, "path": template, "status": answer.0, "body": answer.1})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_answers_validate_against_the_coordinators_openapi_document() {
    let redis = RedisServer::start().unwrap();
    let s = store(&redis.url());
    let (admin, metrics_task) = metrics_node().await;
    // A live node (fresh heartbeats) whose admin listener is the stand-in.
    let hb_store = s.clone();
    let heartbeats = tokio::spawn(async move {
        for _ in 0..2000 {
            let mut hb = NodeHeartbeat {
                node_id: "node-a".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                client_address: "127.0.0.1:1".into(),
                admin_address: admin.to_string(),
                sent_at_ms: crate::support::coordinator::epoch_ms(),
                redis_state: "up".into(),
                ..NodeHeartbeat::default()
            };
            hb.breakers.insert("p0".into(), "open".into());
            hb.connections.insert("active".into(), 3);
            hb_store
                .heartbeat("node-a", &hb.to_json(), 3000)
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    // Something in every part of the documents.
    s.cooldown_extend(&CooldownWrite {
        conn: "p0-c0",
        duration_ms: 90_000,
        backoff_level: 1,
        reason: FailureReason::RateLimitExceeded,
        terminal: None,
        last_error: "429",
    })
    .await
    .unwrap();
    s.lockout_extend(
        "p0",
        "p0-c0",
        "gpt-4o",
        45_000,
        2,
        FailureReason::QuotaExhausted,
    )
    .await
    .unwrap();
    s.terminal_set("p1-c1", TerminalStatus::Banned)
        .await
        .unwrap();
    let keys = s.connection_lease_keys("p1-c0");
    s.lease_acquire(&keys, "owner-token-openapi", "client-a", 300_000)
        .await
        .unwrap();
    crate::support::coordinator::open_breaker(&s, "p0").await;

    let c = Coordinator::start(
        &config(&redis.url(), 2, 2, ""),
        &[("SWITCHYARD_COORDINATOR_HISTORY_INTERVAL_MS", "200")],
    );

    // The served document is the repository's, and valid.
    let served = c.http.get(c.url("/api/openapi.json")).send().await.unwrap();
    assert_eq!(served.status().as_u16(), 200);
    let served = served.text().await.unwrap();
    let file = std::fs::read_to_string(repo_file("../docs/coordinator-openapi.json")).unwrap();
    assert_eq!(served, file, "the coordinator serves a stale document");

    // Wait until the history has points for p0 (two scrapes of the stand-in at least).
    let history = eventually(Duration::from_secs(20), || async {
        let (status, body) = c.call("GET", "/api/cluster/history", None).await;
        let points = body["providers"][0]["points"].as_array()?.len();
        (status == 200 && points >= 2).then_some((status, body))
    })
    .await
    .expect("the history never got two points for p0");
    let p0 = &history.1["providers"][0];
    assert_eq!(p0["id"], "p0");
    assert!(
        p0["points"][1]["requestsPerSec"].as_f64().unwrap() > 0.0,
        "{p0}"
    );
    assert!(p0["points"][1]["p95Ms"].as_f64().unwrap() > 100.0, "{p0}");

    let mut samples = vec![sample("get", "/api/cluster/history", history.clone())];
    let health = c.call("GET", "/api/cluster/health", None).await;
    assert_eq!(health.0, 200);
    assert_eq!(health.1["nodes"].as_array().map(Vec::len), Some(1));
    assert!(!health.1["connections"].as_array().unwrap().is_empty());
    assert!(!health.1["leases"].as_array().unwrap().is_empty());
    samples.push(sample("get", "/api/cluster/health", health));
    for (template, path) in [
        ("/healthz", "/healthz"),
        ("/readyz", "/readyz"),
        ("/api/cluster/nodes", "/api/cluster/nodes"),
        ("/api/cluster/providers/{id}", "/api/cluster/providers/p0"),
        (
            "/api/cluster/connections/{id}",
            "/api/cluster/connections/p0-c0",
        ),
        (
            "/api/cluster/connections/{id}",
            "/api/cluster/connections/p1-c0",
        ),
        ("/api/cluster/settings", "/api/cluster/settings"),
    ] {
        let answer = c.call("GET", path, None).await;
        assert_eq!(answer.0, 200, "GET {path}: {}", answer.1);
        samples.push(sample("get", template, answer));
    }
    // Errors, each in the envelope.
    let errors = [
        (
            c.call_as(None, "GET", "/api/cluster/health", None).await,
            "get",
            "/api/cluster/health",
            401,
        ),
        (
            c.call_as(Some(CLIENT_KEY), "GET", "/api/cluster/nodes", None)
                .await,
            "get",
            "/api/cluster/nodes",
            403,
        ),
        (
            c.call("GET", "/api/cluster/providers/nope", None).await,
            "get",
            "/api/cluster/providers/{id}",
            404,
        ),
        (
            c.call("GET", "/api/cluster/connections/a..b", None).await,
            "get",
            "/api/cluster/connections/{id}",
            400,
        ),
        (
            c.call(
                "POST",
                "/api/cluster/cooldowns",
                Some(json!({"all": false})),
            )
            .await,
            "post",
            "/api/cluster/cooldowns",
            400,
        ),
        (
            c.call("PATCH", "/api/cluster/settings", Some(json!({"nope": 1})))
                .await,
            "patch",
            "/api/cluster/settings",
            400,
        ),
    ];
    for (answer, method, template, want) in errors {
        assert_eq!(answer.0, want, "{method} {template}: {}", answer.1);
        samples.push(sample(method, template, answer));
    }
    // Actions.
    let actions = [
        (
            "post",
            "/api/cluster/providers/{id}/reset",
            "/api/cluster/providers/p0/reset",
            None,
        ),
        (
            "post",
            "/api/cluster/cooldowns",
            "/api/cluster/cooldowns",
            Some(json!({"connectionIds": ["p0-c0"]})),
        ),
        (
            "delete",
            "/api/cluster/model-cooldowns",
            "/api/cluster/model-cooldowns",
            Some(json!({"all": true})),
        ),
        (
            "post",
            "/api/cluster/connections/{id}/reinstate",
            "/api/cluster/connections/p1-c1/reinstate",
            None,
        ),
        (
            "delete",
            "/api/cluster/leases/{id}",
            "/api/cluster/leases/p1-c0",
            None,
        ),
        (
            "patch",
            "/api/cluster/settings",
            "/api/cluster/settings",
            Some(json!({"provider_breaker": {"apikey": {"failure_threshold": 4}}})),
        ),
        ("post", "/api/cluster/reset", "/api/cluster/reset", None),
    ];
    for (method, template, path, body) in actions {
        let answer = c.call(&method.to_uppercase(), path, body).await;
        assert_eq!(answer.0, 200, "{method} {path}: {}", answer.1);
        samples.push(sample(method, template, answer));
    }
    heartbeats.abort();
    metrics_task.abort();

    let python = tokio::task::spawn_blocking(validator_python).await.unwrap();
    let mut spec = std::process::Command::new(&python);
    spec.args([
        "-c",
        "import sys\n\
         from openapi_spec_validator import validate\n\
         from openapi_spec_validator.readers import read_from_filename\n\
         spec, _ = read_from_filename(sys.argv[1])\n\
         validate(spec)\n\
         print('valid')",
    ])
    .arg(repo_file("../docs/coordinator-openapi.json"));
    let (ok, output) = switchyard_tests::python::run(&mut spec, Duration::from_secs(60), "spec");
    assert!(
        ok,
        "docs/coordinator-openapi.json is not valid OpenAPI:\n{output}"
    );

    let samples = Value::Array(samples);
    let (ok, output) = validate_answers(&samples).await;
    assert!(ok, "answers do not match the document:\n{output}");
    assert!(
        output.contains(&format!(
            "{} samples, 0 failed",
            samples.as_array().map_or(0, Vec::len)
        )),
        "{output}"
    );
}

/// The validator can fail: an answer that breaks its schema is reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_validator_rejects_a_body_that_breaks_its_schema() {
    let samples = json!([
        {"method": "get", "path": "/api/cluster/nodes", "status": 200,
         "body": {"nodes": [{"id": "n", "state": "sideways", "heartbeat": true}], "generatedAt": 1}},
        {"method": "get", "path": "/api/cluster/nodes", "status": 401,
         "body": {"error": {"message": "m", "type": "authentication_error"}}},
        {"method": "get", "path": "/api/cluster/nodes", "status": 418, "body": {}},
    ]);
    let (ok, output) = validate_answers(&samples).await;
    assert!(!ok, "{output}");
    assert!(output.contains("3 samples, 3 failed"), "{output}");
}
