//! Ingress checks before routing: content type, authentication, body, key policy.
//!
//! Order (cheap and unauthenticated checks first, so a rejected request costs little):
//! content type (415) → API key (401) → body size (413, before any parsing) → JSON (400) →
//! key policy: allowed models (403), requests per minute (429).

use actix_web::HttpRequest;
use actix_web::http::StatusCode;
use actix_web::http::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderName, HeaderValue};
use actix_web::web;

use super::body::{parse_body, read_limited};
use super::errors::{ClientFormat, ErrorSource, GatewayError};
use crate::routing::RouteRequest;
use crate::runtime::Runtime;

// Header names are constants rather than `&str`: actix's `HeaderMap::get(&str)` parses the
// name on every call, and these are looked up on every request.

/// Client headers that carry a session-affinity key, in precedence order. Never forwarded.
const SESSION_HEADERS: [HeaderName; 3] = [
    HeaderName::from_static("x-session-id"),
    HeaderName::from_static("x-codex-session-id"),
    HeaderName::from_static("x-switchyard-session"),
];

/// Client headers forwarded upstream (protocol versions and feature flags only).
const FORWARDED: [HeaderName; 3] = [
    HeaderName::from_static("anthropic-version"),
    HeaderName::from_static("anthropic-beta"),
    HeaderName::from_static("openai-beta"),
];

/// Validates and parses a client request into a routing request.
pub async fn prepare(
    rt: &Runtime,
    req: &HttpRequest,
    payload: web::Payload,
    format: ClientFormat,
) -> Result<RouteRequest, GatewayError> {
    let ct = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !ct
        .trim_start()
        .to_ascii_lowercase()
        .starts_with("application/json")
    {
        return Err(GatewayError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid_request_error",
            "unsupported_media_type",
            "Content-Type must be application/json",
        )
        .with_source(ErrorSource::Downstream));
    }
    let key = rt.keys.authenticate(req.headers())?.cloned(); // an Arc clone
    let content_length = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let max = usize::try_from(rt.config.server.max_body_bytes).unwrap_or(usize::MAX);
    let raw = read_limited(payload, content_length, max).await?;
    let body = parse_body(raw)?;
    if let Some(k) = &key {
        if !k.allows_model(&body.model) {
            return Err(GatewayError::forbidden(
                "model_not_allowed",
                format!("This API key may not use model `{}`", body.model),
            ));
        }
        if k.requests_per_minute > 0 {
            check_key_rate(rt, &k.id)?;
        }
    }
    let session = SESSION_HEADERS
        .iter()
        .find_map(|h| req.headers().get(h).and_then(|v| v.to_str().ok()))
        .map(str::to_owned)
        .filter(|s| !s.is_empty() && s.len() <= 512)
        .or_else(|| body.body_session_key.clone());
    let mut forward_headers: Vec<(HeaderName, HeaderValue)> = Vec::new();
    for name in FORWARDED {
        if let Some(v) = req.headers().get(&name) {
            forward_headers.push((name, v.clone()));
        }
    }
    Ok(RouteRequest {
        format,
        key,
        session,
        forward_headers,
        body,
        upstream_wait: Default::default(),
        lease: None,
        excluded_connections: Vec::new(),
    })
}

fn check_key_rate(rt: &Runtime, key_id: &str) -> Result<(), GatewayError> {
    let now = rt.table.clock.now();
    let Ok(mut rates) = rt.key_rates.lock() else {
        return Ok(());
    };
    let Some(state) = rates.get_mut(key_id) else {
        return Ok(());
    };
    state.try_acquire(now).map_err(|retry_after_ms| {
        GatewayError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "key_rate_limit_exceeded",
            "This API key exceeded its requests per minute",
        )
        .with_source(ErrorSource::Downstream)
        .with_retry_after_ms(retry_after_ms)
    })
}
