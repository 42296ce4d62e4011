//! Replays every entry of the upstream error corpus (`tests/fixtures/upstream-errors/`)
//! through a real node and the mock upstream, and checks each entry's `expect` (the fixture
//! README defines it): the connection cooldown, terminal state and breaker count through the
//! admin API, the model lockout and whether a combo moves on, and what an OpenAI-format and
//! an Anthropic-format client see, as JSON and as a stream.
//!
//! Each entry gets its own node in the README's canonical scenario: one connection of the
//! entry's category on a provider named like the real one (provider rules key on the id),
//! `wait_for_cooldown` off, `model_lockout` on, and a combo whose second target is another
//! provider. State is reset through the admin API between scenarios.
//!
//! Entries whose expectations the node does not meet yet are listed in [`KNOWN_GAPS`] with the
//! reason. The test fails when an unlisted entry fails, and also when a listed one passes, so
//! the list can only shrink.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockHandle};

use crate::support::http::*;

const MGMT_KEY: &str = "mgmt-corpus-3d7b1f9e5a2c";
const ENTRY_KEY: &str = "sk-corpus-entry-key-0001";
const FALLBACK_KEY: &str = "sk-corpus-fallback-key-0002";
const MODEL: &str = "test-model";

/// Entries the node does not handle as their `expect` says yet, with why. Each must fail; the
/// test fails if one of them passes (then remove it here).
const KNOWN_GAPS: &[(&str, &str)] = &[
    (
        "openrouter/insufficient-credits",
        "expects a 120 s cooldown; the reference's step 9 (and the classification test \
         openrouter_402_is_credits_exhausted_on_the_connection) make every 402 \
         credits_exhausted",
    ),
    (
        "openrouter/insufficient-credits-limit-source",
        "as openrouter/insufficient-credits",
    ),
    (
        "openrouter/more-credits-or-fewer-max-tokens",
        "as openrouter/insufficient-credits",
    ),
];

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/upstream-errors")
}

fn entries() -> Vec<Value> {
    let mut out = Vec::new();
    let mut dirs: Vec<_> = std::fs::read_dir(corpus_dir())
        .expect("corpus directory")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            let v: Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            out.push(v);
        }
    }
    out
}

/// The Switchyard provider id an entry is played on: the real provider's name, since built-in
/// provider rules key on it (`claude` for the Anthropic subscription, `codex` for ChatGPT).
fn provider_id(provider: &str) -> &str {
    match provider {
        "anthropic-oauth" => "claude",
        "codex-chatgpt" => "codex",
        other => other,
    }
}

fn config(entry: &Value, url: &str) -> String {
    let pid = provider_id(entry["provider"].as_str().unwrap());
    let format = entry["provider_format"].as_str().unwrap();
    let category = entry["auth_type"].as_str().unwrap();
    format!(
        "\n[auth]\nrequire_api_key = false\nmanagement_key_env = \"SY_MGMT\"\n{}\
         \n[resilience.wait_for_cooldown]\nenabled = false\n\
         \n[resilience.model_lockout]\nenabled = true\n{}{}{}{}\
         \n[[combos]]\nname = \"combo\"\nstrategy = \"priority\"\n\
         targets = [{{ target = \"{pid}/{MODEL}\" }}, {{ target = \"fallback/gpt-4o-mini\" }}]\n",
        queue_off(),
        provider(pid, format, url, &[MODEL], "", "").replacen(
            "category = \"apikey\"",
            &format!("category = \"{category}\""),
            1
        ),
        connection("entry-k1", pid, "UP_ENTRY", ""),
        provider("fallback", "openai", url, &["gpt-4o-mini"], "", ""),
        connection("fallback-k1", "fallback", "UP_FALLBACK", ""),
    )
}

