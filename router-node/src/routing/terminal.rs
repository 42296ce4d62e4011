//! The answers a request gets when no target succeeded — each with a status, a `type`, a
//! `code`, a `Retry-After` when waiting helps, and the reason for every target.

use actix_web::http::StatusCode;
use serde_json::{Value, json};
use switchyard_shared::Millis;
use switchyard_shared::admission::{
    self, BlockedConnection, ComboWaitDecision, DirectWaitDecision, EmptyPoolOutcome,
    ExcludedTarget, LockedTarget, Rejection,
};
use switchyard_shared::config::ResolveError;
use switchyard_shared::strategy::Strategy;

use super::report::{Report, TargetRecord, TargetSkip};
use super::select;
use crate::api::errors::{ErrorSource, GatewayError};
use crate::runtime::RoutingTable;

/// After a pass that produced no response.
pub enum AfterPass {
    /// Sleep this long, then run another pass.
    Wait(Millis),
    Fail(GatewayError),
}

/// Unknown or ambiguous model names: 404 / 400 naming nothing secret.
pub fn resolve_error(e: ResolveError) -> GatewayError {
    match e {
        ResolveError::Ambiguous { model, candidates } => GatewayError::bad_request(
            "ambiguous_model",
            format!(
                "Model `{model}` is served by several providers; use one of: {}",
                candidates.join(", ")
            ),
        )
        .with_field("candidates", candidates),
        ResolveError::NotListed { provider, model } => GatewayError::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "model_not_found",
            format!("Provider `{provider}` does not serve model `{model}`"),
        )
        .with_source(ErrorSource::Downstream),
        ResolveError::Unknown { model } => GatewayError::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "model_not_found",
            format!(
                "Unknown model `{model}`: not a configured provider/model, combo or listed model"
            ),
        )
        .with_source(ErrorSource::Downstream),
    }
}

/// 503 `max_attempts_exceeded`.
pub fn max_attempts(report: &Report) -> GatewayError {
    with_diagnostics(
        GatewayError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "max_attempts_exceeded",
            format!(
                "Maximum attempts reached ({}) without a successful response",
                report.attempts
            ),
        ),
        report,
    )
}

/// 504 `COMBO_TIMEOUT`: the combo's whole dispatch exceeded `combo_timeout_ms`.
pub fn combo_timeout(ms: Millis) -> GatewayError {
    GatewayError::new(
        StatusCode::GATEWAY_TIMEOUT,
        "server_error",
        "COMBO_TIMEOUT",
        format!("The combo did not produce a response within {ms} ms"),
    )
}

/// The last upstream failure, re-wrapped: status preserved, sanitised message.
pub fn upstream_error(report: &Report) -> GatewayError {
    let Some(f) = &report.last_failure else {
        return GatewayError::new(
            StatusCode::BAD_GATEWAY,
            "server_error",
            "no_upstream_response",
            "No upstream response",
        );
    };
    let (status, error_type, code) = match (f.stream_code, f.status) {
        (Some((s, t, c)), _) => (s, t, c.to_owned()),
        (None, Some(s)) => {
            let (t, c) = default_type_code(s);
            (s, t, f.code.clone().unwrap_or_else(|| c.to_owned()))
        }
        (None, None) => (502, "server_error", "upstream_unreachable".to_owned()),
    };
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut e = GatewayError::new(
        status,
        error_type,
        code,
        format!("[{}] {}", f.target, f.message),
    )
    .with_source(ErrorSource::Upstream)
    .with_header("x-switchyard-connection", &f.connection)
    .with_header("x-switchyard-attempts", &report.attempts.to_string());
    if let Some(ms) = f.retry_after_ms {
        e = e.with_retry_after_ms(ms);
    }
    e
}

/// The reference's default `type` / `code` by status.
pub fn default_type_code(status: u16) -> (&'static str, &'static str) {
    match status {
        400 => ("invalid_request_error", "bad_request"),
        401 => ("authentication_error", "invalid_api_key"),
        402 => ("billing_error", "payment_required"),
        403 => ("permission_error", "insufficient_quota"),
        404 => ("invalid_request_error", "model_not_found"),
        406 => ("invalid_request_error", "model_not_supported"),
        408 => ("timeout_error", "request_timeout"),
        413 => ("invalid_request_error", "payload_too_large"),
        422 => ("invalid_request_error", "unprocessable_entity"),
        429 => ("rate_limit_error", "rate_limit_exceeded"),
        502 => ("server_error", "bad_gateway"),
        503 => ("server_error", "service_unavailable"),
        504 => ("server_error", "gateway_timeout"),
        s if s >= 500 => ("server_error", "internal_server_error"),
        _ => ("invalid_request_error", "upstream_error"),
    }
}

