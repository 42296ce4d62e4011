//! The summariser call: a sub-request routed like any request (the fusion judge's way, through
//! [`route_resolved`]), with the client's key, no session and no lease, bounded by
//! `summary_timeout_ms`.

use std::time::Duration;

use bytes::Bytes;
use switchyard_shared::config::{ComboRoute, Resolved};

use super::messages::{self, Shape};
use crate::api::body::parse_body;
use crate::routing::dispatch::{RouteRequest, RoutedBody, SideCall, route_resolved};
use crate::routing::multi_call::{RouteFuture, prompt, side_call};
use crate::runtime::RoutingTable;
use crate::upstream::UpstreamWait;

/// A summary and its call, whose usage is booked on the summariser's own connection.
pub struct Summary {
    pub text: String,
    pub call: Option<SideCall>,
}

/// Asks the summariser for a summary of `transcript`. `Err` says why there is none (for the
/// log); the caller then sends the conversation unchanged.
pub async fn summarise(
    rt: &RoutingTable,
    req: &RouteRequest,
    combo: &std::sync::Arc<ComboRoute>,
    shape: Shape,
    transcript: &str,
) -> Result<Summary, String> {
    let opts = &combo.context_relay;
    // Empty: the combo's own targets in order (the sub-request has no session, so no relay).
    let (resolved, name) = if opts.summariser.is_empty() {
        (Resolved::Combo(combo.clone()), combo.name.as_str())
    } else {
        let resolved = rt
            .index
            .resolve(&opts.summariser)
            .map_err(|e| format!("summariser `{}`: {e}", opts.summariser))?;
        (resolved, opts.summariser.as_str())
    };
    let body = messages::summariser_body(shape, name, transcript);
    let sub = RouteRequest {
        format: req.format,
        body: parse_body(Bytes::from(body)).map_err(|e| e.message)?,
        key: req.key.clone(),
        session: None,
        forward_headers: req.forward_headers.clone(),
        upstream_wait: UpstreamWait::default(),
        lease: None,
        excluded_connections: Vec::new(),
    };
    // Boxed: the summariser's routing is the request path again (async recursion).
    let call: RouteFuture<'_> = Box::pin(route_resolved(rt, &sub, resolved));
    let limit = Duration::from_millis(opts.summary_timeout_ms);
    let result = tokio::time::timeout(limit, call).await;
    req.upstream_wait.add(sub.upstream_wait.get());
    let routed = match result {
        Ok(Ok(routed)) => routed,
        Ok(Err(e)) => return Err(format!("{} ({})", e.code, e.status.as_u16())),
        Err(_) => return Err(format!("no summary within {} ms", opts.summary_timeout_ms)),
    };
    let RoutedBody::Json(ok) = &routed.body else {
        return Err("the summariser streamed".to_owned());
    };
    let text = prompt::answer_text(req.format, &ok.body).unwrap_or_default();
    if text.trim().is_empty() {
        return Err("the summary is empty".to_owned());
    }
    Ok(Summary {
        text,
        call: side_call(&routed),
    })
}
