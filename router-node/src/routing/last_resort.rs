//! The last resorts after routing failed (docs/router-node.md, "Last resorts"), each one extra dispatch:
//!
//! - a combo that ends in 502 or 503 gets one attempt on `[fallback] global_fallback_model`;
//! - a direct request that ends with one of `[fallback.emergency] statuses` is retried once
//!   on the emergency `target`, its output-token limit clamped to `max_tokens`, so the retry
//!   stays cheap and within what a small fallback model accepts.
//!
//! When the last resort fails too, the client gets the original failure: it names the target
//! it asked for. A leased request never moves (its lease binds it to one connection).

use bytes::Bytes;
use serde_json::Value;
use switchyard_shared::config::{Resolved, Target, global_fallback_applies};

use super::dispatch::{RouteRequest, Routed, route_resolved};
use crate::api::body::parse_body;
use crate::api::errors::{ClientFormat, GatewayError};
use crate::runtime::RoutingTable;
use crate::upstream::UpstreamWait;

/// The output-token fields a client format may carry.
const TOKEN_FIELDS: [&str; 3] = ["max_tokens", "max_completion_tokens", "max_output_tokens"];

/// After `err` ended a request: its one last resort when configured and applicable, else
/// `err` itself.
pub async fn after_failure(
    rt: &RoutingTable,
    req: &RouteRequest,
    is_combo: bool,
    err: GatewayError,
) -> Result<Routed, GatewayError> {
    let status = err.status.as_u16();
    if req.lease.is_some() {
        return Err(err);
    }
    let (kind, model, clamp) = if is_combo {
        let model = &rt.fallback.global_fallback_model;
        if !global_fallback_applies(model, status) {
            return Err(err);
        }
        ("global", model, None)
    } else {
        let e = &rt.fallback.emergency;
        if !e.applies_to(status) || e.target == req.body.model {
            return Err(err);
        }
        ("emergency", &e.target, Some(e.max_tokens))
    };
    let Some(target) = direct_target(rt, model) else {
        return Err(err);
    };
    let body = match clamp {
        Some(max) => match clamped_body(&req.body.raw, req.format, max).map(parse_body) {
            Some(Ok(body)) => body,
            _ => return Err(err),
        },
        None => match parse_body(req.body.raw.clone()) {
            Ok(body) => body,
            Err(_) => return Err(err),
        },
    };
    let retry = RouteRequest {
        format: req.format,
        body,
        key: req.key.clone(),
        session: req.session.clone(),
        forward_headers: req.forward_headers.clone(),
        upstream_wait: UpstreamWait::default(),
        lease: None,
        excluded_connections: req.excluded_connections.clone(),
    };
    tracing::info!(
        kind,
        target = %model,
        status,
        "routing failed; one last-resort attempt"
    );
    match route_resolved(rt, &retry, Resolved::Direct(target)).await {
        Ok(routed) => {
            rt.metrics.last_resort(kind, "served");
            Ok(routed)
        }
        Err(_) => {
            rt.metrics.last_resort(kind, "failed");
            Err(err)
        }
    }
}

/// The configured `provider/model` as a direct target (a combo name is not one).
fn direct_target(rt: &RoutingTable, model: &str) -> Option<Target> {
    match rt.index.resolve(model) {
        Ok(Resolved::Direct(t)) => Some(t),
        _ => None,
    }
}

/// The request body with every output-token limit clamped to `max`, and one set when it has
/// none. `None` when the body is not a JSON object.
pub fn clamped_body(raw: &[u8], format: ClientFormat, max: u32) -> Option<Bytes> {
    let mut v: Value = serde_json::from_slice(raw).ok()?;
    let obj = v.as_object_mut()?;
    let mut found = false;
    for field in TOKEN_FIELDS {
        if let Some(n) = obj.get_mut(field) {
            found = true;
            if n.as_u64().is_none_or(|n| n > u64::from(max)) {
                *n = Value::from(max);
            }
        }
    }
    if !found {
        let field = match format {
            ClientFormat::OpenAiResponses => "max_output_tokens",
            ClientFormat::OpenAiChat | ClientFormat::Anthropic => "max_tokens",
        };
        obj.insert(field.to_owned(), Value::from(max));
    }
    serde_json::to_vec(&v).ok().map(Bytes::from)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn clamp(body: Value, format: ClientFormat, max: u32) -> Value {
        let out = clamped_body(body.to_string().as_bytes(), format, max).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn output_limits_are_clamped_and_set_when_missing() {
        let v = clamp(
            json!({"model": "m", "max_tokens": 9000}),
            ClientFormat::Anthropic,
            4096,
        );
        assert_eq!(v["max_tokens"], 4096);
        let v = clamp(
            json!({"model": "m", "max_tokens": 100}),
            ClientFormat::OpenAiChat,
            4096,
        );
        assert_eq!(v["max_tokens"], 100, "a lower limit stays");
        let v = clamp(
            json!({"model": "m", "max_completion_tokens": 50000}),
            ClientFormat::OpenAiChat,
            4096,
        );
        assert_eq!(v["max_completion_tokens"], 4096);
        assert!(v.get("max_tokens").is_none());
        let v = clamp(json!({"model": "m"}), ClientFormat::OpenAiResponses, 512);
        assert_eq!(v["max_output_tokens"], 512);
        let v = clamp(json!({"model": "m"}), ClientFormat::OpenAiChat, 512);
        assert_eq!(v["max_tokens"], 512);
        assert!(clamped_body(b"[1]", ClientFormat::OpenAiChat, 1).is_none());
    }
}
