//! Reading and minimally parsing client request bodies.
//!
//! The gateway forwards the client's JSON unchanged except for the `model` field (a client's
//! `provider/model` or combo name becomes the bare upstream model). Parsing the whole document
//! into a tree would cost an allocation per node; instead the top-level object is read as
//! borrowed raw values (`serde_json::value::RawValue`), which validates the JSON, finds the few
//! fields routing needs, and lets the body be re-emitted by splicing one value.

use std::borrow::Cow;
use std::fmt;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::errors::GatewayError;
use actix_web::http::StatusCode;

/// The fields routing needs, extracted from a validated JSON body.
#[derive(Debug, Clone)]
pub struct ParsedBody {
    /// The original bytes, forwarded unchanged apart from `model`.
    pub raw: Bytes,
    /// The client's model name.
    pub model: String,
    /// `stream: true`.
    pub stream: bool,
    /// A session-affinity key from the body (`metadata.session_id`, `session_id`,
    /// `prompt_cache_key`), if present.
    pub body_session_key: Option<String>,
    /// `background: true` (Responses), which is degraded to synchronous.
    pub background: bool,
    /// Byte range of the `model` value (including quotes) in `raw`.
    model_span: (usize, usize),
    /// Byte range of a `background: true` value, degraded to `false` upstream.
    background_span: Option<(usize, usize)>,
}

impl ParsedBody {
    /// The body sent upstream: `model` replaced by `upstream_model` and a Responses
    /// `background: true` degraded to `false` (Switchyard answers synchronously). Everything
    /// else is forwarded byte for byte; at most one copy.
    pub fn with_model(&self, upstream_model: &str) -> Bytes {
        if upstream_model == self.model && self.background_span.is_none() {
            return self.raw.clone();
        }
        let quoted = serde_json::to_string(upstream_model).unwrap_or_else(|_| "\"\"".into());
        let mut edits: Vec<((usize, usize), &[u8])> = vec![(self.model_span, quoted.as_bytes())];
        if let Some(span) = self.background_span {
            edits.push((span, b"false"));
        }
        edits.sort_by_key(|((start, _), _)| *start);
        let mut out = BytesMut::with_capacity(self.raw.len() + quoted.len());
        let mut at = 0;
        for ((start, end), replacement) in edits {
            out.extend_from_slice(&self.raw[at..start]);
            out.extend_from_slice(replacement);
            at = end;
        }
        out.extend_from_slice(&self.raw[at..]);
        out.freeze()
    }
}

/// Reads the request body with a hard size cap: 413 before any parsing when exceeded.
pub async fn read_limited(
    mut payload: actix_web::web::Payload,
    content_length: Option<u64>,
    max_bytes: usize,
) -> Result<Bytes, GatewayError> {
    let too_large = || {
        GatewayError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            "payload_too_large",
            format!("Request body exceeds the limit of {max_bytes} bytes"),
        )
        .with_source(super::errors::ErrorSource::Downstream)
    };
    if content_length.is_some_and(|n| n > max_bytes as u64) {
        return Err(too_large());
    }
    let mut buf = BytesMut::with_capacity(content_length.unwrap_or(1024).min(1 << 20) as usize);
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| {
            GatewayError::bad_request("body_read_error", format!("Could not read body: {e}"))
        })?;
        if buf.len() + chunk.len() > max_bytes {
            return Err(too_large());
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

/// Validates the JSON body and extracts the routing fields.
pub fn parse_body(raw: Bytes) -> Result<ParsedBody, GatewayError> {
    let top: TopLevel<'_> = serde_json::from_slice(&raw).map_err(|e| {
        GatewayError::bad_request(
            "invalid_json",
            format!("Request body is not valid JSON: {e}"),
        )
    })?;
    let mut model = None;
    let mut stream = false;
    let mut background = false;
    let mut background_span = None;
    let mut session = None;
    let mut cache_key = None;
    for (key, value) in &top.0 {
        match key.as_ref() {
            "model" => {
                let m: String = serde_json::from_str(value.get()).map_err(|_| {
                    GatewayError::bad_request("invalid_model", "`model` must be a string")
                })?;
                model = Some((m, span_of(&raw, value)));
            }
            "stream" => stream = parse_bool(value, "stream")?,
            "background" => {
                background = parse_bool(value, "background")?;
                if background {
                    background_span = Some(span_of(&raw, value));
                }
            }
            "session_id" => session = string_value(value),
            "prompt_cache_key" => cache_key = string_value(value),
            "metadata" => {
                if let Ok(meta) = serde_json::from_str::<Metadata<'_>>(value.get())
                    && let Some(s) = meta.session_id
                {
                    session = Some(s.into_owned());
                }
            }
            _ => {}
        }
    }
    let Some((model, model_span)) = model else {
        return Err(GatewayError::bad_request(
            "missing_model",
            "`model` is required",
        ));
    };
    if model.is_empty() || model.len() > 512 {
        return Err(GatewayError::bad_request(
            "invalid_model",
            "`model` must be 1 to 512 characters",
        ));
    }
    drop(top);
    Ok(ParsedBody {
        model,
        stream,
        background,
        body_session_key: session.or(cache_key),
        model_span,
        background_span,
        raw,
    })
}

