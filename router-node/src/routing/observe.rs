//! Turning an attempt's outcome into policy effects: restatement, classification, and the
//! observations sent to the owning actors.
//!
//! Each attempt is accounted exactly once: one breaker observation (or none for a plain success
//! on a clean CLOSED breaker), one connection observation for failures (or a success report
//! only when the snapshot has something to clear). Messages go with `try_send`; a full mailbox
//! is counted, never waited on.

use std::sync::Arc;

use switchyard_shared::Millis;
use switchyard_shared::admission::{ConnectionBlock, CoolingScope};
use switchyard_shared::classify::{
    self, Classification, ClassifyInput, MatchedRule, StructuredError, TransportFailure,
};
use switchyard_shared::cooldown::{self, ConnEvent, FailureObservation};
use switchyard_shared::hints;
use switchyard_shared::lockout::{
    LockFailure, LockKey, LockReason, LockoutScope, resolve_lock_key, select_lockout_cooldown,
};
use switchyard_shared::outcome::{
    BreakerOutcome, CooldownHint, FailureReason, LockScope, TerminalSignal,
};
use switchyard_shared::restatement;
use switchyard_shared::settings::ResilienceSettings;
use switchyard_shared::strategy::AttemptOutcome;

use super::report::UpstreamFailure;
use crate::actors::{self, BreakerObserve, ObserveFailure, ObserveSuccess, ProbeGuard};
use crate::actors::{ConnHandle, ProviderHandle};
use crate::api::scrub::scrub_text;
use crate::runtime::RoutingTable;
use crate::upstream::AttemptFailure;

/// The classification rule of a 404 that names a route, not a model.
const ROUTE_RULE: &str = classify::ROUTE_NOT_FOUND_RULE;

/// The policy's reading of a failed attempt.
#[derive(Debug, Clone)]
pub struct Judged {
    pub classification: Classification,
    pub failure: UpstreamFailure,
}

/// Restates, classifies and reports a failed attempt; returns what the router needs next.
#[allow(clippy::too_many_arguments)]
pub fn on_failure(
    rt: &RoutingTable,
    provider: &ProviderHandle,
    conn: &ConnHandle,
    model: &Arc<str>,
    target: &str,
    failure: &AttemptFailure,
    probe: Option<ProbeGuard>,
    is_combo: bool,
) -> Judged {
    judge(
        rt, provider, conn, model, target, failure, probe, is_combo, true,
    )
}

/// A committed stream failed later: the breaker already counted the attempt (a success at the
/// commit point), so only the connection learns about it.
pub fn after_commit_failure(
    rt: &RoutingTable,
    provider: &ProviderHandle,
    conn: &ConnHandle,
    model: &Arc<str>,
    target: &str,
    failure: &AttemptFailure,
) {
    judge(
        rt, provider, conn, model, target, failure, None, false, false,
    );
}

