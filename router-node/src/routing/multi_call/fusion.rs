//! `fusion`: the combo's targets answer in parallel (the panel, in configured order, at most
//! `panel_size`), then a judge model synthesises one answer from theirs.
//!
//! The panel is never streamed. It waits for every member, or once `min_panel` answered for at
//! most `straggler_grace_ms` more, and never past `timeout_ms` ([`policy::next`]); a member
//! that fails or is not eligible (cooling, breaker open) is replaced by the next target while
//! targets and time remain. Stragglers are cancelled when the panel stops. With a quorum the
//! judge (`judge`, routed like a client's `model`; by default the first target) gets the
//! client's conversation plus the answers and answers the client, streamed if the client
//! asked for a stream. Fewer answers: the first one in configured order is the answer
//! (`x-switchyard-fusion-fallback: single-answer`); none: 502 `fusion_panel_failed` (503
//! when no member reached an upstream). A judge that fails does not fail the request: the
//! first panel answer is the answer (`x-switchyard-fusion-fallback: judge-failed`, with the
//! judge's error code in `x-switchyard-fusion-judge-error`).
//!
//! Every member's usage is booked on the member's own connection, the judge's on the judge's
//! ([`SideCall`]), whether the client's answer is JSON or a stream.

use std::time::Duration;

use actix_web::http::StatusCode;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use switchyard_shared::config::{ComboRoute, Resolved};

use super::policy::{self, PanelPolicy, PanelProgress, Verdict, Wait};
use super::prompt::{self, PanelAnswer, Role};
use super::{CallEnd, call_target, finish, shape_error, side_call, sub_request, text_of};
use crate::api::errors::GatewayError;
use crate::routing::dispatch::{RouteRequest, Routed, SideCall, route_resolved, target_key};
use crate::routing::terminal;
use crate::runtime::RoutingTable;

/// A member that answered.
struct Answered {
    /// Position among the combo's targets.
    index: usize,
    label: String,
    text: String,
    routed: Routed,
}

/// Runs the panel, then the judge.
pub async fn run(
    rt: &RoutingTable,
    req: &RouteRequest,
    combo: &ComboRoute,
) -> Result<Routed, GatewayError> {
    let policy = PanelPolicy::from(&combo.fusion);
    let body = prompt::with_messages(&req.body.raw, req.format, &[], false).map_err(shape_error)?;
    let panel_req = sub_request(req, body)?;
    let panel = Panel::collect(rt, &panel_req, combo, &policy).await;
    req.upstream_wait.add(panel_req.upstream_wait.get());
    let mut answers = panel.answers;
    answers.sort_by_key(|a| a.index);
    match policy::verdict(&policy, answers.len()) {
        Verdict::Judge => judge(rt, req, combo, answers).await,
        Verdict::BestSingle => {
            let answered = answers.len();
            let mut rest = answers.into_iter();
            let Some(best) = rest.next() else {
                return Err(panel_failed(combo, &panel.failures, panel.dispatched));
            };
            let others: Vec<SideCall> = rest.filter_map(|a| side_call(&a.routed)).collect();
            tracing::info!(
                combo = %combo.name,
                answered,
                failures = ?panel.failures,
                "fusion panel below min_panel; the first answer is the answer"
            );
            let headers = [
                ("x-switchyard-fusion-panel", "1".to_owned()),
                ("x-switchyard-fusion-fallback", "single-answer".to_owned()),
            ];
            Ok(finish(best.routed, others, &headers))
        }
        Verdict::Failed => Err(panel_failed(combo, &panel.failures, panel.dispatched)),
    }
}

/// The panel's results.
struct Panel {
    answers: Vec<Answered>,
    /// `provider/model: code` of every member that did not answer.
    failures: Vec<String>,
    /// Whether any member reached an upstream.
    dispatched: bool,
}

impl Panel {
    async fn collect(
        rt: &RoutingTable,
        req: &RouteRequest,
        combo: &ComboRoute,
        policy: &PanelPolicy,
    ) -> Panel {
        let limit = combo.fusion.panel_limit(combo.targets.len());
        let started = rt.clock.now();
        let mut running = FuturesUnordered::new();
        for index in 0..limit {
            running.push(member(rt, req, combo, index));
        }
        let mut next_target = limit;
        let mut panel = Panel {
            answers: Vec::new(),
            failures: Vec::new(),
            dispatched: false,
        };
        let mut quorum_at = None;
        loop {
            let progress = move |panel: &Panel, pending: usize| PanelProgress {
                started,
                answered: panel.answers.len(),
                pending,
                quorum_at,
            };
            let now = rt.clock.now();
            let until = match policy::next(policy, &progress(&panel, running.len()), now) {
                Wait::Until(t) => t,
                Wait::Stop(stop) => {
                    tracing::debug!(combo = %combo.name, ?stop, "fusion panel done");
                    break;
                }
            };
            let pause = tokio::time::sleep(Duration::from_millis(until.saturating_sub(now)));
            let done = tokio::select! {
                Some(done) = running.next() => Some(done),
                () = pause => None,
            };
            let Some((index, end)) = done else {
                continue;
            };
            panel.dispatched |= end.attempts > 0;
            let label = combo.targets.get(index).map(target_key).unwrap_or_default();
            match end.result {
                Ok(routed) => {
                    let text = text_of(req, &routed);
                    panel.answers.push(Answered {
                        index,
                        label,
                        text,
                        routed,
                    });
                    if quorum_at.is_none() && panel.answers.len() >= policy.min_panel {
                        quorum_at = Some(rt.clock.now());
                    }
                }
                Err(e) => {
                    panel.failures.push(format!("{label}: {}", e.code));
                    let wait =
                        policy::next(policy, &progress(&panel, running.len()), rt.clock.now());
                    if panel.answers.len() < limit
                        && policy::may_replace(next_target, combo.targets.len(), wait)
                    {
                        running.push(member(rt, req, combo, next_target));
                        next_target += 1;
                    }
                }
            }
        }
        // Dropping the stragglers cancels their upstream calls and hands back their permits.
        drop(running);
        panel
    }
}

