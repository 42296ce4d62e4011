//! JSON views of providers, breakers, connections and lockouts, shared by the admin endpoints.
//!
//! Each view is assembled field by field from the snapshots (an explicit whitelist), so a field
//! added to a handle later, such as a credential, can never leak into an admin response by
//! accident. The upstream error text is left out too: it is upstream-controlled and could echo
//! a key; the error's type, status and category are what operators act on.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use switchyard_shared::admission;
use switchyard_shared::breaker::{BreakerStatus, BreakerView};
use switchyard_shared::lockout::{LockEntry, LockKey, LockTarget};
use switchyard_shared::outcome::FailureReason;
use switchyard_shared::settings::ResilienceSettings;

use super::common::Now;
use crate::actors::{ConnHandle, ConnSnapshot, ProviderHandle};
use crate::runtime::Runtime;

/// Transitions shown per breaker.
pub const HISTORY_SHOWN: usize = 20;

/// How a connection stands, coarsest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnClass {
    Active,
    /// Available, but some models are locked out.
    ModelLocked,
    CoolingDown,
    Terminal,
}

impl ConnClass {
    pub fn of(snapshot: &ConnSnapshot, now: &Now) -> Self {
        if snapshot.terminal().is_some() {
            Self::Terminal
        } else if snapshot.cooldown_remaining(now.mono) > 0 {
            Self::CoolingDown
        } else if !snapshot.lockouts.active(now.mono).is_empty() {
            Self::ModelLocked
        } else {
            Self::Active
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::ModelLocked => "model_locked",
            Self::CoolingDown => "cooling_down",
            Self::Terminal => "terminal",
        }
    }
}

/// One active lockout.
pub fn lockout(key: &LockKey, entry: &LockEntry, now: &Now) -> Value {
    let (field, scope) = match &key.model {
        LockTarget::Model(_) => ("model", "model"),
        LockTarget::Family(_) => ("family", "family"),
    };
    let mut v = json!({
        "provider": key.provider,
        "connectionId": key.connection,
        "scope": scope,
        "reason": entry.reason.as_str(),
        "remainingMs": entry.remaining_ms(now.mono),
        "failureCount": entry.failure_count,
        "lockedAt": now.epoch_of(entry.locked_at),
        "until": now.epoch_of(entry.until),
    });
    v[field] = json!(key.model.name());
    v
}

/// The active lockouts of a connection, soonest expiry first.
pub fn lockouts(snapshot: &ConnSnapshot, now: &Now) -> Vec<Value> {
    snapshot
        .lockouts
        .active(now.mono)
        .into_iter()
        .map(|(key, entry)| lockout(key, entry, now))
        .collect()
}

/// Whether the connection's requests go through its request queue right now.
pub fn queue_active(
    provider: &ProviderHandle,
    conn: &ConnHandle,
    snapshot: &ConnSnapshot,
    settings: &ResilienceSettings,
) -> bool {
    admission::queue_enabled(
        provider.config.category,
        snapshot
            .rate_limit_protection
            .unwrap_or(conn.config.rate_limit_protection),
        settings.request_queue.auto_enable_apikey_providers,
        None,
    )
}

/// A coarse category of the last error, for dashboards.
fn error_category(snapshot: &ConnSnapshot) -> Option<&'static str> {
    let state = &snapshot.state;
    let category = match (state.error_code, state.last_error_type) {
        (Some(429), _) | (_, Some(FailureReason::RateLimitExceeded)) => "rate_limit",
        (Some(401 | 403), _) | (_, Some(FailureReason::AuthError)) => "auth",
        (Some(404), _) => "not_found",
        (Some(500..=599), _) | (_, Some(FailureReason::ServerError)) => "server",
        (None, None) => return None,
        _ => "other",
    };
    Some(category)
}

/// The cooldown manager's row of a connection (`GET /api/resilience/cooldowns`).
pub fn cooldown_row(conn: &ConnHandle, now: &Now) -> Value {
    let snapshot = conn.load();
    let state = &snapshot.state;
    let remaining = snapshot.cooldown_remaining(now.mono);
    json!({
        "id": &*conn.id,
        "provider": conn.config.provider,
        "status": ConnClass::of(&snapshot, now).as_str(),
        "testStatus": state.status.as_str(),
        "terminal": snapshot.terminal().map(|t| t.as_str()),
        "cooldownRemainingMs": remaining,
        "rateLimitedUntil": state.rate_limited_until.filter(|_| remaining > 0).map(|t| now.epoch_of(t)),
        "backoffLevel": state.backoff_level,
        "lastErrorType": state.last_error_type.map(FailureReason::as_str),
        "lastStatus": state.error_code,
        "lastErrorAt": state.last_error_at.map(|t| now.epoch_of(t)),
        "disableCooling": conn.config.disable_cooling,
        "lockouts": lockouts(&snapshot, now),
    })
}