#[allow(clippy::too_many_arguments)]
fn judge(
    rt: &RoutingTable,
    provider: &ProviderHandle,
    conn: &ConnHandle,
    model: &Arc<str>,
    target: &str,
    failure: &AttemptFailure,
    probe: Option<ProbeGuard>,
    is_combo: bool,
    count_for_breaker: bool,
) -> Judged {
    let now = rt.clock.now();
    let epoch = rt.clock.epoch_ms();
    let headers: Vec<(&str, &str)> = failure
        .headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let retry_after = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("retry-after"))
        .and_then(|(_, v)| hints::parse_retry_after(v, epoch));
    let mut status = failure.status.unwrap_or(0);
    let mut client_retry_after = None;
    let rules = rt
        .restatement
        .get(provider.idx)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let mut operator_veto = false;
    if let Some(s) = failure.status {
        match restatement::restate(s, &failure.message, &failure.body, rules, retry_after) {
            Some(r) => {
                status = r.status;
                client_retry_after = r.retry_after_ms;
            }
            // An exclude marker vetoes every reading of the body, not only the restatement.
            None => {
                operator_veto =
                    restatement::vetoed(s, &failure.message, &failure.body, rules).is_some();
            }
        }
    }
    let hint = hints::upstream_hint(&headers, &failure.body, epoch);
    let settings = rt.settings.load();
    let use_hints = settings
        .cooldown_params(provider.config.category, conn.config.disable_cooling)
        .use_upstream_retry_hints;
    let file_rules = rt
        .error_rules
        .get(provider.idx)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    // Runtime rules (PATCH or `[resilience.provider_error_rules]`) go first, read per failure
    // so that a patch applies to the next one.
    let merged;
    let operator = match settings.provider_error_rules.get(&*provider.id) {
        Some(runtime) if !runtime.is_empty() => {
            merged = classify::ErrorRule::with_runtime(runtime, file_rules);
            merged.as_slice()
        }
        _ => file_rules,
    };
    let text = format!("{} {}", failure.message, failure.body);
    let upstream_error = classify::parse_error_body(&failure.body);
    let classification = classify::classify(&ClassifyInput {
        status,
        transport: failure.transport,
        error_text: &text,
        body: &failure.body,
        structured: StructuredError {
            code: upstream_error.code.as_deref(),
            error_type: upstream_error.error_type.as_deref(),
        },
        headers: &headers,
        upstream_hint_ms: hint,
        provider_id: &provider.id,
        category: provider.config.category,
        per_model_quota: provider.config.per_model_quota,
        use_upstream_retry_hints: use_hints,
        operator_rules: operator,
        now_epoch_ms: epoch,
        is_combo,
        request_scoped: false,
        operator_veto,
    });

    // The strategies' inputs: the quota windows the error stated, and the attempt itself
    // (a committed stream's latency and success were recorded at its commit point).
    conn.observe_quota_headers(&headers, now, epoch);
    if count_for_breaker {
        conn.observe_attempt(
            strategy_outcome(failure.transport, classification.request_scoped),
            failure.elapsed_ms,
            now,
        );
    }

    // Connection cooldown or model lockout. A request-scoped failure (context overflow, an
    // invalid parameter, an unknown route …) changes neither: it is this request's fault.
    let request_scoped = classification.request_scoped;
    let model_scoped = classification.scope == LockScope::Model;
    // The combo path of the lockout (`model_lockout.enabled`, status in `error_codes`); a
    // concurrency cap frees in a second and locks nothing.
    let combo_path = is_combo
        && settings.model_lockout.enabled
        && settings.model_lockout.error_codes.contains(&status)
        && classification.rule != MatchedRule::Builtin(classify::CONCURRENCY_RULE);
    // A terminal state is about the credential: the connection is out, no lock is needed.
    let terminal = matches!(
        classification.terminal,
        TerminalSignal::Banned | TerminalSignal::CreditsExhausted
    );
    let mut lockout = if request_scoped || terminal {
        None
    } else if model_scoped || combo_path {
        let model_ref = provider.model_ref(&conn.id, model);
        let stated = classification
            .reset_hint_ms
            .or(match classification.cooldown {
                CooldownHint::Upstream(ms) | CooldownHint::Fixed(ms) => Some(ms),
                CooldownHint::None | CooldownHint::ScaledBackoff => None,
            });
        let lock_hint = if combo_path {
            // The reference's `selectLockoutCooldownMs`: a stated reset longer than the base
            // is used exactly, otherwise the lockout's own backoff.
            select_lockout_cooldown(stated, &settings.lockout())
        } else {
            match (classification.reset_hint_ms, classification.cooldown) {
                (Some(ms), _) => CooldownHint::Upstream(ms),
                (None, CooldownHint::None) => CooldownHint::ScaledBackoff,
                (None, other) => other,
            }
        };
        // A spent quota with no stated reset is locked until the daily reset (the reference's
        // `recordModelLockoutFailure`), not for the transient backoff.
        let lock_hint = match lock_hint {
            CooldownHint::ScaledBackoff
                if classification.reason == FailureReason::QuotaExhausted && stated.is_none() =>
            {
                CooldownHint::Upstream(hints::ms_until_utc_midnight(epoch))
            }
            other => other,
        };
        // With `model_lockout.enabled = false` the lockout's own 120 s escalation is off: a
        // lock that stands in for the connection cooldown (a combo's transient 429, a
        // per-model-quota failure) lasts what the cooldown would have, the connection's
        // scaled backoff (3 s on an API key), as the same 429 costs on a direct request.
        let lock_hint = match lock_hint {
            CooldownHint::ScaledBackoff if !settings.model_lockout.enabled => {
                let params =
                    settings.cooldown_params(provider.config.category, conn.config.disable_cooling);
                let level = conn.load().state.backoff_level;
                CooldownHint::Fixed(cooldown::scaled_backoff(&params, level).0)
            }
            other => other,
        };
        let requested = (classification.rule_scope && model_scoped).then_some(LockoutScope::Model);
        let key = resolve_lock_key(&model_ref, status, requested);
        let reason = if status == 404 {
            LockReason::NotFound
        } else {
            LockReason::from(classification.reason)
        };
        Some((
            key,
            LockFailure {
                reason,
                hint: lock_hint,
                reset_after_ms: settings
                    .breaker_profile(provider.config.category)
                    .reset_timeout_ms,
            },
        ))
    } else {
        None
    };
    // What the client (and the log) may see: our summary plus the upstream's own message,
    // with the connection's exact key and well-known key formats removed.
    let client_message = {
        let full = match upstream_error_message(&failure.body) {
            Some(m) => format!("{}: {m}", failure.message),
            None => failure.message.clone(),
        };
        classify::sanitize_message(&scrub_text(&full, conn.api_key.as_deref()))
    };
    let mut observation = FailureObservation {
        status: failure.status,
        reason: classification.reason,
        // A model-scoped failure locks the model, not the whole connection.
        hint: if model_scoped {
            CooldownHint::None
        } else {
            classification.cooldown
        },
        terminal: classification.terminal,
        stream_stall: failure.transport == Some(TransportFailure::Stall),
        message: client_message.clone(),
    };
    // A typed `RetryInfo` on a 429: a wait the queue can sit out paces the connection's
    // limiter; a longer one (a spent daily quota) locks only this model on this connection.
    if status == 429
        && !request_scoped
        && !terminal
        && let Some(delay) = hints::typed_retry_info_ms(&failure.body)
    {
        match hints::body_retry(delay, conn.queue.settings().max_wait_ms) {
            hints::BodyRetry::Pace(ms) => {
                conn.queue.pause_until(now.saturating_add(ms));
                // In redis mode the peers pause their queue of this connection too.
                if let Some(cluster) = &rt.cluster {
                    cluster.share_queue_pause(&conn.id, ms);
                }
                rt.metrics.body_retry("pace");
            }
            hints::BodyRetry::LockModel(ms) => {
                let model_ref = provider.model_ref(&conn.id, model);
                let key = resolve_lock_key(&model_ref, status, Some(LockoutScope::Model));
                lockout = Some((
                    key,
                    LockFailure {
                        reason: LockReason::QuotaExhausted,
                        hint: CooldownHint::Upstream(ms),
                        reset_after_ms: settings
                            .breaker_profile(provider.config.category)
                            .reset_timeout_ms,
                    },
                ));
                observation.hint = CooldownHint::None;
                rt.metrics.body_retry("model_lockout");
            }
        }
    }
    // What this failure is about to block, computed with the same pure policies the
    // connection's actor applies (the actor may apply it after the answer is sent): a request
    // whose own failures blocked every connection is answered like one that found them
    // blocked (RESILIENCE.md, "A direct request whose every connection is cooling").
    let block = if request_scoped {
        None
    } else {
        predicted_block(
            &settings,
            provider,
            conn,
            &observation,
            lockout.as_ref(),
            now,
        )
    };
    if !request_scoped {
        actors::observe(
            conn,
            ObserveFailure {
                model: model.clone(),
                observation,
                lockout,
                at: now,
            },
        );
    }

    // Provider breaker: exactly one outcome per attempt (an ignored one hands a probe back).
    if count_for_breaker {
        let outcome = if classification.skip_provider_breaker || request_scoped {
            BreakerOutcome::Ignore
        } else {
            classification.breaker
        };
        report_breaker(rt, provider, outcome, probe, now);
        if matches!(outcome, BreakerOutcome::Failure(_))
            && !model_scoped
            && settings.provider_cooldown.enabled
            && let Ok(mut tracker) = rt.provider_cooldown.lock()
        {
            tracker.record_failure(&provider.id, provider.config.category, Some(&conn.id), now);
        }
    }

    let retry_after_ms = client_retry_after
        .or(hint)
        .filter(|_| matches!(status, 429 | 503));
    let stream_code = failure
        .stream_abort
        .as_ref()
        .map(|a| (a.status(), a.error_type(), a.code()));
    // The provider's own code, translated where its format has none (Anthropic's "prompt is
    // too long" is `context_length_exceeded`); a stream readiness failure keeps its own.
    let code = if status == 0 {
        None
    } else if classification.rule == MatchedRule::Builtin(ROUTE_RULE) {
        Some(classify::ROUTE_NOT_FOUND.to_owned())
    } else {
        classify::client_code(&upstream_error, &text)
    };
    Judged {
        failure: UpstreamFailure {
            target: target.to_owned(),
            connection: conn.id.to_string(),
            status: (status != 0).then_some(status),
            message: client_message,
            retry_after_ms,
            stream_code,
            code,
            block,
        },
        classification,
    }
}

