//! Cluster-wide operator actions, applied through Redis so every node converges.
//!
//! Each action changes the shared state with the store's own scripts (the same ones nodes
//! use), then publishes the matching wire event with `origin_node = "coordinator:<id>"` so
//! nodes apply it at once instead of at their next resync. Every action is idempotent: doing
//! it twice leaves the same state and reports nothing changed the second time. Each is logged
//! with the caller's management key id and what it touched. Result shapes match the node's
//! admin API (`docs/admin-api.md`), so scripts written for a node work here.

use futures_util::StreamExt as _;
use serde_json::{Value, json};
use switchyard_shared::wire::{BreakerPhase, LeaseEventKind, WireEvent};
use switchyard_store::{LockoutRecord, StoreError};

use crate::auth::ManagementKey;
use crate::error::ApiError;
use crate::service::Coordinator;

/// How many connections one bulk action works on at once.
const CONCURRENCY: usize = 32;

fn store_err(co: &Coordinator, action: &str, e: &StoreError) -> ApiError {
    co.metrics.action(action, false);
    ApiError::store_unavailable(e)
}

/// Resets provider breakers to CLOSED (`POST /api/cluster/reset`, `…/providers/{id}/reset`).
pub async fn reset_breakers(
    co: &Coordinator,
    key: &ManagementKey,
    providers: Vec<String>,
) -> Result<Value, ApiError> {
    let mut reset = Vec::new();
    let mut changed = Vec::new();
    let mut failed = Vec::new();
    for provider in &providers {
        match co.store.breaker_reset(provider).await {
            Ok(change) => {
                // Published even when Redis already read CLOSED: a node whose local view is
                // behind still closes.
                let _ = co
                    .publish(WireEvent::BreakerTransition {
                        provider: provider.clone(),
                        from: change.before,
                        to: BreakerPhase::Closed,
                        generation: change.after.generation,
                        retry_after_ms: 0,
                    })
                    .await;
                if change.changed() {
                    changed.push(provider.clone());
                }
                reset.push(provider.clone());
            }
            Err(e) => {
                tracing::warn!(provider = %provider, error = %e, "breaker reset failed");
                failed.push(provider.clone());
            }
        }
    }
    tracing::warn!(key_id = %key.id, providers = ?reset, changed = ?changed, failed = ?failed,
        "cluster: provider breakers reset by operator");
    if reset.is_empty() && !failed.is_empty() {
        return Err(store_err(co, "reset_breakers", &StoreError::Unavailable));
    }
    co.metrics.action("reset_breakers", failed.is_empty());
    Ok(json!({
        "ok": failed.is_empty(),
        "resetCount": reset.len(),
        "providers": reset,
        "changed": changed,
        "failed": failed,
        "message": format!("Reset {} provider breaker(s)", reset.len()),
    }))
}

/// Clears cooldowns, backoff levels and lockouts (`POST /api/cluster/cooldowns`); terminal
/// connections are skipped, as on a node.
pub async fn clear_cooldowns(
    co: &Coordinator,
    key: &ManagementKey,
    targets: Vec<String>,
) -> Result<Value, ApiError> {
    let ids: Vec<&str> = targets.iter().map(String::as_str).collect();
    let (records, lockout_counts) =
        futures_util::try_join!(co.store.read_connections(&ids), lockout_counts(co, &ids),)
            .map_err(|e| store_err(co, "clear_cooldowns", &e))?;
    let work = records
        .into_iter()
        .zip(lockout_counts)
        .map(|(record, locks)| async move {
            let id = record.conn.clone();
            if let Some(status) = record.terminal {
                return json!({"id": id, "result": "skipped_terminal", "status": status.as_str()});
            }
            if record.remaining_ms == 0 && record.backoff_level == 0 && locks == 0 {
                return json!({"id": id, "result": "unchanged"});
            }
            let lockouts = if locks > 0 {
                co.store.read_lockouts(&id).await.unwrap_or_default()
            } else {
                Vec::new()
            };
            let cleared = match co.store.cooldown_clear(&id).await {
                Ok(true) => true,
                // Turned terminal since the read.
                Ok(false) => return json!({"id": id, "result": "skipped_terminal", "status": null}),
                Err(_) => return json!({"id": id, "result": "failed"}),
            };
            let removed = if locks > 0 {
                match co.store.lockout_clear_connection(&id).await {
                    Ok(n) => n,
                    Err(_) => return json!({"id": id, "result": "failed"}),
                }
            } else {
                0
            };
            if cleared {
                let _ = co
                    .publish(WireEvent::CooldownCleared {
                        connection: id.clone(),
                    })
                    .await;
            }
            publish_lockouts_cleared(co, &lockouts).await;
            json!({"id": id, "result": "cleared", "lockoutsCleared": removed})
        });
    let rows: Vec<Value> = futures_util::stream::iter(work)
        .buffered(CONCURRENCY)
        .collect()
        .await;
    let count = |r: &str| rows.iter().filter(|v| v["result"] == r).count();
    let (cleared, unchanged, skipped, failed) = (
        count("cleared"),
        count("unchanged"),
        count("skipped_terminal"),
        count("failed"),
    );
    let lockouts_cleared: u64 = rows
        .iter()
        .filter_map(|v| v["lockoutsCleared"].as_u64())
        .sum();
    tracing::warn!(key_id = %key.id, cleared, unchanged, skipped_terminal = skipped,
        lockouts_cleared, failed, "cluster: connection cooldowns cleared by operator");
    co.metrics.action("clear_cooldowns", failed == 0);
    Ok(json!({
        "ok": failed == 0,
        "cleared": cleared,
        "unchanged": unchanged,
        "skippedTerminal": skipped,
        "lockoutsCleared": lockouts_cleared,
        "failed": failed,
        "connections": rows,
    }))
}

