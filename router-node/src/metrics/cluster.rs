//! The Redis and cluster-sync metric families.
//!
//! Why a registry of its own: these families belong to the node's cluster membership, which
//! outlives any one runtime (a config reload builds a new runtime and registry, the Redis link
//! and its history stay). The scrape handler appends this registry's families to the
//! runtime's. [`ClusterMetrics`] is also the store's [`StoreObserver`], so every Redis command
//! is timed and every error counted where it happens, without the callers doing anything.

use std::time::Duration;

use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
};
use switchyard_store::{RedisState, StoreError, StoreObserver};

/// Redis command latency buckets: sub-millisecond on loopback up to the longest sane timeout.
const COMMAND_BUCKETS: &[f64] = &[
    0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];

/// Propagation delay buckets: the target is tens of milliseconds.
const DELAY_BUCKETS: &[f64] = &[
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// Results of a cluster event, as labelled in `switchyard_cluster_events_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventResult {
    /// Published by this node after a store write changed something.
    Published,
    /// Received from a peer (or the coordinator).
    Received,
    /// Handed to an actor.
    Applied,
    /// Lost: undecodable, a full mailbox, a full queue, or an unknown target.
    Dropped,
}

/// How a resync read the shared state, as labelled in `switchyard_cluster_resyncs_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResyncKind {
    /// Through the change log: only the records it named.
    Incremental,
    /// Every configured connection record.
    Full,
}

impl ResyncKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Incremental => "incremental",
            Self::Full => "full",
        }
    }
}

impl EventResult {
    fn as_str(self) -> &'static str {
        match self {
            Self::Published => "published",
            Self::Received => "received",
            Self::Applied => "applied",
            Self::Dropped => "dropped",
        }
    }
}

/// The cluster families and the store observer.
pub struct ClusterMetrics {
    registry: Registry,
    command_duration: HistogramVec,
    errors: IntCounterVec,
    redis_state: IntGauge,
    degraded: IntGauge,
    events: IntCounterVec,
    resyncs: IntCounterVec,
    propagation: Histogram,
    replay_depth: IntGauge,
    replay_dropped: IntCounter,
}

