//! Families computed at scrape time from the handles' snapshots and atomics.
//!
//! Breaker state, connection state, lockouts, queue depth and in-flight permits already live
//! in the snapshots the actors publish and in the atomics the hot path touches. Keeping a
//! second copy in Prometheus gauges would mean a write on every change (and a chance to drift);
//! reading them when Prometheus asks costs nothing between scrapes and is exact at scrape time.
//! The actor-owned counters (transitions, cooldowns, restarts, dropped observations) are read
//! the same way.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType};

use super::labels::{ActorKind, BreakerLabel, ConnectionState, CooldownReason};
use crate::actors::ActorStats;
use crate::actors::{ConnHandle, ProviderHandle};
use crate::clock::Clock;

/// One family's description.
struct Family {
    desc: Desc,
    kind: MetricType,
}

impl Family {
    fn new(name: &str, help: &str, labels: &[&str], kind: MetricType) -> prometheus::Result<Self> {
        let labels = labels.iter().map(|l| (*l).to_owned()).collect();
        Ok(Self {
            desc: Desc::new(name.to_owned(), help.to_owned(), labels, HashMap::new())?,
            kind,
        })
    }

    /// An empty family with this description.
    fn start(&self) -> MetricFamily {
        let mut mf = MetricFamily::default();
        mf.set_name(self.desc.fq_name.clone());
        mf.set_help(self.desc.help.clone());
        mf.set_field_type(self.kind);
        mf
    }

    /// Adds one sample.
    fn push(&self, mf: &mut MetricFamily, labels: &[(&str, &str)], value: f64) {
        let pairs = labels
            .iter()
            .map(|(name, value)| {
                let mut pair = LabelPair::default();
                pair.set_name((*name).to_owned());
                pair.set_value((*value).to_owned());
                pair
            })
            .collect();
        let mut metric = Metric::from_label(pairs);
        if self.kind == MetricType::COUNTER {
            let mut counter = Counter::default();
            counter.set_value(value);
            metric.set_counter(counter);
        } else {
            let mut gauge = Gauge::default();
            gauge.set_value(value);
            metric.set_gauge(gauge);
        }
        mf.mut_metric().push(metric);
    }
}

/// The scrape-time collector: reads every provider and connection handle.
pub struct StateCollector {
    providers: Vec<Arc<ProviderHandle>>,
    connections: Vec<Arc<ConnHandle>>,
    clock: Clock,
    actor_stats: Arc<ActorStats>,
    breaker_state: Family,
    breaker_transitions: Family,
    connection_state: Family,
    cooldowns: Family,
    model_lockouts: Family,
    queue_depth: Family,
    semaphore_in_flight: Family,
    actor_restarts: Family,
    dropped_observations: Family,
    task_restarts: Family,
}

impl StateCollector {
    pub fn new(
        providers: Vec<Arc<ProviderHandle>>,
        connections: Vec<Arc<ConnHandle>>,
        clock: Clock,
        actor_stats: Arc<ActorStats>,
    ) -> prometheus::Result<Self> {
        use MetricType::{COUNTER, GAUGE};
        Ok(Self {
            providers,
            connections,
            clock,
            actor_stats,
            breaker_state: Family::new(
                "switchyard_breaker_state",
                "Provider circuit breaker state: 0 closed, 1 degraded, 2 half_open, 3 open.",
                &["provider"],
                GAUGE,
            )?,
            breaker_transitions: Family::new(
                "switchyard_breaker_transitions_total",
                "Provider circuit breaker transitions (history entries) by from and to state.",
                &["provider", "from", "to"],
                COUNTER,
            )?,
            connection_state: Family::new(
                "switchyard_connection_state",
                "1 for the state each connection is in (active, cooldown or terminal), else 0.",
                &["provider", "connection", "state"],
                GAUGE,
            )?,
            cooldowns: Family::new(
                "switchyard_cooldowns_total",
                "Connection cooldowns set, by provider and failure reason.",
                &["provider", "reason"],
                COUNTER,
            )?,
            model_lockouts: Family::new(
                "switchyard_model_lockouts",
                "Model lockouts in force on the provider's connections.",
                &["provider"],
                GAUGE,
            )?,
            queue_depth: Family::new(
                "switchyard_queue_depth",
                "Requests waiting in the connection's request queue.",
                &["connection"],
                GAUGE,
            )?,
            semaphore_in_flight: Family::new(
                "switchyard_semaphore_in_flight",
                "Requests holding the connection's concurrency slot (dispatched, not finished).",
                &["connection"],
                GAUGE,
            )?,
            actor_restarts: Family::new(
                "switchyard_actor_restarts_total",
                "Connection actors restarted after a panic.",
                &[],
                COUNTER,
            )?,
            dropped_observations: Family::new(
                "switchyard_dropped_observations_total",
                "Observations dropped because an actor's mailbox was full or closed.",
                &["actor"],
                COUNTER,
            )?,
            task_restarts: Family::new(
                "switchyard_task_restarts_total",
                "Restarts of supervised tasks and actors (cluster writer, sync, membership, breaker actors) after they died.",
                &["task"],
                COUNTER,
            )?,
        })
    }

