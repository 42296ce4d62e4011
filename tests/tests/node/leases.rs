//! Exclusive session leases on a real node in embedded mode: the lease API, the pin of leased
//! requests to their connection, the dispatch fence, contention, expiry, and that the owner
//! token never leaves the client's own requests.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{STATE_DEADLINE, eventually};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{MockConfig, MockHandle, MockUpstream};

pub(crate) const AGENT_KEY: &str = "sy-lease-agent-key-5a1c";
pub(crate) const PLAIN_KEY: &str = "sy-lease-plain-key-7b2d";
pub(crate) const UP_1: &str = "sk-up-lease-one-11111111";
pub(crate) const UP_2: &str = "sk-up-lease-two-22222222";
pub(crate) const UP_3: &str = "sk-up-lease-three-333333";
pub(crate) const OWNER_A: &str = "vlo_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
pub(crate) const OWNER_B: &str = "vlo_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB";
pub(crate) const OWNER_C: &str = "vlo_CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC";

pub(crate) const ENV: &[(&str, &str)] = &[
    ("AGENT_KEY", AGENT_KEY),
    ("PLAIN_KEY", PLAIN_KEY),
    ("UP_1", UP_1),
    ("UP_2", UP_2),
    ("UP_3", UP_3),
];

/// Provider `glm` with three connections; `agents` may lease `glm-1` and `glm-2`, so
/// ordinary traffic only ever sees `glm-3`.
pub(crate) fn config(mock: &MockHandle, ttl_ms: u64) -> String {
    format!(
        r#"
[server]
workers = 2

[auth]
require_api_key = true
management_key_env = ""

[[api_keys]]
id = "agents"
key_env = "AGENT_KEY"
scopes = ["lease:exclusive"]
allowed_connections = ["glm-1", "glm-2"]

[[api_keys]]
id = "plain"
key_env = "PLAIN_KEY"

[[providers]]
id = "glm"
format = "openai"
base_url = "{base}/v1"
models = ["glm-4.6"]

[[connections]]
id = "glm-1"
provider = "glm"
api_key_env = "UP_1"
priority = 1

[[connections]]
id = "glm-2"
provider = "glm"
api_key_env = "UP_2"
priority = 2

[[connections]]
id = "glm-3"
provider = "glm"
api_key_env = "UP_3"
priority = 3

[resilience.request_queue]
auto_enable_apikey_providers = false

[resilience.wait_for_cooldown]
enabled = false

[resilience.session_leases]
ttl_ms = {ttl_ms}
"#,
        base = mock.base_url()
    )
}

pub(crate) struct Client {
    http: reqwest::Client,
    base: String,
    /// Every response body seen, to prove no owner token is ever echoed.
    seen: std::sync::Mutex<Vec<String>>,
}

#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) retry_after: Option<u64>,
    pub(crate) connection: Option<String>,
    pub(crate) json: Value,
}

impl Reply {
    pub(crate) fn code(&self) -> &str {
        self.json["error"]["code"].as_str().unwrap_or("")
    }
}