async fn publish_lockouts_cleared(co: &Coordinator, lockouts: &[LockoutRecord]) {
    for l in lockouts {
        let _ = co
            .publish(WireEvent::LockoutCleared {
                provider: l.provider.clone(),
                connection: l.conn.clone(),
                model: l.model.clone(),
            })
            .await;
    }
}

/// Lockout index sizes, one pipeline.
async fn lockout_counts(co: &Coordinator, ids: &[&str]) -> Result<Vec<i64>, StoreError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for id in ids {
        pipe.cmd("SCARD").arg(co.store.keys().lockout_index(id));
    }
    co.store
        .run("coordinator_lockout_index", |mut con| async move {
            pipe.query_async(&mut con).await
        })
        .await
}

/// Clears model lockouts (`DELETE /api/cluster/model-cooldowns`): on `targets`, optionally
/// only of `provider` and `model`.
pub async fn clear_lockouts(
    co: &Coordinator,
    key: &ManagementKey,
    targets: Vec<String>,
    provider: Option<String>,
    model: Option<String>,
) -> Result<Value, ApiError> {
    let ids: Vec<&str> = targets.iter().map(String::as_str).collect();
    let counts = lockout_counts(co, &ids)
        .await
        .map_err(|e| store_err(co, "clear_lockouts", &e))?;
    let (provider, model) = (&provider, &model);
    let work = ids
        .iter()
        .zip(counts)
        .filter(|(_, n)| *n > 0)
        .map(|(id, _)| async move {
            let Ok(lockouts) = co.store.read_lockouts(id).await else {
                return (id.to_string(), None);
            };
            let mut removed = Vec::new();
            for l in lockouts {
                let wanted = provider.as_ref().is_none_or(|p| *p == l.provider)
                    && model.as_ref().is_none_or(|m| *m == l.model);
                if !wanted {
                    continue;
                }
                match co.store.lockout_clear(&l.provider, &l.conn, &l.model).await {
                    Ok(true) => removed.push(l),
                    Ok(false) => {}
                    Err(_) => return (id.to_string(), None),
                }
            }
            publish_lockouts_cleared(co, &removed).await;
            (id.to_string(), Some(removed.len()))
        });
    let results: Vec<(String, Option<usize>)> = futures_util::stream::iter(work)
        .buffered(CONCURRENCY)
        .collect()
        .await;
    let removed: usize = results.iter().filter_map(|r| r.1).sum();
    let failed: Vec<&str> = results
        .iter()
        .filter(|r| r.1.is_none())
        .map(|r| r.0.as_str())
        .collect();
    tracing::warn!(key_id = %key.id, connections = targets.len(),
        provider = provider.as_deref().unwrap_or("*"), model = model.as_deref().unwrap_or("*"),
        removed, "cluster: model lockouts cleared by operator");
    co.metrics.action("clear_lockouts", failed.is_empty());
    Ok(json!({"ok": failed.is_empty(), "removed": removed, "failed": failed}))
}

/// Reinstates a terminal connection (`POST /api/cluster/connections/{id}/reinstate`).
pub async fn reinstate(co: &Coordinator, key: &ManagementKey, id: &str) -> Result<Value, ApiError> {
    let before = co
        .store
        .read_connections(&[id])
        .await
        .map_err(|e| store_err(co, "reinstate", &e))?;
    let previous = before.first().and_then(|r| r.terminal).map(|t| t.as_str());
    let was_terminal = co
        .store
        .terminal_clear(id)
        .await
        .map_err(|e| store_err(co, "reinstate", &e))?;
    let _ = co
        .publish(WireEvent::TerminalReinstated {
            connection: id.to_owned(),
        })
        .await;
    tracing::warn!(connection = id, key_id = %key.id, was_terminal,
        previous_status = previous.unwrap_or("none"), "cluster: connection reinstated by operator");
    co.metrics.action("reinstate", true);
    Ok(json!({
        "ok": true,
        "connectionId": id,
        "reinstated": was_terminal,
        "previousStatus": previous,
    }))
}

/// Revokes the exclusive session lease on a connection (`DELETE /api/cluster/leases/{id}`).
pub async fn revoke_lease(
    co: &Coordinator,
    key: &ManagementKey,
    id: &str,
) -> Result<Value, ApiError> {
    let keys = co.store.connection_lease_keys(id);
    let current = co
        .store
        .read_leases(&[(id, keys.clone())])
        .await
        .map_err(|e| store_err(co, "revoke_lease", &e))?;
    let generation = current.first().map(|l| l.generation);
    let revoked = co
        .store
        .lease_revoke(&keys)
        .await
        .map_err(|e| store_err(co, "revoke_lease", &e))?;
    if revoked {
        let _ = co
            .publish(WireEvent::LeaseEvent {
                connection: id.to_owned(),
                generation: generation.unwrap_or(0),
                kind: LeaseEventKind::Revoked,
            })
            .await;
    }
    tracing::warn!(connection = id, key_id = %key.id, revoked, generation,
        "cluster: session lease revoked by operator");
    co.metrics.action("revoke_lease", true);
    Ok(json!({"ok": true, "connectionId": id, "revoked": revoked, "generation": generation}))
}
