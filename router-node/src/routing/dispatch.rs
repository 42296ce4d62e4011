//! The request path over targets and connections, with fallback and cooldown-aware waits.
//!
//! Per target, the steps of [`super::pipeline`]: breaker gate → connection selection → lease
//! fence → request-queue admission and concurrency gates → upstream attempt → outcome. A
//! retryable failure excludes the connection for this request and tries the next one, then
//! the next target. When a whole pass dispatched nothing because of resilience timers, the
//! request may wait for the earliest one (within the configured budgets) and try again;
//! otherwise it ends with an error that lists every target's skip reason.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use actix_web::http::header::{HeaderName, HeaderValue};
use switchyard_shared::Millis;
use switchyard_shared::breaker::{BreakerView, ProbeGeneration};
use switchyard_shared::config::{Resolved, Target};
use switchyard_shared::strategy::{self, Candidate, SelectCtx, Strategy, stable_hash};

use super::pipeline::{self, Permits, RequestCtx};
use super::report::Report;
use super::select;
use super::terminal;
use super::translation::Translation;
use crate::actors::{ConnHandle, ProviderHandle};
use crate::api::auth::ClientKey;
use crate::api::body::ParsedBody;
use crate::api::errors::{ClientFormat, GatewayError};
use crate::runtime::RoutingTable;
use crate::upstream::{CommittedStream, JsonSuccess, UpstreamWait};

/// Default global cap of attempts for one request (the reference's `MAX_GLOBAL_ATTEMPTS`).
const DEFAULT_MAX_ATTEMPTS: u32 = 30;

/// A request as routing sees it.
#[derive(Debug)]
pub struct RouteRequest {
    pub format: ClientFormat,
    pub body: ParsedBody,
    /// The authenticated client key and its policy (`None` for an anonymous client).
    pub key: Option<Arc<ClientKey>>,
    pub session: Option<String>,
    pub forward_headers: Vec<(HeaderName, HeaderValue)>,
    /// Time spent waiting on upstream attempts, for the gateway-overhead metric.
    pub upstream_wait: UpstreamWait,
    /// An exclusive session lease this request claims: it is pinned to the lease's connection
    /// and fenced before every dispatch.
    pub lease: Option<crate::leases::LeaseClaim>,
    /// Connections (by index) this request may not use at all: a mid-stream continuation
    /// leaves out the connections that already served the stream it continues.
    pub excluded_connections: Vec<usize>,
}

impl RouteRequest {
    /// The client key's id, for logs and metrics.
    pub fn key_id(&self) -> Option<&str> {
        self.key.as_deref().map(|k| k.id.as_str())
    }

    /// The connections the key may use (`[]` = all); a leased request only its lease's (which
    /// a move may change during the request, hence owned).
    pub fn allowed_connections(&self) -> std::borrow::Cow<'_, [String]> {
        if let Some(lease) = &self.lease {
            return std::borrow::Cow::Owned(vec![lease.connection()]);
        }
        std::borrow::Cow::Borrowed(
            self.key
                .as_deref()
                .map_or(&[], |k| k.allowed_connections.as_slice()),
        )
    }
}

/// What came back from upstream.
pub enum RoutedBody {
    Json(JsonSuccess),
    Stream(CommittedStream),
}

/// `own` plus every side call's usage, field by field (what the whole request cost).
pub fn with_side_usage(
    own: Option<switchyard_shared::sse::Usage>,
    calls: &[SideCall],
) -> Option<switchyard_shared::sse::Usage> {
    let mut total = own;
    for call in calls {
        super::multi_call::prompt::add_usage(&mut total, Some(&call.usage));
    }
    total
}

/// A successful dispatch, holding its permits until the response is finished.
pub struct Routed {
    pub body: RoutedBody,
    pub conn: Arc<ConnHandle>,
    pub provider: Arc<ProviderHandle>,
    pub model: Arc<str>,
    pub target: String,
    pub attempts: u32,
    /// The half-open probe this attempt was, already settled by its reported success.
    pub probe: Option<ProbeGeneration>,
    pub permits: Permits,
    /// Set when the client's format differs from the provider's: the answer is translated.
    pub translation: Option<Translation>,
    /// The other upstream calls a multi-call combo made for this answer, booked on their own
    /// connections when the answer is (empty for every other request).
    pub side_calls: Vec<SideCall>,
}

/// One upstream call that answered a multi-call combo's intermediate step (a fusion panel
/// member, an earlier pipeline step): its usage belongs to its own connection, not to the
/// connection that answered the client.
#[derive(Clone)]
pub struct SideCall {
    pub provider: Arc<ProviderHandle>,
    pub connection: Arc<str>,
    pub model: Arc<str>,
    pub usage: switchyard_shared::sse::Usage,
}

