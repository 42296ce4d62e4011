//! The reference docs against the code, failing on drift in either direction:
//!
//! - `docs/metrics.md` documents exactly the metric families the node registers (every
//!   `"switchyard_…"` family name in `router-node/src`), and every family a live node exports
//!   on `/metrics` after real traffic is documented;
//! - `docs/admin-api.md`'s endpoint table lists exactly the management operations (`/api/*`,
//!   not tagged `client`) of `docs/openapi.json`, whose paths the node's own unit tests tie to
//!   the routes it registers, both ways.
//!
//! Families that appear only after a particular event (a labelled counter has no series until
//! its first increment) are covered by the source scan, since a scrape of one short run cannot
//! show them all.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchyard_tests::cluster::metrics_text;
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{MockConfig, MockUpstream};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Family names in the tables of docs/metrics.md: the first cell of each row.
fn documented_families(md: &str) -> BTreeSet<String> {
    md.lines()
        .filter_map(|l| l.strip_prefix("| `switchyard_"))
        .filter_map(|rest| rest.split_once('`'))
        .map(|(name, _)| format!("switchyard_{name}"))
        .collect()
}

/// Every `"switchyard_…"` string literal in the `.rs` files under `dir`, without the
/// `_bucket` / `_sum` / `_count` series of a histogram family that is itself present.
fn families_in_source(dir: &Path) -> BTreeSet<String> {
    fn walk(dir: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let src = std::fs::read_to_string(&path).unwrap();
                for chunk in src.split("\"switchyard_").skip(1) {
                    let name: String = chunk
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                        .collect();
                    if chunk[name.len()..].starts_with('"') && !name.is_empty() {
                        out.insert(format!("switchyard_{name}"));
                    }
                }
            }
        }
    }
    let mut all = BTreeSet::new();
    walk(dir, &mut all);
    let series_of_a_family = |n: &String| {
        ["_bucket", "_sum", "_count"]
            .iter()
            .any(|s| n.strip_suffix(s).is_some_and(|base| all.contains(base)))
    };
    all.iter()
        .filter(|n| !series_of_a_family(n))
        .cloned()
        .collect()
}

#[test]
fn the_table_parser_and_the_source_scan_find_what_they_should() {
    let md =
        "| Family | Type |\n|---|---|\n| `switchyard_a_total` | counter |\nsee `switchyard_b`\n";
    assert_eq!(
        documented_families(md),
        BTreeSet::from(["switchyard_a_total".to_owned()])
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("m.rs"),
        r#"let a = "switchyard_x_seconds"; let b = "switchyard_x_seconds_bucket";
           let c = "switchyard_y_count"; let d = "switchyard_prefix_{}";"#,
    )
    .unwrap();
    assert_eq!(
        families_in_source(dir.path()),
        BTreeSet::from([
            "switchyard_x_seconds".to_owned(),
            "switchyard_y_count".to_owned()
        ])
    );
}

#[test]
fn metrics_doc_lists_exactly_the_families_the_node_registers() {
    let documented = documented_families(&read("docs/metrics.md"));
    let registered = families_in_source(&repo().join("router-node/src"));
    assert!(
        registered.contains("switchyard_requests_total"),
        "the source scan found too little: {registered:?}"
    );
    let undocumented: Vec<_> = registered.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&registered).collect();
    assert!(
        undocumented.is_empty() && stale.is_empty(),
        "docs/metrics.md is out of date: registered but not documented {undocumented:?}; \
         documented but not registered {stale:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_family_a_live_node_exports_is_documented() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let config = format!(
        r#"
[auth]
require_api_key = false
management_key_env = ""

[[providers]]
id = "p"
category = "apikey"
format = "openai"
base_url = "{}/v1"
models = ["m"]

[[connections]]
id = "c"
provider = "p"
api_key_env = "DOCS_TRUTH_KEY"
"#,
        mock.base_url()
    );
    let node = tokio::task::spawn_blocking(move || {
        NodeProcess::start(&config, &[("DOCS_TRUTH_KEY", "k")]).unwrap()
    })
    .await
    .unwrap();
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", node.client_url()))
        .json(&json!({"model": "p/m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{:?}", resp.text().await);

    // The request's series are written when its response ends; poll until they show.
    let admin = node.admin;
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = tokio::task::spawn_blocking(move || metrics_text(admin))
            .await
            .unwrap();
        if text.contains("switchyard_requests_total{") || Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let exported: BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    assert!(
        exported.contains("switchyard_requests_total"),
        "no request counter after a request:\n{text}"
    );
    let documented = documented_families(&read("docs/metrics.md"));
    let undocumented: Vec<_> = exported
        .iter()
        .filter(|f| f.starts_with("switchyard_") && !documented.contains(*f))
        .collect();
    assert!(
        undocumented.is_empty(),
        "/metrics exports families docs/metrics.md does not list: {undocumented:?}"
    );
    drop(node);
    mock.shutdown().await;
}

/// `(METHOD, path)` of each row of docs/admin-api.md's endpoint table. A row's first cell
/// names one or more methods (`` `GET` / `POST /api/x` ``) and a path, optionally followed
/// by a query (`[?provider=]`).
fn documented_admin_routes(md: &str) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for line in md.lines() {
        let Some(cell) = line.strip_prefix("| ").and_then(|l| l.split(" | ").next()) else {
            continue;
        };
        let cell = cell.replace('`', "");
        let Some(at) = cell.find("/api/") else {
            continue;
        };
        let path = cell[at..]
            .split(['[', '?', ' '])
            .next()
            .unwrap_or_default()
            .to_owned();
        for method in cell[..at].split('/') {
            let method = method.trim();
            if !method.is_empty() {
                out.insert((method.to_owned(), path.clone()));
            }
        }
    }
    out
}

#[test]
fn admin_route_table_parser_reads_shared_rows_and_queries() {
    let md = "| route | what |\n|---|---|\n\
              | `GET` / `DELETE /api/a` | x |\n\
              | `GET /api/b[?p=&q=]` | y |\n";
    let want: BTreeSet<(String, String)> =
        [("GET", "/api/a"), ("DELETE", "/api/a"), ("GET", "/api/b")]
            .iter()
            .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
            .collect();
    assert_eq!(documented_admin_routes(md), want);
}

#[test]
fn admin_api_doc_lists_exactly_the_api_operations_of_the_openapi_document() {
    let md = read("docs/admin-api.md");
    let documented = documented_admin_routes(&md);
    let doc: Value = serde_json::from_str(&read("docs/openapi.json")).unwrap();
    let mut served = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        // The document itself is described in the doc's introduction, not in the table.
        if !path.starts_with("/api/") || path == "/api/openapi.json" {
            continue;
        }
        for (method, op) in item.as_object().unwrap() {
            // `client`-tagged operations are on the client listener (the session lease API,
            // docs/leases.md), not the management API this doc describes.
            let on_client_listener = op["tags"]
                .as_array()
                .is_some_and(|tags| tags.iter().any(|t| t == "client"));
            if op.is_object() && !on_client_listener {
                served.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    assert!(
        served.len() >= 5,
        "too few /api operations in docs/openapi.json: {served:?}"
    );
    assert!(
        md.contains("GET /api/openapi.json"),
        "docs/admin-api.md no longer mentions GET /api/openapi.json"
    );
    let undocumented: Vec<_> = served.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&served).collect();
    assert!(
        undocumented.is_empty() && stale.is_empty(),
        "docs/admin-api.md's endpoint table is out of date: served but not listed \
         {undocumented:?}; listed but not served {stale:?}"
    );
}
