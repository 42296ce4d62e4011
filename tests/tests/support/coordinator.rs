//! Shared helpers of the coordinator tests: start a real `switchyard-coordinator` on a free
//! loopback port against a test Redis, call its API, seed synthetic cluster state, and signal
//! the process (SIGSTOP/SIGCONT/SIGKILL by its own PID).

// clippy's allow-*-in-tests settings cover `#[test]` functions only, not these helpers;
// failing loudly is what a test helper should do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use switchyard_store::{NodeHeartbeat, NoopObserver, RedisStore, RedisStoreConfig};
use switchyard_tests::coordinator_process::CoordinatorProcess;

pub const MGMT_KEY: &str = "mgmt-coordinator-secret-71c2";
pub const CLIENT_KEY: &str = "sk-client-coordinator-5a9e";
pub const PREFIX: &str = "sytest:";

/// A config with `providers` providers and `conns_per_provider` connections each, named
/// `p{i}` and `p{i}-c{j}`, in redis mode against `redis_url`.
pub fn config(redis_url: &str, providers: usize, conns_per_provider: usize, extra: &str) -> String {
    let mut out = format!(
        r#"
[auth]
require_api_key = true

[[api_keys]]
id = "client"
key_env = "CLIENT_KEY"

[cluster]
mode = "redis"
redis_url = "{redis_url}"
key_prefix = "{PREFIX}"
heartbeat_interval_ms = 500
node_ttl_ms = 3000
redis_timeout_ms = 500
{extra}
"#
    );
    for p in 0..providers {
        out.push_str(&format!(
            "\n[[providers]]\nid = \"p{p}\"\ncategory = \"apikey\"\nformat = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n"
        ));
    }
    for p in 0..providers {
        for c in 0..conns_per_provider {
            out.push_str(&format!(
                "\n[[connections]]\nid = \"p{p}-c{c}\"\nprovider = \"p{p}\"\napi_key_env = \"UP_KEY\"\n"
            ));
        }
    }
    out
}

/// A running coordinator. Dropping it kills the process.
pub struct Coordinator {
    process: CoordinatorProcess,
    pub addr: SocketAddr,
    pub http: reqwest::Client,
}

impl Coordinator {
    /// Starts a coordinator with `config` and extra environment; waits for `/healthz`.
    pub fn start(config: &str, env: &[(&str, &str)]) -> Self {
        let mut all = vec![
            ("SWITCHYARD_MANAGEMENT_KEY", MGMT_KEY),
            ("CLIENT_KEY", CLIENT_KEY),
        ];
        all.extend_from_slice(env);
        let process = CoordinatorProcess::start(config, &all)
            .expect("start switchyard-coordinator (build it first)");
        Self {
            addr: process.addr,
            process,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn log(&self) -> String {
        self.process.log()
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([sig, &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill {sig}");
    }

    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// `method path` with the management key and an optional JSON body: (status, body).
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        self.call_as(Some(MGMT_KEY), method, path, body).await
    }

    pub async fn call_as(
        &self,
        key: Option<&str>,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self.http.request(method, self.url(path));
        if let Some(key) = key {
            req = req.bearer_auth(key);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    pub async fn health(&self) -> Value {
        let (status, body) = self.call("GET", "/api/cluster/health", None).await;
        assert_eq!(status, 200, "{body}");
        body
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        // SIGKILL ends a stopped (SIGSTOP) process too.
        self.kill();
    }
}

/// A store on the test Redis with the tests' key prefix.
pub fn store(redis_url: &str) -> Arc<RedisStore> {
    let cfg = RedisStoreConfig {
        url: redis_url.to_owned(),
        key_prefix: PREFIX.to_owned(),
        timeout_ms: 2000,
        health: Default::default(),
    };
    Arc::new(RedisStore::connect(&cfg, Arc::new(NoopObserver)).unwrap())
}

pub fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Writes a synthetic heartbeat for node `id` sent `age_ms` ago.
pub async fn heartbeat(store: &RedisStore, id: &str, version: &str, age_ms: u64, ttl_ms: u64) {
    let mut hb = NodeHeartbeat {
        node_id: id.to_owned(),
        version: version.to_owned(),
        client_address: format!("10.0.0.1:{}", 8000),
        admin_address: "10.0.0.1:9090".into(),
        sent_at_ms: epoch_ms() - age_ms,
        inflight: 3,
        redis_state: "up".into(),
        ..NodeHeartbeat::default()
    };
    hb.breakers.insert("p0".into(), "closed".into());
    store.heartbeat(id, &hb.to_json(), ttl_ms).await.unwrap();
}

/// Opens `provider`'s cluster breaker the way nodes record upstream failures (the store's
/// breaker script, threshold 2).
pub async fn open_breaker(store: &RedisStore, provider: &str) {
    let params = switchyard_store::BreakerParams {
        failure_threshold: 2,
        degradation_at: 1,
        reset_timeout_ms: 60_000,
        max_reset_timeout_ms: 120_000,
        backoff_escalation_count: 0,
    };
    for _ in 0..2 {
        store.breaker_failure(provider, &params).await.unwrap();
    }
}
