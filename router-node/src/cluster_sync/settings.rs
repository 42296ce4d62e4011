//! Runtime settings shared through Redis.
//!
//! Why: `PATCH /api/resilience` on any node must change every node. The persisted settings
//! layer is one JSON document in Redis with a version; the patching node publishes
//! `SettingsVersion`, and every node (on that event, and on each resync) pulls the document
//! when its version is newer than what it applied. Operators can read the document with
//! `redis-cli HGETALL`.
//!
//! A patch is written with compare-and-set on the version it was computed from
//! ([`switchyard_store::RedisStore::settings_write_if`]), not last-writer-wins: when
//! another node wrote a newer version meanwhile, the fields this patch changed are rebased
//! onto that version ([`rebase`]) and the write is tried again, so concurrent patches of
//! different fields both survive (of the same field, the later write wins). The patching node
//! then applies the merged document on its next pull (at the latest on the next resync).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::Value;
use switchyard_shared::settings::{self, Persisted};
use switchyard_shared::wire::WireEvent;
use switchyard_store::{SettingsWrite, StoreError};

use super::writer;
use crate::actors::ApplySettings;
use crate::cluster::{Cluster, wall_ms};
use crate::runtime::Runtime;

/// Compare-and-set attempts of one patch before it gives up (each lost to a concurrent write).
const CAS_ATTEMPTS: usize = 5;

/// Writes the persisted layer to Redis and announces its new version. Returns the version.
/// `persisted` is the node's layer with one patch applied, computed from the version this
/// node last applied; see the module docs for what happens when Redis moved on meanwhile.
pub async fn persist(cluster: &Cluster, persisted: &Persisted) -> Result<u64, StoreError> {
    let protocol = |message: String| StoreError::Protocol {
        command: "settings_write",
        message,
    };
    let ours = serde_json::to_value(persisted).map_err(|e| protocol(e.to_string()))?;
    let mut expected = cluster.sync.settings_version.load(Ordering::Relaxed);
    let base = cluster.sync.settings_base(expected);
    let mut doc = ours.clone();
    let mut rebased = false;
    for _ in 0..CAS_ATTEMPTS {
        let text = serde_json::to_string(&doc).map_err(|e| protocol(e.to_string()))?;
        match cluster.store.settings_write_if(expected, &text).await? {
            SettingsWrite::Written(version) => {
                if rebased {
                    tracing::info!(version, "settings patch rebased onto a concurrent one");
                } else {
                    // What the caller applies locally is exactly this version.
                    cluster.sync.set_settings_base(version, ours);
                    cluster
                        .sync
                        .settings_version
                        .fetch_max(version, Ordering::Relaxed);
                }
                writer::publish(cluster, wall_ms(), WireEvent::SettingsVersion { version }).await;
                return Ok(version);
            }
            SettingsWrite::Conflict(_) => {
                let Some(base) = &base else {
                    return Err(protocol("the settings changed concurrently".to_owned()));
                };
                let (version, theirs) = match cluster.store.settings_read().await? {
                    Some((v, text)) => (v, serde_json::from_str(&text).unwrap_or(Value::Null)),
                    None => (0, Value::Null),
                };
                doc = rebase(base, &ours, &theirs);
                // The merge must still be a valid settings layer.
                serde_json::from_value::<Persisted>(doc.clone())
                    .map_err(|e| protocol(format!("cannot rebase the settings patch: {e}")))?;
                expected = version;
                rebased = true;
            }
        }
    }
    Err(protocol(
        "the settings kept changing concurrently; nothing was written".to_owned(),
    ))
}

/// Three-way merge of JSON settings layers: `theirs` with every leaf that `ours` changed
/// relative to `base` (set, changed or removed) taken from `ours`. A `null` counts as absent
/// (an unset optional setting).
pub fn rebase(base: &Value, ours: &Value, theirs: &Value) -> Value {
    merge(
        &without_nulls(base),
        &without_nulls(ours),
        &without_nulls(theirs),
    )
}

fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn merge(base: &Value, ours: &Value, theirs: &Value) -> Value {
    match (base, ours, theirs) {
        (Value::Object(b), Value::Object(o), Value::Object(t)) => {
            let mut out = t.clone();
            for key in b.keys().chain(o.keys()) {
                let (bv, ov) = (b.get(key), o.get(key));
                if bv == ov {
                    continue;
                }
                match (bv, ov, t.get(key)) {
                    (Some(bv), Some(ov), Some(tv)) => {
                        out.insert(key.clone(), merge(bv, ov, tv));
                    }
                    // A table both sides created: merge it field by field.
                    (None, Some(ov), Some(tv)) if ov.is_object() && tv.is_object() => {
                        let empty = Value::Object(serde_json::Map::new());
                        out.insert(key.clone(), merge(&empty, ov, tv));
                    }
                    (_, Some(ov), _) => {
                        out.insert(key.clone(), ov.clone());
                    }
                    (_, None, _) => {
                        out.remove(key);
                    }
                }
            }
            Value::Object(out)
        }
        _ if base == ours => theirs.clone(),
        _ => ours.clone(),
    }
}

/// Pulls the shared settings when they are newer than what this node applied (`hint`: the
/// version an event announced, to skip the read when it is not newer). Returns whether new
/// settings were applied.
pub async fn pull(cluster: &Cluster, rt: &Runtime, hint: Option<u64>) -> Result<bool, StoreError> {
    if hint.is_some_and(|v| v <= cluster.sync.settings_version.load(Ordering::Relaxed)) {
        return Ok(false);
    }
    // Read and apply under the writer lock: a document read before a concurrent local patch
    // was written must not be applied after it.
    let _writer = rt.settings_store.lock_writer().await;
    let applied = cluster.sync.settings_version.load(Ordering::Relaxed);
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
    let doc = serde_json::to_value(&persisted).unwrap_or(Value::Null);
    apply_locked(rt, persisted).await;
    cluster.sync.set_settings_base(version, doc);
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
    let _writer = rt.settings_store.lock_writer().await;
    apply_locked(rt, next).await;
}

/// [`apply_persisted`] for a caller that holds the settings writer lock.
async fn apply_locked(rt: &Runtime, next: Persisted) {
    let store = &rt.settings_store;
    let built = settings::build(&rt.config, store.env(), &next);
    if let Err(e) = store.store(next).await {
        tracing::warn!(error = %e, "shared settings not written to the local state file");
    }
    let values = Arc::new(built.values());
    rt.table.settings.store(values.clone());
    if let Ok(mut tracker) = rt.table.provider_cooldown.lock() {
        tracker.set_params(values.provider_cooldown());
    }
    let at = rt.table.clock.now();
    for provider in &rt.table.providers {
        if let Some(addr) = provider.actor.get() {
            addr.do_send(ApplySettings {
                settings: values.clone(),
                at,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::rebase;

    #[test]
    fn concurrent_patches_of_different_fields_both_survive() {
        let base = json!({"a": {"x": 1, "y": 2}, "b": 1});
        let ours = json!({"a": {"x": 5, "y": 2}, "b": 1});
        let theirs = json!({"a": {"x": 1, "y": 7}, "b": 1, "c": true});
        assert_eq!(
            rebase(&base, &ours, &theirs),
            json!({"a": {"x": 5, "y": 7}, "b": 1, "c": true})
        );
    }

    #[test]
    fn the_same_field_takes_ours_and_removals_carry_over() {
        let base = json!({"a": 1, "b": 2});
        let ours = json!({"a": 3});
        let theirs = json!({"a": 4, "b": 2, "d": 0});
        assert_eq!(rebase(&base, &ours, &theirs), json!({"a": 3, "d": 0}));
        // Nothing changed by us: theirs stands as it is.
        assert_eq!(rebase(&base, &base, &theirs), theirs);
    }

    #[test]
    fn a_table_both_sides_created_is_merged() {
        let base = json!({});
        let ours = json!({"breaker": {"oauth": {"threshold": 20}}});
        let theirs = json!({"breaker": {"apikey": {"threshold": 3}}});
        assert_eq!(
            rebase(&base, &ours, &theirs),
            json!({"breaker": {"apikey": {"threshold": 3}, "oauth": {"threshold": 20}}})
        );
    }

    #[test]
    fn an_unset_optional_setting_is_no_change() {
        let base = json!({});
        let ours = json!({"a": null, "b": 5});
        let theirs = json!({"a": 1});
        assert_eq!(rebase(&base, &ours, &theirs), json!({"a": 1, "b": 5}));
    }
}