/// Decides what follows a pass in which nothing succeeded.
pub fn after_pass(
    rt: &RoutingTable,
    report: &Report,
    is_combo: bool,
    strategy: Option<Strategy>,
    waits: u32,
    waited_ms: Millis,
) -> AfterPass {
    // Something reached an upstream in this pass and failed: that failure is the answer,
    // unless (direct requests) the failures blocked every connection of the target; then
    // the answer is the one for a target found blocked: a wait, or 429 with `reset_seconds`.
    if report
        .records
        .iter()
        .any(|r| matches!(r.skip, Some(TargetSkip::Failed)))
    {
        if !is_combo
            && let Some(record) = report.records.first()
            && let Some(connections) = blocked_by_failures(rt, report, record)
        {
            // No wait here: the request has just been answered by the upstream, and waiting out
            // its own fresh cooldown would double its latency; the client gets the wait
            // (`reset_seconds`, `Retry-After`) to decide.
            return match blocked(rt, record, connections, None) {
                AfterPass::Fail(e) => AfterPass::Fail(after_own_failures(e, report)),
                wait => wait,
            };
        }
        return AfterPass::Fail(upstream_error(report));
    }
    if !is_combo {
        let Some(record) = report.records.first() else {
            return AfterPass::Fail(upstream_error(report));
        };
        let skip = record.skip.clone().unwrap_or(TargetSkip::Failed);
        return match skip {
            TargetSkip::CircuitOpen { retry_after_ms } => {
                AfterPass::Fail(circuit_open(&record.provider, retry_after_ms))
            }
            TargetSkip::ProviderCooldown { retry_after_ms } => AfterPass::Fail(
                GatewayError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "server_error",
                    "provider_cooldown",
                    format!(
                        "Provider {} is cooling down after repeated failures",
                        record.provider
                    ),
                )
                .with_retry_after_ms(retry_after_ms)
                .with_field("provider", record.provider.as_str()),
            ),
            // A quota cut-off is answered like the cooldown it stands for: a wait when the
            // window resets soon, else 429 with the window's reset as `reset_seconds`.
            TargetSkip::Blocked { connections } | TargetSkip::QuotaCutoff { connections } => {
                blocked(rt, record, connections, Some((waits, waited_ms)))
            }
            TargetSkip::NotAllowed => AfterPass::Fail(GatewayError::forbidden(
                "connection_not_allowed",
                "This API key may not use any connection of the requested model",
            )),
            TargetSkip::NoConnections => AfterPass::Fail(no_connections(&record.provider)),
            skip @ TargetSkip::Saturated { .. } => AfterPass::Fail(
                saturated(&record.target, &skip).unwrap_or_else(|| upstream_error(report)),
            ),
            TargetSkip::ToolLimit { limit } => AfterPass::Fail(
                GatewayError::bad_request(
                    "tool_limit_exceeded",
                    format!(
                        "{} accepts at most {limit} tools; the request declares more",
                        record.target
                    ),
                )
                .with_field("limit", limit),
            ),
            TargetSkip::Failed | TargetSkip::RequestExhaustion => {
                AfterPass::Fail(upstream_error(report))
            }
        };
    }
    combo_after_pass(rt, report, strategy, waits, waited_ms)
}

