//! `switchyard-node demo`: a node plus two in-process mock providers, to try failover in a
//! minute with nothing else installed. Built only with the `demo` feature (on by default, off
//! in release images), which brings in the `switchyard-mock` crate.

use std::sync::mpsc;

use switchyard_mock::{FaultSpec, MockConfig, MockUpstream};

/// The two mock providers' base URLs; they run on their own thread until the process exits.
pub struct DemoMocks {
    pub healthy: String,
    pub flaky: String,
    _thread: std::thread::JoinHandle<()>,
}

/// Starts both mocks on a dedicated runtime thread.
pub fn start_mocks() -> std::io::Result<DemoMocks> {
    let (tx, rx) = mpsc::channel::<std::io::Result<(String, String)>>();
    let thread = std::thread::Builder::new()
        .name("demo-mocks".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            rt.block_on(async move {
                let healthy = MockUpstream::start(MockConfig::default()).await;
                let flaky = MockUpstream::start(MockConfig::default()).await;
                match (healthy, flaky) {
                    (Ok(h), Ok(f)) => {
                        // The flaky provider answers every request with a 503.
                        let _ = f.script(FaultSpec::status(503));
                        let _ = tx.send(Ok((
                            format!("{}/v1", h.base_url()),
                            format!("{}/v1", f.base_url()),
                        )));
                        std::future::pending::<()>().await;
                        drop((h, f));
                    }
                    (Err(e), _) | (_, Err(e)) => {
                        let _ = tx.send(Err(e));
                    }
                }
            });
        })?;
    let (healthy, flaky) = rx
        .recv()
        .map_err(|_| std::io::Error::other("mock thread ended early"))??;
    Ok(DemoMocks {
        healthy,
        flaky,
        _thread: thread,
    })
}

/// Environment of the demo: fake upstream keys (the mocks accept any key).
pub fn env(name: &str) -> Option<String> {
    match name {
        "DEMO_HEALTHY_KEY" => Some("demo-healthy-key".into()),
        "DEMO_FLAKY_KEY" => Some("demo-flaky-key".into()),
        other => std::env::var(other).ok(),
    }
}

/// The demo's config.
pub fn config_toml(port: u16, admin_port: u16, healthy: &str, flaky: &str) -> String {
    format!(
        r#"
[server]
listen = "127.0.0.1:{port}"
admin_listen = "127.0.0.1:{admin_port}"
node_id = "demo"

[auth]
require_api_key = false
management_key_env = ""

[[providers]]
id = "flaky"
category = "apikey"
format = "openai"
base_url = "{flaky}"
models = ["gpt-4o-mini"]

[[providers]]
id = "healthy"
category = "apikey"
format = "openai"
base_url = "{healthy}"
models = ["gpt-4o-mini", "claude-sonnet-4-5"]

[[connections]]
id = "flaky-key-1"
provider = "flaky"
api_key_env = "DEMO_FLAKY_KEY"

[[connections]]
id = "healthy-key-1"
provider = "healthy"
api_key_env = "DEMO_HEALTHY_KEY"

[[combos]]
name = "demo"
strategy = "priority"
targets = [{{ target = "flaky/gpt-4o-mini" }}, {{ target = "healthy/gpt-4o-mini" }}]

[resilience.request_queue]
auto_enable_apikey_providers = false

# Long enough that the curl run again by hand still finds `flaky` cooling down (the default
# for API-key connections is 3 s, doubling per failure).
[resilience.connection_cooldown.apikey]
base_cooldown_ms = {DEMO_COOLDOWN_MS}
"#
    )
}

/// How long one failure cools the failing connection in the demo.
pub const DEMO_COOLDOWN_MS: u64 = 60_000;

/// What to try, printed once the node is ready. Every claim in it is checked by the
/// black-box test of the demo.
pub fn banner(port: u16, admin_port: u16) -> String {
    let cooldown_s = DEMO_COOLDOWN_MS / 1000;
    format!(
        "\nSwitchyard demo is up: client API on http://127.0.0.1:{port}, admin on http://127.0.0.1:{admin_port}\n\
         The combo `demo` tries the always-failing provider `flaky` first, then `healthy`:\n\n  \
         curl -s -i http://127.0.0.1:{port}/v1/chat/completions -H 'content-type: application/json' \\\n    \
         -d '{{\"model\":\"demo\",\"messages\":[{{\"role\":\"user\",\"content\":\"hi\"}}]}}'\n\n\
         Look at x-switchyard-connection (healthy-key-1) and x-switchyard-attempts (2): `flaky` answered\n\
         503 and the request failed over. That failure cools the connection `flaky-key-1` for {cooldown_s} s,\n\
         so the same curl run again within that time skips `flaky` without an attempt:\n\
         x-switchyard-connection (healthy-key-1), x-switchyard-attempts (1). The admin listener counts it:\n\n  \
         curl -s http://127.0.0.1:{admin_port}/metrics | grep '^switchyard_cooldowns_total'\n"
    )
}
