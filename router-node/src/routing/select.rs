//! Choosing a connection within a provider for one target.
//!
//! Eligibility reads only snapshots (cooldown, terminal status, model lockout, and with the
//! quota preflight on, the quota windows the connection's last answers reported) plus the
//! request's own exclusions and the API key's allowed connections. The session pin is consulted *after*
//! filtering (a cooling connection is never forced), then the provider's connection strategy
//! picks among the rest. Cost is proportional to this provider's connections only.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use switchyard_shared::Millis;
use switchyard_shared::admission::{BlockedConnection, ConnectionBlock, CoolingScope};
use switchyard_shared::outcome::FailureReason;
use switchyard_shared::quota_preflight::Preflight;
use switchyard_shared::strategy::{self, Candidate, SelectCtx, Strategy, stable_hash};

use crate::actors::{ConnHandle, ProviderHandle};
use crate::runtime::RoutingTable;

/// The eligible connections of a target and why the others were left out.
#[derive(Debug, Default)]
pub struct Eligibility {
    pub candidates: Vec<Candidate>,
    pub blocked: Vec<BlockedConnection>,
    pub not_allowed: usize,
    pub total: usize,
    /// How many of `blocked` the quota preflight cut off (their reported quota window is
    /// nearly spent).
    pub quota_cut: usize,
    /// Connections this request's own failures left out (the in-request exhaustion).
    pub excluded: usize,
}

/// A block this request's own failure raised on a connection, in force for the request's
/// next choice even before the connection's actor has applied it to the snapshot (the egress
/// sibling lock, the failing connection's own cooldown or model lockout): RESILIENCE.md, "state
/// raised by an attempt is in force for the same request's next choice".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingBlock {
    pub conn: usize,
    /// Node clock.
    pub until: Millis,
    pub scope: CoolingScope,
    /// For a [`CoolingScope::Model`] block, the model it locks.
    pub model: Option<Arc<str>>,
    pub reason: FailureReason,
}

impl PendingBlock {
    /// The remaining block on `conn` for `model`, if any.
    fn remaining<'a>(
        pending: &'a [Self],
        conn: usize,
        model: &str,
        now: Millis,
    ) -> Option<&'a Self> {
        pending.iter().find(|b| {
            b.conn == conn
                && b.until > now
                && (b.scope == CoolingScope::Connection || b.model.as_deref() == Some(model))
        })
    }
}

/// Filters `provider`'s connections for `model`. `leased`: the request holds an exclusive
/// session lease, so connections reserved for leases are not left out. `pending`: blocks this
/// request raised that a snapshot may not show yet.
#[allow(clippy::too_many_arguments)]
pub fn eligible(
    rt: &RoutingTable,
    provider: &ProviderHandle,
    model: &str,
    pinned: Option<&str>,
    allowed: &[String],
    leased: bool,
    excluded: &[usize],
    pending: &[PendingBlock],
    now: Millis,
) -> Eligibility {
    let mut out = Eligibility::default();
    for &cidx in &provider.connections {
        let Some(conn) = rt.connections.get(cidx) else {
            continue;
        };
        if pinned.is_some_and(|p| p != &*conn.id) {
            continue;
        }
        out.total += 1;
        if !allowed.is_empty() && !allowed.iter().any(|a| a.as_str() == &*conn.id) {
            out.not_allowed += 1;
            continue;
        }
        // Connections reserved for exclusive leases serve leased requests only.
        if !leased && rt.leases.is_managed(&conn.id) {
            out.not_allowed += 1;
            continue;
        }
        if excluded.contains(&cidx) {
            out.excluded += 1;
            continue;
        }
        let snap = conn.load();
        if let Some(status) = snap.terminal() {
            out.blocked.push(BlockedConnection {
                connection: conn.id.to_string(),
                block: ConnectionBlock::Terminal(status),
            });
            continue;
        }
        // A block this request raised wins over a snapshot that does not show it yet.
        if let Some(b) = PendingBlock::remaining(pending, cidx, model, now)
            && (b.scope == CoolingScope::Model || snap.cooldown_remaining(now) < b.until - now)
        {
            out.blocked.push(BlockedConnection {
                connection: conn.id.to_string(),
                block: ConnectionBlock::Cooling {
                    remaining_ms: b.until - now,
                    scope: b.scope,
                    reason: b.reason,
                },
            });
            continue;
        }
        let remaining = snap.cooldown_remaining(now);
        if remaining > 0 {
            out.blocked.push(BlockedConnection {
                connection: conn.id.to_string(),
                block: ConnectionBlock::Cooling {
                    remaining_ms: remaining,
                    scope: CoolingScope::Connection,
                    reason: snap
                        .state
                        .last_error_type
                        .unwrap_or(FailureReason::RateLimitExceeded),
                },
            });
            continue;
        }
        let model_ref = provider.model_ref(&conn.id, model);
        if let Some(lock) = snap.model_lock(&model_ref, now) {
            out.blocked.push(BlockedConnection {
                connection: conn.id.to_string(),
                block: ConnectionBlock::Cooling {
                    remaining_ms: lock.remaining_ms(now),
                    scope: CoolingScope::Model,
                    reason: lock_failure_reason(lock.reason),
                },
            });
            continue;
        }
        // The quota preflight (`[quota_preflight] enabled`): a window the last answers
        // reported as nearly spent keeps the connection out until that window resets.
        if let Some(thresholds) = &provider.quota_preflight
            && let Preflight::Cutoff { until, .. } = conn.quota_preflight(thresholds, now)
        {
            out.blocked.push(BlockedConnection {
                connection: conn.id.to_string(),
                block: ConnectionBlock::Cooling {
                    remaining_ms: until.saturating_sub(now).max(1),
                    scope: CoolingScope::Connection,
                    reason: FailureReason::QuotaExhausted,
                },
            });
            out.quota_cut += 1;
            continue;
        }
        out.candidates
            .push(candidate(conn, provider, snap.state.backoff_level, now));
    }
    out
}