/// A direct request's target whose every connection is blocked: wait for the earliest
/// (within `wait_for_cooldown`, when `waited` says how much this request waited so far), else 429 `connection_cooldown` / `model_cooldown` with
/// `reset_seconds`, or 401 `all_connections_terminal`.
fn blocked(
    rt: &RoutingTable,
    record: &TargetRecord,
    connections: Vec<BlockedConnection>,
    waited: Option<(u32, Millis)>,
) -> AfterPass {
    let settings = rt.settings.load();
    let mut wait = settings.wait_for_cooldown().clamped();
    wait.enabled &= waited.is_some();
    let (waits, waited_ms) = waited.unwrap_or_default();
    match admission::decide_direct_wait(&connections, waits, waited_ms, &wait) {
        DirectWaitDecision::Wait { ms, .. } => AfterPass::Wait(ms),
        DirectWaitDecision::Cooling(rej) => {
            let list: Vec<Value> = rej
                .connections
                .iter()
                .map(|c| {
                    json!({"connection": c.connection, "remaining_ms": c.remaining_ms,
                               "scope": c.scope, "reason": c.reason.as_str()})
                })
                .collect();
            let message = if rej.code() == "model_cooldown" {
                format!(
                    "All credentials for model {} are cooling down",
                    record.target
                )
            } else {
                format!(
                    "All connections of provider {} are cooling down",
                    record.provider
                )
            };
            AfterPass::Fail(
                GatewayError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limit_error",
                    rej.code(),
                    message,
                )
                .with_retry_after_ms(rej.retry_after_ms)
                .with_field("model", record.target.as_str())
                .with_field("reset_seconds", rej.reset_seconds)
                .with_field(
                    "retry_after",
                    iso8601(rt.clock.epoch_ms() + rej.retry_after_ms),
                )
                .with_field("connections", list),
            )
        }
        DirectWaitDecision::AllTerminal(rej) => AfterPass::Fail(
            GatewayError::new(
                StatusCode::UNAUTHORIZED,
                "authentication_error",
                rej.code(),
                format!(
                    "[{}] All {} connection(s) are unusable: {}",
                    record.provider,
                    rej.connections.len(),
                    rej.dominant.as_str()
                ),
            )
            .with_field("status", rej.dominant.as_str()),
        ),
        DirectWaitDecision::NoConnections => AfterPass::Fail(no_connections(&record.provider)),
    }
}

/// The blocked answer to a request whose own failures blocked every connection keeps what the
/// upstream's answer told: the connection that answered last, the attempt count, and the
/// `Retry-After` the client is told (a restatement's default, the upstream's hint).
fn after_own_failures(e: GatewayError, report: &Report) -> GatewayError {
    let Some(f) = &report.last_failure else {
        return e;
    };
    let mut e = e
        .with_source(ErrorSource::Upstream)
        .with_header("x-switchyard-connection", &f.connection)
        .with_header("x-switchyard-attempts", &report.attempts.to_string());
    if let Some(ms) = f.retry_after_ms {
        e = e.with_retry_after_ms(ms);
    }
    e
}

/// When every connection of the direct target is now blocked, counting what this pass's own
/// failures are about to block (the actors may not have applied it yet): all of them, for the
/// blocked answer. `None` when a connection is still usable or a failure blocked nothing
/// (a request-scoped error): the upstream's answer is then the client's.
fn blocked_by_failures(
    rt: &RoutingTable,
    report: &Report,
    record: &TargetRecord,
) -> Option<Vec<BlockedConnection>> {
    // A last failure that blocked nothing (request-scoped) is the answer as it is.
    report.last_failure.as_ref()?.block?;
    let provider = rt.provider(&record.provider)?;
    let model = record
        .target
        .strip_prefix(record.provider.as_str())
        .and_then(|m| m.strip_prefix('/'))?;
    let now = rt.clock.now();
    let elig = select::eligible(rt, provider, model, None, &[], false, &[], &[], now);
    let by_failure = |id: &str| report.failure_blocks.iter().any(|b| b.connection == id);
    let found_blocked = |id: &str| elig.blocked.iter().any(|b| b.connection == id);
    // A connection that no failure of this pass blocked and that is not blocked already is
    // usable: the request failed for another reason, and the upstream's answer stands.
    let usable = provider
        .connections
        .iter()
        .filter_map(|&ci| rt.connections.get(ci))
        .any(|conn| !by_failure(&conn.id) && !found_blocked(&conn.id));
    if usable {
        return None;
    }
    let mut connections: Vec<BlockedConnection> = elig
        .blocked
        .into_iter()
        .filter(|b| !by_failure(&b.connection))
        .collect();
    connections.extend(report.failure_blocks.iter().cloned());
    Some(connections)
}