impl std::fmt::Debug for SideCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SideCall")
            .field("provider", &self.provider.id)
            .field("connection", &self.connection)
            .field("model", &self.model)
            .field("usage", &self.usage)
            .finish()
    }
}

/// Routes a request to completion of its dispatch (for streams: to the commit point). A combo
/// with `combo_timeout_ms` gets 504 `COMBO_TIMEOUT` when the whole dispatch takes longer.
pub async fn route(rt: &RoutingTable, req: &RouteRequest) -> Result<Routed, GatewayError> {
    let resolved = rt
        .index
        .resolve(&req.body.model)
        .map_err(terminal::resolve_error)?;
    let is_combo = matches!(resolved, Resolved::Combo(_));
    let session_key = match &resolved {
        Resolved::Combo(c) => req.session.as_deref().map(|s| session_pin_key(&c.name, s)),
        Resolved::Direct(_) => None,
    };
    let result = match &resolved {
        Resolved::Combo(c) if c.options.combo_timeout_ms > 0 => {
            let combo_timeout = c.options.combo_timeout_ms;
            let limit = Duration::from_millis(combo_timeout);
            match tokio::time::timeout(limit, route_resolved(rt, req, resolved)).await {
                Ok(result) => result,
                Err(_) => Err(terminal::combo_timeout(combo_timeout)),
            }
        }
        _ => route_resolved(rt, req, resolved).await,
    };
    if let Some(key) = session_key {
        record_session_outcome(rt, key, result.is_ok());
    }
    match result {
        Ok(routed) => Ok(routed),
        // The global fallback model (combos) or the emergency fallback (direct requests).
        Err(e) => super::last_resort::after_failure(rt, req, is_combo, e).await,
    }
}

pub(super) async fn route_resolved(
    rt: &RoutingTable,
    req: &RouteRequest,
    resolved: Resolved,
) -> Result<Routed, GatewayError> {
    // `fusion` and `pipeline` call several targets per request instead of ordering them.
    if let Resolved::Combo(c) = &resolved
        && c.strategy.is_multi_call()
    {
        return super::multi_call::route(rt, req, c.clone()).await;
    }
    let target_timeout_ms = match &resolved {
        Resolved::Combo(c) => c.options.timeout_ms,
        Resolved::Direct(_) => 0,
    };
    let (targets, strategy, combo, max_attempts) = match &resolved {
        Resolved::Direct(t) => (vec![t.clone()], None, None, DEFAULT_MAX_ATTEMPTS),
        Resolved::Combo(c) => (
            c.targets.clone(),
            Some(c.strategy),
            Some(c.name.clone()),
            if c.options.max_attempts == 0 {
                DEFAULT_MAX_ATTEMPTS
            } else {
                c.options.max_attempts
            },
        ),
    };
    // A combo's same-target retries, and the deadline their delays must stay inside (the
    // combo timeout `route` put around this call, started just before it).
    let (max_retries, retry_delay_ms, deadline) = match &resolved {
        Resolved::Combo(c) => (
            c.options.max_retries,
            c.options.retry_delay_ms,
            (c.options.combo_timeout_ms > 0)
                .then(|| rt.clock.now().saturating_add(c.options.combo_timeout_ms)),
        ),
        Resolved::Direct(_) => (0, 0, None),
    };
    let mut rc = RequestCtx {
        pending_blocks: Vec::new(),
        is_combo: combo.is_some(),
        max_attempts,
        target_timeout_ms,
        max_retries,
        retry_delay_ms,
        deadline,
        excluded: req.excluded_connections.clone(),
        exhausted: req.excluded_connections.clone(),
        report: Report {
            skips: Some(rt.metrics.skips()),
            ..Report::default()
        },
        reopens: 0,
        quota_share: strategy == Some(Strategy::QuotaShare),
        relay: super::relay::RelayCtx::for_request(rt, req, &resolved),
    };
    let mut waits = 0u32;
    let mut waited_ms: Millis = 0;
    loop {
        let cache_key = req.session.as_deref().map(|k| {
            let hash = stable_hash(k.as_bytes());
            match (&combo, rt.combo_sessions.lock()) {
                (Some(name), Ok(pins)) => pins.cache_key(session_pin_key(name, k), hash),
                _ => hash,
            }
        });
        let mut order = order_targets(rt, &targets, strategy, combo.as_deref(), cache_key);
        super::relay::home_first(rc.relay.as_ref(), &targets, &mut order);
        for ti in order {
            let Some(target) = targets.get(ti) else {
                continue;
            };
            if rc.report.attempts >= max_attempts {
                return Err(terminal::max_attempts(&rc.report));
            }
            if let Some(routed) = pipeline::run_target(rt, req, &mut rc, target).await? {
                // Last-known-good memory of the combo (lkgp and friends).
                if let Some(Ok(mut state)) = combo
                    .as_ref()
                    .and_then(|n| rt.combo_state.get(n))
                    .map(|s| s.lock())
                {
                    state.record_success(stable_hash(target_key(target).as_bytes()));
                }
                return Ok(super::relay::on_served(rt, &mut rc, routed));
            }
        }
        // Nothing succeeded in this pass: wait for a cooldown, or give up with every reason.
        match terminal::after_pass(rt, &rc.report, rc.is_combo, strategy, waits, waited_ms) {
            terminal::AfterPass::Wait(ms) => {
                waits += 1;
                waited_ms += ms;
                tokio::time::sleep(Duration::from_millis(ms)).await;
                // The exhaustion set holds for the whole request; the rest may serve again.
                rc.excluded.clone_from(&rc.exhausted);
                rc.report.new_pass();
            }
            terminal::AfterPass::Fail(e) => return Err(e),
        }
    }
}

