//! Which upstream response headers leave the attempt, and in what form.
//!
//! Two allow-lists, never a deny-list: a provider adding a header (a cookie, a tracing id
//! that names an account) must not leak it to clients by default.
//! - Classification needs the retry and rate-limit headers and our own fallback hint; they
//!   are copied as lower-cased strings, bounded in number and length.
//! - Clients may see the content type, request ids, processing time and rate-limit headers;
//!   they are converted to actix-web's header types, ready to insert into a response.

use actix_web::http::header::{HeaderName, HeaderValue};
use http::HeaderMap;
use switchyard_shared::classify::SERVICE_HINT_HEADER;

/// At most this many headers are kept for classification.
const MAX_CLASSIFY_HEADERS: usize = 32;
/// A kept header value is cut to this many bytes.
const MAX_CLASSIFY_VALUE_BYTES: usize = 256;

fn wanted_for_classification(name: &str) -> bool {
    name == "retry-after"
        || name == "retry-after-ms"
        || name == SERVICE_HINT_HEADER
        // MiniMax's per-model quota (`a=0,b=42`): its built-in rule reads it.
        || name == "x-model-quota-remaining"
        // Codex / ChatGPT plans state their 5-hour and weekly windows (used share, reset):
        // a usage-limit 429 is cooled until the spent window's reset.
        || name.starts_with("x-codex-")
        || name.starts_with("x-ratelimit-")
        || name.starts_with("anthropic-ratelimit-")
}

/// The headers that state quota windows (what `switchyard_shared::quota_headers` reads).
fn states_quota(name: &str) -> bool {
    name == "x-model-quota-remaining"
        || name.starts_with("x-ratelimit-")
        || name.starts_with("anthropic-ratelimit-")
        || name.starts_with("x-codex-")
}

fn safe_for_client(name: &str) -> bool {
    matches!(
        name,
        "content-type" | "x-request-id" | "request-id" | "openai-processing-ms"
    ) || name.starts_with("x-ratelimit-")
        || name.starts_with("anthropic-ratelimit-")
}

/// The headers classification reads (names are lower-case in `HeaderMap`).
pub(super) fn for_classification(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(name, _)| wanted_for_classification(name.as_str()))
        .filter_map(|(name, value)| {
            let text = value.to_str().ok()?;
            Some((name.as_str().to_owned(), bounded(text).to_owned()))
        })
        .take(MAX_CLASSIFY_HEADERS)
        .collect()
}

/// The quota-window headers of a successful answer, for the strategies' inputs. Nothing is
/// allocated when the upstream sends none.
pub(super) fn for_quota(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(name, _)| states_quota(name.as_str()))
        .filter_map(|(name, value)| {
            let text = value.to_str().ok()?;
            Some((name.as_str().to_owned(), bounded(text).to_owned()))
        })
        .take(MAX_CLASSIFY_HEADERS)
        .collect()
}

/// The headers a client may see, as actix-web types.
pub(super) fn for_client(headers: &HeaderMap) -> Vec<(HeaderName, HeaderValue)> {
    headers
        .iter()
        .filter(|(name, _)| safe_for_client(name.as_str()))
        .filter_map(|(name, value)| {
            // actix-web and hyper use different `http` crate versions; convert by bytes.
            let name = HeaderName::from_bytes(name.as_str().as_bytes()).ok()?;
            let value = HeaderValue::from_bytes(value.as_bytes()).ok()?;
            Some((name, value))
        })
        .collect()
}

/// `text` cut to at most [`MAX_CLASSIFY_VALUE_BYTES`] on a character boundary (header
/// values that are valid `str` are visible ASCII, but stay safe regardless).
fn bounded(text: &str) -> &str {
    let mut end = text.len().min(MAX_CLASSIFY_VALUE_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
