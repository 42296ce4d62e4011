//! Combo strategies that make several upstream calls for one client request (docs/policy.md,
//! `strategy`): `fusion` ([`fusion`]: a parallel panel, then a judge's synthesis) and `pipeline`
//! ([`steps`]: the targets in sequence, each refining the previous answer).
//!
//! Why here and not in the strategy order: the other strategies only order targets for
//! fallback, and one target answers. These build new request bodies ([`prompt`]), wait by a
//! policy ([`policy`]), and send every call through the same per-target pipeline as any
//! request ([`super::pipeline::run_target`]: cooldowns, breakers, gates, retries), so each
//! failure updates the shared state as usual. The client gets one answer: the judge's or the
//! last step's [`Routed`], carrying the other calls as [`SideCall`]s (each booked on its own
//! connection when the answer is) and `x-switchyard-fusion-*` / `x-switchyard-pipeline-*`
//! headers saying what happened.

pub mod fusion;
pub mod policy;
pub mod prompt;
pub mod steps;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use actix_web::http::StatusCode;
use actix_web::http::header::{HeaderName, HeaderValue};
use bytes::Bytes;
use switchyard_shared::config::{ComboRoute, Target};
use switchyard_shared::strategy::Strategy;

use super::dispatch::{RouteRequest, Routed, RoutedBody, SideCall};
use super::pipeline::{self, RequestCtx};
use super::report::Report;
use crate::api::body::parse_body;
use crate::api::errors::GatewayError;
use crate::runtime::RoutingTable;
use crate::upstream::UpstreamWait;

/// The boxed future of [`route`]: the judge is routed through `route_resolved` again, and
/// async recursion needs a box.
pub type RouteFuture<'a> = Pin<Box<dyn Future<Output = Result<Routed, GatewayError>> + 'a>>;

/// Routes a request on a `fusion` or `pipeline` combo.
pub fn route<'a>(
    rt: &'a RoutingTable,
    req: &'a RouteRequest,
    combo: Arc<ComboRoute>,
) -> RouteFuture<'a> {
    Box::pin(async move {
        match combo.strategy {
            Strategy::Pipeline => steps::run(rt, req, &combo).await,
            _ => fusion::run(rt, req, &combo).await,
        }
    })
}

/// A sub-request: the client's request with another body (its model still the client's).
fn sub_request(req: &RouteRequest, body: Vec<u8>) -> Result<RouteRequest, GatewayError> {
    Ok(RouteRequest {
        format: req.format,
        body: parse_body(Bytes::from(body))?,
        key: req.key.clone(),
        session: req.session.clone(),
        forward_headers: req.forward_headers.clone(),
        upstream_wait: UpstreamWait::default(),
        lease: req.lease.clone(),
        excluded_connections: req.excluded_connections.clone(),
    })
}

/// A body the combo cannot extend: the client's error.
fn shape_error(e: prompt::BodyShape) -> GatewayError {
    GatewayError::bad_request(
        "invalid_request_body",
        format!("A multi-call combo cannot use this request body: {}", e.0),
    )
}

/// How one call on one target ended.
pub struct CallEnd {
    pub result: Result<Routed, GatewayError>,
    /// Upstream attempts made.
    pub attempts: u32,
}

/// One call on one target through the per-target pipeline, with the combo's attempt rules;
/// a target that is skipped (cooling, breaker open, gates) or fails ends with a definite
/// error naming why.
async fn call_target(
    rt: &RoutingTable,
    req: &RouteRequest,
    combo: &ComboRoute,
    target: &Target,
) -> CallEnd {
    let o = &combo.options;
    let mut rc = RequestCtx {
        pending_blocks: Vec::new(),
        is_combo: true,
        max_attempts: o.max_attempts.max(1),
        target_timeout_ms: o.timeout_ms,
        max_retries: o.max_retries,
        retry_delay_ms: o.retry_delay_ms,
        deadline: None,
        excluded: Vec::new(),
        exhausted: Vec::new(),
        reopens: 0,
        quota_share: false,
        relay: None,
        report: Report {
            skips: Some(rt.metrics.skips()),
            ..Report::default()
        },
    };
    let result = match pipeline::run_target(rt, req, &mut rc, target).await {
        Ok(Some(routed)) => Ok(routed),
        Ok(None) => Err(not_served(&rc.report)),
        Err(e) => Err(e),
    };
    CallEnd {
        result,
        attempts: rc.report.attempts,
    }
}

/// Why a target served nothing: its last upstream failure, else its skip reason.
fn not_served(report: &Report) -> GatewayError {
    if report.last_failure.is_some() {
        return super::terminal::upstream_error(report);
    }
    let reason = report
        .records
        .last()
        .and_then(|r| r.skip.as_ref())
        .map_or("not_served", |s| s.reason());
    GatewayError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "server_error",
        reason,
        format!("The target was not called ({reason})"),
    )
}

/// The answer text of a routed JSON answer (empty when it has none, e.g. only a tool call).
fn text_of(req: &RouteRequest, routed: &Routed) -> String {
    match &routed.body {
        RoutedBody::Json(ok) => prompt::answer_text(req.format, &ok.body).unwrap_or_default(),
        RoutedBody::Stream(_) => String::new(),
    }
}

/// A routed JSON answer as a side call of the answer the client gets: its usage, booked on
/// its own connection (`None` when it reported none, or for a stream, which books its own).
pub(crate) fn side_call(routed: &Routed) -> Option<SideCall> {
    let RoutedBody::Json(ok) = &routed.body else {
        return None;
    };
    Some(SideCall {
        provider: routed.provider.clone(),
        connection: routed.conn.id.clone(),
        model: routed.model.clone(),
        usage: ok.usage?,
    })
}

/// Hands the other calls' usage to the answer the client gets (booked on their own
/// connections with it, whether it is JSON or a stream), and adds the headers saying what
/// happened.
fn finish(mut routed: Routed, others: Vec<SideCall>, headers: &[(&'static str, String)]) -> Routed {
    routed.side_calls.extend(others);
    let list = match &mut routed.body {
        RoutedBody::Json(ok) => &mut ok.headers,
        RoutedBody::Stream(s) => &mut s.headers,
    };
    for (name, value) in headers {
        if let Ok(v) = HeaderValue::from_str(value) {
            list.push((HeaderName::from_static(name), v));
        }
    }
    routed
}
