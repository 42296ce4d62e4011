//! Embedded mode keeps connection state across a restart (`SWITCHYARD_STATE_DIR`): a key that
//! a provider declared out of credits stays terminal and is not dispatched to after the node
//! restarts; a missing store starts empty, an unreadable one starts empty with a warning.

use serde_json::{Value, json};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockUpstream};

use crate::support::http::{
    chat, connection, cooldown_row, env, http, messages, open_auth, post, provider, start_node,
    wait_connection,
};
use crate::support::{STATE_DEADLINE, eventually};

const DEAD_KEY: &str = "sk-persist-dead";
const LIVE_KEY: &str = "sk-persist-live";

/// A corpus entry: a real provider's "no credit left" answer.
fn credits_fixture() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/upstream-errors/anthropic/credit-balance-too-low.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("corpus entry")).expect("JSON")
}

fn config(base_url: &str) -> String {
    format!(
        "{}{}{}{}\n[resilience.request_queue]\nauto_enable_apikey_providers = false\n",
        open_auth(),
        provider("p", "anthropic", base_url, &["m"], "", ""),
        connection("c1", "p", "KEY_DEAD", ""),
        connection("c2", "p", "KEY_LIVE", ""),
    )
}

fn node_env(dir: &std::path::Path) -> Vec<(String, String)> {
    env(&[
        ("KEY_DEAD", DEAD_KEY),
        ("KEY_LIVE", LIVE_KEY),
        ("SWITCHYARD_STATE_DIR", dir.to_str().unwrap()),
        ("RUST_LOG", "info,switchyard_node::actors::persist=debug"),
    ])
}

