//! Dynamic tool limits: learn a provider's limit from a "too many tools" 400, and count a
//! request's tools to skip targets whose learned limit it exceeds.
//!
//! Counting parses the body, so it runs only where a limit is known or being learned; the
//! request path of every other request never pays for it. A learned limit ages out after the
//! provider's `tool_limit_ttl_ms`, and a success above it drops it (`actors::handles::
//! tool_limits`): one client's odd 400 must not lock every client out for good.

use serde::Deserialize;
use serde::de::IgnoredAny;
use switchyard_shared::classify::tool_limit;

use super::TargetCtx;
use crate::actors::ProviderHandle;
use crate::routing::dispatch::RouteRequest;
use crate::runtime::RoutingTable;
use crate::upstream::AttemptFailure;

/// The shortest `tool_limit_ttl_ms` honoured: a limit must outlive the request that taught it.
const MIN_TTL_MS: u64 = 1_000;

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

/// Records the limit a "too many tools" failure reveals for the target's provider and model,
/// for the provider's `tool_limit_ttl_ms`; in redis mode peers learn it too.
pub fn learn(rt: &RoutingTable, req: &RouteRequest, ctx: &TargetCtx, failure: &AttemptFailure) {
    let text = format!("{} {}", failure.message, failure.body).to_lowercase();
    let requested = tool_count(&req.body.raw);
    let Some(limit) = tool_limit::tool_limit(&text, requested) else {
        return;
    };
    let ttl_ms = ctx.provider.config.tool_limit_ttl_ms.max(MIN_TTL_MS);
    let now = rt.clock.now();
    let learned =
        ctx.provider
            .record_tool_limit(&ctx.model, limit, now.saturating_add(ttl_ms), now);
    tracing::info!(
        provider = %ctx.provider.id,
        model = %ctx.model,
        limit,
        ttl_ms,
        "tool limit learned"
    );
    if let (Some(cluster), Some(_)) = (&rt.cluster, learned) {
        cluster.share_tool_limit(&ctx.provider.id, &ctx.model, limit, ttl_ms);
    }
}

/// A success on the target: a learned limit below the tools it carried was wrong and is
/// dropped (here and, in redis mode, on every node). The body is counted only when a limit
/// is known.
pub fn on_success(rt: &RoutingTable, req: &RouteRequest, provider: &ProviderHandle, model: &str) {
    let Some(limit) = provider.tool_limit(model, rt.clock.now()) else {
        return;
    };
    let tools = tool_count(&req.body.raw);
    if tools <= limit as usize {
        return;
    }
    if provider.tool_limit_success(model, tools).is_some() {
        tracing::info!(
            provider = %provider.id,
            model,
            limit,
            tools,
            "tool limit dropped: a request above it succeeded"
        );
        if let Some(cluster) = &rt.cluster {
            cluster.clear_tool_limit(&provider.id, model, tools);
        }
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
