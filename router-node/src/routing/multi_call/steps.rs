//! `pipeline`: the combo's targets are steps, run in configured order. Step 1 gets the
//! client's request; every later step gets the client's conversation, the previous step's
//! answer as an assistant message and `step_prompt` as a user message. The client gets the
//! last step's answer (streamed if it asked for a stream; the earlier steps never are).
//!
//! A failing step ends the combo with 502 `pipeline_step_failed` naming the step (503 when the
//! step reached no upstream), or with `on_step_failure = "skip"` is left out: the next step
//! refines the last answer there is. With `skip` the last answer is kept until the next step
//! answers, so a failed last step can still answer with it.

use actix_web::http::StatusCode;
use switchyard_shared::config::{ComboRoute, StepFailure, Target};

use super::{call_target, finish, shape_error, side_call, sub_request, text_of};
use crate::api::errors::GatewayError;
use crate::routing::dispatch::{RouteRequest, Routed, SideCall, target_key};
use crate::runtime::RoutingTable;

/// Runs the steps in order.
pub async fn run(
    rt: &RoutingTable,
    req: &RouteRequest,
    combo: &ComboRoute,
) -> Result<Routed, GatewayError> {
    let opts = &combo.pipeline;
    let steps = combo.targets.len();
    let keep_last = opts.on_step_failure == StepFailure::Skip;
    let mut previous_text: Option<String> = None;
    let mut previous: Option<Routed> = None;
    // The steps before the answer the client gets, booked with it.
    let mut earlier: Vec<SideCall> = Vec::new();
    let mut served = 0usize;
    let mut skipped: Vec<String> = Vec::new();
    for (i, target) in combo.targets.iter().enumerate() {
        let last = i + 1 == steps;
        let extra = super::prompt::step_messages(previous_text.as_deref(), &opts.step_prompt);
        let body = super::prompt::with_messages(
            &req.body.raw,
            req.format,
            &extra,
            last && req.body.stream,
        )
        .map_err(shape_error)?;
        let step_req = sub_request(req, body)?;
        let end = call_target(rt, &step_req, combo, target).await;
        req.upstream_wait.add(step_req.upstream_wait.get());
        match end.result {
            Ok(routed) => {
                served += 1;
                if let Some(before) = previous.take() {
                    earlier.extend(side_call(&before));
                }
                if last {
                    let headers = headers(served, &skipped);
                    return Ok(finish(routed, earlier, &headers));
                }
                previous_text = Some(text_of(req, &routed));
                if keep_last {
                    // Kept only as the answer of last resort: its permits go back now.
                    let mut kept = routed;
                    kept.permits.release_now();
                    previous = Some(kept);
                } else {
                    earlier.extend(side_call(&routed));
                }
            }
            Err(e) if keep_last => {
                tracing::info!(
                    combo = %combo.name,
                    step = i + 1,
                    code = %e.code,
                    "pipeline step failed and is skipped"
                );
                skipped.push((i + 1).to_string());
            }
            Err(e) => return Err(step_failed(combo, i, target, &e, end.attempts > 0)),
        }
    }
    match previous {
        Some(answer) => Ok(finish(answer, earlier, &headers(served, &skipped))),
        None => Err(GatewayError::new(
            StatusCode::BAD_GATEWAY,
            "server_error",
            "pipeline_step_failed",
            format!("Every step of pipeline combo `{}` failed", combo.name),
        )
        .with_header("x-switchyard-pipeline-steps", "0")),
    }
}

/// `x-switchyard-pipeline-steps` (steps that answered) and the skipped steps, if any.
fn headers(served: usize, skipped: &[String]) -> Vec<(&'static str, String)> {
    let mut out = vec![("x-switchyard-pipeline-steps", served.to_string())];
    if !skipped.is_empty() {
        out.push(("x-switchyard-pipeline-skipped", skipped.join(",")));
    }
    out
}

/// 502 `pipeline_step_failed` naming the step (1-based) and its target, with the step's own
/// error code; 503 when the step reached no upstream.
fn step_failed(
    combo: &ComboRoute,
    index: usize,
    target: &Target,
    cause: &GatewayError,
    dispatched: bool,
) -> GatewayError {
    let status = if dispatched {
        StatusCode::BAD_GATEWAY
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let key = target_key(target);
    GatewayError::new(
        status,
        "server_error",
        "pipeline_step_failed",
        format!(
            "Step {} of {} ({key}) of pipeline combo `{}` failed: {} ({})",
            index + 1,
            combo.targets.len(),
            combo.name,
            cause.code,
            cause.status.as_u16()
        ),
    )
    .with_field("step", index + 1)
    .with_field("step_target", key)
    .with_field("step_error", cause.code.clone())
    .with_header("x-switchyard-pipeline-steps", &index.to_string())
}