fn combo_after_pass(
    rt: &RoutingTable,
    report: &Report,
    strategy: Option<Strategy>,
    waits: u32,
    waited_ms: Millis,
) -> AfterPass {
    let settings = rt.settings.load();
    let now = rt.clock.now();
    let locked: Vec<LockedTarget> = report
        .records
        .iter()
        .filter_map(|r| {
            let skip = r.skip.as_ref()?;
            Some(LockedTarget {
                target: r.target.clone(),
                reason: skip.lock_reason()?,
                remaining_ms: skip.remaining_ms()?,
                hint_ms: 0,
            })
        })
        .collect();
    let wait = settings.combo_wait().clamped();
    let decision = admission::decide_combo_wait(&locked, waits, waited_ms, now, &wait);
    match decision {
        ComboWaitDecision::Wait { ms, .. } => return AfterPass::Wait(ms),
        ComboWaitDecision::RateLimited { retry_after_ms, .. } => {
            return AfterPass::Fail(with_diagnostics(
                GatewayError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limit_error",
                    "rate_limit_exceeded",
                    "Every target of this combo is rate limited; retry after the indicated time",
                )
                .with_retry_after_ms(retry_after_ms)
                .with_field("retry_after", retry_after_ms.div_ceil(1000))
                .with_field("reset_at", iso8601(rt.clock.epoch_ms() + retry_after_ms)),
                report,
            ));
        }
        ComboWaitDecision::AllTargetsSkipped { .. } => {}
    }
    let excluded: Vec<ExcludedTarget> = report
        .records
        .iter()
        .filter_map(|r| {
            let skip = r.skip.as_ref()?;
            Some(ExcludedTarget {
                target: r.target.clone(),
                reason: skip.exclusion(),
                remaining_ms: skip.remaining_ms().unwrap_or(0),
            })
        })
        .collect();
    let pool = admission::classify_empty_pool(&excluded);
    // Targets refused by Switchyard's own gates (semaphores, queue depth) exist and will take
    // requests again: answer with the gate's 503/429 and its Retry-After, never the 404 that
    // says the model does not exist.
    if let EmptyPoolOutcome::NoExecutableTargets { .. } = pool
        && let Some(e) = report
            .records
            .iter()
            .find_map(|r| saturated(&r.target, r.skip.as_ref()?))
    {
        return AfterPass::Fail(with_diagnostics(e, report));
    }
    if let EmptyPoolOutcome::NoExecutableTargets { .. } = pool {
        return AfterPass::Fail(with_diagnostics(
            GatewayError::new(
                StatusCode::NOT_FOUND,
                pool.error_type(),
                pool.code(),
                "No target of this combo can execute the request",
            ),
            report,
        ));
    }
    let next = excluded
        .iter()
        .filter(|e| e.remaining_ms > 0)
        .map(|e| e.remaining_ms)
        .min();
    if strategy == Some(Strategy::Weighted) {
        let retry = next.unwrap_or(0);
        return AfterPass::Fail(with_diagnostics(
            GatewayError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                pool.error_type(),
                pool.code(),
                "Every target of this weighted combo is cooling down",
            )
            .with_retry_after_ms(retry),
            report,
        ));
    }
    let skipped = skipped_targets(report, rt.clock.epoch_ms());
    let mut e = GatewayError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "service_unavailable",
        "ALL_TARGETS_SKIPPED",
        "Every target of this combo was skipped before dispatch",
    )
    .with_field("skippedTargets", skipped);
    if let Some(ms) = next {
        e = e
            .with_retry_after_ms(ms)
            .with_field("nextRetryAt", iso8601(rt.clock.epoch_ms() + ms));
    }
    AfterPass::Fail(with_diagnostics(e, report))
}

