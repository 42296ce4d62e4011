//! `GET` / `PATCH /api/cluster/settings`: the runtime settings layer in Redis.
//!
//! A patch is validated with the node's own rules ([`SettingsPatch::from_json`],
//! [`apply_patch`]: 400 `invalid_settings` naming every bad field, nothing half-applied),
//! merged into the stored layer, written with a new version and announced with
//! `SettingsVersion`, which nodes answer by reloading the layer.

use serde_json::{Value, json};
use switchyard_shared::settings::{FieldError, Persisted, SettingsPatch, apply_patch};
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
                ApiError::new(
                    actix_web::http::StatusCode::INTERNAL_SERVER_ERROR,
                    "server_error",
                    "stored_settings_unreadable",
                    format!("The stored settings document cannot be read: {e}"),
                )
            }),
    }
}

/// 400 `invalid_settings`, naming the first bad field (the node's answer).
pub fn invalid_settings(errors: Vec<FieldError>) -> ApiError {
    let message = match errors.first() {
        Some(first) if !first.path.is_empty() => {
            format!("Invalid settings: {}: {}", first.path, first.message)
        }
        Some(first) => format!("Invalid settings: {}", first.message),
        None => "Invalid settings".to_owned(),
    };
    ApiError::bad_request("invalid_settings", message)
        .with_details(errors.into_iter().map(|e| (e.path, e.message)).collect())
}

/// `PATCH /api/cluster/settings`: validated exactly as on a node, merged into the stored layer,
/// written with a new version, announced with `SettingsVersion`.
pub async fn patch_settings(
    co: &Coordinator,
    key: &ManagementKey,
    body: &str,
) -> Result<Value, ApiError> {
    if body.trim().is_empty() {
        return Err(ApiError::bad_request(
            "missing_body",
            "A JSON settings patch is required",
        ));
    }
    let patch = SettingsPatch::from_json(body).map_err(invalid_settings)?;
    if patch.is_empty() {
        return Err(invalid_settings(vec![FieldError::new(
            "",
            "the patch sets no setting",
        )]));
    }
    let (_, persisted) = read_settings(co).await?;
    let next = apply_patch(&persisted, &patch).map_err(invalid_settings)?;
    let doc = serde_json::to_string(&next).map_err(|e| {
        ApiError::new(
            actix_web::http::StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "internal_error",
            e.to_string(),
        )
    })?;
    let version = co.store.settings_write(&doc).await.map_err(|e| {
        co.metrics.action("patch_settings", false);
        ApiError::store_unavailable(&e)
    })?;
    let _ = co.publish(WireEvent::SettingsVersion { version }).await;
    let mut changed = Vec::new();
    leaf_paths(
        &serde_json::to_value(&patch).unwrap_or(Value::Null),
        "",
        &mut changed,
    );
    tracing::warn!(key_id = %key.id, fields = ?changed, version, "cluster: resilience settings patched by operator");
    co.metrics.action("patch_settings", true);
    Ok(json!({"ok": true, "version": version, "changed": changed, "persisted": next}))
}

/// The dotted path of every leaf a patch sets.
fn leaf_paths(value: &Value, prefix: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) if !map.is_empty() && !prefix.starts_with("provider_error_rules") => {
            for (k, v) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaf_paths(v, &path, out);
            }
        }
        _ => out.push(prefix.to_owned()),
    }
}
