//! Config hot reload (SIGHUP).
//!
//! Operators change providers and connections without a restart, and a typo must never take
//! a serving node down. So the runtime lives in a swappable [`RuntimeCell`] and every request
//! loads it once ([`Rt`]): a reload builds a whole new runtime next to the old one and swaps
//! the pointer. A request keeps the runtime it started with, so in-flight requests and streams
//! finish on the old handles and the old actors; the old actors are retired once no request
//! holds the old runtime any more.
//!
//! The file is read and validated by the same code as `--check`; an invalid file is rejected
//! with every problem logged and the running config kept. Resilience state of providers and
//! connections that still exist (by id) is carried over: connection snapshots (cooldown,
//! terminal status, lockouts, rate-limit toggle), breakers, and the persisted settings layer.
//! The time base is kept too, so carried deadlines keep their meaning, and so is the metrics
//! registry, so `/metrics` continues across a reload.
//!
//! Listener addresses, the worker count and the node id need a restart; a reload that changes
//! them logs which keys were not applied and applies the rest.

use std::collections::HashMap;
use std::future::{Ready, ready};
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use actix::ArbiterHandle;
use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, web};
use arc_swap::ArcSwap;
use prometheus::{IntCounterVec, Opts};
use switchyard_shared::breaker::Breaker;
use switchyard_shared::config::{Config, ConfigErrors};
use switchyard_shared::settings;

use crate::actors::{GetBreaker, Retire};
use crate::clock::Clock;
use crate::runtime::Runtime;

/// How often a retired runtime is checked for remaining users.
const RETIRE_POLL: Duration = Duration::from_millis(500);
/// The longest a retired runtime waits for its last request (a very long stream); its actors
/// are stopped after that even if a request still holds it.
const RETIRE_MAX_WAIT: Duration = Duration::from_secs(3_600);
/// How long a reload waits for an old breaker actor to hand over its breaker.
const BREAKER_HANDOVER: Duration = Duration::from_secs(2);

/// Reads and validates a config file and builds a runtime from it: the one path shared by
/// `--check`, startup and reload.
pub fn load_runtime(
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    clock: Clock,
) -> Result<Runtime, ConfigErrors> {
    let config = Config::load(path)?;
    Runtime::build_with_clock(config, env, clock)
}

/// The current runtime, swapped whole on reload.
pub struct RuntimeCell {
    current: ArcSwap<Runtime>,
    /// The config file (none for the demo, which cannot reload).
    path: Option<PathBuf>,
    /// `switchyard_config_reloads_total{result}`, registered in every runtime's registry so it
    /// survives the swap.
    reloads: IntCounterVec,
    generation: AtomicU64,
}

impl RuntimeCell {
    /// Wraps the first runtime.
    pub fn new(rt: Arc<Runtime>, path: Option<PathBuf>) -> prometheus::Result<Self> {
        let reloads = IntCounterVec::new(
            Opts::new(
                "switchyard_config_reloads_total",
                "Config reloads (SIGHUP) by result: ok (applied) or rejected (invalid file).",
            ),
            &["result"],
        )?;
        for result in ["ok", "rejected"] {
            reloads.with_label_values(&[result]);
        }
        rt.metrics.registry().register(Box::new(reloads.clone()))?;
        Ok(Self {
            generation: AtomicU64::new(rt.generation),
            current: ArcSwap::new(rt),
            path,
            reloads,
        })
    }

    /// The current runtime.
    pub fn load(&self) -> Arc<Runtime> {
        self.current.load_full()
    }

