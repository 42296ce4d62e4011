//! `POST /v1/messages/count_tokens`: Anthropic's token counting, which Claude Code calls.
//!
//! The model resolves like any request's. When its (first) target is an Anthropic-format
//! provider, the request goes there, to `{base_url}/messages/count_tokens`, with one of the
//! provider's credentials: the provider's own count is the right one. Otherwise (an OpenAI-format
//! provider, or an Anthropic-compatible server that does not serve the route, or none reachable)
//! the node answers an estimate from OpenAI's `o200k_base` tokenizer (the `tiktoken-rs` crate,
//! whose BPE ranks ship inside the crate, so nothing is downloaded) over every text, tool call,
//! tool result and tool definition of the request, and says so in the
//! `x-switchyard-token-estimate` header. Counting touches no routing state: no cooldown,
//! breaker or quota is read or changed, as Anthropic does not charge for it either.

use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use bytes::Bytes;
use serde_json::{Value, json};
use switchyard_shared::config::ProviderFormat;

use super::body::read_limited;
use super::errors::{ClientFormat, ErrorSource, GatewayError};
use super::scrub;
use crate::reload::Rt;
use crate::runtime::Runtime;

/// The response header marking an estimate, and its value (the tokenizer used).
pub const ESTIMATE_HEADER: &str = "x-switchyard-token-estimate";
const ESTIMATE_TOKENIZER: &str = "tiktoken-o200k_base";
/// How long a forwarded count may take before the estimate is answered instead.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(10);
/// The Anthropic API version sent when the client names none.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The route handler.
pub async fn count_tokens(rt: Rt, req: HttpRequest, payload: web::Payload) -> HttpResponse {
    match serve(rt.get_ref(), &req, payload).await {
        Ok(resp) => resp,
        Err(e) => e.to_response(ClientFormat::Anthropic),
    }
}

async fn serve(
    rt: &Runtime,
    req: &HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, GatewayError> {
    let key = rt.keys.authenticate(req.headers())?.cloned();
    let content_length = req
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let max = usize::try_from(rt.config.server.max_body_bytes).unwrap_or(usize::MAX);
    let raw = read_limited(payload, content_length, max).await?;
    let body: Value = serde_json::from_slice(&raw).map_err(|e| {
        GatewayError::bad_request(
            "invalid_json",
            format!("Request body is not valid JSON: {e}"),
        )
    })?;
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .ok_or_else(|| GatewayError::bad_request("missing_model", "`model` is required"))?;
    if let Some(k) = &key
        && !k.allows_model(model)
    {
        return Err(GatewayError::forbidden(
            "model_not_allowed",
            format!("This API key may not use model `{model}`"),
        ));
    }
    let resolved = rt.table.index.resolve(model).map_err(|e| {
        GatewayError::new(
            StatusCode::NOT_FOUND,
            "not_found_error",
            "model_not_found",
            e.to_string(),
        )
        .with_source(ErrorSource::Downstream)
    })?;
    if let Some(target) = resolved.targets().first()
        && let Some(resp) = forward(rt, req, &body, &target.provider, &target.model).await
    {
        return Ok(resp);
    }
    let tokens = web::block(move || estimate(&body))
        .await
        .map_err(|_| GatewayError::internal("token estimate failed"))?;
    Ok(HttpResponse::Ok()
        .insert_header((ESTIMATE_HEADER, ESTIMATE_TOKENIZER))
        .json(json!({ "input_tokens": tokens })))
}

/// The provider's own count, when the target is an Anthropic-format provider that answers.
/// `None` means: estimate instead (another format, no credential, a transport failure, or a
/// server without the route).
async fn forward(
    rt: &Runtime,
    req: &HttpRequest,
    body: &Value,
    provider_id: &str,
    upstream_model: &str,
) -> Option<HttpResponse> {
    let provider = rt.table.provider(provider_id)?;
    if provider.config.format != ProviderFormat::Anthropic {
        return None;
    }
    let conn = provider
        .connections
        .iter()
        .filter_map(|i| rt.table.connections.get(*i))
        .find(|c| c.api_key.is_some() || provider.config.is_local())?;
    let mut upstream_body = body.clone();
    upstream_body["model"] = Value::from(upstream_model);
    let to = crate::transport::Endpoint::parse(&switchyard_shared::endpoint::join(
        &provider.config.base_url,
        "/messages/count_tokens",
    ))?;
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| http::HeaderValue::from_bytes(v.as_bytes()).ok())
    };
    let mut call = http::Request::new(Bytes::from(serde_json::to_vec(&upstream_body).ok()?));
    *call.method_mut() = http::Method::POST;
    let headers = call.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    headers.insert(
        "anthropic-version",
        header("anthropic-version")
            .unwrap_or_else(|| http::HeaderValue::from_static(ANTHROPIC_VERSION)),
    );
    if let Some(beta) = header("anthropic-beta") {
        headers.insert("anthropic-beta", beta);
    }
    if let Some(key) = conn.api_key.as_deref() {
        let mut value = http::HeaderValue::from_str(key).ok()?;
        value.set_sensitive(true);
        headers.insert("x-api-key", value);
    }
    let call = async {
        let mut resp = conn.client.send(&to, call).await.ok()?;
        let status = resp.status().as_u16();
        // A server without the route (many Anthropic-compatible ones): estimate instead.
        if status == 404 || status == 405 {
            return None;
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = resp.body_mut().next_chunk().await {
            bytes.extend_from_slice(&chunk.ok()?);
        }
        Some((status, Bytes::from(bytes)))
    };
    let (status, bytes) = tokio::time::timeout(FORWARD_TIMEOUT, call).await.ok()??;
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    Some(
        HttpResponse::build(status)
            .content_type("application/json")
            .body(scrub::scrub_bytes(&bytes, conn.scrub_secret.as_ref())),
    )
}

