//! The session-limit reset's two calls (`auto_limit_reset`): the usage check and the claim.
//!
//! The wire contract is Claude Code 2.1.263's `/limit-reset`, as the OmniRoute resilience
//! guide records it under "Claude OAuth usage wall"; the policy around the calls (when to try,
//! what to remember) is `usage_wall::reset`. Both calls go to the provider's origin (its
//! `base_url` without the `/v1` API prefix) with the connection's OAuth token, through the
//! connection's pooled client, each within [`CALL_TIMEOUT`].

use std::time::Duration;

use crate::actors::ConnHandle;
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
    let usage = match call(conn, conn.client.get(format!("{origin}{USAGE_PATH}"))).await {
        Some(body) => body,
        None => return ResetOutcome::Error,
    };
    if let Err(outcome) = reset::read_usage(&usage) {
        return outcome;
    }
    let url = format!("{origin}/api/organizations/{organization}/reset_rate_limits");
    let request = conn
        .client
        .post(url)
        .header("content-type", "application/json")
        .body(reset::claim_body().to_string());
    match call(conn, request).await {
        Some(body) => reset::read_claim(&body),
        None => ResetOutcome::Error,
    }
}

/// One call with the connection's token; the body of a 2xx answer, `None` otherwise.
async fn call(conn: &ConnHandle, request: reqwest::RequestBuilder) -> Option<Vec<u8>> {
    let mut request = request
        .timeout(CALL_TIMEOUT)
        .header("anthropic-beta", OAUTH_BETA);
    if let Some(token) = conn.api_key.as_deref() {
        request = request.bearer_auth(token);
    }
    let response = match request.send().await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(connection = %conn.id, error = %e, "session-limit reset call failed");
            return None;
        }
    };
    let status = response.status();
    if !status.is_success() {
        tracing::warn!(connection = %conn.id, %status, "session-limit reset call refused");
        return None;
    }
    let body = response.bytes().await.ok()?;
    (body.len() <= MAX_ANSWER_BYTES).then(|| body.to_vec())
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
