//! Prometheus metrics of a node, served as text at `GET /metrics` on the admin listener.
//!
//! Operators need to see from outside what the resilience machinery is doing (breakers,
//! cooldowns, lockouts, queues, gates, fallbacks, watchdogs) and what the gateway itself costs
//! (its overhead on top of the upstream's time). Everything lives in one [`Registry`] owned
//! by the runtime, never in a global one, so tests and several runtimes in one process do not
//! share counters.
//!
//! Two kinds of families, chosen by who knows the value first:
//! - **Recorded on the request path** through handles resolved once when the runtime is
//!   built: a per-route array of counters, a per-provider set of histograms. A request does
//!   an array index and an atomic add, never a string format or a registry lookup (token
//!   usage adds one map lookup by model name) ([`Metrics`], [`RequestTimer`]).
//! - **Computed at scrape time** from the snapshots the actors publish and the atomics the hot
//!   path already keeps (`collector.rs`): breaker and connection state, lockouts, queue depth,
//!   in-flight permits, and the counters the actors keep on the handles ([`crate::counters`]).
//!
//! Conventions: the `switchyard_` prefix, base units (seconds, tokens), `_total` on counters,
//! and labels from closed sets only ([`labels`]): configured provider, connection and model
//! ids (an unconfigured model is `other`), route, status class and reason enums. No label
//! ever carries client text.
//!
//! # Gateway overhead
//!
//! `switchyard_gateway_overhead_seconds` is the time a request spent in the node minus the
//! time it spent waiting on upstreams, summed over its attempts (failed ones included) in the
//! request's [`UpstreamWait`]. The upstream wait is only the awaits on the upstream: from
//! handing the request to the HTTP client until the response head arrives, then reading the
//! body (JSON and error answers) or waiting for the first content event (streams). Building
//! the upstream request, checking and filtering the answer, and everything around the
//! attempts count as overhead. For a routed JSON answer or a routing error, the total runs
//! from the handler's start until actix has taken the response body for writing (the timer
//! travels with the body); for a stream it runs to the commit point, and relaying the rest
//! of the stream is paced by the upstream and is not counted. The overhead therefore
//! includes the node's own waits (request queue, concurrency gates, cooldown waits), which
//! also have their own families. What no timer in the process sees: the kernel's socket
//! work and the wake-up before actix reads the request, and the write of the response.

pub mod cluster;
mod collector;
pub use crate::counters::labels;
mod timed_body;

#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use std::time::{Duration, Instant};

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};
use switchyard_shared::Millis;
use switchyard_shared::config::Config;
use switchyard_shared::sse::Usage;

pub use crate::counters::{CooldownCounts, TransitionCounts};
pub use crate::upstream::wait::{UpstreamWait, WaitTimer};
pub use collector::StateCollector;
use labels::{
    AbortKind, AttemptFailureKind, FallbackReason, OTHER, QuotaShareWait, RejectionType, Route,
    SkipLabel, SkipReason, StatusClass, TokenType,
};

use crate::actors::ActorStats;
use crate::actors::{ConnHandle, ProviderHandle};
use crate::clock::Clock;
use crate::upstream::{AttemptResult, StreamEnd};

/// Buckets of request, upstream and time-to-first-content durations: 5 ms to 10 min (LLM
/// generations and streams run for minutes).
pub const LATENCY_BUCKETS: [f64; 16] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

