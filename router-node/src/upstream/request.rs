//! The upstream HTTP request of one attempt: URL, credentials and forwarded headers.
//!
//! The client's body goes upstream unchanged (the pipeline has already rewritten `model`).
//! Headers are built from scratch: only what the caller explicitly forwards, plus our own
//! content negotiation and the connection's credential, which is marked sensitive so it
//! never shows up in debug output.

use std::sync::Arc;

use actix_web::http::header::{HeaderName, HeaderValue};
use bytes::Bytes;
use http::header::{self as rh, HeaderMap};
use http::{Method, Request};
use switchyard_shared::Millis;
use switchyard_shared::config::{ProviderFormat, ProviderTimeouts};
use switchyard_shared::sse::{ThroughputSettings, WatchConfig};

pub use crate::actors::handles::endpoint_url;
use crate::actors::{ConnHandle, ProviderHandle};
use crate::api::errors::ClientFormat;
use crate::clock::Clock;
use crate::transport::Endpoint;

/// The Anthropic API version sent when the client did not name one.
pub(super) const DEFAULT_ANTHROPIC_VERSION: &str = "2023-06-01";

/// Everything one attempt needs.
pub struct AttemptRequest {
    pub conn: Arc<ConnHandle>,
    pub provider: Arc<ProviderHandle>,
    /// The client's wire format; for now the provider speaks the same one. It picks the
    /// endpoint path, the SSE tap's format and the framing of in-band errors.
    pub client_format: ClientFormat,
    /// The client's JSON with `model` already rewritten.
    pub body: Bytes,
    pub stream: bool,
    /// Already filtered by the caller (`anthropic-version`, `anthropic-beta`, `openai-beta`
    /// …). Credential and hop-by-hop headers are dropped again here regardless.
    pub forward_headers: Vec<(HeaderName, HeaderValue)>,
    /// Absolute attempt deadline on the node clock; `None` = none.
    pub deadline_ms: Option<Millis>,
    pub watch: WatchConfig,
    pub clock: Clock,
}

/// The watchdog limits of a provider: readiness and idle from its timeouts, the content-stall
/// budget equal to the idle timeout (as the reference does), and the throughput settings.
pub fn watch_config(timeouts: &ProviderTimeouts, throughput: ThroughputSettings) -> WatchConfig {
    WatchConfig {
        first_content_ms: timeouts.first_content_ms,
        idle_ms: timeouts.idle_ms,
        stall_ms: timeouts.idle_ms,
        throughput,
    }
}

/// Headers the caller may never forward: credentials, cookies, and what we set ourselves or
/// the HTTP layer owns. The caller filters already; this is the second line.
fn is_reserved(name: &str) -> bool {
    matches!(
        name,
        "authorization"
            | "proxy-authorization"
            | "x-api-key"
            | "api-key"
            | "cookie"
            | "host"
            | "content-type"
            | "content-length"
            | "accept"
            | "accept-encoding"
            | "transfer-encoding"
            | "connection"
            | "keep-alive"
            | "upgrade"
            | "te"
            | "trailer"
    ) || name.starts_with("x-switchyard-")
}

/// The request, ready to send; `Err` carries a short reason when it cannot be built. The URI
/// is the provider's pre-parsed endpoint (cloning it only bumps reference counts).
/// `Bearer <key>` as a header value, built in one buffer that the value keeps (no
/// formatting machinery and no second copy: this runs on every OpenAI-format attempt).
fn bearer(key: &str) -> Option<rh::HeaderValue> {
    let mut value = Vec::with_capacity(7 + key.len());
    value.extend_from_slice(b"Bearer ");
    value.extend_from_slice(key.as_bytes());
    rh::HeaderValue::from_maybe_shared(Bytes::from(value)).ok()
}

/// The request to send to the provider's endpoint for the client's format.
pub(super) fn build(req: &AttemptRequest) -> Result<(&Endpoint, Request<Bytes>), &'static str> {
    let config = &req.provider.config;
    let mut headers = HeaderMap::with_capacity(req.forward_headers.len() + 4);
    headers.insert(
        rh::CONTENT_TYPE,
        rh::HeaderValue::from_static("application/json"),
    );
    headers.insert(
        rh::ACCEPT,
        rh::HeaderValue::from_static(if req.stream {
            "text/event-stream"
        } else {
            "application/json"
        }),
    );
    for (name, value) in &req.forward_headers {
        if is_reserved(name.as_str()) {
            continue;
        }
        // actix-web and hyper use different `http` crate versions; convert by bytes.
        let (Ok(name), Ok(value)) = (
            rh::HeaderName::from_bytes(name.as_str().as_bytes()),
            rh::HeaderValue::from_bytes(value.as_bytes()),
        ) else {
            continue;
        };
        headers.append(name, value);
    }
    match config.format {
        ProviderFormat::Openai => {
            if let Some(key) = req.conn.api_key.as_deref() {
                let mut value = bearer(key).ok_or("the API key is not a valid header value")?;
                value.set_sensitive(true);
                headers.insert(rh::AUTHORIZATION, value);
            }
        }
        ProviderFormat::Anthropic => {
            if let Some(key) = req.conn.api_key.as_deref() {
                let mut value = rh::HeaderValue::from_str(key)
                    .map_err(|_| "the API key is not a valid header value")?;
                value.set_sensitive(true);
                headers.insert(rh::HeaderName::from_static("x-api-key"), value);
            }
            headers
                .entry(rh::HeaderName::from_static("anthropic-version"))
                .or_insert(rh::HeaderValue::from_static(DEFAULT_ANTHROPIC_VERSION));
        }
    }
    // Parsed with the provider: `None` only for a base URL that did not parse then either.
    let to = req
        .provider
        .endpoint(req.client_format)
        .ok_or("the provider's base URL is not an absolute http(s) URL")?;
    let mut request = Request::new(req.body.clone());
    *request.method_mut() = Method::POST;
    *request.headers_mut() = headers;
    Ok((to, request))
}

#[cfg(test)]
mod tests {
    use super::bearer;

    #[test]
    fn the_bearer_value_is_the_key_behind_the_scheme() {
        let value = bearer("sk-test-123").unwrap();
        assert_eq!(value.as_bytes(), b"Bearer sk-test-123");
    }

    #[test]
    fn a_key_that_cannot_be_a_header_value_is_refused() {
        assert!(bearer("sk-line\nbreak").is_none());
        assert!(bearer("sk-\u{7f}").is_none());
    }
}
