//! The request pipeline end to end against a canned upstream on 127.0.0.1, with the real
//! breaker actors: what a request leaves behind in the breaker (its half-open probe lease)
//! whichever way it ends.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use actix::Arbiter;
use bytes::Bytes;
use switchyard_shared::breaker::{Breaker, BreakerView};
use switchyard_shared::config::Config;
use switchyard_shared::outcome::{BreakerOutcome, FailureKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::{RouteRequest, route};
use crate::actors::{self, GetBreaker, GetBreakerStatus};
use crate::api::body::parse_body;
use crate::api::errors::ClientFormat;
use crate::runtime::Runtime;

/// An upstream that answers every request with `response` (a full HTTP/1.1 message) and
/// closes the connection. Returns its base URL.
pub(crate) async fn canned_upstream(response: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    actix_rt::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            actix_rt::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let mut seen = Vec::new();
                // Read the head and the body announced by Content-Length, then answer.
                loop {
                    let Ok(n) = sock.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    if request_complete(&seen) {
                        break;
                    }
                }
                let _ = sock.write_all(response.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    format!("http://{addr}/v1")
}

fn request_complete(seen: &[u8]) -> bool {
    let Some(head_end) = seen.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&seen[..head_end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    seen.len() >= head_end + 4 + length
}

pub(crate) const TOO_MANY: &str = "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\ncontent-length: 40\r\nconnection: close\r\n\r\n{\"error\":{\"message\":\"slow down please\"}}";

pub(crate) const OK_JSON: &str = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 108\r\nconnection: close\r\n\r\n{\"id\":\"c1\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"ok\"}}]}";

pub(crate) const NOT_JSON: &str = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 8\r\nconnection: close\r\n\r\nnot json";

/// One openai-format provider `p` (connections `p-1` and `p-2`, which takes one request at a
/// time) serving model `m`, and a combo `c` over it
/// that allows `max_attempts` attempts.
pub(crate) fn runtime(base_url: &str, max_attempts: u32) -> Arc<Runtime> {
    let toml = format!(
        r#"
[server]
listen = "127.0.0.1:1"
admin_listen = "127.0.0.1:2"

[auth]
require_api_key = false
management_key_env = ""

[[providers]]
id = "p"
category = "apikey"
format = "openai"
base_url = "{base_url}"
models = ["m"]

[[connections]]
id = "p-1"
provider = "p"
api_key_env = "KEY"

[[connections]]
id = "p-2"
provider = "p"
api_key_env = "KEY"
max_concurrent = 1

[[combos]]
name = "c"
strategy = "priority"
targets = [{{ target = "p/m" }}]
[combos.config]
max_attempts = {max_attempts}
"#
    );
    let config = Config::from_toml_str(&toml).unwrap();
    Arc::new(Runtime::build(config, &|k| (k == "KEY").then(|| "sk-test".to_owned())).unwrap())
}

/// Starts the actors with provider `p`'s breaker half-open: opened at time 0 and refreshed at
/// a time past its reset timeout, so the next admission is a probe.
pub(crate) async fn start_half_open(rt: &Runtime) {
    let profile = rt
        .table
        .settings
        .load()
        .breaker_profile(rt.table.providers[0].config.category);
    let mut breaker = Breaker::new(profile);
    for _ in 0..profile.failure_threshold {
        let _ = breaker.on_outcome(None, BreakerOutcome::Failure(FailureKind::Transient), 0);
    }
    let seeds = HashMap::from([("p".to_owned(), breaker)]);
    actors::start_actors_seeded(
        &rt.table.providers,
        &rt.table.connections,
        &rt.table.settings.load(),
        &Arbiter::current(),
        rt.table.actor_stats.clone(),
        &seeds,
    );
    let addr = rt.table.providers[0].actor.get().unwrap();
    let later = profile.reset_timeout_ms * profile.max_backoff_multiplier as u64 + 1;
    addr.send(GetBreakerStatus { at: later }).await.unwrap();
    assert_eq!(
        rt.table.providers[0].breaker.load().view,
        BreakerView::HalfOpen
    );
}

/// Probe leases the breaker of provider `p` still holds (after every message sent so far).
pub(crate) async fn probes_in_flight(rt: &Runtime) -> usize {
    let addr = rt.table.providers[0].actor.get().unwrap();
    let breaker = addr.send(GetBreaker).await.unwrap();
    breaker.probes_in_flight(rt.table.clock.now())
}

pub(crate) fn request(format: ClientFormat, body: &str) -> RouteRequest {
    RouteRequest {
        format,
        body: parse_body(Bytes::copy_from_slice(body.as_bytes())).unwrap(),
        key: None,
        session: None,
        forward_headers: Vec::new(),
        upstream_wait: Default::default(),
        lease: None,
        excluded_connections: Vec::new(),
    }
}

const CHAT: &str = r#"{"model":"c","messages":[{"role":"user","content":"hi"}]}"#;

/// A probe whose attempt was ignored by the breaker (a connection's 429) is handed back and a
/// new one admitted for the next connection; when the attempt cap then ends the request
/// before that attempt, the new lease must be handed back too.
#[actix_rt::test]
async fn max_attempts_after_a_readmitted_probe_releases_the_probe() {
    let base = canned_upstream(TOO_MANY).await;
    let rt = runtime(&base, 1);
    start_half_open(&rt).await;
    let req = request(ClientFormat::OpenAiChat, CHAT);
    let result = tokio::time::timeout(Duration::from_secs(10), route(&rt.table, &req))
        .await
        .unwrap();
    let Err(e) = result else {
        panic!("a 429 with one attempt allowed cannot succeed");
    };
    assert_eq!(e.code, "max_attempts_exceeded", "{e:?}");
    assert_eq!(probes_in_flight(&rt).await, 0, "the probe lease leaked");
}

/// A successful probe whose answer cannot be translated into the client's format ends the
/// request with a gateway error; the probe lease must not outlive it.
#[actix_rt::test]
async fn untranslatable_success_releases_the_probe() {
    let base = canned_upstream(NOT_JSON).await;
    let rt = runtime(&base, 30);
    start_half_open(&rt).await;
    let req = request(
        ClientFormat::Anthropic,
        r#"{"model":"p/m","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}"#,
    );
    let result = tokio::time::timeout(Duration::from_secs(10), route(&rt.table, &req))
        .await
        .unwrap();
    let Err(e) = result else {
        panic!("a body that is not JSON cannot be translated");
    };
    assert_eq!(e.code, "upstream_invalid_json", "{e:?}");
    assert_eq!(probes_in_flight(&rt).await, 0, "the probe lease leaked");
}
