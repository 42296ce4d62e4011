//! The request path over targets and connections, with fallback and cooldown-aware waits.
//!
//! Per target: breaker gate → connection selection → request-queue admission → concurrency
//! gates (connection → model) → upstream attempt → outcome. A retryable failure excludes the
//! connection for this request and tries the next one, then the next target. When a whole pass
//! dispatched nothing because of resilience timers, the request may wait for the earliest one
//! (within the configured budgets) and try again; otherwise it ends with an error that lists
//! every target's skip reason.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use actix_web::http::header::{HeaderName, HeaderValue};
use switchyard_shared::Millis;
use switchyard_shared::admission::Rejection;
use switchyard_shared::breaker::{Admission, BreakerView, ProbeGeneration};
use switchyard_shared::config::{Resolved, Target};
use switchyard_shared::outcome::RetryClass;
use switchyard_shared::strategy::{self, Candidate, SelectCtx, Strategy, stable_hash};
use tokio::sync::OwnedSemaphorePermit;

use super::observe;
use super::report::{Report, TargetSkip};
use super::select;
use super::terminal;
use super::translation::{self, Translation};
use crate::actors::AdmitProbe;
use crate::http::auth::ClientKey;
use crate::http::body::ParsedBody;
use crate::http::errors::{ClientFormat, GatewayError};
use crate::metrics::UpstreamWait;
use crate::metrics::labels::FallbackReason;
use crate::runtime::Runtime;
use crate::state::{ConnHandle, ProviderHandle, QueuePermit};
use crate::upstream::{self, AttemptRequest, AttemptResult, CommittedStream, JsonSuccess};

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
}

impl RouteRequest {
    /// The client key's id, for logs and metrics.
    pub fn key_id(&self) -> Option<&str> {
        self.key.as_deref().map(|k| k.id.as_str())
    }

    /// The connections the key may use (`[]` = all); a leased request only its lease's.
    pub fn allowed_connections(&self) -> &[String] {
        if let Some(lease) = &self.lease {
            return std::slice::from_ref(&lease.connection);
        }
        self.key
            .as_deref()
            .map_or(&[], |k| k.allowed_connections.as_slice())
    }
}

/// What came back from upstream.
pub enum RoutedBody {
    Json(JsonSuccess),
    Stream(CommittedStream),
}

/// A successful dispatch, holding its permits until the response is finished.
pub struct Routed {
    pub body: RoutedBody,
    pub conn: Arc<ConnHandle>,
    pub provider: Arc<ProviderHandle>,
    pub model: Arc<str>,
    pub target: String,
    pub attempts: u32,
    pub probe: Option<ProbeGeneration>,
    pub permits: Permits,
    /// Set when the client's format differs from the provider's: the answer is translated.
    pub translation: Option<Translation>,
}

/// Permits and in-flight counts of one dispatched attempt, released exactly once on drop.
pub struct Permits {
    _conn: Option<OwnedSemaphorePermit>,
    _model: Option<OwnedSemaphorePermit>,
    _queue: Option<QueuePermit>,
    conn: Arc<ConnHandle>,
    provider: Arc<ProviderHandle>,
}

