//! The routing fields of a client request body, found without parsing the whole document.
//!
//! The gateway forwards the client's JSON unchanged except for the `model` field (a client's
//! `provider/model` or combo name becomes the bare upstream model). Parsing the whole document
//! into a tree would cost an allocation per node; instead the top-level object is read as
//! borrowed raw values (`serde_json::value::RawValue`), which validates the JSON, finds the few
//! fields routing needs, and lets the body be re-emitted by splicing one value.
//!
//! This lives here rather than in the node so it can be fuzzed and tested without an HTTP
//! stack: it is a pure function of the bytes, and every failure is a [`BodyError`] with the
//! `code` the client is told.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};
use serde_json::value::RawValue;

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
/// Nesting in fields routing does not read is skipped without recursion (serde_json's raw
/// values), so a deeply nested document costs no stack.
pub fn scan(raw: &[u8]) -> Result<BodyFields, BodyError> {
    let top: TopLevel<'_> = serde_json::from_slice(raw).map_err(|e| {
        BodyError::new(
            "invalid_json",
            format!("Request body is not valid JSON: {e}"),
        )
    })?;
    let mut model = None;
    let mut stream = false;
    let mut background = false;
    let mut background_span = None;
    // Kept apart so the spec's order decides, not the client's key order:
    // `metadata.session_id`, then `session_id`, then `prompt_cache_key`.
    let mut meta_session = None;
    let mut session = None;
    let mut cache_key = None;
    for (key, value) in &top.0 {
        match key.as_ref() {
            "model" => {
                let m: String = serde_json::from_str(value.get())
                    .map_err(|_| BodyError::new("invalid_model", "`model` must be a string"))?;
                model = Some((m, span_of(raw, value)));
            }
            "stream" => stream = parse_bool(value, "stream")?,
            "background" => {
                background = parse_bool(value, "background")?;
                background_span = background.then(|| span_of(raw, value));
            }
            "session_id" => session = string_value(value),
            "prompt_cache_key" => cache_key = string_value(value),
            "metadata" => {
                if let Ok(meta) = serde_json::from_str::<Metadata<'_>>(value.get())
                    && let Some(s) = meta.session_id
                {
                    meta_session = Some(s.into_owned());
                }
            }
            _ => {}
        }
    }
    let Some((model, model_span)) = model else {
        return Err(BodyError::new("missing_model", "`model` is required"));
    };
    if model.is_empty() || model.len() > MAX_MODEL_LEN {
        return Err(BodyError::new(
            "invalid_model",
            format!("`model` must be 1 to {MAX_MODEL_LEN} characters"),
        ));
    }
    Ok(BodyFields {
        model,
        stream,
        background,
        session_key: meta_session.or(session).or(cache_key),
        model_span,
        background_span,
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

#[derive(Deserialize)]
struct Metadata<'a> {
    #[serde(borrow, default)]
    session_id: Option<Cow<'a, str>>,
}

/// The top-level JSON object as borrowed `(key, raw value)` pairs, in document order.
struct TopLevel<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> Deserialize<'de> for TopLevel<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TopLevel<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    let value: &'de RawValue = map.next_value()?;
                    out.push((key, value));
                }
                Ok(TopLevel(out))
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(s: &str) -> &'static str {
        scan(s.as_bytes()).unwrap_err().code
    }

    #[test]
    fn metadata_session_id_wins_whatever_the_key_order() {
        for raw in [
            r#"{"model":"m","metadata":{"session_id":"meta"},"session_id":"top","prompt_cache_key":"c"}"#,
            r#"{"model":"m","prompt_cache_key":"c","session_id":"top","metadata":{"session_id":"meta"}}"#,
        ] {
            let f = scan(raw.as_bytes()).unwrap();
            assert_eq!(f.session_key.as_deref(), Some("meta"), "{raw}");
        }
        let f = scan(br#"{"prompt_cache_key":"c","session_id":"top","model":"m"}"#).unwrap();
        assert_eq!(f.session_key.as_deref(), Some("top"));
    }

    #[test]
    fn extracts_routing_fields_and_splices_model() {
        let raw = r#"{"messages":[{"role":"user","content":"hi"}], "model" : "openai/gpt-4o", "stream":true,"metadata":{"session_id":"s1"}}"#;
        let f = scan(raw.as_bytes()).unwrap();
        assert_eq!(f.model, "openai/gpt-4o");
        assert!(f.stream);
        assert_eq!(f.session_key.as_deref(), Some("s1"));
        let out = splice(raw.as_bytes(), &f, "gpt-4o");
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["model"], "gpt-4o");
        assert_eq!(v["messages"][0]["content"], "hi");
    }

    #[test]
    fn errors_have_codes() {
        assert_eq!(code("{"), "invalid_json");
        assert_eq!(code("[1]"), "invalid_json");
        assert_eq!(code(r#"{"x":1}"#), "missing_model");
        assert_eq!(code(r#"{"model":1}"#), "invalid_model");
        assert_eq!(code(r#"{"model":""}"#), "invalid_model");
        assert_eq!(code(r#"{"model":"m","stream":"yes"}"#), "invalid_parameter");
        assert_eq!(code("{\"model\":\"m\"}\u{0}"), "invalid_json");
        assert_eq!(
            scan(b"{\"model\":\"\xff\"}").unwrap_err().code,
            "invalid_json"
        );
    }

    #[test]
    fn deep_nesting_costs_no_stack() {
        let deep = format!(
            "{{\"model\":\"m\",\"x\":{}{}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert_eq!(scan(deep.as_bytes()).unwrap().model, "m");
        let unbalanced = format!("{{\"model\":\"m\",\"x\":{}}}", "[".repeat(100_000));
        assert_eq!(code(&unbalanced), "invalid_json");
    }

    #[test]
    fn duplicate_keys_splice_into_valid_json() {
        // The last `model` wins; a `background: true` before a later `background: false` must
        // not leave a stale span that would cut the document apart.
        let raw = r#"{"background":true,"model":"a","background":false,"model":"b"}"#;
        let f = scan(raw.as_bytes()).unwrap();
        assert_eq!(f.model, "b");
        assert!(!f.background);
        let out = splice(raw.as_bytes(), &f, "up");
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["model"], "up");
    }
}