/// `skippedTargets[]`: the skipped targets grouped by reason, each group with the
/// `nextRetryAt` of its soonest timer when its reason is one (the reference's #12659).
fn skipped_targets(report: &Report, epoch_ms: u64) -> Vec<Value> {
    let mut groups: Vec<(&'static str, Vec<String>, Option<Millis>)> = Vec::new();
    for r in &report.records {
        let reason = r.skip.as_ref().map_or("unknown", TargetSkip::reason);
        let remaining = r
            .skip
            .as_ref()
            .and_then(TargetSkip::remaining_ms)
            .filter(|ms| *ms > 0);
        match groups.iter_mut().find(|(g, _, _)| *g == reason) {
            Some((_, targets, next)) => {
                targets.push(r.target.clone());
                *next = match (*next, remaining) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            None => groups.push((reason, vec![r.target.clone()], remaining)),
        }
    }
    groups
        .into_iter()
        .map(|(reason, targets, next)| {
            let mut v = json!({"reason": reason, "targets": targets});
            if let Some(ms) = next {
                v["nextRetryAt"] = iso8601(epoch_ms + ms).into();
            }
            v
        })
        .collect()
}

/// The answer for a target every connection of which a concurrency gate or the request
/// queue refused (`SEMAPHORE_TIMEOUT` 503, `RATE_LIMIT_QUEUE_FULL` 429 …), with a
/// `Retry-After` (1 s when the gate names none); `None` for any other skip.
fn saturated(target: &str, skip: &TargetSkip) -> Option<GatewayError> {
    let TargetSkip::Saturated {
        code,
        status,
        error_type,
        retry_after_ms,
    } = skip
    else {
        return None;
    };
    Some(
        GatewayError::new(
            StatusCode::from_u16(*status).unwrap_or(StatusCode::TOO_MANY_REQUESTS),
            error_type,
            *code,
            format!("[{target}] every connection is at capacity"),
        )
        .with_retry_after_ms(retry_after_ms.unwrap_or(1000)),
    )
}

/// 503 `provider_circuit_open` with `Retry-After` and the breaker header.
pub fn circuit_open(provider: &str, retry_after_ms: Millis) -> GatewayError {
    GatewayError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "server_error",
        "provider_circuit_open",
        format!("Provider {provider} circuit breaker is open"),
    )
    .with_retry_after_ms(retry_after_ms)
    .with_field("provider", provider)
    .with_field("retry_after", retry_after_ms.div_ceil(1000).max(1))
    .with_header("x-switchyard-provider-breaker", "open")
}

fn no_connections(provider: &str) -> GatewayError {
    GatewayError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "server_error",
        "no_active_connections",
        format!("No active connections for provider {provider}"),
    )
}

/// Adds `diagnostics` (every target and its reason) and the combo headers.
fn with_diagnostics(e: GatewayError, report: &Report) -> GatewayError {
    let excluded: Vec<Value> = report
        .records
        .iter()
        .map(|r| {
            let reason = r.skip.as_ref().map_or("unknown", |s| s.reason());
            let mut v = json!({"target": r.target, "provider": r.provider, "reason": reason});
            if let Some(ms) = r.skip.as_ref().and_then(TargetSkip::remaining_ms) {
                v["remaining_ms"] = ms.into();
            }
            v
        })
        .collect();
    let header: String = report
        .records
        .iter()
        .map(|r| {
            format!(
                "{}:{}",
                r.target,
                r.skip.as_ref().map_or("unknown", |s| s.reason())
            )
        })
        .collect::<Vec<_>>()
        .join(",")
        .chars()
        .filter(char::is_ascii)
        .take(900)
        .collect();
    e.with_top_level(
        "diagnostics",
        json!({"attempted": report.attempts, "poolSize": report.records.len(), "excluded": excluded}),
    )
    .with_header("x-switchyard-combo-excluded", &header)
    .with_header("x-switchyard-attempts", &report.attempts.to_string())
}

/// RFC 3339 UTC timestamp of epoch milliseconds (e.g. `2026-11-29T18:00:00.000Z`).
pub fn iso8601(epoch_ms: u64) -> String {
    let secs = epoch_ms / 1000;
    let ms = epoch_ms % 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso8601_formats_known_instants() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_795_982_400_123), "2026-11-29T20:00:00.123Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn default_types_and_codes() {
        assert_eq!(
            default_type_code(429),
            ("rate_limit_error", "rate_limit_exceeded")
        );
        assert_eq!(default_type_code(599).0, "server_error");
        assert_eq!(default_type_code(418).1, "upstream_error");
    }

    #[test]
    fn circuit_open_body() {
        let e = circuit_open("openai", 1500);
        assert_eq!(e.status.as_u16(), 503);
        assert_eq!(e.retry_after_secs, Some(2));
        assert_eq!(e.fields["provider"], "openai");
        assert!(
            e.headers
                .iter()
                .any(|(k, v)| k == "x-switchyard-provider-breaker" && v == "open")
        );
    }
}
