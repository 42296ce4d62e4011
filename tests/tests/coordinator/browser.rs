//! The operator dashboard in a real browser: headless Chromium (Debian's `chromium`) driven
//! through chromedriver, against a running two-node cluster (real `switchyard-node`s in redis
//! mode, an in-process mock upstream) and a coordinator. An open provider breaker must show on
//! the page, the page's Reset button must close it cluster-wide, and the page must show that.
//! Screenshots are kept in `target/browser-artifacts/`.
//!
//! Needs `chromium` and `chromium-driver` (apt) and the node and coordinator binaries
//! (`cargo build -p switchyard-node -p switchyard-coordinator`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use crate::support::coordinator::{Coordinator, MGMT_KEY, PREFIX, store};
use crate::support::webdriver::{Browser, artifact_dir};
use serde_json::{Value, json};
use switchyard_shared::outcome::{FailureReason, TerminalStatus};
use switchyard_shared::wire::BreakerPhase;
use switchyard_store::CooldownWrite;
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockHandle, MockUpstream, Route};
use switchyard_tests::redis_server::RedisServer;

/// The cluster's config, shared by nodes and coordinator: one provider on the mock, a
/// breaker that opens after two failures, redis mode.
fn cluster_config(redis_url: &str, mock: &MockHandle, extra: &str) -> String {
    format!(
        r#"
[server]
workers = 2

[auth]
require_api_key = false

[cluster]
mode = "redis"
redis_url = "{redis_url}"
key_prefix = "{PREFIX}"
heartbeat_interval_ms = 500
node_ttl_ms = 3000
redis_timeout_ms = 500

[resilience.provider_breaker.apikey]
failure_threshold = 2

[resilience.request_queue]
auto_enable_apikey_providers = false

[resilience.wait_for_cooldown]
enabled = false

[[providers]]
id = "p0"
category = "apikey"
format = "openai"
base_url = "{base}/v1"
models = []
[providers.timeouts]
connect_ms = 1000
headers_ms = 5000
first_content_ms = 5000
idle_ms = 5000

[[connections]]
id = "p0-c0"
provider = "p0"
api_key_env = "UP_KEY"
# Failures count toward the provider breaker instead of cooling the one connection.
disable_cooling = true
{extra}"#,
        base = mock.base_url()
    )
}

/// Extra providers and connections for the synthetic scenario.
const MORE_CONNECTIONS: &str = r#"
[[providers]]
id = "p1"
category = "apikey"
format = "openai"
base_url = "http://127.0.0.1:9/v1"

[[connections]]
id = "p1-c0"
provider = "p1"
api_key_env = "UP_KEY"

[[connections]]
id = "p1-c1"
provider = "p1"
api_key_env = "UP_KEY"

[[connections]]
id = "p1-c2"
provider = "p1"
api_key_env = "UP_KEY"
"#;

/// Row counts of the nodes, connections and leases tables.
const ROWS: &str = r#"
    const n = (sel) => document.querySelectorAll(sel).length;
    return [n('#nodes tr[data-node]'), n('#connections tr[data-connection]'), n('#leases tr[data-lease]')];"#;

const BREAKER_STATE: &str = r#"
    const cell = document.querySelector('tr[data-provider="p0"] td.breaker span');
    return cell ? cell.dataset.state : null;"#;

struct Cluster {
    _redis: RedisServer,
    mock: MockHandle,
    nodes: Vec<NodeProcess>,
    coordinator: Coordinator,
    _heartbeats: Option<AbortOnDrop>,
}

/// Stops the synthetic heartbeats with the test.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Redis, the mock, the coordinator and, with `real_nodes`, two `switchyard-node`s in redis
/// mode (without, two synthetic node heartbeats stand in for them).
async fn cluster(real_nodes: bool, extra: &str) -> Cluster {
    cluster_with(real_nodes, extra, |cfg| cfg).await
}