/// The mock fault that answers like the entry, on every request with the entry's key.
fn fault(entry: &Value) -> FaultSpec {
    let r = &entry["response"];
    let status = r["status"].as_u64().unwrap() as u16;
    let headers = r["headers"].as_object().cloned().unwrap_or_default();
    let content_type = headers
        .get("content-type")
        .and_then(Value::as_str)
        .unwrap_or("application/json")
        .to_owned();
    let bytes = match (&r["sse"], &r["body"]) {
        (Value::String(sse), _) => sse.clone().into_bytes(),
        (_, Value::String(text)) => text.clone().into_bytes(),
        (_, body) => body.to_string().into_bytes(),
    };
    let mut f = FaultSpec::raw(status, &content_type, bytes).for_key(ENTRY_KEY);
    for (name, value) in headers {
        if name != "content-type"
            && let Some(v) = value.as_str()
        {
            f = f.header(name, v);
        }
    }
    f
}

struct Node {
    node: NodeProcess,
    /// The entry's provider id.
    pid: String,
    _mock: MockHandle,
    http: reqwest::Client,
}

impl Node {
    async fn admin(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.node.admin_url()))
            .bearer_auth(MGMT_KEY);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = send(req).await;
        assert!(r.status < 300, "{path}: {r:#?}");
        r.json()
    }

    async fn row(&self) -> Value {
        let list = self
            .admin(reqwest::Method::GET, "/api/resilience/cooldowns", None)
            .await;
        list["connections"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == "entry-k1")
            .cloned()
            .unwrap()
    }

    async fn breaker_failures(&self, provider: &str) -> u64 {
        let h = self
            .admin(reqwest::Method::GET, "/api/monitoring/health", None)
            .await;
        h["providerBreakers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["provider"] == provider)
            .and_then(|b| b["failureCount"].as_u64())
            .unwrap_or(0)
    }

    /// Back to a fresh state: reinstated (terminal cleared), cooldowns and lockouts cleared,
    /// breakers reset.
    async fn reset(&self) {
        quiesce(&self.node, MGMT_KEY).await;
        self.admin(
            reqwest::Method::POST,
            "/api/resilience/connections/entry-k1/reinstate",
            Some(json!({})),
        )
        .await;
        self.admin(
            reqwest::Method::POST,
            "/api/resilience/cooldowns",
            Some(json!({"all": true})),
        )
        .await;
        for provider in [self.pid.as_str(), "fallback"] {
            self.admin(
                reqwest::Method::POST,
                "/api/resilience/reset",
                Some(json!({ "provider": provider })),
            )
            .await;
        }
    }
}

/// Milliseconds until the next UTC midnight.
fn ms_until_utc_midnight() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    86_400_000 - now % 86_400_000
}

/// The expected remaining milliseconds of a cooldown or lockout spec, how far below it the
/// observed value may be (time passes between the failure and the read), and how far above
/// (1 ms of truncation; for a daily window the node places midnight on its own clock, read a
/// moment before this test reads the wall clock, so up to a second).
fn expected_ms(spec: &Value, category: &str) -> Option<(u64, u64, u64)> {
    const SLACK: u64 = 3_000;
    match spec {
        Value::String(s) if s == "none" => None,
        Value::String(s) if s == "backoff" => {
            let base = if category == "oauth" { 5_000 } else { 3_000 };
            Some((base, base, 1))
        }
        Value::Object(o)
            if o.get("window").and_then(Value::as_str) == Some("daily")
                && o.get("ms").is_none() =>
        {
            Some((ms_until_utc_midnight(), 10_000, 1_000))
        }
        Value::Object(o) => o.get("ms").and_then(Value::as_u64).map(|ms| (ms, SLACK, 1)),
        _ => None,
    }
}

fn check_remaining(what: &str, got: u64, spec: &Value, category: &str, errs: &mut Vec<String>) {
    match expected_ms(spec, category) {
        None if got != 0 => errs.push(format!("{what}: expected none, got {got} ms")),
        None => {}
        Some((ms, below, above)) if got == 0 || got > ms + above || got + below < ms => {
            errs.push(format!("{what}: expected ~{ms} ms ({spec}), got {got} ms"));
        }
        Some(_) => {}
    }
}