async fn wait_log(node: &NodeProcess, what: &str, holds: impl Fn(&str) -> bool) {
    let seen = eventually(STATE_DEADLINE, || async { holds(&node.log()) }).await;
    assert!(seen, "timed out waiting for {what}; log:\n{}", node.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_out_of_credits_stays_terminal_after_a_restart() {
    let fixture = credits_fixture();
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let fault: FaultSpec = serde_json::from_value(json!({
        "match": {"api_key": DEAD_KEY},
        "status": fixture["response"]["status"],
        "headers": fixture["response"]["headers"],
        "body": fixture["response"]["body"],
    }))
    .unwrap();
    mock.script(fault).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let c = http();

    let node = start_node(config(&mock.base_url()), node_env(dir.path())).await;
    // Until a request has tried c1 (the strategy may pick c2 first).
    let terminal = eventually(STATE_DEADLINE, || async {
        let r = post(
            &c,
            &node.client_url(),
            "/v1/messages",
            &messages("p/m", false),
        )
        .await;
        assert_eq!(r.status, 200, "{r:#?}");
        let row = cooldown_row(&node, "c1").await;
        (row["terminal"] == "credits_exhausted").then_some(row)
    })
    .await;
    assert!(
        terminal.is_some(),
        "c1 never became terminal; log:\n{}",
        node.log()
    );
    wait_log(&node, "the state write", |log| {
        log.contains("connection state stored") && log.contains("c1")
    })
    .await;
    drop(node);

    let node = start_node(config(&mock.base_url()), node_env(dir.path())).await;
    wait_connection(&node, "c1", "the restored terminal state", |row| {
        row["terminal"] == "credits_exhausted"
    })
    .await;
    mock.reset_stats();
    for _ in 0..6 {
        let r = post(
            &c,
            &node.client_url(),
            "/v1/messages",
            &messages("p/m", false),
        )
        .await;
        assert_eq!(r.status, 200, "{r:#?}");
        assert_eq!(r.connection(), "c2");
    }
    let dead = mock
        .arrivals()
        .iter()
        .filter(|a| a.api_key == DEAD_KEY)
        .count();
    assert_eq!(
        dead, 0,
        "the terminal key was dispatched to after the restart"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_store_starts_empty_with_a_warning() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("state.redb"), b"not a database at all").unwrap();
    let node = start_node(config(&mock.base_url()), node_env(dir.path())).await;
    wait_log(&node, "the warning", |log| {
        log.contains("state store unreadable")
    })
    .await;
    let row = cooldown_row(&node, "c1").await;
    assert!(row["terminal"].is_null(), "{row}");
    let r = post(
        &http(),
        &node.client_url(),
        "/v1/messages",
        &messages("p/m", false),
    )
    .await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert!(dir.path().join("state.redb.corrupt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_store_starts_empty() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(config(&mock.base_url()), node_env(dir.path())).await;
    wait_log(&node, "the restore", |log| {
        log.contains("connection state restored") && log.contains("\"restored\":0")
    })
    .await;
    assert!(
        !node.log().contains("state store unreadable"),
        "{}",
        node.log()
    );
    let r = post(
        &http(),
        &node.client_url(),
        "/v1/messages",
        &messages("p/m", false),
    )
    .await;
    assert_eq!(r.status, 200, "{r:#?}");
}

const LOCK_KEY: &str = "sk-persist-lock";

/// One provider `lockp` with one connection, model lockouts on (404 locks the model for 120 s),
/// no waiting for cooldowns, and a provider `brkp` whose breaker opens after two failures.
fn lock_config(base_url: &str) -> String {
    format!(
        "{}{}{}{}{}\n[resilience.request_queue]\nauto_enable_apikey_providers = false\n\
         [resilience.model_lockout]\nenabled = true\n\
         [resilience.wait_for_cooldown]\nenabled = false\n\
         [resilience.provider_breaker.apikey]\nfailure_threshold = 2\nreset_timeout_ms = 120000\n",
        open_auth(),
        provider("lockp", "openai", base_url, &["m", "other"], "", ""),
        connection("lc1", "lockp", "KEY_LOCK", "disable_cooling = true"),
        provider("brkp", "openai", base_url, &["m"], "", ""),
        connection("bc1", "brkp", "KEY_BRK", "disable_cooling = true"),
    )
}

fn lock_env(dir: &std::path::Path) -> Vec<(String, String)> {
    env(&[
        ("KEY_LOCK", LOCK_KEY),
        ("KEY_BRK", "sk-persist-brk"),
        ("SWITCHYARD_STATE_DIR", dir.to_str().unwrap()),
        ("RUST_LOG", "info,switchyard_node::actors::persist=debug"),
    ])
}

/// A model lockout and an open provider breaker survive a restart in embedded mode: the
/// locked model is not dispatched to and the open provider is not called until they end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_lockout_and_an_open_breaker_survive_a_restart() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let not_found: FaultSpec = serde_json::from_value(json!({
        "match": {"api_key": LOCK_KEY, "model": "m"},
        "status": 404,
        "headers": {"content-type": "application/json"},
        "body": {"error": {"message": "The model `m` does not exist or you do not have access to it.",
                 "type": "invalid_request_error", "param": null, "code": "model_not_found"}},
    }))
    .unwrap();
    mock.script(not_found).unwrap();
    mock.script(FaultSpec::status(500).for_key("sk-persist-brk"))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let c = http();

    let node = start_node(lock_config(&mock.base_url()), lock_env(dir.path())).await;
    let r = post(
        &c,
        &node.client_url(),
        "/v1/chat/completions",
        &chat("lockp/m", false),
    )
    .await;
    assert_eq!(r.status, 404, "{r:#?}");
    for _ in 0..2 {
        let r = post(
            &c,
            &node.client_url(),
            "/v1/chat/completions",
            &chat("brkp/m", false),
        )
        .await;
        assert_eq!(r.status, 500, "{r:#?}");
    }
    wait_connection(&node, "lc1", "the lockout", |row| {
        row["lockouts"].as_array().is_some_and(|l| !l.is_empty())
    })
    .await;
    let open = eventually(STATE_DEADLINE, || async {
        breaker_state(&node, "brkp").await == "OPEN"
    })
    .await;
    assert!(open, "the breaker did not open; log:\n{}", node.log());
    wait_log(&node, "the lockout and breaker writes", |log| {
        log.contains("connection state stored") && log.contains("lc1") && log.contains("brkp")
    })
    .await;
    drop(node);

    let node = start_node(lock_config(&mock.base_url()), lock_env(dir.path())).await;
    let row = wait_connection(&node, "lc1", "the restored lockout", |row| {
        row["lockouts"].as_array().is_some_and(|l| !l.is_empty())
    })
    .await;
    let remaining = row["lockouts"][0]["remainingMs"].as_u64().unwrap_or(0);
    assert!(
        remaining > 60_000,
        "restored for the rest of its 120 s: {row}"
    );
    assert_eq!(breaker_state(&node, "brkp").await, "OPEN");
    mock.reset_stats();
    let r = post(
        &c,
        &node.client_url(),
        "/v1/chat/completions",
        &chat("lockp/m", false),
    )
    .await;
    assert_eq!(r.status, 429, "the model is still locked: {r:#?}");
    let r = post(
        &c,
        &node.client_url(),
        "/v1/chat/completions",
        &chat("lockp/other", false),
    )
    .await;
    assert_eq!(r.status, 200, "another model is served: {r:#?}");
    let r = post(
        &c,
        &node.client_url(),
        "/v1/chat/completions",
        &chat("brkp/m", false),
    )
    .await;
    assert_eq!(r.status, 503, "the breaker is still open: {r:#?}");
    assert_eq!(
        mock.stats().requests_total,
        1,
        "only the unlocked model reached the upstream after the restart"
    );
}

/// The provider breaker's state as `/api/monitoring/health` shows it.
async fn breaker_state(node: &NodeProcess, provider: &str) -> String {
    let r = crate::support::http::send(
        http()
            .get(format!("{}/api/monitoring/health", node.admin_url()))
            .bearer_auth(crate::support::http::MGMT_KEY),
    )
    .await;
    let health = r.json();
    health["providerBreakers"]
        .as_array()
        .and_then(|b| b.iter().find(|b| b["provider"] == provider))
        .and_then(|b| b["state"].as_str())
        .unwrap_or("unknown")
        .to_owned()
}