/// How the latency and health strategies read a failed attempt: a timeout feeds the latency
/// average, a request's own fault (or the client leaving) says nothing about the connection.
fn strategy_outcome(transport: Option<TransportFailure>, request_scoped: bool) -> AttemptOutcome {
    match transport {
        Some(TransportFailure::ClientAbort) => AttemptOutcome::RequestError,
        Some(
            TransportFailure::Timeout
            | TransportFailure::ReadinessTimeout
            | TransportFailure::IdleTimeout,
        ) => AttemptOutcome::Timeout,
        _ if request_scoped => AttemptOutcome::RequestError,
        _ => AttemptOutcome::Failure,
    }
}

/// Feeds the strategies a successful attempt: its latency (to the answer, or to a stream's
/// first content) and the quota windows its headers state.
pub fn feed_success(
    rt: &RoutingTable,
    conn: &ConnHandle,
    latency_ms: Millis,
    quota_headers: &[(String, String)],
) {
    let now = rt.clock.now();
    conn.observe_attempt(AttemptOutcome::Success, latency_ms, now);
    if !quota_headers.is_empty() {
        let headers: Vec<(&str, &str)> = quota_headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        conn.observe_quota_headers(&headers, now, rt.clock.epoch_ms());
    }
}

/// The block a failure puts on its connection once applied: a terminal state, a connection
/// cooldown, or a model lockout (a lockout for a model that does not exist is not a wait, the
/// 404 is the answer).
fn predicted_block(
    settings: &ResilienceSettings,
    provider: &ProviderHandle,
    conn: &ConnHandle,
    observation: &FailureObservation,
    lockout: Option<&(LockKey, LockFailure)>,
    now: Millis,
) -> Option<ConnectionBlock> {
    let snap = conn.load();
    let params = settings.cooldown_params(provider.config.category, conn.config.disable_cooling);
    let event = ConnEvent::Failure(observation.clone());
    let (next, _) = cooldown::on_event(&snap.state, &event, &params, now);
    if let Some(terminal) = next.status.terminal() {
        return Some(ConnectionBlock::Terminal(terminal));
    }
    let remaining = cooldown::remaining_ms(&next, now);
    if remaining > 0 {
        return Some(ConnectionBlock::Cooling {
            remaining_ms: remaining,
            scope: CoolingScope::Connection,
            reason: observation.reason,
        });
    }
    let (key, failure) = lockout?;
    if failure.reason == LockReason::NotFound {
        return None;
    }
    let mut failure = *failure;
    if failure.reset_after_ms == 0 {
        failure.reset_after_ms = settings
            .breaker_profile(provider.config.category)
            .reset_timeout_ms;
    }
    let entry = snap
        .lockouts
        .preview_failure(key, &failure, &settings.lockout(), now)?;
    let remaining = entry.remaining_ms(now);
    (remaining > 0).then_some(ConnectionBlock::Cooling {
        remaining_ms: remaining,
        scope: CoolingScope::Model,
        reason: observation.reason,
    })
}