fn check_client(what: &str, r: &Reply, want: &Value, anthropic: bool, errs: &mut Vec<String>) {
    let status = want["status"].as_u64().unwrap_or(0) as u16;
    if r.status != status {
        errs.push(format!(
            "{what}: status {} != {status}: {}",
            r.status, r.body
        ));
        return;
    }
    let Ok(v) = serde_json::from_str::<Value>(&r.body) else {
        errs.push(format!("{what}: body is not JSON: {}", r.body));
        return;
    };
    if anthropic && v["type"] != "error" {
        errs.push(format!("{what}: not an Anthropic envelope: {v}"));
    }
    for field in ["type", "code"] {
        if v["error"][field] != want[field] {
            errs.push(format!(
                "{what}: error.{field} {} != {}",
                v["error"][field], want[field]
            ));
        }
    }
}

/// A client told `connection_cooldown` is told the wait the cooldown really lasts:
/// `reset_seconds` (whole seconds, rounded up) within the cooldown's own tolerance. A window
/// cut short anywhere between classification and the answer shows here even where the
/// admin view's numbers look plausible.
fn check_told_wait(
    what: &str,
    r: &Reply,
    cooldown: &Value,
    category: &str,
    errs: &mut Vec<String>,
) {
    let Ok(v) = serde_json::from_str::<Value>(&r.body) else {
        return;
    };
    if v["error"]["code"] != "connection_cooldown" {
        return;
    }
    let Some((ms, below, above)) = expected_ms(cooldown, category) else {
        return;
    };
    let Some(told_s) = v["error"]["reset_seconds"].as_u64() else {
        errs.push(format!(
            "{what}: connection_cooldown without reset_seconds: {v}"
        ));
        return;
    };
    let told = told_s * 1000;
    if told + below < ms || told > ms + above + 1_000 {
        errs.push(format!(
            "{what}: told reset_seconds {told_s}, expected ~{ms} ms ({cooldown})"
        ));
    }
}

/// The request of a scenario: its path and body.
fn request(anthropic: bool, model: &str, stream: bool) -> (&'static str, Value) {
    if anthropic {
        ("/v1/messages", messages(model, stream))
    } else {
        ("/v1/chat/completions", chat(model, stream))
    }
}

