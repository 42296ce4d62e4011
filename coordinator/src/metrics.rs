//! `/metrics`: the coordinator's own Prometheus metrics.
//!
//! Few and cheap: whether this replica leads, janitor passes by result, operator actions by
//! kind, and how long health documents take to build (the latency budget is 100 ms).

use std::time::Duration;

use prometheus::{Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry};

/// The registry and its metrics.
pub struct Metrics {
    registry: Registry,
    leader: Option<IntGauge>,
    janitor: Option<IntCounterVec>,
    actions: Option<IntCounterVec>,
    health: Option<HistogramVec>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Builds the metrics; a metric that cannot be registered is left out rather than failing
    /// startup.
    pub fn new() -> Self {
        let registry = Registry::new();
        let leader = IntGauge::new(
            "switchyard_coordinator_leader",
            "1 while this replica holds the leader lease",
        )
        .ok()
        .filter(|m| registry.register(Box::new(m.clone())).is_ok());
        let janitor = IntCounterVec::new(
            Opts::new(
                "switchyard_coordinator_janitor_passes_total",
                "Janitor passes by result (ok, fenced, error)",
            ),
            &["result"],
        )
        .ok()
        .filter(|m| registry.register(Box::new(m.clone())).is_ok());
        let actions = IntCounterVec::new(
            Opts::new(
                "switchyard_coordinator_actions_total",
                "Cluster-wide operator actions by kind and result",
            ),
            &["action", "result"],
        )
        .ok()
        .filter(|m| registry.register(Box::new(m.clone())).is_ok());
        let health = HistogramVec::new(
            HistogramOpts::new(
                "switchyard_coordinator_health_build_seconds",
                "Time to read Redis and build one health document, by cluster status",
            )
            .buckets(vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0]),
            &["status"],
        )
        .ok()
        .filter(|m| registry.register(Box::new(m.clone())).is_ok());
        Self {
            registry,
            leader,
            janitor,
            actions,
            health,
        }
    }

    pub fn set_leader(&self, leader: bool) {
        if let Some(g) = &self.leader {
            g.set(i64::from(leader));
        }
    }

    pub fn janitor(&self, result: &str) {
        if let Some(c) = &self.janitor {
            c.with_label_values(&[result]).inc();
        }
    }

    pub fn action(&self, action: &str, ok: bool) {
        if let Some(c) = &self.actions {
            c.with_label_values(&[action, if ok { "ok" } else { "error" }])
                .inc();
        }
    }

    pub fn observe_health(&self, elapsed: Duration, status: &str) {
        if let Some(h) = &self.health {
            h.with_label_values(&[status])
                .observe(elapsed.as_secs_f64());
        }
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut buf = Vec::new();
        let _ = prometheus::TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        String::from_utf8(buf).unwrap_or_default()
    }
}
