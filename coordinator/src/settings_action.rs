//! `GET` / `PATCH /api/cluster/settings`: the runtime settings layer in Redis.
//!
//! A patch is validated with the node's own rules (the admin toolkit's
//! [`switchyard_shared::admin_kit::settings`] and
//! [`apply_patch`]: 400 `invalid_settings` naming every bad field, nothing half-applied),
//! merged into the stored layer, written with a new version (a compare-and-set on the stored
//! version, retried on a conflict) and announced with
//! `SettingsVersion`, which nodes answer by reloading the layer.

use serde_json::{Value, json};
use switchyard_shared::admin_kit::settings as admin_settings;
use switchyard_shared::settings::{Persisted, apply_patch};
use switchyard_shared::wire::WireEvent;
use switchyard_store::SettingsWrite;

use crate::auth::ManagementKey;
use crate::error::ApiError;
use crate::service::Coordinator;

/// Read-merge-write rounds before a patch that keeps losing the race gives up with 409.
const CAS_ATTEMPTS: u32 = 8;

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
    // Compare-and-set on the stored version, as the nodes do: a patch written between this
    // read and this write (by a node or another coordinator) is merged with, never overwritten.
    let mut attempt = 0;
    let (version, next) = loop {
        attempt += 1;
        let (expected, persisted) = read_settings(co).await?;
        let next = apply_patch(&persisted, &patch).map_err(admin_settings::invalid_settings)?;
        let doc = serde_json::to_string(&next)
            .map_err(|e| ApiError::internal("internal_error", e.to_string()))?;
        match co.store.settings_write_if(expected, &doc).await {
            Ok(SettingsWrite::Written(version)) => break (version, next),
            Ok(SettingsWrite::Conflict(_)) if attempt < CAS_ATTEMPTS => continue,
            Ok(SettingsWrite::Conflict(stored)) => {
                co.metrics.action("patch_settings", false);
                return Err(ApiError::new(
                    actix_web::http::StatusCode::CONFLICT,
                    "invalid_request_error",
                    "settings_conflict",
                    format!(
                        "The settings changed {CAS_ATTEMPTS} times while this patch was applied \
                         (stored version {stored}); send it again."
                    ),
                ));
            }
            Err(e) => {
                co.metrics.action("patch_settings", false);
                return Err(ApiError::store_unavailable(&e));
            }
        }
    };
    let _ = co.publish(WireEvent::SettingsVersion { version }).await;
    let changed = admin_settings::changed_paths(&patch);
    tracing::warn!(key_id = %key.id, fields = ?changed, version, "cluster: resilience settings patched by operator");
    co.metrics.action("patch_settings", true);
    Ok(json!({"ok": true, "version": version, "changed": changed, "persisted": next}))
}