fn parse_bool(value: &RawValue, name: &str) -> Result<bool, GatewayError> {
    match value.get() {
        "true" => Ok(true),
        "false" | "null" => Ok(false),
        _ => Err(GatewayError::bad_request(
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

    fn parse(s: &str) -> Result<ParsedBody, GatewayError> {
        parse_body(Bytes::copy_from_slice(s.as_bytes()))
    }

    #[test]
    fn extracts_routing_fields_and_rewrites_model() {
        let p = parse(
            r#"{"messages":[{"role":"user","content":"hi"}], "model" : "openai/gpt-4o", "stream":true,"metadata":{"session_id":"s1"}}"#,
        )
        .unwrap();
        assert_eq!(p.model, "openai/gpt-4o");
        assert!(p.stream);
        assert_eq!(p.body_session_key.as_deref(), Some("s1"));
        let out = p.with_model("gpt-4o");
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["model"], "gpt-4o");
        assert_eq!(v["messages"][0]["content"], "hi");
    }

    #[test]
    fn escaped_model_is_rewritten_safely() {
        let p = parse(r#"{"model":"a\"b"}"#).unwrap();
        assert_eq!(p.model, "a\"b");
        let out = p.with_model("x\"y");
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["model"], "x\"y");
    }

    #[test]
    fn errors_have_codes() {
        assert_eq!(parse("{").unwrap_err().code, "invalid_json");
        assert_eq!(parse("[1]").unwrap_err().code, "invalid_json");
        assert_eq!(parse(r#"{"x":1}"#).unwrap_err().code, "missing_model");
        assert_eq!(parse(r#"{"model":1}"#).unwrap_err().code, "invalid_model");
        assert_eq!(parse(r#"{"model":""}"#).unwrap_err().code, "invalid_model");
        assert_eq!(
            parse(r#"{"model":"m","stream":"yes"}"#).unwrap_err().code,
            "invalid_parameter"
        );
        // Deep nesting in fields routing does not read is skipped without recursion (no stack
        // risk) and forwarded as is; an unbalanced document is still invalid.
        let deep = format!(
            "{{\"model\":\"m\",\"x\":{}{}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert_eq!(parse(&deep).unwrap().model, "m");
        let unbalanced = format!("{{\"model\":\"m\",\"x\":{}}}", "[".repeat(100_000));
        assert_eq!(parse(&unbalanced).unwrap_err().code, "invalid_json");
        assert_eq!(
            parse("{\"model\":\"m\"}\u{0}").unwrap_err().code,
            "invalid_json"
        );
    }

    #[test]
    fn invalid_utf8_is_a_json_error() {
        let raw = Bytes::from_static(b"{\"model\":\"\xff\"}");
        assert_eq!(parse_body(raw).unwrap_err().code, "invalid_json");
    }

    #[test]
    fn background_is_degraded_to_synchronous_upstream() {
        let p = parse(r#"{"background":true,"model":"openai/gpt-4o","input":"x"}"#).unwrap();
        assert!(p.background);
        let v: serde_json::Value = serde_json::from_slice(&p.with_model("gpt-4o")).unwrap();
        assert_eq!(v["background"], false);
        assert_eq!(v["model"], "gpt-4o");
        assert_eq!(v["input"], "x");
        let p = parse(r#"{"model":"m","background":true}"#).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&p.with_model("m")).unwrap();
        assert_eq!(v["background"], false);
    }

    #[test]
    fn prompt_cache_key_is_a_fallback_session_key() {
        let p = parse(r#"{"model":"m","prompt_cache_key":"k"}"#).unwrap();
        assert_eq!(p.body_session_key.as_deref(), Some("k"));
    }
}