impl Drop for Permits {
    fn drop(&mut self) {
        self.conn.inflight.fetch_sub(1, Ordering::AcqRel);
        self.provider.inflight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Routes a request to completion of its dispatch (for streams: to the commit point). A combo
/// with `combo_timeout_ms` gets 504 `COMBO_TIMEOUT` when the whole dispatch takes longer.
pub async fn route(rt: &Arc<Runtime>, req: &RouteRequest) -> Result<Routed, GatewayError> {
    let resolved = rt
        .index
        .resolve(&req.body.model)
        .map_err(terminal::resolve_error)?;
    let combo_timeout = match &resolved {
        Resolved::Combo(c) if c.options.combo_timeout_ms > 0 => c.options.combo_timeout_ms,
        _ => return route_resolved(rt, req, resolved).await,
    };
    let limit = Duration::from_millis(combo_timeout);
    match tokio::time::timeout(limit, route_resolved(rt, req, resolved)).await {
        Ok(result) => result,
        Err(_) => Err(terminal::combo_timeout(combo_timeout)),
    }
}

async fn route_resolved(
    rt: &Arc<Runtime>,
    req: &RouteRequest,
    resolved: Resolved,
) -> Result<Routed, GatewayError> {
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
    let is_combo = combo.is_some();
    let mut report = Report {
        skips: Some(rt.metrics.skips()),
        ..Report::default()
    };
    let mut excluded: Vec<usize> = Vec::new();
    let mut waits = 0u32;
    let mut waited_ms: Millis = 0;
    loop {
        let cache_key = req.session.as_deref().map(|k| stable_hash(k.as_bytes()));
        let order = order_targets(rt, &targets, strategy, combo.as_deref(), cache_key);
        for ti in order {
            let Some(target) = targets.get(ti) else {
                continue;
            };
            if report.attempts >= max_attempts {
                return Err(terminal::max_attempts(&report));
            }
            if let Some(routed) = try_target(
                rt,
                req,
                target,
                is_combo,
                max_attempts,
                target_timeout_ms,
                &mut excluded,
                &mut report,
            )
            .await?
            {
                // Last-known-good memory of the combo (lkgp and friends).
                if let Some(Ok(mut state)) = combo
                    .as_ref()
                    .and_then(|n| rt.combo_state.get(n))
                    .map(|s| s.lock())
                {
                    state.record_success(stable_hash(target_key(target).as_bytes()));
                }
                return Ok(routed);
            }
        }
        // Nothing succeeded in this pass: wait for a cooldown, or give up with every reason.
        match terminal::after_pass(rt, &report, is_combo, strategy, waits, waited_ms) {
            terminal::AfterPass::Wait(ms) => {
                waits += 1;
                waited_ms += ms;
                tokio::time::sleep(Duration::from_millis(ms)).await;
                excluded.clear();
                report.new_pass();
            }
            terminal::AfterPass::Fail(e) => return Err(e),
        }
    }
}

/// `provider/model` of a target.
pub fn target_key(t: &Target) -> String {
    format!("{}/{}", t.provider, t.model)
}

/// The order in which to try targets: the combo's strategy, or the single direct target.
fn order_targets(
    rt: &Runtime,
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
            Candidate {
                priority: u32::try_from(i).unwrap_or(u32::MAX),
                weight: t.weight,
                in_flight: provider.map_or(0, |p| p.inflight.load(Ordering::Relaxed)),
                cost: provider.and_then(|p| p.config.cost_per_1k_tokens),
                healthy: provider
                    .is_none_or(|p| !matches!(p.breaker.load().view, BreakerView::Open { .. })),
                ..Candidate::new(i, stable_hash(target_key(t).as_bytes()))
            }
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

/// Tries one target over its eligible connections. `Ok(None)`: move on (reasons recorded).
#[allow(clippy::too_many_arguments)]
async fn try_target(
    rt: &Arc<Runtime>,
    req: &RouteRequest,
    target: &Target,
    is_combo: bool,
    max_attempts: u32,
    target_timeout_ms: Millis,
    excluded: &mut Vec<usize>,
    report: &mut Report,
) -> Result<Option<Routed>, GatewayError> {
    let key = target_key(target);
    let Some(provider) = rt.provider(&target.provider).cloned() else {
        report.skip(&key, &target.provider, TargetSkip::NoConnections);
        return Ok(None);
    };
    let plan = translation::plan_for(req.format, &provider.config);
    // The body in the provider's wire format, once per target; a parameter that format cannot
    // carry is the client's error (400 naming it), whatever state the provider is in.
    let model: Arc<str> = target.model.clone();
    let (upstream_body, translation) = translation::upstream_body(
        req.format,
        plan,
        &req.body,
        &model,
        rt.clock.epoch_ms() / 1000,
        &switchyard_shared::translate::TranslateOptions {
            unknown_params: rt.config.translation.unknown_params,
            ..Default::default()
        },
    )?;
    // 0. The optional windowed provider cooldown (off by default).
    let now = rt.clock.now();
    if rt.settings.load().provider_cooldown.enabled
        && let Some(until) = rt
            .provider_cooldown
            .lock()
            .ok()
            .and_then(|t| t.cooling_until(&provider.id, None, now))
    {
        report.skip(
            &key,
            &provider.id,
            TargetSkip::ProviderCooldown {
                retry_after_ms: until - now,
            },
        );
        return Ok(None);
    }
    // 1. Provider breaker.
    let snap = **provider.breaker.load();
    let mut probe: Option<ProbeGeneration> = None;
    match snap.view {
        BreakerView::Closed | BreakerView::Degraded => {}
        BreakerView::Open { until } if until > now => {
            report.skip(
                &key,
                &provider.id,
                TargetSkip::CircuitOpen {
                    retry_after_ms: until - now,
                },
            );
            return Ok(None);
        }
        BreakerView::Open { .. } | BreakerView::HalfOpen => {
            let mut admission = admit_probe(&provider, now).await;
            if let Some(cluster) = &rt.cluster {
                let ttl = crate::cluster::probe::lease_ttl_ms(&provider);
                admission = crate::cluster::probe::admit(
                    cluster,
                    &provider,
                    &rt.actor_stats,
                    admission,
                    ttl,
                    now,
                )
                .await;
            }
            match admission {
                Admission::Allowed => {}
                Admission::Probe { generation } => probe = Some(generation),
                Admission::Rejected { retry_after_ms } => {
                    report.skip(
                        &key,
                        &provider.id,
                        TargetSkip::CircuitOpen { retry_after_ms },
                    );
                    return Ok(None);
                }
            }
        }
    }
    let mut gate_rejection: Option<TargetSkip> = None;
    let mut fallback = false;
    loop {
        // 2. Connection selection.
        let now = rt.clock.now();
        let elig = select::eligible(
            rt,
            &provider,
            &model,
            target.connection.as_deref(),
            req.allowed_connections(),
            req.lease.is_some(),
            excluded,
            now,
        );
        if elig.candidates.is_empty() {
            if let Some(g) = probe {
                crate::actors::release_probe(&provider, &rt.actor_stats, g, now);
            }
            let skip = if let Some(g) = gate_rejection.take() {
                g
            } else if report
                .last_failure
                .as_ref()
                .is_some_and(|f| f.target == key)
            {
                TargetSkip::Failed
            } else if elig.total == 0 {
                TargetSkip::NoConnections
            } else if elig.not_allowed == elig.total {
                TargetSkip::NotAllowed
            } else {
                TargetSkip::Blocked {
                    connections: elig.blocked,
                }
            };
            report.skip(&key, &provider.id, skip);
            return Ok(None);
        }
        let Some(conn) = select::pick(
            rt,
            &provider,
            &elig.candidates,
            req.session.as_deref(),
            fallback,
            now,
        ) else {
            report.skip(&key, &provider.id, TargetSkip::NoConnections);
            return Ok(None);
        };
        // 3. Request queue, 4. concurrency gates.
        let permits = match acquire(rt, &provider, &conn, &model).await {
            Ok(p) => p,
            Err(skip) => {
                rt.metrics.rejected(&skip);
                rt.metrics.fallback(FallbackReason::ConcurrencyCap);
                excluded.push(conn.idx);
                gate_rejection = Some(skip);
                fallback = true;
                continue;
            }
        };
        // 5. Dispatch.
        if report.attempts >= max_attempts {
            return Err(terminal::max_attempts(report));
        }
        report.attempts += 1;
        let previous = provider.last_used_conn.swap(conn.idx, Ordering::AcqRel);
        conn.mark_used(now, (previous != usize::MAX).then_some(previous));
        // The lease fence: a stale holder never reaches the provider.
        if let Some(lease) = &req.lease
            && let Err(e) = crate::leases::fence::check(rt, lease, &conn.id).await
        {
            if let Some(g) = probe {
                crate::actors::release_probe(&provider, &rt.actor_stats, g, rt.clock.now());
            }
            return Err(e);
        }
        let attempt_req = AttemptRequest {
            conn: conn.clone(),
            provider: provider.clone(),
            client_format: plan.wire,
            body: upstream_body.clone(),
            stream: req.body.stream,
            forward_headers: req.forward_headers.clone(),
            deadline_ms: earliest(
                attempt_deadline(rt, &provider, &conn, now),
                (target_timeout_ms > 0).then(|| now + target_timeout_ms),
            ),
            watch: rt.watch_config(&provider.config),
            clock: rt.clock,
        };
        let attempt = upstream::attempt_waiting(attempt_req, &req.upstream_wait);
        let timed = rt.metrics.time_attempt(provider.idx, attempt);
        let body = match timed.await {
            AttemptResult::Json(mut ok) => {
                if let Some(t) = &translation {
                    ok.body = translation::json_body(t, &ok.body)?;
                }
                Ok(RoutedBody::Json(ok))
            }
            AttemptResult::Stream(stream) => Ok(RoutedBody::Stream(stream)),
            AttemptResult::Failed(failure) => Err(failure),
        };
        match body {
            Ok(body) => {
                observe::on_success(rt, &provider, &conn, &model, probe, now);
                let mut routed = success(
                    rt, req, body, conn, provider, model, key, report, probe, permits,
                );
                routed.translation = translation.clone();
                return Ok(Some(routed));
            }
            Err(failure) => {
                drop(permits);
                let judged = observe::on_failure(
                    rt, &provider, &conn, &model, &key, &failure, probe, is_combo,
                );
                // A probe is used once: later attempts on this target go through the breaker again.
                let was_probe = probe.take().is_some();
                if let Some(session) = &req.session {
                    rt.affinity.evict(provider.idx, session);
                }
                report.last_failure = Some(judged.failure);
                let retryable = judged.classification.should_fallback
                    && judged.classification.retry != RetryClass::NotRetryable;
                if !retryable {
                    return Err(terminal::upstream_error(report));
                }
                rt.metrics.fallback(judged.classification.reason);
                excluded.push(conn.idx);
                fallback = true;
                let now = rt.clock.now();
                if was_probe {
                    // The snapshot still reads half-open until the actor applies this failure,
                    // so ask the actor itself: the admission queues behind the observation, sees
                    // a failed probe's reopened breaker, and stops the request here instead of
                    // letting it reach the provider's other connections unadmitted.
                    match admit_probe(&provider, now).await {
                        Admission::Allowed => {}
                        Admission::Probe { generation } => probe = Some(generation),
                        Admission::Rejected { .. } => {
                            report.skip(&key, &provider.id, TargetSkip::Failed);
                            return Ok(None);
                        }
                    }
                } else if let BreakerView::Open { until } = provider.breaker.load().view
                    && until > now
                {
                    // The breaker may have opened on this failure: re-check before the next
                    // connection.
                    report.skip(&key, &provider.id, TargetSkip::Failed);
                    return Ok(None);
                }
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn success(
    rt: &Runtime,
    req: &RouteRequest,
    body: RoutedBody,
    conn: Arc<ConnHandle>,
    provider: Arc<ProviderHandle>,
    model: Arc<str>,
    target: String,
    report: &Report,
    probe: Option<ProbeGeneration>,
    permits: Permits,
) -> Routed {
    if let Some(session) = &req.session {
        rt.affinity
            .pin(provider.idx, session, conn.idx, rt.clock.now());
    }
    if let Ok(mut s) = provider.strategy_state.lock() {
        s.record_success(stable_hash(conn.id.as_bytes()));
    }
    Routed {
        body,
        conn,
        provider,
        model,
        target,
        attempts: report.attempts,
        probe,
        permits,
        translation: None,
    }
}

async fn admit_probe(provider: &ProviderHandle, now: Millis) -> Admission {
    let Some(addr) = provider.actor.get() else {
        // No breaker actor (not started yet): fail open rather than refuse traffic.
        return Admission::Allowed;
    };
    match tokio::time::timeout(Duration::from_secs(2), addr.send(AdmitProbe { at: now })).await {
        Ok(Ok(admission)) => admission,
        _ => Admission::Rejected {
            retry_after_ms: 1000,
        },
    }
}

/// The absolute deadline of one attempt: the provider's attempt ceiling and, for queued
/// connections, the execution budget.
fn attempt_deadline(
    rt: &Runtime,
    provider: &ProviderHandle,
    conn: &ConnHandle,
    now: Millis,
) -> Option<Millis> {
    let mut deadline = None;
    if provider.config.timeouts.attempt_deadline_ms > 0 {
        deadline = Some(now + provider.config.timeouts.attempt_deadline_ms);
    }
    if queue_enabled(rt, provider, conn) {
        let budget = switchyard_shared::admission::execution_budget_ms(
            conn.queue.settings().execution_max_wait_ms,
            provider.config.timeouts.headers_ms,
        );
        let d = now + budget;
        deadline = Some(deadline.map_or(d, |x: Millis| x.min(d)));
    }
    deadline
}

fn queue_enabled(rt: &Runtime, provider: &ProviderHandle, conn: &ConnHandle) -> bool {
    let explicit = conn
        .load()
        .rate_limit_protection
        .unwrap_or(conn.config.rate_limit_protection);
    let settings = rt.settings.load();
    explicit
        || (provider.config.category == switchyard_shared::outcome::ProviderCategory::Apikey
            && settings.request_queue.auto_enable_apikey_providers)
}

fn earliest(a: Option<Millis>, b: Option<Millis>) -> Option<Millis> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Queue admission then the composite gate (connection → model). Global and provider caps are
/// not configured in this version; their place in the order is documented in `admission`.
async fn acquire(
    rt: &Runtime,
    provider: &Arc<ProviderHandle>,
    conn: &Arc<ConnHandle>,
    model: &str,
) -> Result<Permits, TargetSkip> {
    let queue = if queue_enabled(rt, provider, conn) {
        match conn.queue.admit(&rt.clock).await {
            Ok(p) => {
                // The local queue paced this node; the cluster bucket paces all nodes, within
                // what is left of the same wait budget.
                let q = conn.queue.settings();
                let left = q.max_wait_ms.saturating_sub(p.waited_ms);
                if let Err(e) =
                    crate::caps::rpm::pace_connection(rt, conn, q.requests_per_minute, left).await
                {
                    let timeout = switchyard_shared::admission::AdmissionError::QueueTimeout {
                        waited_ms: p.waited_ms.saturating_add(e.waited_ms),
                        max_wait_ms: q.max_wait_ms,
                    };
                    return Err(TargetSkip::Saturated {
                        code: timeout.code(),
                        status: timeout.status(),
                        error_type: timeout.error_type(),
                        retry_after_ms: Some(e.retry_after_ms),
                    });
                }
                rt.metrics.queue_waited(p.waited_ms);
                Some(p)
            }
            Err(e) => {
                return Err(TargetSkip::Saturated {
                    code: e.code(),
                    status: e.status(),
                    error_type: e.error_type(),
                    retry_after_ms: None,
                });
            }
        }
    } else {
        None
    };
    let (max_queue, timeout) = {
        let s = rt.settings.load();
        (
            s.concurrency.semaphore_max_queue,
            s.concurrency.semaphore_queue_timeout_ms,
        )
    };
    let gate_err = |e: switchyard_shared::admission::SemaphoreError| TargetSkip::Saturated {
        code: e.code(),
        status: e.status(),
        error_type: e.error_type(),
        retry_after_ms: None,
    };
    let conn_permit = conn
        .gate
        .acquire(max_queue, timeout)
        .await
        .map_err(gate_err)?;
    let model_permit = match conn.model_gates.get(model) {
        Some(g) => g.acquire(max_queue, timeout).await.map_err(gate_err)?,
        None => None,
    };
    conn.inflight.fetch_add(1, Ordering::AcqRel);
    provider.inflight.fetch_add(1, Ordering::AcqRel);
    Ok(Permits {
        _conn: conn_permit,
        _model: model_permit,
        _queue: queue,
        conn: conn.clone(),
        provider: provider.clone(),
    })
}