/// [`cluster`] with the config text passed through `adjust` first.
async fn cluster_with(
    real_nodes: bool,
    extra: &str,
    adjust: impl FnOnce(String) -> String,
) -> Cluster {
    let redis = RedisServer::start().unwrap();
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let cfg = adjust(cluster_config(&redis.url(), &mock, extra));
    let env = [
        ("UP_KEY", "sk-up-browser"),
        ("SWITCHYARD_MANAGEMENT_KEY", MGMT_KEY),
    ];
    let mut heartbeats = None;
    let nodes = if real_nodes {
        // Distinct ids: on one host both would default to the host name.
        ["node-1", "node-2"]
            .iter()
            .map(|id| {
                let cfg = cfg.replacen(
                    "workers = 2",
                    &format!("workers = 2\nnode_id = \"{id}\""),
                    1,
                );
                NodeProcess::start(&cfg, &env).unwrap()
            })
            .collect()
    } else {
        let s = store(&redis.url());
        heartbeats = Some(tokio::spawn(async move {
            // Bounded: the test ends long before 10 minutes.
            for _ in 0..2000 {
                for id in ["node-a", "node-b"] {
                    crate::support::coordinator::heartbeat(
                        &s,
                        id,
                        env!("CARGO_PKG_VERSION"),
                        0,
                        3000,
                    )
                    .await;
                }
                // The heartbeat period of these synthetic nodes (part of the scenario).
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }));
        Vec::new()
    };
    let coordinator = Coordinator::start(
        &cfg,
        &[
            ("SWITCHYARD_COORDINATOR_ID", "coord-ui"),
            // Charts fill in seconds rather than minutes.
            ("SWITCHYARD_COORDINATOR_HISTORY_INTERVAL_MS", "500"),
        ],
    );
    Cluster {
        _redis: redis,
        mock,
        nodes,
        coordinator,
        _heartbeats: heartbeats.map(AbortOnDrop),
    }
}

/// Opens the dashboard, enters the key, waits for the open breaker, screenshots, presses
/// Reset, waits for it to close in the page and in Redis, screenshots again.
async fn reset_from_the_page(c: &Cluster, name: &str) {
    let s = store(&c._redis.url());
    let browser = Browser::start().await;
    browser.goto(&c.coordinator.url("/")).await;
    browser.type_into("#key", MGMT_KEY).await;
    browser.click("#key-save").await;
    let state = browser
        .wait_for(BREAKER_STATE, &json!("open"), Duration::from_secs(15))
        .await;
    assert_eq!(
        state,
        json!("open"),
        "the page never showed the open breaker"
    );
    let status = browser
        .eval("return document.querySelector('#cluster-status').textContent;")
        .await;
    assert_eq!(status, json!("degraded"));
    let dir = artifact_dir();
    browser
        .screenshot(&dir.join(format!("{name}-open.png")))
        .await;

    browser
        .click(r#"button[data-action="reset-provider"][data-id="p0"]"#)
        .await;
    let state = browser
        .wait_for(BREAKER_STATE, &json!("closed"), Duration::from_secs(15))
        .await;
    assert_eq!(
        state,
        json!("closed"),
        "the page never showed the breaker closed"
    );
    assert_eq!(
        s.read_breakers(&["p0"]).await.unwrap()[0].phase,
        BreakerPhase::Closed
    );
    // The toast names what happened.
    let toast = browser
        .eval("return document.querySelector('#toast').textContent;")
        .await;
    assert!(toast.as_str().unwrap_or("").contains("Reset 1"), "{toast}");
    browser
        .screenshot(&dir.join(format!("{name}-closed.png")))
        .await;
}

/// The page against the shared state of a two-node cluster (synthetic heartbeats), the
/// breaker opened the way a node records upstream failures (the store's breaker script).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_an_open_breaker_and_resets_it() {
    let c = cluster(false, MORE_CONNECTIONS).await;
    let s = store(&c._redis.url());
    // Something in every section: a cooling connection with a model lockout, a terminal one,
    // a session lease.
    s.cooldown_extend(&CooldownWrite {
        conn: "p1-c0",
        duration_ms: 90_000,
        backoff_level: 2,
        reason: FailureReason::RateLimitExceeded,
        terminal: None,
        last_error: "429",
    })
    .await
    .unwrap();
    s.lockout_extend(
        "p1",
        "p1-c0",
        "gpt-4o",
        45_000,
        2,
        FailureReason::QuotaExhausted,
    )
    .await
    .unwrap();
    s.terminal_set("p1-c1", TerminalStatus::CreditsExhausted)
        .await
        .unwrap();
    let keys = s.connection_lease_keys("p1-c2");
    s.lease_acquire(&keys, "session-token-browser", "client-a", 300_000)
        .await
        .unwrap();
    crate::support::coordinator::open_breaker(&s, "p0").await;
    reset_from_the_page(&c, "dashboard").await;
    let browser = Browser::start().await;
    browser.goto(&c.coordinator.url("/")).await;
    browser.type_into("#key", MGMT_KEY).await;
    browser.click("#key-save").await;
    let rows = browser
        .wait_for(ROWS, &json!([2, 3, 1]), Duration::from_secs(10))
        .await;
    assert_eq!(
        rows,
        json!([2, 3, 1]),
        "nodes, cooling/terminal/leased connections, leases"
    );
    let lockout = browser
        .eval(r#"return document.querySelector('tr[data-connection="p1-c0"]').textContent;"#)
        .await;
    assert!(lockout.as_str().unwrap().contains("gpt-4o"), "{lockout}");
    // Reinstate the terminal connection from the page.
    browser
        .click(r#"button[data-action="reinstate"][data-id="p1-c1"]"#)
        .await;
    let rows = browser
        .wait_for(ROWS, &json!([2, 2, 1]), Duration::from_secs(10))
        .await;
    assert_eq!(rows, json!([2, 2, 1]));
    assert_eq!(
        s.read_connections(&["p1-c1"]).await.unwrap()[0].terminal,
        None
    );
}

/// The full scenario: upstream 503s through one node trip the cluster-wide breaker, which
/// the page shows and resets. Needs the nodes' cluster sync (breaker failures written to
/// Redis, events applied), which lands separately.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traffic_trips_the_breaker_and_the_page_resets_it() {
    let c = cluster(true, "").await;
    let s = store(&c._redis.url());
    c.mock
        .script(
            FaultSpec::status(503)
                .on_route(Route::ChatCompletions)
                .times(2),
        )
        .unwrap();
    let http = reqwest::Client::new();
    for _ in 0..2 {
        let r = http
            .post(format!("{}/v1/chat/completions", c.nodes[0].client_url()))
            .json(
                &json!({"model": "p0/mock-model", "messages": [{"role": "user", "content": "hi"}]}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 503);
    }
    let open = crate::support::eventually(Duration::from_secs(10), || async {
        let b = s.read_breakers(&["p0"]).await.ok()?;
        (b[0].phase == BreakerPhase::Open).then_some(())
    })
    .await;
    assert!(
        open.is_some(),
        "the nodes did not record the breaker in Redis"
    );
    reset_from_the_page(&c, "dashboard-traffic").await;
    // Both nodes converge on the reset: a request through the other node is served.
    let r = http
        .post(format!("{}/v1/chat/completions", c.nodes[1].client_url()))
        .json(&json!({"model": "p0/mock-model", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let body: Value = r.json().await.unwrap_or(Value::Null);
    assert_eq!(status, 200, "{body}");
}

/// Whether provider p0's requests chart is drawn with at least three points and a non-zero
/// maximum ("drawn"), else what is missing.
const REQUESTS_CHART: &str = r#"
    const chart = document.querySelector('svg[data-provider="p0"][data-series="requests"]');
    if (!chart) return 'no chart';
    const line = chart.querySelector('polyline');
    const points = line ? line.getAttribute('points').trim().split(/\s+/).length : 0;
    const caption = chart.querySelector('text').textContent;
    return points >= 3 && caption.includes('max') ? 'drawn' : `${points} points: ${caption}`;"#;

/// Traffic through two real nodes, with a few upstream failures, shows in p0's charts:
/// the coordinator samples the nodes' metrics and the page draws them as inline SVG.
/// The screenshot (`target/browser-artifacts/dashboard-charts.png`) is the one in
/// `docs/dashboard.png`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_charts_provider_traffic() {
    // Failures cool the connection here, which is what the errors chart counts.
    let c = cluster_with(true, "", |cfg| {
        cfg.replace("disable_cooling = true", "disable_cooling = false")
    })
    .await;
    let browser = Browser::start().await;
    browser.goto(&c.coordinator.url("/")).await;
    browser.type_into("#key", MGMT_KEY).await;
    browser.click("#key-save").await;
    // Paced traffic through both nodes while the page draws; every twentieth request meets
    // an upstream 503. Bounded: 200 requests.
    let clients: Vec<String> = c.nodes.iter().map(|n| n.client_url()).collect();
    let traffic = async {
        let http = reqwest::Client::new();
        let mut served = 0;
        for i in 0..200 {
            if i % 20 == 19 {
                c.mock
                    .script(
                        FaultSpec::status(503)
                            .on_route(Route::ChatCompletions)
                            .times(1),
                    )
                    .unwrap();
            }
            let r = http
                .post(format!("{}/v1/chat/completions", clients[i % 2]))
                .json(&json!({"model": "p0/mock-model", "messages": [{"role": "user", "content": "hi"}]}))
                .send()
                .await
                .unwrap();
            if r.status().is_success() {
                served += 1;
            }
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
        served
    };
    let watch = async {
        let drawn = browser
            .wait_for(REQUESTS_CHART, &json!("drawn"), Duration::from_secs(30))
            .await;
        assert_eq!(drawn, json!("drawn"), "the requests chart was not drawn");
        // One chart per series, each an inline SVG.
        let series = browser
            .eval(
                r#"return [...document.querySelectorAll('svg[data-provider="p0"]')]
                .map((s) => s.dataset.series);"#,
            )
            .await;
        assert_eq!(series, json!(["requests", "errors", "p95"]));
        let p95 = browser
        .eval(r#"return Number(document.querySelector('svg[data-provider="p0"][data-series="p95"]').dataset.points);"#)
        .await;
        assert!(p95.as_u64().unwrap_or(0) >= 1, "no latency point: {p95}");
        // A picture with some history in it: wait for a dozen points, as traffic goes on.
        let twelve = browser
        .wait_for(
            r#"return Number(document.querySelector('svg[data-provider="p0"][data-series="requests"]').dataset.points) >= 12;"#,
            &json!(true),
            Duration::from_secs(30),
        )
        .await;
        assert_eq!(twelve, json!(true), "the history stopped growing");
        browser
            .screenshot(&artifact_dir().join("dashboard-charts.png"))
            .await;
    };
    let (served, ()) = tokio::join!(traffic, watch);
    assert!(served > 0, "no request was served");
}