impl ClusterMetrics {
    pub fn new() -> prometheus::Result<Self> {
        let registry = Registry::new();
        let command_duration = HistogramVec::new(
            HistogramOpts::new(
                "switchyard_redis_command_duration_seconds",
                "Redis command (or script, or pipeline) latency as seen by this node.",
            )
            .buckets(COMMAND_BUCKETS.to_vec()),
            &["command"],
        )?;
        let errors = IntCounterVec::new(
            Opts::new(
                "switchyard_redis_errors_total",
                "Redis commands that failed, by command and kind (timeout, error, unavailable, protocol).",
            ),
            &["command", "kind"],
        )?;
        let redis_state = IntGauge::new(
            "switchyard_redis_state",
            "The node's Redis link: 0 up, 1 degraded, 2 down.",
        )?;
        let degraded = IntGauge::new(
            "switchyard_cluster_degraded",
            "1 while the node serves on local state only (Redis or its event stream unreachable).",
        )?;
        let events = IntCounterVec::new(
            Opts::new(
                "switchyard_cluster_events_total",
                "Cluster events by kind and result (published, received, applied, dropped).",
            ),
            &["kind", "result"],
        )?;
        let resyncs = IntCounterVec::new(
            Opts::new(
                "switchyard_cluster_resyncs_total",
                "Resyncs from Redis (on every (re)connect and periodically), by kind: incremental (through the change log) or full (every record).",
            ),
            &["kind"],
        )?;
        // Both series exist from the start, so a scrape tells "none yet" from "not exported".
        for kind in [ResyncKind::Incremental, ResyncKind::Full] {
            resyncs.with_label_values(&[kind.as_str()]);
        }
        let propagation = Histogram::with_opts(
            HistogramOpts::new(
                "switchyard_cluster_propagation_delay_seconds",
                "From the origin's observation (wall clock in the event) to this node applying it.",
            )
            .buckets(DELAY_BUCKETS.to_vec()),
        )?;
        let replay_depth = IntGauge::new(
            "switchyard_cluster_replay_queue_depth",
            "Local changes waiting for Redis to come back.",
        )?;
        let replay_dropped = IntCounter::new(
            "switchyard_cluster_replay_dropped_total",
            "Local changes dropped because the replay queue was full (oldest first).",
        )?;
        registry.register(Box::new(command_duration.clone()))?;
        registry.register(Box::new(errors.clone()))?;
        registry.register(Box::new(redis_state.clone()))?;
        registry.register(Box::new(degraded.clone()))?;
        registry.register(Box::new(events.clone()))?;
        registry.register(Box::new(resyncs.clone()))?;
        registry.register(Box::new(propagation.clone()))?;
        registry.register(Box::new(replay_depth.clone()))?;
        registry.register(Box::new(replay_dropped.clone()))?;
        Ok(Self {
            registry,
            command_duration,
            errors,
            redis_state,
            degraded,
            events,
            resyncs,
            propagation,
            replay_depth,
            replay_dropped,
        })
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub fn event(&self, kind: &str, result: EventResult) {
        self.events
            .with_label_values(&[kind, result.as_str()])
            .inc();
    }

    /// How many events of `kind` had `result` (tests, health).
    pub fn event_count(&self, kind: &str, result: EventResult) -> u64 {
        self.events
            .get_metric_with_label_values(&[kind, result.as_str()])
            .map_or(0, |c| c.get())
    }

    pub fn resynced(&self, kind: ResyncKind) {
        self.resyncs.with_label_values(&[kind.as_str()]).inc();
    }

    /// Resyncs of one kind.
    pub fn resync_count_of(&self, kind: ResyncKind) -> u64 {
        self.resyncs
            .get_metric_with_label_values(&[kind.as_str()])
            .map_or(0, |c| c.get())
    }

    /// Resyncs of every kind.
    pub fn resync_count(&self) -> u64 {
        self.resync_count_of(ResyncKind::Incremental) + self.resync_count_of(ResyncKind::Full)
    }

    pub fn propagation_delay(&self, delay_ms: u64) {
        self.propagation.observe(delay_ms as f64 / 1000.0);
    }

    pub fn set_degraded(&self, degraded: bool) {
        self.degraded.set(i64::from(degraded));
    }

    pub fn set_replay(&self, depth: usize, dropped_now: u64) {
        self.replay_depth
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
        if dropped_now > 0 {
            self.replay_dropped.inc_by(dropped_now);
        }
    }

    pub fn replay_dropped(&self) -> u64 {
        self.replay_dropped.get()
    }
}

impl StoreObserver for ClusterMetrics {
    fn command(&self, command: &'static str, elapsed: Duration, error: Option<&StoreError>) {
        match error {
            // A skipped call never reached Redis: its "latency" would only flatter the histogram.
            Some(StoreError::Unavailable) => {}
            _ => self
                .command_duration
                .with_label_values(&[command])
                .observe(elapsed.as_secs_f64()),
        }
        if let Some(e) = error {
            self.errors.with_label_values(&[command, e.kind()]).inc();
        }
    }

    fn state_changed(&self, from: RedisState, to: RedisState) {
        self.redis_state.set(to.as_gauge());
        tracing::warn!(from = from.as_str(), to = to.as_str(), "redis link state");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_exposed_with_their_names() {
        use prometheus::Encoder as _;
        let m = ClusterMetrics::new().unwrap();
        m.command("cooldown_extend", Duration::from_millis(1), None);
        m.command(
            "cooldown_extend",
            Duration::from_millis(250),
            Some(&StoreError::Timeout {
                command: "cooldown_extend",
            }),
        );
        m.event("cooldown_set", EventResult::Applied);
        m.propagation_delay(12);
        m.state_changed(RedisState::Up, RedisState::Down);
        let mut buf = Vec::new();
        prometheus::TextEncoder::new()
            .encode(&m.registry().gather(), &mut buf)
            .unwrap();
        let text = String::from_utf8(buf).unwrap();
        for name in [
            "switchyard_redis_command_duration_seconds_bucket{command=\"cooldown_extend\"",
            "switchyard_redis_errors_total{command=\"cooldown_extend\",kind=\"timeout\"} 1",
            "switchyard_redis_state 2",
            "switchyard_cluster_events_total{kind=\"cooldown_set\",result=\"applied\"} 1",
            "switchyard_cluster_propagation_delay_seconds_count 1",
            "switchyard_cluster_degraded 0",
            "switchyard_cluster_replay_queue_depth 0",
        ] {
            assert!(text.contains(name), "{name} missing in\n{text}");
        }
        assert_eq!(m.event_count("cooldown_set", EventResult::Applied), 1);
    }
}