/// One panel member.
async fn member(
    rt: &RoutingTable,
    req: &RouteRequest,
    combo: &ComboRoute,
    index: usize,
) -> (usize, CallEnd) {
    let Some(target) = combo.targets.get(index) else {
        let e = GatewayError::internal("fusion panel member out of range");
        return (
            index,
            CallEnd {
                result: Err(e),
                attempts: 0,
            },
        );
    };
    (index, call_target(rt, req, combo, target).await)
}

/// The judge's call: the client's conversation, then the synthesis instruction with every
/// answer. The panel's permits are released before it goes out; the first answer is kept as
/// the answer should the judge fail.
async fn judge(
    rt: &RoutingTable,
    req: &RouteRequest,
    combo: &ComboRoute,
    answers: Vec<Answered>,
) -> Result<Routed, GatewayError> {
    // The first answer (kept as the fallback) and the other members, as side calls.
    let mut first: Option<Routed> = None;
    let mut first_call: Option<SideCall> = None;
    let mut others: Vec<SideCall> = Vec::with_capacity(answers.len());
    let mut panel: Vec<PanelAnswer> = Vec::with_capacity(answers.len());
    for a in answers {
        let mut routed = a.routed;
        routed.permits.release_now();
        if first.is_none() {
            first_call = side_call(&routed);
            first = Some(routed);
        } else {
            others.extend(side_call(&routed));
        }
        panel.push(PanelAnswer {
            label: a.label,
            text: a.text,
        });
    }
    let size = panel.len().to_string();
    let instruction = prompt::judge_prompt(&panel);
    let body = prompt::with_messages(
        &req.body.raw,
        req.format,
        &[(Role::User, &instruction)],
        req.body.stream,
    )
    .map_err(shape_error)?;
    let judge_req = sub_request(req, body)?;
    let (resolved, judge_name) = if combo.fusion.judge.is_empty() {
        let Some(first) = combo.targets.first() else {
            return Err(panel_failed(combo, &[], false));
        };
        (Resolved::Direct(first.clone()), target_key(first))
    } else {
        let resolved = rt
            .index
            .resolve(&combo.fusion.judge)
            .map_err(terminal::resolve_error)?;
        (resolved, combo.fusion.judge.clone())
    };
    let result = route_resolved(rt, &judge_req, resolved).await;
    req.upstream_wait.add(judge_req.upstream_wait.get());
    match (result, first) {
        (Ok(routed), _) => {
            let headers = [
                ("x-switchyard-fusion-panel", size),
                ("x-switchyard-fusion-judge", judge_name),
            ];
            let members = first_call.into_iter().chain(others).collect();
            Ok(finish(routed, members, &headers))
        }
        (Err(e), Some(mut answer)) => {
            tracing::warn!(
                combo = %combo.name,
                judge = %judge_name,
                code = %e.code,
                "fusion judge failed; the first panel answer is the answer"
            );
            // The answer books its own usage; the other members stay side calls.
            answer.side_calls.clear();
            let headers = [
                ("x-switchyard-fusion-panel", size),
                ("x-switchyard-fusion-judge", judge_name),
                ("x-switchyard-fusion-fallback", "judge-failed".to_owned()),
                ("x-switchyard-fusion-judge-error", e.code.to_string()),
            ];
            Ok(finish(answer, others, &headers))
        }
        (Err(e), None) => Err(e
            .with_header("x-switchyard-fusion-panel", &size)
            .with_field("fusion_judge", judge_name)),
    }
}

/// No answer at all: 502 `fusion_panel_failed`, or 503 when no member reached an upstream.
fn panel_failed(combo: &ComboRoute, failures: &[String], dispatched: bool) -> GatewayError {
    let status = if dispatched {
        StatusCode::BAD_GATEWAY
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    GatewayError::new(
        status,
        "server_error",
        "fusion_panel_failed",
        format!(
            "No member of the fusion panel of combo `{}` answered ({})",
            combo.name,
            if failures.is_empty() {
                "no target was called".to_owned()
            } else {
                failures.join("; ")
            }
        ),
    )
    .with_field("panel_failures", failures.to_vec())
    .with_header("x-switchyard-fusion-panel", "0")
}