/// The key of a session's pin on one combo.
fn session_pin_key(combo: &str, session: &str) -> u64 {
    stable_hash(format!("{combo}\0{session}").as_bytes())
}

/// Counts a combo request's outcome for its session: after
/// [`switchyard_shared::strategy::COMBO_FAILURE_THRESHOLD`] consecutive failures the
/// session's pin is cleared (re-seeded).
fn record_session_outcome(rt: &RoutingTable, key: u64, ok: bool) {
    let Ok(mut pins) = rt.combo_sessions.lock() else {
        return;
    };
    if ok {
        pins.record_success(key);
    } else if pins.record_failure(key) {
        rt.metrics.session_pin_cleared();
        tracing::debug!("session pin cleared after consecutive combo failures");
    }
}

/// `provider/model` of a target.
pub fn target_key(t: &Target) -> String {
    // Joined by hand: `format!` runs the formatting machinery on every request.
    let mut key = String::with_capacity(t.provider.len() + 1 + t.model.len());
    key.push_str(&t.provider);
    key.push('/');
    key.push_str(&t.model);
    key
}

/// The order in which to try targets: the combo's strategy, or the single direct target.
fn order_targets(
    rt: &RoutingTable,
    targets: &[Target],
    strategy: Option<Strategy>,
    combo: Option<&str>,
    cache_key: Option<u64>,
) -> Vec<usize> {
    let Some(strategy) = strategy else {
        return (0..targets.len()).collect();
    };
    let now = rt.clock.now();
    let candidates: Vec<Candidate> = targets
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let provider = rt.provider(&t.provider);
            let mut c = Candidate {
                priority: u32::try_from(i).unwrap_or(u32::MAX),
                weight: t.weight,
                in_flight: provider.map_or(0, |p| p.inflight.load(Ordering::Relaxed)),
                cost: provider.and_then(|p| p.config.cost_per_1k_tokens),
                healthy: provider
                    .is_none_or(|p| !matches!(p.breaker.load().view, BreakerView::Open { .. })),
                ..Candidate::new(i, stable_hash(target_key(t).as_bytes()))
            };
            if let Some(p) = provider {
                select::fill_target(rt, p, &mut c, now);
            }
            // quota-share balances the members' own load against their caps.
            if strategy == Strategy::QuotaShare {
                (c.in_flight, c.max_concurrent) = super::quota_share::member_load(rt, t);
                c.id_hash = super::quota_share::member_hash(t);
            }
            c
        })
        .collect();
    let mut ctx = SelectCtx::new(now);
    // cache-optimized: the session / prompt-cache key pins a request to its target.
    ctx.cache_key = cache_key;
    let mut out = Vec::with_capacity(candidates.len());
    let state = combo.and_then(|c| rt.combo_state.get(c));
    match state.map(|s| s.lock()) {
        Some(Ok(mut s)) => strategy::order(
            strategy,
            &candidates,
            &mut s,
            &ctx,
            &mut rand::rng(),
            &mut out,
        ),
        _ => strategy::order(
            strategy,
            &candidates,
            &mut strategy::StrategyState::new(),
            &ctx,
            &mut rand::rng(),
            &mut out,
        ),
    }
    out
}
