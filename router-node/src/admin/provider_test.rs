//! `POST /api/providers/{id}/test`: a connection test. Sends one minimal request (`"ping"`,
//! one output token) to the provider's first model over its first connection that is not in
//! a terminal state, and reports what came back. A success also returns a DEGRADED breaker to
//! CLOSED (the seed's "valid connection test"); a failure changes no state: the test is the
//! operator's, not traffic, so it neither cools the connection nor counts for the breaker.

use actix_web::HttpResponse;
use actix_web::web;
use bytes::Bytes;
use serde_json::json;
use switchyard_shared::config::ProviderFormat;

use super::ACTOR_TIMEOUT;
use super::auth::ManagementKey;
use super::common::{ApiError, ApiResult, provider_idx};
use crate::actors::ConnectionTestPassed;
use crate::api::errors::ClientFormat;
use crate::reload::Rt;
use crate::upstream::{self, AttemptRequest, AttemptResult};

/// How long the test request may take.
const TEST_DEADLINE_MS: u64 = 30_000;

/// The minimal request in the provider's wire format.
fn minimal_body(format: ProviderFormat, model: &str) -> (ClientFormat, Bytes) {
    let messages = json!([{"role": "user", "content": "ping"}]);
    let body = json!({"model": model, "max_tokens": 1, "messages": messages, "stream": false});
    let wire = match format {
        ProviderFormat::Anthropic => ClientFormat::Anthropic,
        ProviderFormat::Openai => ClientFormat::OpenAiChat,
    };
    (wire, Bytes::from(body.to_string()))
}

/// `POST /api/providers/{id}/test`.
pub async fn test(rt: Rt, key: ManagementKey, path: web::Path<String>) -> ApiResult {
    let id = path.into_inner();
    let idx = provider_idx(&rt, &id)?;
    // `provider_idx` found it, so it is there.
    let Some(provider) = rt.table.providers.get(idx).cloned() else {
        return Err(ApiError::actor_unavailable("the provider"));
    };
    let Some(model) = provider.config.models.first().cloned() else {
        return Err(ApiError::bad_request(
            "no_models",
            "The provider lists no model to test",
        ));
    };
    let Some(conn) = provider
        .connections
        .iter()
        .filter_map(|&i| rt.table.connections.get(i))
        .find(|c| c.load().terminal().is_none())
        .cloned()
    else {
        return Err(ApiError::bad_request(
            "no_usable_connection",
            "Every connection of the provider is in a terminal state",
        ));
    };
    let (wire, body) = minimal_body(provider.config.format, &model);
    let now = rt.table.clock.now();
    let result = upstream::attempt(AttemptRequest {
        conn: conn.clone(),
        provider: provider.clone(),
        client_format: wire,
        body,
        stream: false,
        forward_headers: Vec::new(),
        deadline_ms: Some(now + TEST_DEADLINE_MS),
        watch: rt.table.watch_config(&provider.config),
        clock: rt.table.clock,
    })
    .await;
    let before = provider.breaker.load().view;
    let (ok, status, latency_ms, error) = match &result {
        AttemptResult::Json(ok) => (true, Some(ok.status), ok.elapsed_ms, None),
        AttemptResult::Stream(s) => (true, Some(200), s.ready_after_ms, None),
        AttemptResult::Failed(f) => (
            false,
            f.status,
            f.elapsed_ms,
            Some(switchyard_shared::classify::sanitize_message(&f.message)),
        ),
    };
    let mut breaker = json!(before.state().as_str());
    if ok && let Some(addr) = provider.actor.get() {
        let asked = addr.send(ConnectionTestPassed {
            at: rt.table.clock.now(),
        });
        match tokio::time::timeout(ACTOR_TIMEOUT, asked).await {
            Ok(Ok(state)) => breaker = json!(state.as_str()),
            _ => return Err(ApiError::actor_unavailable("the provider breaker")),
        }
    }
    tracing::info!(
        key_id = %key.id,
        provider = %provider.id,
        connection = %conn.id,
        ok,
        "connection test"
    );
    Ok(HttpResponse::Ok().json(json!({
        "ok": ok,
        "provider": &*provider.id,
        "connection": &*conn.id,
        "model": model,
        "status": status,
        "latencyMs": latency_ms,
        "error": error,
        "breaker": breaker,
    })))
}
