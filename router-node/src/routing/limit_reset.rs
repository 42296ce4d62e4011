//! The session-limit reset's two calls (`auto_limit_reset`): the usage check and the claim.
//!
//! The wire contract is Claude Code 2.1.263's `/limit-reset`, as the OmniRoute resilience
//! guide records it under "Claude OAuth usage wall"; the policy around the calls (when to try,
//! what to remember) is `usage_wall::reset`. Both calls go to the provider's origin (its
//! `base_url` without the `/v1` API prefix) with the connection's OAuth token, through the
//! connection's pooled client, each within [`CALL_TIMEOUT`].

use std::time::Duration;

use bytes::Bytes;

use crate::actors::ConnHandle;
use crate::transport::Endpoint;
use crate::usage_wall::reset::{self, ResetOutcome};

/// Each call's ceiling: a reset that cannot be had quickly is not worth holding the request.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The usage check at the wall (no spend data needed).
const USAGE_PATH: &str = "/api/oauth/usage?at_wall=1&skip_spend=1";
/// The beta flag Anthropic's OAuth endpoints want.
const OAUTH_BETA: &str = "oauth-2025-04-20";
/// The most of an answer read.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// The origin of a provider's `base_url`: trailing slashes and a final `/v1` removed.
pub fn origin(base_url: &str) -> &str {
    let base = base_url.trim_end_matches('/');
    base.strip_suffix("/v1").unwrap_or(base)
}

/// Checks whether the reset is available and claims it when it is.
pub async fn claim(conn: &ConnHandle, base_url: &str, organization: &str) -> ResetOutcome {
    let origin = origin(base_url);
    let usage_url = format!("{origin}{USAGE_PATH}");
    let usage = match call(conn, http::Method::GET, &usage_url, Bytes::new()).await {
        Some(body) => body,
        None => return ResetOutcome::Error,
    };
    if let Err(outcome) = reset::read_usage(&usage) {
        return outcome;
    }
    let url = format!("{origin}/api/organizations/{organization}/reset_rate_limits");
    let body = Bytes::from(reset::claim_body().to_string());
    match call(conn, http::Method::POST, &url, body).await {
        Some(body) => reset::read_claim(&body),
        None => ResetOutcome::Error,
    }
}

/// One call with the connection's token; the body of a 2xx answer, `None` otherwise.
async fn call(conn: &ConnHandle, method: http::Method, url: &str, body: Bytes) -> Option<Vec<u8>> {
    let Some(to) = Endpoint::parse(url) else {
        tracing::warn!(connection = %conn.id, %url, "session-limit reset URL is not valid");
        return None;
    };
    let json = !body.is_empty();
    let mut request = http::Request::new(body);
    *request.method_mut() = method;
    let headers = request.headers_mut();
    headers.insert("anthropic-beta", http::HeaderValue::from_static(OAUTH_BETA));
    if json {
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
    }
    if let Some(token) = conn.api_key.as_deref() {
        let mut value = http::HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
        value.set_sensitive(true);
        headers.insert(http::header::AUTHORIZATION, value);
    }
    let exchange = async {
        let mut response = match conn.client.send(&to, request).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(connection = %conn.id, error = e.classify().1, "session-limit reset call failed");
                return None;
            }
        };
        let status = response.status();
        if !status.is_success() {
            tracing::warn!(connection = %conn.id, %status, "session-limit reset call refused");
            return None;
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response.body_mut().next_chunk().await {
            bytes.extend_from_slice(&chunk.ok()?);
            if bytes.len() > MAX_ANSWER_BYTES {
                return None;
            }
        }
        Some(bytes)
    };
    match tokio::time::timeout(CALL_TIMEOUT, exchange).await {
        Ok(answer) => answer,
        Err(_) => {
            tracing::warn!(connection = %conn.id, "session-limit reset call timed out");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::origin;

    #[test]
    fn the_origin_drops_the_api_prefix() {
        assert_eq!(
            origin("https://api.anthropic.com/v1"),
            "https://api.anthropic.com"
        );
        assert_eq!(origin("http://127.0.0.1:9/v1/"), "http://127.0.0.1:9");
        assert_eq!(origin("http://127.0.0.1:9"), "http://127.0.0.1:9");
    }
}