fn lock_failure_reason(reason: switchyard_shared::lockout::LockReason) -> FailureReason {
    use switchyard_shared::lockout::LockReason as L;
    match reason {
        L::RateLimited => FailureReason::RateLimitExceeded,
        L::QuotaExhausted => FailureReason::QuotaExhausted,
        L::ServerError => FailureReason::ServerError,
        L::ModelCapacity => FailureReason::ModelCapacity,
        L::Forbidden => FailureReason::AuthError,
        L::NotFound | L::QualityFailure | L::Unknown => FailureReason::Unknown,
    }
}

/// The strategy view of a connection, with its observed latency, last success and quota.
fn candidate(
    conn: &ConnHandle,
    provider: &ProviderHandle,
    backoff_level: u32,
    now: Millis,
) -> Candidate {
    let last = conn.last_used_at.load(Ordering::Relaxed);
    let mut c = Candidate {
        priority: conn.config.priority,
        weight: conn.config.weight,
        in_flight: conn.inflight.load(Ordering::Relaxed),
        last_used_at: (last > 0).then_some(last),
        consecutive_use_count: conn.consecutive_use.load(Ordering::Relaxed),
        backoff_level,
        cost: provider.config.cost_per_1k_tokens,
        ..Candidate::new(conn.idx, stable_hash(conn.id.as_bytes()))
    };
    conn.fill_candidate(&mut c, now);
    c
}

/// Picks one candidate: the session pin when it is eligible, else the provider's strategy.
pub fn pick(
    rt: &RoutingTable,
    provider: &ProviderHandle,
    candidates: &[Candidate],
    session: Option<&str>,
    fallback: bool,
    now: Millis,
) -> Option<Arc<ConnHandle>> {
    if let Some(session) = session
        && let Some(pinned) = rt.affinity.get(provider.idx, session, now)
        && candidates.iter().any(|c| c.index == pinned)
    {
        return rt.connections.get(pinned).cloned();
    }
    let strategy = Strategy::from(provider.config.connection_strategy);
    let mut ctx = SelectCtx::new(now);
    ctx.sticky_limit = provider.config.sticky_round_robin_limit;
    ctx.fallback = fallback;
    ctx.cache_key = session.map(|k| stable_hash(k.as_bytes()));
    let idx = match provider.strategy_state.lock() {
        Ok(mut state) => strategy::pick(strategy, candidates, &mut state, &ctx, &mut rand::rng()),
        // A poisoned lock only loses selection memory; select with a fresh state.
        Err(_) => strategy::pick(
            strategy,
            candidates,
            &mut strategy::StrategyState::new(),
            &ctx,
            &mut rand::rng(),
        ),
    }?;
    rt.connections.get(idx).cloned()
}

/// Fills a combo target's strategy inputs from its provider's connections: the best any of
/// them shows (the lowest known latency, the latest success, the most quota left), since the
/// target is served by whichever of them the connection strategy then picks.
pub fn fill_target(rt: &RoutingTable, provider: &ProviderHandle, c: &mut Candidate, now: Millis) {
    for conn in provider
        .connections
        .iter()
        .filter_map(|&i| rt.connections.get(i))
    {
        let mut seen = Candidate::new(c.index, c.id_hash);
        conn.fill_candidate(&mut seen, now);
        c.latency_ms = match (c.latency_ms, seen.latency_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        c.last_success_at = c.last_success_at.max(seen.last_success_at);
        c.quota = match (c.quota, seen.quota) {
            (Some(a), Some(b)) if b.remaining > a.remaining => Some(b),
            (a, b) => a.or(b),
        };
    }
}