    /// Rereads the config file and swaps in a runtime built from it, or logs why not and
    /// keeps the running one. Returns whether the new config was applied.
    pub async fn reload(&self, arbiter: &ArbiterHandle) -> bool {
        let Some(path) = &self.path else {
            tracing::warn!("config reload requested, but this node has no config file");
            return false;
        };
        let old = self.load();
        let env = |k: &str| std::env::var(k).ok();
        let mut next = match load_runtime(path, &env, old.clock) {
            Ok(rt) => rt,
            Err(errors) => {
                for e in &errors.errors {
                    tracing::error!(path = %e.path, "config reload rejected: {}", e.message);
                }
                tracing::error!(
                    errors = errors.errors.len(),
                    file = %path.display(),
                    "config reload rejected; keeping the running config"
                );
                self.reloads.with_label_values(&["rejected"]).inc();
                return false;
            }
        };
        for w in &next.settings_warnings {
            tracing::warn!("settings: {w}");
        }
        warn_restart_only(&old.config, &next.config);
        let generation = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        next.generation = generation;
        carry_node_state(&old, &mut next);
        self.continue_metrics(&old, &mut next);
        carry_settings(&old, &next).await;
        let breakers = carry_resilience_state(&old, &next).await;
        let counts = Diff::of(&old, &next);
        let next = Arc::new(next);
        crate::actors::start_actors_seeded(
            &next.providers,
            &next.connections,
            &next.settings.load(),
            arbiter,
            next.actor_stats.clone(),
            &breakers,
        );
        self.current.store(next);
        self.reloads.with_label_values(&["ok"]).inc();
        tracing::info!(
            generation,
            providers_added = counts.providers_added,
            providers_removed = counts.providers_removed,
            providers_changed = counts.providers_changed,
            connections_added = counts.connections_added,
            connections_removed = counts.connections_removed,
            connections_changed = counts.connections_changed,
            "config reloaded"
        );
        actix_web::rt::spawn(retire(old));
        true
    }
}

impl RuntimeCell {
    /// Keeps `/metrics` continuous: the new runtime records into the old registry and families.
    /// Should that fail, it keeps its own fresh registry (counters restart from zero) and the
    /// reload counter is registered there.
    fn continue_metrics(&self, old: &Runtime, next: &mut Runtime) {
        match old.metrics.continued(
            &next.config,
            &next.providers,
            &next.connections,
            next.clock,
            next.actor_stats.clone(),
        ) {
            Ok(metrics) => next.metrics = Arc::new(metrics),
            Err(e) => {
                tracing::error!("config reload: metrics restart from zero: {e}");
                if let Err(e) = next
                    .metrics
                    .registry()
                    .register(Box::new(self.reloads.clone()))
                {
                    tracing::warn!("reload counter not registered in the new registry: {e}");
                }
            }
        }
    }
}

/// A handler's runtime: the one current when the request arrived, kept for its whole life.
/// Derefs to `Arc<Runtime>`, like the `web::Data<Arc<Runtime>>` it replaces.
pub struct Rt(Arc<Runtime>);

impl Rt {
    pub fn get_ref(&self) -> &Arc<Runtime> {
        &self.0
    }

    pub fn into_inner(self) -> Arc<Runtime> {
        self.0
    }
}

impl Deref for Rt {
    type Target = Arc<Runtime>;

    fn deref(&self) -> &Arc<Runtime> {
        &self.0
    }
}

impl FromRequest for Rt {
    type Error = actix_web::Error;
    type Future = Ready<Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(match req.app_data::<web::Data<RuntimeCell>>() {
            Some(cell) => Ok(Rt(cell.load())),
            None => Err(actix_web::error::ErrorInternalServerError(
                "runtime not configured",
            )),
        })
    }
}

/// Warns about keys that only a restart applies. They keep their running values.
fn warn_restart_only(old: &Config, next: &Config) {
    let (o, n) = (&old.server, &next.server);
    let mut keys = Vec::new();
    if o.listen != n.listen {
        keys.push("server.listen");
    }
    if o.admin_listen != n.admin_listen {
        keys.push("server.admin_listen");
    }
    if o.workers != n.workers {
        keys.push("server.workers");
    }
    if o.node_id != n.node_id {
        keys.push("server.node_id");
    }
    if !keys.is_empty() {
        tracing::warn!(
            keys = keys.join(", "),
            "config reload: these keys need a restart and keep their running values"
        );
    }
}

/// Node-wide state that is not part of the config: probes, counters, identity.
fn carry_node_state(old: &Runtime, next: &mut Runtime) {
    next.lifecycle = old.lifecycle.clone();
    next.stats = old.stats.clone();
    next.actor_stats = old.actor_stats.clone();
    next.node_id = old.node_id.clone();
}

/// A memory-only persisted settings layer (no state directory) exists only in the old
/// runtime; hand it on and recompute the effective settings. (A file-backed one was just
/// reread from its file.)
async fn carry_settings(old: &Runtime, next: &Runtime) {
    if next.settings_store.persistence().durable {
        return;
    }
    let persisted = old.settings_store.persisted();
    if let Err(e) = next.settings_store.store((*persisted).clone()).await {
        tracing::warn!("config reload: runtime settings not carried over: {e}");
        return;
    }
    let built = settings::build(&next.config, next.settings_store.env(), &persisted);
    next.settings.store(Arc::new(built.values()));
}

