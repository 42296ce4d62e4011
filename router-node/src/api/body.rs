//! Reading client request bodies and extracting the routing fields.
//!
//! The scan itself is the pure [`switchyard_shared::request_body`] (fuzzed there); this module
//! reads the body under its size cap and keeps the bytes next to the fields so the body can be
//! forwarded unchanged apart from `model`.

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use switchyard_shared::request_body::{self, BodyFields};

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
    fields: BodyFields,
}

impl ParsedBody {
    /// The body sent upstream: `model` replaced by `upstream_model` and a Responses
    /// `background: true` degraded to `false` (Switchyard answers synchronously). Everything
    /// else is forwarded byte for byte; at most one copy.
    pub fn with_model(&self, upstream_model: &str) -> Bytes {
        if upstream_model == self.model && self.fields.background_span.is_none() {
            return self.raw.clone();
        }
        Bytes::from(request_body::splice(
            &self.raw,
            &self.fields,
            upstream_model,
        ))
    }
}

/// Reads the request body with a hard size cap: 413 before any parsing when exceeded.
pub async fn read_limited(
    mut payload: actix_web::web::Payload,
    content_length: Option<u64>,
    max_bytes: usize,
) -> Result<Bytes, GatewayError> {
    // The same 413 as every admin body (the admin toolkit's), from the client side.
    let too_large = || {
        let e = switchyard_shared::admin_kit::body::too_large(max_bytes);
        GatewayError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            e.error_type,
            e.code,
            e.message,
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
    let fields =
        request_body::scan(&raw).map_err(|e| GatewayError::bad_request(e.code, e.message))?;
    Ok(ParsedBody {
        model: fields.model.clone(),
        stream: fields.stream,
        body_session_key: fields.session_key.clone(),
        background: fields.background,
        fields,
        raw,
    })
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
        // Nesting past serde_json's limit is refused as its full parse refuses it, without
        // recursion (no stack risk); an unbalanced document is invalid too.
        let deep = format!(
            "{{\"model\":\"m\",\"x\":{}{}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert_eq!(parse(&deep).unwrap_err().code, "invalid_json");
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