/// Reports a success to whoever has something to clear; nothing on the steady-state path.
pub fn on_success(
    rt: &RoutingTable,
    provider: &ProviderHandle,
    conn: &ConnHandle,
    model: &Arc<str>,
    probe: Option<ProbeGuard>,
    started: Millis,
) {
    let now = rt.clock.now();
    if rt.settings.load().provider_cooldown.enabled
        && let Ok(mut tracker) = rt.provider_cooldown.lock()
    {
        tracker.record_success(&provider.id, Some(&conn.id));
    }
    if conn.load().needs_success_report() {
        actors::observe_success(
            conn,
            ObserveSuccess {
                model: model.clone(),
                started,
                started_epoch_ms: rt.clock.epoch_of(started),
                at: now,
            },
        );
    }
    report_breaker(rt, provider, BreakerOutcome::Success, probe, now);
}

/// Sends the breaker outcome when it can matter: any failure, a probe's result, or a success
/// while the breaker has failures to forget. The outcome settles a probe; an outcome that is
/// not sent drops the probe, which hands its lease back.
pub fn report_breaker(
    rt: &RoutingTable,
    provider: &ProviderHandle,
    outcome: BreakerOutcome,
    probe: Option<ProbeGuard>,
    now: Millis,
) {
    let needed = match outcome {
        BreakerOutcome::Failure(_) => true,
        BreakerOutcome::Success => {
            probe.is_some() || provider.breaker.load().needs_success_report()
        }
        BreakerOutcome::Ignore => false,
    };
    if needed {
        actors::observe_breaker(
            provider,
            &rt.actor_stats,
            BreakerObserve {
                generation: probe.and_then(ProbeGuard::settle),
                outcome,
                at: now,
            },
        );
    }
    // Otherwise an ignored outcome says nothing about the provider: `probe` drops here and
    // hands its lease back.
}