/// Seeds the new handles from the old ones with the same id (connection snapshots, breaker
/// views, counters) and collects the old breakers for the new breaker actors. A connection
/// whose credential changed keeps only its counters.
async fn carry_resilience_state(old: &Runtime, next: &Runtime) -> HashMap<String, Breaker> {
    for conn in &next.connections {
        let Some(prev) = old.connection(&conn.id) else {
            continue;
        };
        conn.cooldowns.add(&prev.cooldowns);
        if prev.api_key != conn.api_key {
            // A replaced credential is how an operator fixes a banned or expired key: its
            // cooldown and terminal status belonged to the old key.
            tracing::info!(
                connection = &*conn.id,
                "config reload: new credential, resilience state starts fresh"
            );
            continue;
        }
        conn.publish((**prev.load()).clone());
        conn.last_used_at
            .store(prev.last_used_at.load(Ordering::Relaxed), Ordering::Relaxed);
    }
    let mut breakers = HashMap::new();
    for provider in &next.providers {
        let Some(prev) = old.provider(&provider.id) else {
            continue;
        };
        provider.transitions.add(&prev.transitions);
        provider.breaker.store(prev.breaker.load_full());
        let Some(addr) = prev.actor.get() else {
            continue;
        };
        match tokio::time::timeout(BREAKER_HANDOVER, addr.send(GetBreaker)).await {
            Ok(Ok(breaker)) => {
                breakers.insert(provider.id.to_string(), breaker);
            }
            _ => tracing::warn!(
                provider = &*provider.id,
                "config reload: breaker state not carried over (actor did not answer)"
            ),
        }
    }
    breakers
}

/// Stops the actors of a replaced runtime once no request holds it (bounded by
/// [`RETIRE_MAX_WAIT`]), which also breaks the handle/actor reference cycle so it is freed.
async fn retire(old: Arc<Runtime>) {
    let rounds = RETIRE_MAX_WAIT.as_millis() / RETIRE_POLL.as_millis();
    for _ in 0..rounds {
        if Arc::strong_count(&old) == 1 {
            break;
        }
        tokio::time::sleep(RETIRE_POLL).await;
    }
    for provider in &old.providers {
        if let Some(addr) = provider.actor.get() {
            addr.do_send(Retire);
        }
    }
    tracing::info!(
        generation = old.generation,
        "previous config retired; its actors stop"
    );
}

/// What a reload changed, by id.
#[derive(Debug, Default, PartialEq, Eq)]
struct Diff {
    providers_added: usize,
    providers_removed: usize,
    providers_changed: usize,
    connections_added: usize,
    connections_removed: usize,
    connections_changed: usize,
}

impl Diff {
    fn of(old: &Runtime, next: &Runtime) -> Self {
        let (pa, pr, pc) = diff_by_id(
            old.config.providers.iter().map(|p| (p.id.as_str(), p)),
            next.config.providers.iter().map(|p| (p.id.as_str(), p)),
        );
        let (ca, cr, cc) = diff_by_id(
            old.config.connections.iter().map(|c| (c.id.as_str(), c)),
            next.config.connections.iter().map(|c| (c.id.as_str(), c)),
        );
        Self {
            providers_added: pa,
            providers_removed: pr,
            providers_changed: pc,
            connections_added: ca,
            connections_removed: cr,
            connections_changed: cc,
        }
    }
}

/// (added, removed, changed) between two id-keyed lists.
fn diff_by_id<'a, T: PartialEq + 'a>(
    old: impl Iterator<Item = (&'a str, &'a T)>,
    next: impl Iterator<Item = (&'a str, &'a T)>,
) -> (usize, usize, usize) {
    let old: HashMap<&str, &T> = old.collect();
    let next: HashMap<&str, &T> = next.collect();
    let added = next.keys().filter(|k| !old.contains_key(*k)).count();
    let removed = old.keys().filter(|k| !next.contains_key(*k)).count();
    let changed = next
        .iter()
        .filter(|(k, v)| old.get(*k).is_some_and(|o| o != *v))
        .count();
    (added, removed, changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_counts_added_removed_and_changed_ids() {
        let old = [("a", 1), ("b", 2), ("c", 3)];
        let next = [("b", 2), ("c", 4), ("d", 5)];
        let (added, removed, changed) = diff_by_id(
            old.iter().map(|(k, v)| (*k, v)),
            next.iter().map(|(k, v)| (*k, v)),
        );
        assert_eq!((added, removed, changed), (1, 1, 1));
    }
}
