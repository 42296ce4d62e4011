//! Dynamic tool limits: learn a provider's limit from a "too many tools" 400, and count a
//! request's tools to skip targets whose learned limit it exceeds.
//!
//! Counting parses the body, so it runs only where a limit is known or being learned; the
//! request path of every other request never pays for it.

use serde::Deserialize;
use serde::de::IgnoredAny;
use switchyard_shared::classify::tool_limit;

use super::TargetCtx;
use crate::routing::dispatch::RouteRequest;
use crate::upstream::AttemptFailure;

#[derive(Deserialize)]
struct Tools {
    #[serde(default)]
    tools: Option<Vec<IgnoredAny>>,
}

/// How many tools a request body declares (`tools[]` in every client format); 0 when it
/// declares none or cannot be read.
pub fn tool_count(body: &[u8]) -> usize {
    serde_json::from_slice::<Tools>(body)
        .ok()
        .and_then(|t| t.tools)
        .map_or(0, |t| t.len())
}

/// Records the limit a "too many tools" failure reveals for the target's provider and model.
pub fn learn(req: &RouteRequest, ctx: &TargetCtx, failure: &AttemptFailure) {
    let text = format!("{} {}", failure.message, failure.body).to_lowercase();
    let requested = tool_count(&req.body.raw);
    if let Some(limit) = tool_limit::tool_limit(&text, requested) {
        ctx.provider.record_tool_limit(&ctx.model, limit);
        tracing::info!(
            provider = %ctx.provider.id,
            model = %ctx.model,
            limit,
            "tool limit learned"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::tool_count;

    #[test]
    fn tools_are_counted_in_any_format() {
        assert_eq!(tool_count(br#"{"model":"m","tools":[{},{},{}]}"#), 3);
        assert_eq!(tool_count(br#"{"model":"m","messages":[]}"#), 0);
        assert_eq!(tool_count(br#"{"model":"m","tools":null}"#), 0);
        assert_eq!(tool_count(b"not json"), 0);
    }
}