/// The upstream's own error message from an error body in any provider envelope
/// (`{"error":{"message"}}`, `{"error":"…"}`, `{"message"}`, FastAPI's `{"detail"}`, Google's
/// one-element array), at most 512 characters. A message that is not a string (Mistral's 422
/// `"message":{"detail":[{"type","loc","msg"}]}`, a validation list) is passed on as compact
/// JSON: the detail the client needs to fix its request, whatever its shape.
fn upstream_error_message(body: &str) -> Option<String> {
    use serde_json::Value;
    let value: Value = serde_json::from_str(body.trim()).ok()?;
    let value = match &value {
        Value::Array(items) => items.first()?,
        other => other,
    };
    fn present(v: Option<&Value>) -> Option<&Value> {
        v.filter(|v| !v.is_null())
    }
    let found = match present(value.get("error")) {
        Some(Value::Object(error)) => {
            present(error.get("message")).or_else(|| present(error.get("detail")))
        }
        Some(other) => Some(other),
        None => None,
    }
    .or_else(|| present(value.get("message")))
    .or_else(|| present(value.get("detail")))?;
    let text = match found {
        Value::String(s) => s.clone(),
        other => serde_json::to_string(other).ok()?,
    };
    let text = text.trim();
    (!text.is_empty()).then(|| text.chars().take(512).collect())
}

#[cfg(test)]
mod tests {
    use super::upstream_error_message;

    #[test]
    fn upstream_messages_from_each_envelope() {
        assert_eq!(
            upstream_error_message(r#"{"error":{"message":"Rate limit reached","type":"x"}}"#)
                .as_deref(),
            Some("Rate limit reached")
        );
        assert_eq!(
            upstream_error_message(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            )
            .as_deref(),
            Some("Overloaded")
        );
        assert_eq!(
            upstream_error_message(r#"{"error":"bad key"}"#).as_deref(),
            Some("bad key")
        );
        assert_eq!(
            upstream_error_message(r#"{"message":"nope"}"#).as_deref(),
            Some("nope")
        );
        assert_eq!(upstream_error_message("<html>502</html>"), None);
        // Mistral's 422 (mistralai/client-python#91): the message is an object.
        let mistral = upstream_error_message(
            r#"{"object":"error","message":{"detail":[{"type":"extra_forbidden","loc":["body","tools",0,"function","required"],"msg":"Extra inputs are not permitted","input":["content"]}]},"type":"invalid_request_error","param":null,"code":null}"#,
        )
        .expect("a message");
        assert!(
            mistral.contains("Extra inputs are not permitted"),
            "{mistral}"
        );
        assert!(
            mistral.contains(r#""loc":["body","tools",0,"function","required"]"#),
            "{mistral}"
        );
        // FastAPI's `detail` list and an error message that is an array.
        assert!(
            upstream_error_message(
                r#"{"detail":[{"loc":["body","model"],"msg":"Field required","type":"missing"}]}"#
            )
            .is_some_and(|m| m.contains("Field required"))
        );
        assert!(
            upstream_error_message(r#"{"error":{"message":["a","b"],"code":"x"}}"#)
                .is_some_and(|m| m == r#"["a","b"]"#)
        );
        assert_eq!(
            upstream_error_message(r#"{"error":{"message":"  "}}"#),
            None
        );
    }
}

#[cfg(test)]
mod strategy_outcome_tests {
    use super::{AttemptOutcome, TransportFailure, strategy_outcome};

    #[test]
    fn timeouts_feed_latency_and_request_faults_say_nothing_about_the_connection() {
        for t in [
            TransportFailure::Timeout,
            TransportFailure::ReadinessTimeout,
            TransportFailure::IdleTimeout,
        ] {
            assert_eq!(strategy_outcome(Some(t), false), AttemptOutcome::Timeout);
        }
        assert_eq!(
            strategy_outcome(Some(TransportFailure::ClientAbort), false),
            AttemptOutcome::RequestError
        );
        assert_eq!(strategy_outcome(None, true), AttemptOutcome::RequestError);
        assert_eq!(strategy_outcome(None, false), AttemptOutcome::Failure);
        assert_eq!(
            strategy_outcome(Some(TransportFailure::ConnectRefused), false),
            AttemptOutcome::Failure
        );
    }
}