/// Replays one entry; every mismatch is one line of the result.
async fn replay(entry: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    let id = entry["id"].as_str().unwrap();
    let pid = provider_id(entry["provider"].as_str().unwrap()).to_owned();
    let category = entry["auth_type"].as_str().unwrap().to_owned();
    let expect = &entry["expect"];
    let mock = mock(3).await;
    let cfg = config(entry, &mock.base_url());
    mock.script(fault(entry)).unwrap();
    let node = start_node(
        cfg,
        env(&[
            ("UP_ENTRY", ENTRY_KEY),
            ("UP_FALLBACK", FALLBACK_KEY),
            ("SY_MGMT", MGMT_KEY),
        ]),
    )
    .await;
    let n = Node {
        node,
        pid: pid.clone(),
        _mock: mock,
        http: http(),
    };
    let is_sse = entry["response"]["sse"].is_string();
    let target = format!("{pid}/{MODEL}");
    // Direct requests: each client format, as JSON (not for in-band streams) and as a stream.
    for anthropic in [false, true] {
        for stream in [false, true] {
            if is_sse && !stream {
                continue;
            }
            let what = format!(
                "{id} direct {} {}",
                if anthropic { "anthropic" } else { "openai" },
                if stream { "stream" } else { "json" }
            );
            let (path, body) = request(anthropic, &target, stream);
            let r = post(&n.http, &n.node.client_url(), path, &body).await;
            let want = &expect["client"][if anthropic { "anthropic" } else { "openai" }];
            check_client(&what, &r, want, anthropic, &mut errs);
            if !anthropic {
                check_told_wait(&what, &r, &expect["cooldown"], &category, &mut errs);
            }
            quiesce(&n.node, MGMT_KEY).await;
            let row = n.row().await;
            check_remaining(
                &format!("{what} cooldown"),
                row["cooldownRemainingMs"].as_u64().unwrap_or(0),
                &expect["cooldown"],
                &category,
                &mut errs,
            );
            if row["terminal"] != expect["terminal"] {
                errs.push(format!(
                    "{what}: terminal {} != {}",
                    row["terminal"], expect["terminal"]
                ));
            }
            let failures = n.breaker_failures(&pid).await;
            let want_failures = u64::from(expect["breaker"].as_bool().unwrap_or(false));
            if failures != want_failures {
                errs.push(format!(
                    "{what}: breaker failures {failures} != {want_failures}"
                ));
            }
            n.reset().await;
        }
    }
    // The combo: does it move on, and what does the attempt lock?
    let (path, body) = request(false, "combo", is_sse);
    let r = post(&n.http, &n.node.client_url(), path, &body).await;
    let moves_on = expect["combo_moves_on"].as_bool().unwrap_or(true);
    if moves_on && r.status != 200 {
        errs.push(format!(
            "{id} combo: did not move on: {} {}",
            r.status, r.body
        ));
    }
    if !moves_on && r.status == 200 {
        errs.push(format!("{id} combo: moved on, expected it to stop"));
    }
    quiesce(&n.node, MGMT_KEY).await;
    let row = n.row().await;
    let lockouts = row["lockouts"].as_array().cloned().unwrap_or_default();
    match &expect["lockout"] {
        Value::String(s) if s == "none" => {
            if !lockouts.is_empty() {
                errs.push(format!("{id} combo: expected no lockout, got {lockouts:?}"));
            }
        }
        spec => match lockouts.first() {
            None => errs.push(format!("{id} combo: expected lockout {spec}, got none")),
            Some(l) => {
                if l["scope"] != spec["scope"] {
                    errs.push(format!(
                        "{id} combo: lockout scope {} != {}",
                        l["scope"], spec["scope"]
                    ));
                }
                check_remaining(
                    &format!("{id} combo lockout"),
                    l["remainingMs"].as_u64().unwrap_or(0),
                    spec,
                    &category,
                    &mut errs,
                );
            }
        },
    }
    errs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_corpus_entry_has_the_effects_its_table_row_states() {
    let entries = entries();
    assert!(
        entries.len() >= 60,
        "the corpus has {} entries",
        entries.len()
    );
    let ids: Vec<&str> = entries.iter().filter_map(|e| e["id"].as_str()).collect();
    for (gap, _) in KNOWN_GAPS {
        assert!(ids.contains(gap), "known gap {gap} is not a corpus entry");
    }
    // `SWITCHYARD_CORPUS_ONLY=gemini/,openai/insufficient` replays only the entries whose id
    // starts with one of the prefixes (a quick local run; the full run checks every entry).
    let only = std::env::var("SWITCHYARD_CORPUS_ONLY").ok();
    let selected = |id: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|p| id.starts_with(p.trim())))
    };
    let mut failed: Vec<(String, Vec<String>)> = Vec::new();
    for entry in entries
        .iter()
        .filter(|e| selected(e["id"].as_str().unwrap_or("")))
    {
        let errs = replay(entry).await;
        if !errs.is_empty() {
            failed.push((entry["id"].as_str().unwrap().to_owned(), errs));
        }
    }
    let is_gap = |id: &str| KNOWN_GAPS.iter().any(|(g, _)| *g == id);
    let unexpected: Vec<String> = failed
        .iter()
        .filter(|(id, _)| !is_gap(id))
        .map(|(id, errs)| format!("{id}:\n  {}", errs.join("\n  ")))
        .collect();
    let now_passing: Vec<&str> = KNOWN_GAPS
        .iter()
        .map(|(g, _)| *g)
        .filter(|g| selected(g) && !failed.iter().any(|(id, _)| id == g))
        .collect();
    assert!(
        unexpected.is_empty() && now_passing.is_empty(),
        "{} entries fail their expectations:\n{}\n\nknown gaps that now pass (remove them from \
         KNOWN_GAPS): {now_passing:?}",
        unexpected.len(),
        unexpected.join("\n")
    );
}
