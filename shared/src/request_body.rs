//! The routing fields of a client request body, found without building the document.
//!
//! The gateway forwards the client's JSON unchanged except for the `model` field (a client's
//! `provider/model` or combo name becomes the bare upstream model). Parsing the whole document
//! into a tree would cost an allocation per node; instead the top-level object is read key by
//! key: the few fields routing needs are kept as borrowed raw values
//! (`serde_json::value::RawValue`), so the body can be re-emitted by splicing one value, and
//! every other value goes through serde_json's full parse and is dropped as it is read.
//!
//! The node promises to refuse exactly what `serde_json::from_slice::<Value>` refuses (a body
//! only the upstream's parser would catch costs an attempt and, as a 5xx, the breaker). Raw
//! values are skipped without the full parse's checks (nesting depth, paired `\u` surrogates,
//! numbers within `f64`'s range), so the kept ones are read once more through it
//! (`validated`). `reference` is the full parse itself, and the tests and the fuzz suite hold
//! the two to the same answers on any bytes.
//!
//! This lives here rather than in the node so it can be fuzzed and tested without an HTTP
//! stack: it is a pure function of the bytes, and every failure is a [`BodyError`] with the
//! `code` the client is told.

#[doc(hidden)]
pub mod reference;
#[cfg(test)]
mod tests;
mod top_level;
mod validated;

use std::fmt;

use serde_json::value::RawValue;

use top_level::TopLevel;

/// Longest `model` value accepted, in bytes.
pub const MAX_MODEL_LEN: usize = 512;

/// The fields routing needs, extracted from a validated JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyFields {
    /// The client's model name.
    pub model: String,
    /// `stream: true`.
    pub stream: bool,
    /// A session-affinity key from the body (`metadata.session_id`, `session_id`,
    /// `prompt_cache_key`), if present.
    pub session_key: Option<String>,
    /// `background: true` (Responses), which is degraded to synchronous.
    pub background: bool,
    /// Byte range of the `model` value (including quotes) in the scanned body.
    pub model_span: (usize, usize),
    /// Byte range of a `background: true` value, degraded to `false` upstream.
    pub background_span: Option<(usize, usize)>,
}

/// Why a body was refused: always a 400 with this `code`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyError {
    /// `invalid_json`, `missing_model`, `invalid_model` or `invalid_parameter`.
    pub code: &'static str,
    pub message: String,
}

impl BodyError {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// Validates the JSON body and extracts the routing fields.
///
/// The body is refused exactly when serde_json's full parse would refuse it, without building
/// the tree. Nesting recurses as that parse does, within its limit of 128 levels, so a deeply
/// nested document is refused at that depth. As in that parse, a key given twice means its
/// last value.
pub fn scan(raw: &[u8]) -> Result<BodyFields, BodyError> {
    let not_json = |why: &dyn fmt::Display| {
        BodyError::new(
            "invalid_json",
            format!("Request body is not valid JSON: {why}"),
        )
    };
    // UTF-8 checked once for the whole body, with SIMD, so that serde_json (reading a `str`)
    // checks no string again. `compat` for the error's position.
    let text = simdutf8::compat::from_utf8(raw).map_err(|e| not_json(&e))?;
    let top: TopLevel<'_> = serde_json::from_str(text).map_err(|e| not_json(&e))?;
    let TopLevel {
        model,
        stream,
        background,
        metadata,
        session_id: session,
        prompt_cache_key: cache_key,
    } = top;
    let Some(model_value) = model else {
        return Err(BodyError::new("missing_model", "`model` is required"));
    };
    let model: String = serde_json::from_str(model_value.get())
        .map_err(|_| BodyError::new("invalid_model", "`model` must be a string"))?;
    if model.is_empty() || model.len() > MAX_MODEL_LEN {
        return Err(BodyError::new(
            "invalid_model",
            format!("`model` must be 1 to {MAX_MODEL_LEN} characters"),
        ));
    }
    let stream = stream.map_or(Ok(false), |v| parse_bool(v, "stream"))?;
    let background_value = background;
    let background = background.map_or(Ok(false), |v| parse_bool(v, "background"))?;
    // The spec's order decides, not the client's key order: `metadata.session_id`, then
    // `session_id`, then `prompt_cache_key`.
    let session_key = metadata
        .and_then(metadata_session)
        .or_else(|| session.and_then(string_value))
        .or_else(|| cache_key.and_then(string_value));
    Ok(BodyFields {
        model,
        stream,
        background,
        session_key,
        model_span: span_of(raw, model_value),
        background_span: background_value
            .filter(|_| background)
            .map(|v| span_of(raw, v)),
    })
}

/// The body sent upstream: `model` replaced by `upstream_model` and a Responses
/// `background: true` degraded to `false`. Everything else is copied byte for byte. `raw` must
/// be the bytes `fields` was scanned from.
pub fn splice(raw: &[u8], fields: &BodyFields, upstream_model: &str) -> Vec<u8> {
    let quoted = serde_json::to_string(upstream_model).unwrap_or_else(|_| "\"\"".into());
    let mut edits: Vec<((usize, usize), &[u8])> = vec![(fields.model_span, quoted.as_bytes())];
    if let Some(span) = fields.background_span {
        edits.push((span, b"false"));
    }
    edits.sort_by_key(|((start, _), _)| *start);
    let mut out = Vec::with_capacity(raw.len() + quoted.len());
    let mut at = 0;
    for ((start, end), replacement) in edits {
        // A later duplicate key can leave an earlier span behind `at`; `get` keeps a stale
        // span from slicing out of order.
        out.extend_from_slice(raw.get(at..start).unwrap_or_default());
        out.extend_from_slice(replacement);
        at = end.max(at);
    }
    out.extend_from_slice(raw.get(at..).unwrap_or_default());
    out
}

fn parse_bool(value: &RawValue, name: &str) -> Result<bool, BodyError> {
    match value.get() {
        "true" => Ok(true),
        "false" | "null" => Ok(false),
        _ => Err(BodyError::new(
            "invalid_parameter",
            format!("`{name}` must be a boolean"),
        )),
    }
}

fn string_value(value: &RawValue) -> Option<String> {
    serde_json::from_str::<String>(value.get()).ok()
}

/// Byte range of a borrowed raw value inside the buffer it was parsed from.
fn span_of(buf: &[u8], value: &RawValue) -> (usize, usize) {
    let start = (value.get().as_ptr() as usize).saturating_sub(buf.as_ptr() as usize);
    (start, start + value.get().len())
}

/// `metadata.session_id` when `metadata` is an object and its (last) `session_id` a string.
fn metadata_session(metadata: &RawValue) -> Option<String> {
    let fields: TopLevel<'_> = serde_json::from_str(metadata.get()).ok()?;
    fields.session_id.and_then(string_value)
}
