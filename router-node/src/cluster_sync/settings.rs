//! Runtime settings shared through Redis.
//!
//! Why: `PATCH /api/resilience` on any node must change every node. The persisted settings
//! layer is one JSON document in Redis with a version ([`RedisStore::settings_write`] bumps it
//! atomically); the patching node publishes `SettingsVersion`, and every node (on that event,
//! and on each resync) pulls the document when its version is newer than what it applied.
//! Operators can read the document with `redis-cli HGETALL`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use switchyard_shared::settings::{self, Persisted};
use switchyard_shared::store::StoreError;
use switchyard_shared::wire::WireEvent;

use super::writer;
use crate::actors::ApplySettings;
use crate::cluster::{Cluster, wall_ms};
use crate::runtime::Runtime;

/// Writes the persisted layer to Redis and announces its new version. Returns the version.
pub async fn persist(cluster: &Cluster, persisted: &Persisted) -> Result<u64, StoreError> {
    let doc = serde_json::to_string(persisted).map_err(|e| StoreError::Protocol {
        command: "settings_write",
        message: e.to_string(),
    })?;
    let version = cluster.store.settings_write(&doc).await?;
    cluster
        .sync
        .settings_version
        .fetch_max(version, Ordering::Relaxed);
    writer::publish(cluster, wall_ms(), WireEvent::SettingsVersion { version }).await;
    Ok(version)
}

/// Pulls the shared settings when they are newer than what this node applied (`hint`: the
/// version an event announced, to skip the read when it is not newer). Returns whether new
/// settings were applied.
pub async fn pull(cluster: &Cluster, rt: &Runtime, hint: Option<u64>) -> Result<bool, StoreError> {
    let applied = cluster.sync.settings_version.load(Ordering::Relaxed);
    if hint.is_some_and(|v| v <= applied) {
        return Ok(false);
    }
    let Some((version, doc)) = cluster.store.settings_read().await? else {
        return Ok(false);
    };
    if version <= applied {
        return Ok(false);
    }
    let persisted: Persisted = match serde_json::from_str(&doc) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(version, error = %e, "shared settings document is invalid; ignored");
            cluster
                .sync
                .settings_version
                .fetch_max(version, Ordering::Relaxed);
            return Ok(false);
        }
    };
    apply_persisted(rt, persisted).await;
    cluster
        .sync
        .settings_version
        .fetch_max(version, Ordering::Relaxed);
    tracing::info!(version, "shared resilience settings applied");
    Ok(true)
}

/// Makes `next` this node's persisted layer and applies the effective settings, as a local
/// patch does: the request path reads them on its next load and the actors get their new
/// profiles by message.
pub async fn apply_persisted(rt: &Runtime, next: Persisted) {
    let store = &rt.settings_store;
    let _writer = store.lock_writer().await;
    let built = settings::build(&rt.config, store.env(), &next);
    if let Err(e) = store.store(next).await {
        tracing::warn!(error = %e, "shared settings not written to the local state file");
    }
    let values = Arc::new(built.values());
    rt.settings.store(values.clone());
    if let Ok(mut tracker) = rt.provider_cooldown.lock() {
        tracker.set_params(values.provider_cooldown());
    }
    let at = rt.clock.now();
    for provider in &rt.providers {
        if let Some(addr) = provider.actor.get() {
            addr.do_send(ApplySettings {
                settings: values.clone(),
                at,
            });
        }
    }
}