/// Buckets of the gateway overhead: 10 µs resolution at the bottom, where a healthy node
/// sits (20–50 µs per JSON request on the benchmark machine), up to the seconds a cooldown
/// wait or a full queue can add.
pub const OVERHEAD_BUCKETS: [f64; 20] = [
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Buckets of the request-queue wait: 1 ms to a minute (the queue's wait budget range).
pub const QUEUE_WAIT_BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Skip counters, shared with each request's routing report.
#[derive(Debug)]
pub struct SkipCounters([IntCounter; SkipReason::COUNT]);

impl SkipCounters {
    /// Counts one skipped target.
    pub fn record(&self, skip: &impl SkipLabel) {
        if let Some(c) = self.0.get(SkipReason::of(skip).index()) {
            c.inc();
        }
    }
}

/// Token counters of one (provider, model), by [`TokenType`].
type TokenCounters = [IntCounter; TokenType::COUNT];

/// The request-path handles of one provider.
struct ProviderMetrics {
    upstream_duration: Histogram,
    /// Failed attempts, by [`AttemptFailureKind`].
    failures: [IntCounter; AttemptFailureKind::COUNT],
    time_to_first_content: Histogram,
    /// Configured models of the provider.
    tokens: HashMap<Box<str>, TokenCounters>,
    /// Every other model.
    other_tokens: TokenCounters,
}

/// The families with a provider label, kept to resolve the children of a reloaded config.
#[derive(Clone)]
struct ProviderFamilies {
    upstream_duration: HistogramVec,
    failures: IntCounterVec,
    ttfc: HistogramVec,
    tokens: IntCounterVec,
}

impl ProviderFamilies {
    /// The request path's handles of every provider, in the order of `providers`.
    fn resolve(
        &self,
        config: &Config,
        providers: &[Arc<ProviderHandle>],
    ) -> prometheus::Result<Vec<ProviderMetrics>> {
        let mut out = Vec::with_capacity(providers.len());
        for p in providers {
            let id = &*p.id;
            let model_tokens = |model: &str| {
                children(TokenType::labels(), |t| {
                    self.tokens.get_metric_with_label_values(&[id, model, t])
                })
            };
            let mut per_model = HashMap::new();
            for model in configured_models(config, id) {
                per_model.insert(Box::from(model), model_tokens(model)?);
            }
            out.push(ProviderMetrics {
                upstream_duration: self.upstream_duration.get_metric_with_label_values(&[id])?,
                failures: children(AttemptFailureKind::labels(), |k| {
                    self.failures.get_metric_with_label_values(&[id, k])
                })?,
                time_to_first_content: self.ttfc.get_metric_with_label_values(&[id])?,
                tokens: per_model,
                other_tokens: model_tokens(OTHER)?,
            });
        }
        Ok(out)
    }
}

/// The node's registry and the handles the request path records into.
pub struct Metrics {
    registry: Registry,
    requests: [[IntCounter; StatusClass::COUNT]; Route::COUNT],
    request_duration: [Histogram; Route::COUNT],
    overhead: [Histogram; Route::COUNT],
    providers: Vec<ProviderMetrics>,
    provider_families: ProviderFamilies,
    /// Token counters of each configured client key, by [`TokenType`].
    key_tokens: HashMap<Box<str>, TokenCounters>,
    key_tokens_family: IntCounterVec,
    queue_wait: Histogram,
    rejections: [IntCounter; RejectionType::COUNT],
    skips: Arc<SkipCounters>,
    fallbacks: [IntCounter; FallbackReason::COUNT],
    watchdog_aborts: [IntCounter; AbortKind::COUNT],
    in_flight: IntGauge,
    /// Lease operations by op and result (closed sets; never a token or connection id).
    lease_ops: IntCounterVec,
    /// Leases moved off an ineligible connection, by why (a closed set in `leases::policy`).
    lease_moves: IntCounterVec,
    /// 429s whose typed `RetryInfo` paced a connection or locked a model, by effect.
    body_retries: IntCounterVec,
    /// Last-resort dispatches (global fallback model, emergency fallback) by result.
    last_resorts: IntCounterVec,
    stream_recoveries: IntCounterVec,
    /// Quota-share serialisation at capped connections, by outcome (a closed set).
    quota_share_waits: [IntCounter; QuotaShareWait::COUNT],
    /// `context-relay` hand-offs by outcome.
    context_relays: IntCounterVec,
    /// Sessions' combo pins cleared after consecutive combo failures.
    session_pins_cleared: IntCounter,
    /// Egress siblings a quota or rate 429 was spread to, by the origin's provider.
    egress_sibling_locks: IntCounterVec,
    /// Claude OAuth usage-wall events (lane and session-limit reset), by connection.
    usage_wall_events: IntCounterVec,
    /// Cluster-wide `max_concurrent` permits this node holds, by configured connection.
    permits_held: IntGaugeVec,
    /// Permits in use that no valid grant covers (held past validity, or a fallback share).
    permits_over_cap: IntGaugeVec,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// Resolves one child per label value, in the order of `values`.
fn children<T, const N: usize>(
    values: [&str; N],
    get: impl Fn(&str) -> prometheus::Result<T>,
) -> prometheus::Result<[T; N]> {
    let resolved = values
        .iter()
        .map(|v| get(v))
        .collect::<prometheus::Result<Vec<T>>>()?;
    resolved
        .try_into()
        .map_err(|_| prometheus::Error::Msg("label value count mismatch".to_owned()))
}

fn histogram_vec(
    registry: &Registry,
    name: &str,
    help: &str,
    label: &str,
    buckets: &[f64],
) -> prometheus::Result<HistogramVec> {
    let vec = HistogramVec::new(
        HistogramOpts::new(name, help).buckets(buckets.to_vec()),
        &[label],
    )?;
    registry.register(Box::new(vec.clone()))?;
    Ok(vec)
}

fn counter_vec(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<IntCounterVec> {
    let vec = IntCounterVec::new(Opts::new(name, help), labels)?;
    registry.register(Box::new(vec.clone()))?;
    Ok(vec)
}

/// The token counters of every configured client key (a bounded set: keys come from the
/// config, never from a request).
fn resolve_key_tokens(
    family: &IntCounterVec,
    config: &Config,
) -> prometheus::Result<HashMap<Box<str>, TokenCounters>> {
    let mut out = HashMap::new();
    for key in &config.api_keys {
        let counters = children(TokenType::labels(), |t| {
            family.get_metric_with_label_values(&[&key.id, t])
        })?;
        out.insert(Box::from(key.id.as_str()), counters);
    }
    Ok(out)
}

/// Adds the token counts of `usage` to `counters`, in [`TokenType`] order.
fn count_tokens(counters: &TokenCounters, usage: &Usage) {
    let values = [
        usage.input,
        usage.output,
        usage.cache_read,
        usage.cache_creation,
    ];
    for (counter, value) in counters.iter().zip(values) {
        if let Some(n) = value.filter(|n| *n > 0) {
            counter.inc_by(n);
        }
    }
}

/// The models a provider's token counters are labelled with: its `models` list, the models
/// of combo targets on it and the models of its connections' model caps. Anything else a
/// client names (a provider with an empty list passes any model through) is `other`.
fn configured_models<'a>(config: &'a Config, provider: &'a str) -> BTreeSet<&'a str> {
    let mut out = BTreeSet::new();
    if let Some(p) = config.providers.iter().find(|p| p.id == provider) {
        out.extend(p.models.iter().map(String::as_str));
    }
    for target in config.combos.iter().flat_map(|c| &c.targets) {
        if let Some((p, model)) = target.target.split_once('/')
            && p == provider
        {
            out.insert(model);
        }
    }
    for conn in config.connections_of(provider) {
        out.extend(conn.model_concurrency.keys().map(String::as_str));
    }
    out.remove(OTHER);
    out
}

impl Metrics {
    /// Builds every family, resolves the request path's children and registers the
    /// scrape-time collector over `providers` and `connections`.
    pub fn new(
        config: &Config,
        providers: &[Arc<ProviderHandle>],
        connections: &[Arc<ConnHandle>],
        clock: Clock,
        actor_stats: Arc<ActorStats>,
    ) -> prometheus::Result<Self> {
        let registry = Registry::new();
        let r = &registry;

        let requests = counter_vec(
            r,
            "switchyard_requests_total",
            "Client requests by route and response status class.",
            &["route", "status_class"],
        )?;
        let requests = children(Route::labels(), |route| {
            children(StatusClass::labels(), |class| {
                requests.get_metric_with_label_values(&[route, class])
            })
        })?;
        let request_duration = histogram_vec(
            r,
            "switchyard_request_duration_seconds",
            "Client request duration, to the end of the body for streams.",
            "route",
            &LATENCY_BUCKETS,
        )?;
        let request_duration = children(Route::labels(), |route| {
            request_duration.get_metric_with_label_values(&[route])
        })?;
        let overhead = histogram_vec(
            r,
            "switchyard_gateway_overhead_seconds",
            "Time in the gateway minus time waiting on upstreams (streams: up to the commit point).",
            "route",
            &OVERHEAD_BUCKETS,
        )?;
        let overhead = children(Route::labels(), |route| {
            overhead.get_metric_with_label_values(&[route])
        })?;

        let upstream_duration = histogram_vec(
            r,
            "switchyard_upstream_request_duration_seconds",
            "Upstream attempt duration, failed attempts included; streams to their end.",
            "provider",
            &LATENCY_BUCKETS,
        )?;
        let ttfc = histogram_vec(
            r,
            "switchyard_upstream_time_to_first_content_seconds",
            "Time from the start of a streamed upstream attempt to its first content frame.",
            "provider",
            &LATENCY_BUCKETS,
        )?;
        let tokens = counter_vec(
            r,
            "switchyard_gen_ai_client_token_usage_total",
            "Tokens reported in upstream usage objects, by provider, configured model and type.",
            &["provider", "model", "token_type"],
        )?;
        let failures = counter_vec(
            r,
            "switchyard_upstream_attempt_failures_total",
            "Failed upstream attempts (before or after the commit point), by provider and kind.",
            &["provider", "kind"],
        )?;
        let provider_families = ProviderFamilies {
            upstream_duration,
            failures,
            ttfc,
            tokens,
        };
        let provider_metrics = provider_families.resolve(config, providers)?;
        let key_tokens_family = counter_vec(
            r,
            "switchyard_client_key_token_usage_total",
            "Tokens reported in upstream usage objects, by configured client key and type.",
            &["api_key", "token_type"],
        )?;
        let key_tokens = resolve_key_tokens(&key_tokens_family, config)?;

        let queue_wait = Histogram::with_opts(
            HistogramOpts::new(
                "switchyard_queue_wait_seconds",
                "Time admitted requests waited in a connection's request queue.",
            )
            .buckets(QUEUE_WAIT_BUCKETS.to_vec()),
        )?;
        r.register(Box::new(queue_wait.clone()))?;
        let rejections = counter_vec(
            r,
            "switchyard_semaphore_rejections_total",
            "Concurrency gate and request queue rejections by type.",
            &["type"],
        )?;
        let rejections = children(RejectionType::labels(), |t| {
            rejections.get_metric_with_label_values(&[t])
        })?;
        let skips = counter_vec(
            r,
            "switchyard_skips_total",
            "Targets skipped by routing, by reason.",
            &["reason"],
        )?;
        let skips = children(SkipReason::labels(), |s| {
            skips.get_metric_with_label_values(&[s])
        })?;
        let fallbacks = counter_vec(
            r,
            "switchyard_fallbacks_total",
            "Times a request moved on to another connection or target, by reason.",
            &["reason"],
        )?;
        let fallbacks = children(FallbackReason::labels(), |s| {
            fallbacks.get_metric_with_label_values(&[s])
        })?;
        let aborts = counter_vec(
            r,
            "switchyard_stream_watchdog_aborts_total",
            "Upstream streams ended by a watchdog, before or after the commit point, by kind.",
            &["kind"],
        )?;
        let watchdog_aborts = children(AbortKind::labels(), |k| {
            aborts.get_metric_with_label_values(&[k])
        })?;
        let in_flight = IntGauge::new(
            "switchyard_in_flight_requests",
            "Client requests in progress, streams until their body ends.",
        )?;
        r.register(Box::new(in_flight.clone()))?;
        let lease_ops = counter_vec(
            r,
            "switchyard_lease_operations_total",
            "Exclusive session lease operations (acquire, renew, release, claim, fence) by result.",
            &["op", "result"],
        )?;
        let lease_moves = counter_vec(
            r,
            "switchyard_lease_moves_total",
            "Exclusive session leases moved to another connection (same generation), by why the \
             leased connection became ineligible.",
            &["reason"],
        )?;
        let body_retries = counter_vec(
            r,
            "switchyard_body_retry_total",
            "429s with a typed RetryInfo delay, by effect: pace (the connection's queue paused) or model_lockout.",
            &["effect"],
        )?;
        let last_resorts = counter_vec(
            r,
            "switchyard_last_resort_total",
            "Last-resort dispatches after routing failed: kind global (a combo's 502/503 on global_fallback_model) or emergency (a direct request on the emergency target), result served or failed.",
            &["kind", "result"],
        )?;
        let stream_recoveries = counter_vec(
            r,
            "switchyard_stream_recoveries_total",
            "Stream recovery decisions ([resilience.stream_recovery]): kind reopen (a stream truncated inside the recovery hold), outcome reopened (the request went on to its next attempt) or exhausted (max_reopens reached, the request failed with 502 STREAM_RECOVERY_EXHAUSTED); kind continuation (a plain-text chat stream failed after the commit point), outcome continued, failed, exhausted (max_continuations reached) or refused.",
            &["kind", "outcome"],
        )?;
        let quota_share_waits = counter_vec(
            r,
            "switchyard_quota_share_waits_total",
            "Quota-share dispatches to a connection with max_concurrent, by outcome: acquired (a slot, at once or after waiting), timeout_proceeded / queue_full_proceeded (let past the line, fail-open, to wait for the connection's cap once more), timeout_rejected / queue_full_rejected (quota_share_fail_open = false: the connection was skipped).",
            &["outcome"],
        )?;
        let quota_share_waits = children(QuotaShareWait::labels(), |o| {
            quota_share_waits.get_metric_with_label_values(&[o])
        })?;
        let context_relays = counter_vec(
            r,
            "switchyard_context_relays_total",
            "Sessions of context-relay combos that moved to another connection with a conversation long enough to summarise, by outcome: summarised (the moved request carried the summary) or failed (the summariser failed or timed out; the conversation went unchanged).",
            &["outcome"],
        )?;
        let egress_sibling_locks = counter_vec(
            r,
            "switchyard_egress_sibling_locks_total",
            "Connections cooled with an egress sibling's quota or rate 429 (the [egress_lock] family), by the failing connection's provider.",
            &["provider"],
        )?;
        let usage_wall_events = counter_vec(
            r,
            "switchyard_usage_wall_events_total",
            "Claude OAuth usage-wall events by connection: the low-priority lane accepted, a slot wait, the lane blocked or ended (with its reason), and the session-limit reset's outcomes.",
            &["connection", "event"],
        )?;
        let session_pins_cleared = IntCounter::new(
            "switchyard_combo_session_pins_cleared_total",
            "Sessions whose pin to a combo's target order was cleared after 3 consecutive combo failures.",
        )?;
        r.register(Box::new(session_pins_cleared.clone()))?;
        let permits_held = IntGaugeVec::new(
            Opts::new(
                "switchyard_cluster_permits_held",
                "Cluster-wide max_concurrent permits this node holds, by connection.",
            ),
            &["connection"],
        )?;
        r.register(Box::new(permits_held.clone()))?;
        let permits_over_cap = IntGaugeVec::new(
            Opts::new(
                "switchyard_permits_over_cap",
                "Cluster-wide max_concurrent permits in use on this node that no valid grant covers, by connection.",
            ),
            &["connection"],
        )?;
        r.register(Box::new(permits_over_cap.clone()))?;
        r.register(Box::new(StateCollector::new(
            providers.to_vec(),
            connections.to_vec(),
            clock,
            actor_stats,
        )?))?;

        Ok(Self {
            registry,
            requests,
            request_duration,
            overhead,
            providers: provider_metrics,
            provider_families,
            key_tokens,
            key_tokens_family,
            queue_wait,
            rejections,
            skips: Arc::new(SkipCounters(skips)),
            fallbacks,
            watchdog_aborts,
            in_flight,
            lease_ops,
            lease_moves,
            body_retries,
            last_resorts,
            stream_recoveries,
            quota_share_waits,
            context_relays,
            session_pins_cleared,
            egress_sibling_locks,
            usage_wall_events,
            permits_held,
            permits_over_cap,
        })
    }

    /// Counts one lease moved off its connection; `reason` comes from a closed set.
    pub fn lease_moved(&self, reason: &str) {
        self.lease_moves.with_label_values(&[reason]).inc();
    }

    /// Counts one lease operation; `op` and `result` come from closed sets in `leases`.
    pub fn lease_op(&self, op: &str, result: &str) {
        self.lease_ops.with_label_values(&[op, result]).inc();
    }

    /// Counts a typed `RetryInfo` delay's effect (`pace` or `model_lockout`).
    pub fn body_retry(&self, effect: &str) {
        self.body_retries.with_label_values(&[effect]).inc();
    }

    /// Counts the egress siblings a quota or rate 429 on `provider` cooled.
    pub fn egress_sibling_locks(&self, provider: &str, count: usize) {
        self.egress_sibling_locks
            .with_label_values(&[provider])
            .inc_by(count as u64);
    }

    /// Counts a Claude OAuth usage-wall event on `connection` (`event` from a closed set in
    /// `usage_wall`).
    pub fn usage_wall_event(&self, connection: &str, event: &str) {
        self.usage_wall_events
            .with_label_values(&[connection, event])
            .inc();
    }

    /// Counts a session's combo pin cleared after consecutive combo failures.
    pub fn session_pin_cleared(&self) {
        self.session_pins_cleared.inc();
    }

    /// Counts a last-resort dispatch: `kind` `global` or `emergency`, `result` `served` or
    /// `failed`.
    pub fn last_resort(&self, kind: &str, result: &str) {
        self.last_resorts.with_label_values(&[kind, result]).inc();
    }

    /// Counts a quota-share serialisation outcome at a capped connection.
    pub fn quota_share_wait(&self, outcome: QuotaShareWait) {
        self.count(&self.quota_share_waits, outcome.index());
    }

    /// Counts a stream recovery decision: `kind` `reopen` (`outcome` `reopened`, `exhausted`)
    /// or `continuation` (`continued`, `failed`, `exhausted`, `refused`).
    pub fn stream_recovery(&self, kind: &str, outcome: &str) {
        self.stream_recoveries
            .with_label_values(&[kind, outcome])
            .inc();
    }

    /// Counts a context relay: `outcome` `summarised` or `failed`.
    pub fn context_relay(&self, outcome: &str) {
        self.context_relays.with_label_values(&[outcome]).inc();
    }

    /// The cluster permits this node holds for a (configured) connection.
    pub fn set_permits_held(&self, connection: &str, held: u32) {
        self.permits_held
            .with_label_values(&[connection])
            .set(i64::from(held));
    }

    /// The permits in use on this node for a (configured) connection that no valid grant
    /// covers: Redis may have handed them to another node.
    pub fn set_permits_over_cap(&self, connection: &str, over: u32) {
        self.permits_over_cap
            .with_label_values(&[connection])
            .set(i64::from(over));
    }

    /// The metrics of a reloaded config, continuing these: the same registry and families
    /// (counters keep counting, a scrape sees no reset), the provider children resolved for
    /// `providers`, and the scrape-time collector swapped for one over the new handles. Series
    /// of removed providers stay at their last values until the process restarts.
    pub fn continued(
        &self,
        config: &Config,
        providers: &[Arc<ProviderHandle>],
        connections: &[Arc<ConnHandle>],
        clock: Clock,
        actor_stats: Arc<ActorStats>,
    ) -> prometheus::Result<Self> {
        let provider_metrics = self.provider_families.resolve(config, providers)?;
        // Unregistering matches by descriptors, so an empty collector stands for the old one.
        let old = StateCollector::new(Vec::new(), Vec::new(), clock, actor_stats.clone())?;
        self.registry.unregister(Box::new(old))?;
        self.registry.register(Box::new(StateCollector::new(
            providers.to_vec(),
            connections.to_vec(),
            clock,
            actor_stats,
        )?))?;
        Ok(Self {
            registry: self.registry.clone(),
            requests: self.requests.clone(),
            request_duration: self.request_duration.clone(),
            overhead: self.overhead.clone(),
            providers: provider_metrics,
            provider_families: self.provider_families.clone(),
            key_tokens: resolve_key_tokens(&self.key_tokens_family, config)?,
            key_tokens_family: self.key_tokens_family.clone(),
            queue_wait: self.queue_wait.clone(),
            rejections: self.rejections.clone(),
            skips: self.skips.clone(),
            fallbacks: self.fallbacks.clone(),
            watchdog_aborts: self.watchdog_aborts.clone(),
            in_flight: self.in_flight.clone(),
            lease_ops: self.lease_ops.clone(),
            lease_moves: self.lease_moves.clone(),
            body_retries: self.body_retries.clone(),
            last_resorts: self.last_resorts.clone(),
            stream_recoveries: self.stream_recoveries.clone(),
            quota_share_waits: self.quota_share_waits.clone(),
            context_relays: self.context_relays.clone(),
            session_pins_cleared: self.session_pins_cleared.clone(),
            egress_sibling_locks: self.egress_sibling_locks.clone(),
            usage_wall_events: self.usage_wall_events.clone(),
            permits_held: self.permits_held.clone(),
            permits_over_cap: self.permits_over_cap.clone(),
        })
    }

    /// The registry (for tests and for anything that wants to add families).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The text exposition of every family.
    pub fn encode(&self) -> prometheus::Result<String> {
        let mut buf = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut buf)?;
        String::from_utf8(buf).map_err(|e| prometheus::Error::Msg(e.to_string()))
    }

    /// Starts timing a client request and counts it in flight until the timer is dropped.
    pub fn start_request(self: &Arc<Self>, route: Route) -> RequestTimer {
        self.in_flight.inc();
        RequestTimer {
            metrics: self.clone(),
            route,
            started: Instant::now(),
            status: CLIENT_CLOSED,
            overhead_recorded: false,
        }
    }

    /// Records one upstream attempt that took `elapsed`: its duration, or for a committed
    /// stream its time to first content (the stream's full duration is recorded at its end).
    /// Not a wrapper around the attempt's future: an async fn that takes a future by value
    /// holds it twice (the argument and the awaited copy), which doubled the attempt's share
    /// of every request's routing future.
    pub fn observe_attempt(&self, provider: usize, elapsed: Duration, result: &AttemptResult) {
        if let Some(p) = self.providers.get(provider) {
            match result {
                AttemptResult::Stream(_) => p.time_to_first_content.observe(elapsed.as_secs_f64()),
                AttemptResult::Json(_) => p.upstream_duration.observe(elapsed.as_secs_f64()),
                AttemptResult::Failed(f) => {
                    p.upstream_duration.observe(elapsed.as_secs_f64());
                    let kind =
                        AttemptFailureKind::of(f.stream_abort.is_some(), f.status, f.in_band_error);
                    self.count(&p.failures, kind.index());
                    if let Some(abort) = f.stream_abort {
                        self.count(&self.watchdog_aborts, AbortKind::from(abort).index());
                    }
                }
            }
        }
    }

    /// Records the end of a committed stream: its upstream duration, usage and watchdog.
    pub fn stream_end(&self, provider: usize, model: &str, end: &StreamEnd) {
        if let Some(p) = self.providers.get(provider) {
            p.upstream_duration.observe(millis_to_secs(end.duration_ms));
            // After the commit: a watchdog, a read error or an in-band error event (a client
            // that left is not the upstream's failure).
            let kind = match (&end.abort, &end.upstream_error, &end.stream_error) {
                _ if end.client_disconnected => None,
                (Some(_), _, _) => Some(AttemptFailureKind::StreamAbort),
                (None, _, Some(_)) => Some(AttemptFailureKind::InBand),
                (None, Some(_), None) => Some(AttemptFailureKind::Transport),
                (None, None, None) => None,
            };
            if let Some(kind) = kind {
                self.count(&p.failures, kind.index());
            }
        }
        if let Some(usage) = &end.usage {
            self.usage(provider, model, usage);
        }
        if let Some(abort) = end.abort {
            self.count(&self.watchdog_aborts, AbortKind::from(abort).index());
        }
    }

    /// Counts the tokens of an upstream usage object.
    pub fn usage(&self, provider: usize, model: &str, usage: &Usage) {
        let Some(p) = self.providers.get(provider) else {
            return;
        };
        count_tokens(p.tokens.get(model).unwrap_or(&p.other_tokens), usage);
    }

    /// Counts the tokens of an upstream usage object against the client key that asked
    /// (nothing for a request without a configured key).
    pub fn key_usage(&self, key: &str, usage: &Usage) {
        if let Some(counters) = self.key_tokens.get(key) {
            count_tokens(counters, usage);
        }
    }

    /// The `model` label a provider's usage of `model` is counted under.
    pub fn model_label<'a>(&self, provider: usize, model: &'a str) -> &'a str {
        match self.providers.get(provider) {
            Some(p) if p.tokens.contains_key(model) => model,
            _ => OTHER,
        }
    }

    /// Records the time a request waited in a connection's request queue before admission.
    pub fn queue_waited(&self, waited_ms: Millis) {
        self.queue_wait.observe(millis_to_secs(waited_ms));
    }

    /// Counts a concurrency-gate or request-queue rejection (other skips are ignored).
    pub fn rejected(&self, skip: &impl SkipLabel) {
        if let Some(code) = skip.rejection_code() {
            self.count(&self.rejections, RejectionType::of_code(code).index());
        }
    }

    /// Counts a move to another connection or target.
    pub fn fallback(&self, reason: impl Into<FallbackReason>) {
        self.count(&self.fallbacks, reason.into().index());
    }

    /// The skip counters, for a request's routing report.
    pub fn skips(&self) -> Arc<SkipCounters> {
        self.skips.clone()
    }

    fn count(&self, counters: &[IntCounter], index: usize) {
        if let Some(c) = counters.get(index) {
            c.inc();
        }
    }
}

fn millis_to_secs(ms: Millis) -> f64 {
    Duration::from_millis(ms).as_secs_f64()
}

/// The status recorded for a request whose handler was dropped before it answered (the
/// client went away): nginx's "client closed request", counted as `4xx`.
pub const CLIENT_CLOSED: u16 = 499;

/// Times one client request. Dropping it records the request (count by status class,
/// duration) and leaves the in-flight gauge, so a stream's timer lives in its body's
/// finaliser and a request abandoned by its client is still counted.
pub struct RequestTimer {
    metrics: Arc<Metrics>,
    route: Route,
    started: Instant,
    status: u16,
    overhead_recorded: bool,
}

impl std::fmt::Debug for RequestTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestTimer")
            .field("route", &self.route)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl RequestTimer {
    /// Records the gateway overhead now: time so far minus `upstream` (see the module docs).
    /// Only the first call counts.
    pub fn commit(&mut self, upstream: Duration) {
        if self.overhead_recorded {
            return;
        }
        self.overhead_recorded = true;
        let overhead = self.started.elapsed().saturating_sub(upstream);
        if let Some(h) = self.metrics.overhead.get(self.route.index()) {
            h.observe(overhead.as_secs_f64());
        }
    }

    /// Finishes the request with the status the client got (the access log's status), after
    /// waiting `upstream` on upstreams in total.
    pub fn finish(mut self, status: u16, upstream: Duration) {
        self.commit(upstream);
        self.status = status;
    }
}

impl Drop for RequestTimer {
    fn drop(&mut self) {
        let m = &self.metrics;
        let route = self.route.index();
        if let Some(c) = m
            .requests
            .get(route)
            .and_then(|row| row.get(StatusClass::of(self.status).index()))
        {
            c.inc();
        }
        if let Some(h) = m.request_duration.get(route) {
            h.observe(self.started.elapsed().as_secs_f64());
        }
        m.in_flight.dec();
    }
}
