//! Turning an attempt's outcome into policy effects: the verdict on a failure
//! ([`switchyard_shared::verdict`], pure) applied, and the observations sent to the owning
//! actors.
//!
//! Each attempt is accounted exactly once: one breaker observation (or none for a plain success
//! on a clean CLOSED breaker), one connection observation for failures (or a success report
//! only when the snapshot has something to clear). Messages go with `try_send`; a full mailbox
//! is counted, never waited on.

use std::sync::Arc;

use switchyard_shared::Millis;
use switchyard_shared::admission::{ConnectionBlock, CoolingScope};
use switchyard_shared::classify::{self, Classification};
use switchyard_shared::cooldown::{self, ConnEvent, FailureObservation};
use switchyard_shared::lockout::{LockFailure, LockKey, LockReason};
use switchyard_shared::outcome::BreakerOutcome;
use switchyard_shared::settings::ResilienceSettings;
use switchyard_shared::strategy::AttemptOutcome;
use switchyard_shared::verdict::{self, Attempt, BodyRetry, Context};

use super::report::UpstreamFailure;
use crate::actors::{self, BreakerObserve, ObserveFailure, ObserveSuccess, ProbeGuard};
use crate::actors::{ConnHandle, ProviderHandle};
use crate::api::scrub::scrub_text;
use crate::runtime::RoutingTable;
use crate::upstream::AttemptFailure;

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

/// Reads the attempt against the node's state, judges it ([`verdict::judge`], pure) and
/// applies the verdict: the strategies' inputs, the queue's pause, the connection's
/// observation (with the block it is about to cause), the breaker and the provider cooldown.
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
    let settings = rt.settings.load();
    // What the client (and the log) may see: our summary plus the upstream's own message,
    // with the connection's exact key and well-known key formats removed.
    let client_message = {
        let full = match upstream_error_message(&failure.body) {
            Some(m) => format!("{}: {m}", failure.message),
            None => failure.message.clone(),
        };
        classify::sanitize_message(&scrub_text(&full, conn.api_key.as_deref()))
    };
    let attempt = Attempt {
        status: failure.status,
        transport: failure.transport,
        message: &failure.message,
        body: &failure.body,
        headers: &headers,
    };
    let ctx = Context {
        provider_id: &provider.id,
        category: provider.config.category,
        per_model_quota: provider.config.per_model_quota,
        disable_cooling: conn.config.disable_cooling,
        backoff_level: conn.load().state.backoff_level,
        queue_max_wait_ms: conn.queue.settings().max_wait_ms,
        model_ref: provider.model_ref(&conn.id, model),
        restatement_rules: rt
            .restatement
            .get(provider.idx)
            .map(Vec::as_slice)
            .unwrap_or(&[]),
        file_rules: rt
            .error_rules
            .get(provider.idx)
            .map(Vec::as_slice)
            .unwrap_or(&[]),
        settings: &settings,
        is_combo,
        now_epoch_ms: epoch,
    };
    let v = verdict::judge(&attempt, &ctx, client_message.clone());
    let request_scoped = v.request_scoped();
    let model_scoped = v.model_scoped();

    // The strategies' inputs: the quota windows the error stated, and the attempt itself
    // (a committed stream's latency and success were recorded at its commit point).
    conn.observe_quota_headers(&headers, now, epoch);
    if count_for_breaker {
        conn.observe_attempt(v.strategy, failure.elapsed_ms, now);
    }
    match v.body_retry {
        Some(BodyRetry::Pace(ms)) => {
            conn.queue.pause_until(now.saturating_add(ms));
            // In redis mode the peers pause their queue of this connection too.
            if let Some(cluster) = &rt.cluster {
                cluster.share_queue_pause(&conn.id, ms);
            }
            rt.metrics.body_retry("pace");
        }
        Some(BodyRetry::LockModel) => rt.metrics.body_retry("model_lockout"),
        None => {}
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
            &v.observation,
            v.lockout.as_ref(),
            now,
        )
    };
    if !request_scoped {
        actors::observe(
            conn,
            ObserveFailure {
                model: model.clone(),
                observation: v.observation,
                lockout: v.lockout,
                at: now,
            },
        );
    }

    // Provider breaker: exactly one outcome per attempt (an ignored one hands a probe back).
    if count_for_breaker {
        report_breaker(rt, provider, v.breaker, probe, now);
        if matches!(v.breaker, BreakerOutcome::Failure(_))
            && !model_scoped
            && settings.provider_cooldown.enabled
            && let Ok(mut tracker) = rt.provider_cooldown.lock()
        {
            tracker.record_failure(&provider.id, provider.config.category, Some(&conn.id), now);
        }
    }

    let stream_code = failure
        .stream_abort
        .as_ref()
        .map(|a| (a.status(), a.error_type(), a.code()));
    Judged {
        failure: UpstreamFailure {
            target: target.to_owned(),
            connection: conn.id.to_string(),
            status: (v.status != 0).then_some(v.status),
            message: client_message,
            retry_after_ms: v.retry_after_ms,
            stream_code,
            code: v.code,
            block,
        },
        classification: v.classification,
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