/// Tokens of everything in an Anthropic Messages request that reaches the model: the system
/// prompt, every text, tool call, tool result and thinking block, and the tool definitions.
pub fn estimate(body: &Value) -> u64 {
    let mut text = String::new();
    collect(body.get("system"), &mut text);
    for message in body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        collect(message.get("content"), &mut text);
    }
    for tool in body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        text.push_str(&tool.to_string());
        text.push('\n');
    }
    let tokens = tiktoken_rs::o200k_base_singleton()
        .encode_ordinary(&text)
        .len();
    u64::try_from(tokens).unwrap_or(u64::MAX)
}

/// Appends the model-visible text of a content value (a string or a list of blocks).
fn collect(content: Option<&Value>, out: &mut String) {
    match content {
        Some(Value::String(s)) => {
            out.push_str(s);
            out.push('\n');
        }
        Some(Value::Array(blocks)) => {
            for block in blocks {
                for field in ["text", "thinking", "name"] {
                    if let Some(s) = block.get(field).and_then(Value::as_str) {
                        out.push_str(s);
                        out.push('\n');
                    }
                }
                if let Some(input) = block.get("input") {
                    out.push_str(&input.to_string());
                    out.push('\n');
                }
                // A tool result's content is itself a string or blocks.
                if block.get("type").and_then(Value::as_str) == Some("tool_result") {
                    collect(block.get("content"), out);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_counts_every_part_of_the_request() {
        let small = json!({"model": "m", "messages": [{"role": "user", "content": "hello"}]});
        let base = estimate(&small);
        assert!(base >= 1);
        let full = json!({
            "model": "m",
            "system": [{"type": "text", "text": "You are a careful assistant."}],
            "messages": [
                {"role": "user", "content": "hello"},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "echo hi"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "hi"}]}
                ]}
            ],
            "tools": [{"name": "Bash", "description": "Run a command", "input_schema": {"type": "object"}}]
        });
        let more = estimate(&full);
        // System, tool call, tool result and tool definition all add tokens.
        assert!(more > base + 15, "{more} vs {base}");
    }
}
