//! `GET` / `PATCH /api/cluster/settings`: the runtime settings layer in Redis.
//!
//! A patch is validated with the node's own rules (the admin toolkit's
//! [`switchyard_shared::admin_kit::settings`] and
//! [`apply_patch`]: 400 `invalid_settings` naming every bad field, nothing half-applied),
//! merged into the stored layer, written with a new version and announced with
//! `SettingsVersion`, which nodes answer by reloading the layer.

use serde_json::{Value, json};
use switchyard_shared::admin_kit::settings as admin_settings;
use switchyard_shared::settings::{Persisted, apply_patch};
use switchyard_shared::wire::WireEvent;

use crate::auth::ManagementKey;
use crate::error::ApiError;
use crate::service::Coordinator;

/// The stored runtime settings layer and its version.
pub async fn read_settings(co: &Coordinator) -> Result<(u64, Persisted), ApiError> {
    let stored = co
        .store
        .settings_read()
        .await
        .map_err(|e| ApiError::store_unavailable(&e))?;
    match stored {
        None => Ok((0, Persisted::default())),
        Some((version, doc)) => serde_json::from_str(&doc)
            .map(|p| (version, p))
            .map_err(|e| {
                ApiError::internal(
                    "stored_settings_unreadable",
                    format!("The stored settings document cannot be read: {e}"),
                )
            }),
    }
}

/// `PATCH /api/cluster/settings`: validated exactly as on a node, merged into the stored layer,
/// written with a new version, announced with `SettingsVersion`.
pub async fn patch_settings(
    co: &Coordinator,
    key: &ManagementKey,
    body: &str,
) -> Result<Value, ApiError> {
    let patch = admin_settings::parse_patch(body)?;
    let (_, persisted) = read_settings(co).await?;
    let next = apply_patch(&persisted, &patch).map_err(admin_settings::invalid_settings)?;
    let doc = serde_json::to_string(&next)
        .map_err(|e| ApiError::internal("internal_error", e.to_string()))?;
    let version = co.store.settings_write(&doc).await.map_err(|e| {
        co.metrics.action("patch_settings", false);
        ApiError::store_unavailable(&e)
    })?;
    let _ = co.publish(WireEvent::SettingsVersion { version }).await;
    let changed = admin_settings::changed_paths(&patch);
    tracing::warn!(key_id = %key.id, fields = ?changed, version, "cluster: resilience settings patched by operator");
    co.metrics.action("patch_settings", true);
    Ok(json!({"ok": true, "version": version, "changed": changed, "persisted": next}))
}
