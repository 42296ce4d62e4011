//! What a config reload hands from the old runtime to the new one, and what it warns about.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use switchyard_shared::breaker::Breaker;
use switchyard_shared::config::Config;
use switchyard_shared::settings;

use crate::actors::{GetBreaker, Retire};
use crate::runtime::Runtime;

/// How often a retired runtime is checked for remaining users.
const RETIRE_POLL: Duration = Duration::from_millis(500);
/// The longest a retired runtime waits for its last request (a very long stream); its actors
/// are stopped after that even if a request still holds it.
const RETIRE_MAX_WAIT: Duration = Duration::from_secs(3_600);
/// How long a reload waits for an old breaker actor to hand over its breaker.
const BREAKER_HANDOVER: Duration = Duration::from_secs(2);

/// Warns about keys that only a restart applies. They keep their running values.
pub(super) fn warn_restart_only(old: &Config, next: &Config) {
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
    if old.cluster != next.cluster {
        keys.push("cluster");
    }
    if !keys.is_empty() {
        tracing::warn!(
            keys = keys.join(", "),
            "config reload: these keys need a restart and keep their running values"
        );
    }
}

/// Node-wide state that is not part of the config: probes, counters, identity.
pub(super) fn carry_node_state(old: &Runtime, next: &mut Runtime) {
    next.lifecycle = old.lifecycle.clone();
    next.stats = old.stats.clone();
    next.table.actor_stats = old.table.actor_stats.clone();
    next.node_id = old.node_id.clone();
    // `[cluster]` is restart-only: the node keeps its store connection, subscriber and
    // identity (boot id) across reloads, so peers never see it as a new node.
    next.table.cluster = old.table.cluster.clone();
}

/// A memory-only persisted settings layer (no state directory) exists only in the old
/// runtime; hand it on and recompute the effective settings. (A file-backed one was just
/// reread from its file.)
pub(super) async fn carry_settings(old: &Runtime, next: &Runtime) {
    if next.settings_store.persistence().durable {
        return;
    }
    let persisted = old.settings_store.persisted();
    if let Err(e) = next.settings_store.store((*persisted).clone()).await {
        tracing::warn!("config reload: runtime settings not carried over: {e}");
        return;
    }
    let built = settings::build(&next.config, next.settings_store.env(), &persisted);
    next.table.settings.store(Arc::new(built.values()));
}

/// Seeds the new handles from the old ones with the same id (connection snapshots, breaker
/// views, counters) and collects the old breakers for the new breaker actors. A connection
/// whose credential changed keeps only its counters.
pub(super) async fn carry_resilience_state(
    old: &Runtime,
    next: &Runtime,
) -> HashMap<String, Breaker> {
    for conn in &next.table.connections {
        let Some(prev) = old.table.connection(&conn.id) else {
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
    for provider in &next.table.providers {
        let Some(prev) = old.table.provider(&provider.id) else {
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
pub(super) async fn retire(old: Arc<Runtime>) {
    let rounds = RETIRE_MAX_WAIT.as_millis() / RETIRE_POLL.as_millis();
    for _ in 0..rounds {
        if Arc::strong_count(&old) == 1 {
            break;
        }
        tokio::time::sleep(RETIRE_POLL).await;
    }
    for provider in &old.table.providers {
        if let Some(addr) = provider.actor.get() {
            addr.do_send(Retire);
        }
    }
    tracing::info!(
        generation = old.generation,
        "previous config retired; its actors stop"
    );
}
