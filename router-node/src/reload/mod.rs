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

mod carry;
mod diff;

use std::future::{Ready, ready};
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use actix::ArbiterHandle;
use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, web};
use arc_swap::ArcSwap;
use prometheus::{IntCounterVec, Opts};
use switchyard_shared::config::{Config, ConfigErrors};

use self::carry::{
    carry_node_state, carry_resilience_state, carry_settings, retire, warn_restart_only,
};
use self::diff::Diff;
use crate::clock::Clock;
use crate::runtime::Runtime;

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
    /// `switchyard_config_reloads_total{result}`, in the registry every reloaded runtime
    /// continues.
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
        rt.table
            .metrics
            .registry()
            .register(Box::new(reloads.clone()))?;
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
        let mut next = match load_runtime(path, &env, old.table.clock) {
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
        crate::caps::gates::prepare(&next.table);
        crate::actors::start_actors_seeded(
            &next.table.providers,
            &next.table.connections,
            &next.table.settings.load(),
            arbiter,
            next.table.actor_stats.clone(),
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
        match old.table.metrics.continued(
            &next.config,
            &next.table.providers,
            &next.table.connections,
            next.table.clock,
            next.table.actor_stats.clone(),
        ) {
            Ok(metrics) => next.table.metrics = Arc::new(metrics),
            Err(e) => {
                tracing::error!("config reload: metrics restart from zero: {e}");
                if let Err(e) = next
                    .table
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
            // Only reachable if a server is built without the cell; still a proper envelope.
            None => Err(actix_web::error::InternalError::from_response(
                "runtime not configured",
                actix_web::HttpResponse::InternalServerError().json(serde_json::json!({
                    "error": {
                        "message": "runtime not configured",
                        "type": "server_error",
                        "code": "internal_error",
                    }
                })),
            )
            .into()),
        })
    }
}