/// The full per-connection view (`GET /api/resilience/connections`).
pub fn connection_row(
    provider: &ProviderHandle,
    conn: &ConnHandle,
    settings: &ResilienceSettings,
    now: &Now,
) -> Value {
    let snapshot = conn.load();
    let state = &snapshot.state;
    let breaker = provider.breaker.load();
    let breaker_retry = breaker.open_remaining(now.mono).unwrap_or(0);
    let remaining = snapshot.cooldown_remaining(now.mono);
    let class = ConnClass::of(&snapshot, now);
    let circuit_open = matches!(breaker.view, BreakerView::Open { until } if until > now.mono);
    let connection_status = match class {
        ConnClass::Terminal => "terminal",
        ConnClass::CoolingDown => "cooling_down",
        _ if circuit_open => "circuit_open",
        _ => "healthy",
    };
    let inflight = conn.inflight.load(Ordering::Relaxed);
    let cap = conn.gate.cap();
    let at_capacity = cap > 0 && inflight >= cap;
    let unavailable = match class {
        ConnClass::Terminal => Some("terminal"),
        ConnClass::CoolingDown => Some("cooling_down"),
        _ if circuit_open => Some("circuit_open"),
        _ if at_capacity => Some("at_capacity"),
        _ => None,
    };
    let last_used = conn.last_used_at.load(Ordering::Relaxed);
    let queue = queue_active(provider, conn, &snapshot, settings);
    let explicit = snapshot
        .rate_limit_protection
        .unwrap_or(conn.config.rate_limit_protection);
    json!({
        "id": &*conn.id,
        "provider": conn.config.provider,
        "authType": provider.config.category.as_str(),
        "priority": conn.config.priority,
        "weight": conn.config.weight,
        "isActive": true,
        "connectionStatus": connection_status,
        "status": class.as_str(),
        "testStatus": state.status.as_str(),
        "rateLimitedUntil": state.rate_limited_until.filter(|_| remaining > 0).map(|t| now.epoch_of(t)),
        "cooldownRemainingMs": remaining,
        "isCoolingDown": remaining > 0,
        "backoffLevel": state.backoff_level,
        "lastErrorType": state.last_error_type.map(FailureReason::as_str),
        "lastErrorAt": state.last_error_at.map(|t| now.epoch_of(t)),
        "lastStatus": state.error_code,
        "errorCode": error_category(&snapshot),
        "disableCooling": conn.config.disable_cooling,
        "breaker": {
            "state": breaker.view.state().as_str(),
            "failureCount": breaker.failure_count,
            "retryAfterMs": breaker_retry,
        },
        "lockouts": lockouts(&snapshot, now),
        "rotation": {
            "lastUsedAt": (last_used > 0).then(|| now.epoch_of(last_used)),
            "consecutiveUse": conn.consecutive_use.load(Ordering::Relaxed),
            "lastUsedOfProvider": provider.last_used_conn.load(Ordering::Relaxed) == conn.idx,
        },
        "availability": {
            "available": unavailable.is_none(),
            "reason": unavailable,
            "inFlight": inflight,
            "maxConcurrent": cap,
        },
        "rateLimitProtection": explicit,
        "queue": {
            "enabled": queue,
            "waiting": conn.queue.waiting(),
            "executing": conn.queue.executing(),
        },
    })
}

/// A breaker's health view: the actor's full status when it answered, else the published
/// snapshot (marked `stale`).
pub fn breaker(provider: &ProviderHandle, status: Option<&BreakerStatus>, now: &Now) -> Value {
    let inflight = provider.inflight.load(Ordering::Relaxed);
    match status {
        Some(s) => {
            let skip = s.transition_history.len().saturating_sub(HISTORY_SHOWN);
            let history: Vec<Value> = s
                .transition_history
                .iter()
                .skip(skip)
                .map(|t| {
                    json!({
                        "from": t.from.as_str(),
                        "to": t.to.as_str(),
                        "timestamp": now.epoch_of(t.at),
                        "failureCount": t.failure_count,
                        "reason": t.reason.as_str(),
                    })
                })
                .collect();
            json!({
                "provider": &*provider.id,
                "category": provider.config.category.as_str(),
                "state": s.state.as_str(),
                "failureCount": s.failure_count,
                "retryAfterMs": s.retry_after_ms,
                "lastFailure": s.last_failure_time.map(|t| now.epoch_of(t)),
                "lastFailureKind": s.last_failure_kind,
                "openCycleCount": s.open_cycle_count,
                "degradationThreshold": s.degradation_threshold,
                "effectiveResetTimeout": s.effective_reset_timeout,
                "openedAt": s.opened_at.map(|t| now.epoch_of(t)),
                "probesInFlight": s.probes_in_flight,
                "inFlight": inflight,
                "transitionHistory": history,
                "stale": false,
            })
        }
        None => {
            let b = provider.breaker.load();
            json!({
                "provider": &*provider.id,
                "category": provider.config.category.as_str(),
                "state": b.view.state().as_str(),
                "failureCount": b.failure_count,
                "retryAfterMs": b.open_remaining(now.mono).unwrap_or(0),
                "lastFailure": null,
                "lastFailureKind": null,
                "openCycleCount": null,
                "degradationThreshold": null,
                "effectiveResetTimeout": null,
                "openedAt": null,
                "probesInFlight": null,
                "inFlight": inflight,
                "transitionHistory": [],
                "stale": true,
            })
        }
    }
}

/// Asks every breaker actor for its status at once, each under the admin timeout; `None` for an
/// actor that did not answer.
pub async fn breaker_statuses(rt: &Runtime, now: &Now) -> Vec<Option<BreakerStatus>> {
    let asks = rt.table.providers.iter().map(|p| async move {
        let addr = p.actor.get()?;
        let reply = tokio::time::timeout(
            super::ACTOR_TIMEOUT,
            addr.send(crate::actors::GetBreakerStatus { at: now.mono }),
        )
        .await;
        match reply {
            Ok(Ok(status)) => Some(status),
            _ => None,
        }
    });
    futures_util::future::join_all(asks).await
}
