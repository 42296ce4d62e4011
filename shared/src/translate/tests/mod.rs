//! Unit and property tests for translation. The golden fixtures in
//! `shared/tests/translate_golden.rs` cover whole bodies and streams per direction; these pin
//! the individual mapping tables, the refusals, the stream edge cases and the round trips.

mod agents;
mod mapping;
mod props;
mod reasoning;
mod requests;
mod streams;
mod variants;

use serde_json::Value;

use super::{TranslateOptions, translate_request};
use crate::sse::Format;

/// Translates a request with default options, panicking on refusal.
pub(super) fn request(client: Format, provider: Format, body: &Value) -> Value {
    translate_request(client, provider, body, &TranslateOptions::default())
        .unwrap_or_else(|e| panic!("{client:?} -> {provider:?}: {e}"))
}