    fn families(&self) -> [&Family; 10] {
        [
            &self.breaker_state,
            &self.breaker_transitions,
            &self.connection_state,
            &self.cooldowns,
            &self.model_lockouts,
            &self.queue_depth,
            &self.semaphore_in_flight,
            &self.actor_restarts,
            &self.dropped_observations,
            &self.task_restarts,
        ]
    }

    fn provider_families(&self) -> Vec<MetricFamily> {
        let mut state = self.breaker_state.start();
        let mut transitions = self.breaker_transitions.start();
        for p in &self.providers {
            let id = &*p.id;
            let label = BreakerLabel::from(p.breaker.load().state());
            self.breaker_state
                .push(&mut state, &[("provider", id)], label.index() as f64);
            for from in BreakerLabel::ALL {
                for to in BreakerLabel::ALL {
                    // Every pair, zeros included: a series that appears only after its first
                    // increment makes `rate()` and alerts miss that increment.
                    let n = p.transitions.get(from, to);
                    let labels = [("provider", id), ("from", from.label()), ("to", to.label())];
                    self.breaker_transitions
                        .push(&mut transitions, &labels, n as f64);
                }
            }
        }
        vec![state, transitions]
    }

    fn connection_families(&self) -> Vec<MetricFamily> {
        let now = self.clock.now();
        let mut state = self.connection_state.start();
        let mut queue = self.queue_depth.start();
        let mut in_flight = self.semaphore_in_flight.start();
        let mut cooldowns = vec![[0u64; CooldownReason::COUNT]; self.providers.len()];
        let mut lockouts = vec![0usize; self.providers.len()];
        for c in &self.connections {
            let provider = self
                .providers
                .get(c.provider_idx)
                .map_or(c.config.provider.as_str(), |p| &*p.id);
            let id = &*c.id;
            let snap = c.load();
            let current = if snap.terminal().is_some() {
                ConnectionState::Terminal
            } else if snap.cooldown_remaining(now) > 0 {
                ConnectionState::Cooldown
            } else {
                ConnectionState::Active
            };
            for s in ConnectionState::ALL {
                let labels = [
                    ("provider", provider),
                    ("connection", id),
                    ("state", s.label()),
                ];
                let value = if s == current { 1.0 } else { 0.0 };
                self.connection_state.push(&mut state, &labels, value);
            }
            if let Some(n) = lockouts.get_mut(c.provider_idx) {
                *n += snap.lockouts.active(now).len();
            }
            if let Some(row) = cooldowns.get_mut(c.provider_idx) {
                for (n, reason) in row.iter_mut().zip(CooldownReason::ALL) {
                    *n += c.cooldowns.get(reason);
                }
            }
            self.queue_depth.push(
                &mut queue,
                &[("connection", id)],
                f64::from(c.queue.waiting()),
            );
            self.semaphore_in_flight.push(
                &mut in_flight,
                &[("connection", id)],
                f64::from(c.inflight.load(Ordering::Relaxed)),
            );
        }
        let mut cooldown_mf = self.cooldowns.start();
        let mut lockout_mf = self.model_lockouts.start();
        for ((p, row), locks) in self.providers.iter().zip(&cooldowns).zip(&lockouts) {
            let id = &*p.id;
            for (n, reason) in row.iter().zip(CooldownReason::ALL) {
                let labels = [("provider", id), ("reason", reason.label())];
                self.cooldowns.push(&mut cooldown_mf, &labels, *n as f64);
            }
            self.model_lockouts
                .push(&mut lockout_mf, &[("provider", id)], *locks as f64);
        }
        vec![state, queue, in_flight, cooldown_mf, lockout_mf]
    }

    fn actor_families(&self) -> Vec<MetricFamily> {
        let mut restarts = self.actor_restarts.start();
        let n = self.actor_stats.restarts.load(Ordering::Relaxed);
        self.actor_restarts.push(&mut restarts, &[], n as f64);
        let mut dropped = self.dropped_observations.start();
        let conn: u64 = self
            .connections
            .iter()
            .map(|c| c.dropped_observations.load(Ordering::Relaxed))
            .sum();
        let breaker = self
            .actor_stats
            .breaker_dropped_observations
            .load(Ordering::Relaxed);
        for (actor, n) in [(ActorKind::Connection, conn), (ActorKind::Breaker, breaker)] {
            self.dropped_observations
                .push(&mut dropped, &[("actor", actor.label())], n as f64);
        }
        // Every task known so far, zeros included, so the first restart is a visible increase.
        let mut tasks = self.task_restarts.start();
        for t in crate::actors::supervision::snapshot() {
            self.task_restarts
                .push(&mut tasks, &[("task", &t.task)], t.restarts as f64);
        }
        vec![restarts, dropped, tasks]
    }
}

impl Collector for StateCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.families().into_iter().map(|f| &f.desc).collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let mut out = self.provider_families();
        out.extend(self.connection_families());
        out.extend(self.actor_families());
        out
    }
}