impl Client {
    pub(crate) fn new(node: &NodeProcess) -> Self {
        Self {
            http: reqwest::Client::builder()
                .no_proxy()
                .timeout(Duration::from_secs(15))
                .build()
                .unwrap(),
            base: node.client_url(),
            seen: Default::default(),
        }
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> Reply {
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let header = |n: &str| {
            resp.headers()
                .get(n)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let retry_after = header("retry-after").and_then(|v| v.parse().ok());
        let connection = header("x-switchyard-connection");
        let text = resp.text().await.unwrap();
        self.seen.lock().unwrap().push(text.clone());
        Reply {
            status,
            retry_after,
            connection,
            json: serde_json::from_str(&text).unwrap_or(Value::Null),
        }
    }

    pub(crate) async fn lease(&self, key: &str, owner: Option<&str>, body: Value) -> Reply {
        let mut req = self
            .http
            .post(format!("{}/api/v1/session-leases", self.base))
            .bearer_auth(key)
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(o) = owner {
            req = req.header("x-switchyard-lease-owner", o);
        }
        self.send(req).await
    }

    pub(crate) async fn acquire(&self, owner: &str) -> Reply {
        self.lease(
            AGENT_KEY,
            Some(owner),
            json!({"action": "acquire", "model": "glm/glm-4.6"}),
        )
        .await
    }

    pub(crate) async fn chat(&self, key: &str, lease: Option<(&str, u64)>) -> Reply {
        let mut req = self
            .http
            .post(format!("{}/v1/chat/completions", self.base))
            .bearer_auth(key)
            .header("content-type", "application/json")
            .body(
                json!({"model": "glm/glm-4.6", "messages": [{"role": "user", "content": "hi"}]})
                    .to_string(),
            );
        if let Some((owner, generation)) = lease {
            req = req
                .header("x-switchyard-lease-owner", owner)
                .header("x-switchyard-lease-generation", generation.to_string());
        }
        self.send(req).await
    }
}

pub(crate) fn generation(r: &Reply) -> u64 {
    assert_eq!(r.status, 200, "{r:?}");
    r.json["generation"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_pin_fence_and_contend() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let node = NodeProcess::start(&config(&mock, 60_000), ENV).unwrap();
    let c = Client::new(&node);

    // Acquire: the first free connection in priority order; the body names no connection.
    let a = c.acquire(OWNER_A).await;
    let gen_a = generation(&a);
    assert_eq!(a.json["state"], "ACTIVE");
    assert_eq!(a.json["outcome"], "ACQUIRED");
    assert!(!a.json.to_string().contains("glm-1"), "{a:?}");
    // A re-acquire by the same owner renews the same lease.
    let again = c.acquire(OWNER_A).await;
    assert_eq!(generation(&again), gen_a);
    assert_eq!(again.json["outcome"], "REUSED");

    // A leased request goes to the lease's connection, and no lease header goes upstream.
    let r = c.chat(AGENT_KEY, Some((OWNER_A, gen_a))).await;
    assert_eq!(r.status, 200, "{r:?}\n{}", node.log());
    assert_eq!(r.connection.as_deref(), Some("glm-1"));
    let stats = mock.stats();
    assert_eq!(stats.requests_for_key(UP_1), 1);
    assert!(!stats.any_request_had_header("x-switchyard-lease-owner"));
    assert!(!stats.any_request_had_header("x-switchyard-lease-generation"));

    // B gets the other managed connection; C finds both held: 429 WAITING_FOR_CAPACITY.
    let b = c.acquire(OWNER_B).await;
    let gen_b = generation(&b);
    let r = c.chat(AGENT_KEY, Some((OWNER_B, gen_b))).await;
    assert_eq!(r.connection.as_deref(), Some("glm-2"), "{r:?}");
    let full = c.acquire(OWNER_C).await;
    assert_eq!(full.status, 429, "{full:?}");
    assert_eq!(full.code(), "LEASE_CAPACITY_UNAVAILABLE");
    assert_eq!(full.json["state"], "WAITING_FOR_CAPACITY");
    assert_eq!(full.json["error"]["type"], "lease_error");
    assert_eq!(full.json["eligibleCount"], 2);
    let ra = full.retry_after.expect("Retry-After");
    assert!((1..=60).contains(&ra), "{full:?}");

    // Ordinary traffic never lands on a managed connection.
    for _ in 0..3 {
        let r = c.chat(PLAIN_KEY, None).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.connection.as_deref(), Some("glm-3"), "{r:?}");
    }

    // Stale generation, no lease headers, wrong key, bad token: refused before any upstream.
    let before = mock.stats().requests_total;
    let stale = c.chat(AGENT_KEY, Some((OWNER_A, gen_a + 1))).await;
    assert_eq!((stale.status, stale.code()), (409, "LEASE_FENCE_STALE"));
    let none = c.chat(AGENT_KEY, None).await;
    assert_eq!((none.status, none.code()), (409, "LEASE_REQUIRED"));
    let foreign = c.chat(PLAIN_KEY, Some((OWNER_A, gen_a))).await;
    assert_eq!(
        (foreign.status, foreign.code()),
        (403, "LEASE_SCOPE_REQUIRED")
    );
    let bad = c.chat(AGENT_KEY, Some(("vlo_short", gen_a))).await;
    assert_eq!((bad.status, bad.code()), (400, "LEASE_CONTEXT_INVALID"));
    assert_eq!(mock.stats().requests_total, before);

    // Renew, then release; the released lease fences its holder out and frees the connection.
    let renewed = c
        .lease(
            AGENT_KEY,
            Some(OWNER_A),
            json!({"action": "renew", "generation": gen_a}),
        )
        .await;
    assert_eq!(renewed.json["outcome"], "RENEWED", "{renewed:?}");
    let wrong = c
        .lease(
            AGENT_KEY,
            Some(OWNER_A),
            json!({"action": "renew", "generation": gen_a + 5}),
        )
        .await;
    assert_eq!((wrong.status, wrong.code()), (409, "LEASE_FENCE_STALE"));
    let released = c
        .lease(
            AGENT_KEY,
            Some(OWNER_A),
            json!({"action": "release", "generation": gen_a, "reason": "OWNER_EXIT"}),
        )
        .await;
    assert_eq!(released.json["state"], "RELEASED", "{released:?}");
    let twice = c
        .lease(
            AGENT_KEY,
            Some(OWNER_A),
            json!({"action": "release", "generation": gen_a}),
        )
        .await;
    assert_eq!(twice.status, 200, "release is idempotent: {twice:?}");
    let after = c.chat(AGENT_KEY, Some((OWNER_A, gen_a))).await;
    assert_eq!((after.status, after.code()), (409, "LEASE_FENCE_STALE"));
    // C now gets glm-1, with a newer generation than A ever had there.
    let c_lease = c.acquire(OWNER_C).await;
    let gen_c = generation(&c_lease);
    assert!(gen_c > gen_a, "generations only rise: {gen_c} vs {gen_a}");
    let r = c.chat(AGENT_KEY, Some((OWNER_C, gen_c))).await;
    assert_eq!(r.connection.as_deref(), Some("glm-1"), "{r:?}");

    // Request validation on the lease API itself.
    let url = format!("{}/api/v1/session-leases", c.base);
    let r = c
        .send(
            c.http
                .post(&url)
                .bearer_auth(AGENT_KEY)
                .header("content-type", "text/plain")
                .body("x"),
        )
        .await;
    assert_eq!((r.status, r.code()), (415, "LEASE_CONTENT_TYPE_REQUIRED"));
    let r = c
        .send(
            c.http
                .post(&url)
                .header("content-type", "application/json")
                .body("{}"),
        )
        .await;
    assert_eq!((r.status, r.code()), (401, "LEASE_AUTHENTICATION_REQUIRED"));
    let r = c
        .lease(
            "sy-wrong",
            Some(OWNER_A),
            json!({"action": "acquire", "model": "glm/glm-4.6"}),
        )
        .await;
    assert_eq!((r.status, r.code()), (401, "LEASE_API_KEY_INVALID"));
    let r = c
        .lease(
            PLAIN_KEY,
            Some(OWNER_A),
            json!({"action": "acquire", "model": "glm/glm-4.6"}),
        )
        .await;
    assert_eq!((r.status, r.code()), (403, "LEASE_SCOPE_REQUIRED"));
    let r = c
        .lease(
            AGENT_KEY,
            None,
            json!({"action": "acquire", "model": "glm/glm-4.6"}),
        )
        .await;
    assert_eq!((r.status, r.code()), (400, "LEASE_CONTEXT_REQUIRED"));
    let r = c
        .lease(AGENT_KEY, Some(OWNER_A), json!({"action": "grab"}))
        .await;
    assert_eq!((r.status, r.code()), (400, "LEASE_ACTION_INVALID"));
    let r = c
        .lease(
            AGENT_KEY,
            Some(OWNER_A),
            json!({"action": "acquire", "model": "nope/none"}),
        )
        .await;
    assert_eq!((r.status, r.code()), (400, "LEASE_MODEL_INVALID"));

    // The owner tokens never appear in a body, /metrics, the health body or the log.
    let admin = reqwest::Client::builder().no_proxy().build().unwrap();
    let metrics = admin
        .get(format!("{}/metrics", node.admin_url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("switchyard_lease_operations_total"),
        "{metrics}"
    );
    let health = admin
        .get(format!("{}/api/monitoring/health", node.admin_url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let log = node.wait_for_log(Duration::from_secs(2), |l| {
        l.contains("LEASE_MODEL_INVALID")
    });
    let seen = c.seen.lock().unwrap().join("\n");
    for token in [OWNER_A, OWNER_B, OWNER_C] {
        let body = &token[4..];
        for (what, text) in [
            ("bodies", &seen),
            ("metrics", &metrics),
            ("health", &health),
            ("log", &log),
        ] {
            assert!(!text.contains(body), "owner token in {what}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_fences_its_old_holder_out() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    // The shortest TTL the settings allow: one second.
    let node = NodeProcess::start(&config(&mock, 1_000), ENV).unwrap();
    let c = Client::new(&node);
    let a = c.acquire(OWNER_A).await;
    let gen_a = generation(&a);
    let b = c.acquire(OWNER_B).await;
    let _ = generation(&b);
    // A stalls past its TTL; B keeps renewing; C takes A's connection.
    let gen_c = eventually(STATE_DEADLINE, || async {
        let r = c.acquire(OWNER_C).await;
        if r.status != 200 {
            assert_eq!(r.code(), "LEASE_CAPACITY_UNAVAILABLE", "{r:?}");
        }
        (r.status == 200).then(|| generation(&r))
    })
    .await;
    let gen_c = gen_c.expect("C acquires once a lease expired");
    let before = mock.stats().requests_total;
    let stale = c.chat(AGENT_KEY, Some((OWNER_A, gen_a))).await;
    assert_eq!((stale.status, stale.code()), (409, "LEASE_FENCE_STALE"));
    let renew = c
        .lease(
            AGENT_KEY,
            Some(OWNER_A),
            json!({"action": "renew", "generation": gen_a}),
        )
        .await;
    assert_eq!((renew.status, renew.code()), (409, "LEASE_FENCE_STALE"));
    assert_eq!(
        mock.stats().requests_total,
        before,
        "a stale holder reached the upstream"
    );
    let ok = c.chat(AGENT_KEY, Some((OWNER_C, gen_c))).await;
    assert_eq!(ok.status, 200, "{ok:?}");
}
