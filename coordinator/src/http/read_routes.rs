//! The read side of `/api/cluster/*`: health, nodes, one provider, one connection, settings.

use std::sync::Arc;

use actix_web::{HttpResponse, web};
use serde_json::{Value, json};
use switchyard_shared::admin_kit::clear;

use crate::auth::ManagementKey;
use crate::error::{ApiError, ApiResult};
use crate::health::{self, MAX_ROWS};
use crate::read::{self, epoch_ms};
use crate::service::Coordinator;

/// `GET /api/cluster/health`.
pub async fn health(co: web::Data<Arc<Coordinator>>, _key: ManagementKey) -> ApiResult {
    Ok(HttpResponse::Ok().json(co.health().await))
}

/// `GET /api/cluster/history`: requests/s, errors/s and p95 per provider, last 15 minutes.
pub async fn history(co: web::Data<Arc<Coordinator>>, _key: ManagementKey) -> ApiResult {
    let doc = co
        .history
        .lock()
        .map(|h| h.to_json(&co.catalogue.providers, epoch_ms()))
        .map_err(|_| ApiError::internal("internal_error", "history unavailable"))?;
    Ok(HttpResponse::Ok().json(doc))
}

/// `GET /api/cluster/nodes`.
pub async fn nodes(co: web::Data<Arc<Coordinator>>, _key: ManagementKey) -> ApiResult {
    let nodes = read::read_nodes(&co.store)
        .await
        .map_err(|e| ApiError::store_unavailable(&e))?;
    let now = epoch_ms();
    let rows: Vec<Value> = nodes
        .iter()
        .map(|n| health::node_row(n, &co.params, now).1)
        .collect();
    Ok(HttpResponse::Ok().json(json!({"nodes": rows, "generatedAt": now})))
}

/// The provider of a configured connection, or 400 / 404.
pub(super) fn known_connection<'a>(co: &'a Coordinator, id: &str) -> Result<&'a str, ApiError> {
    Ok(clear::known_connection(&co.catalogue, id)?)
}

/// `GET /api/cluster/providers/{id}`: the breaker, its last transitions, every node's view and
/// the provider's connections.
pub async fn provider(
    co: web::Data<Arc<Coordinator>>,
    _key: ManagementKey,
    path: web::Path<String>,
) -> ApiResult {
    let id = path.into_inner();
    clear::known_provider(&co.catalogue, &id)?;
    let conns: Vec<&str> = co
        .catalogue
        .connections
        .iter()
        .filter(|(_, p)| *p == id)
        .map(|(c, _)| c.as_str())
        .collect();
    let ids = [id.as_str()];
    let (breakers, records, lockouts, nodes) = futures_util::try_join!(
        co.store.read_breakers(&ids),
        co.store.read_connections(&conns),
        read::read_all_lockouts(&co.store, &conns),
        read::read_nodes(&co.store),
    )
    .map_err(|e| ApiError::store_unavailable(&e))?;
    let now = epoch_ms();
    let b = breakers.first();
    let views: serde_json::Map<String, Value> = nodes
        .iter()
        .filter_map(|n| {
            let state = n.heartbeat.as_ref()?.breakers.get(&id)?;
            Some((n.id.clone(), json!(state)))
        })
        .collect();
    let rows: Vec<Value> = records
        .iter()
        .take(MAX_ROWS)
        .map(|c| {
            let locks: Vec<_> = lockouts.iter().filter(|l| l.conn == c.conn).collect();
            health::connection_row(c, &id, &locks, now)
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({
        "id": id,
        "breaker": b.map(|b| json!({
            "state": serde_json::to_value(b.phase).unwrap_or(Value::Null),
            "generation": b.generation,
            "failureCount": b.failure_count,
            "retryAfterMs": b.retry_after_ms,
            "openCycles": b.open_cycles,
        })),
        "lastTransitions": co.feed.transitions(&id),
        "nodeViews": views,
        "connections": rows,
        "generatedAt": now,
    })))
}

/// `GET /api/cluster/connections/{id}`: cooldown, terminal status, level, lockouts, lease and
/// the nodes holding its cluster permits.
pub async fn connection(
    co: web::Data<Arc<Coordinator>>,
    _key: ManagementKey,
    path: web::Path<String>,
) -> ApiResult {
    let id = path.into_inner();
    let provider = known_connection(&co, &id)?.to_owned();
    let keys = co.store.connection_lease_keys(&id);
    let ids = [id.as_str()];
    let lease_keys = [(id.as_str(), keys)];
    let (records, lockouts, leases, permits) = futures_util::try_join!(
        co.store.read_connections(&ids),
        co.store.read_lockouts(&id),
        co.store.read_leases(&lease_keys),
        co.store.permits_read(&id),
    )
    .map_err(|e| ApiError::store_unavailable(&e))?;
    let now = epoch_ms();
    let Some(record) = records.first() else {
        return Err(ApiError::store_unavailable(
            &switchyard_store::StoreError::Unavailable,
        ));
    };
    let locks: Vec<_> = lockouts.iter().collect();
    let mut row = health::connection_row(record, &provider, &locks, now);
    row["lease"] = leases.first().map_or(Value::Null, |l| {
        json!({
            "ownerHashPrefix": l.owner_hash_prefix,
            "apiKeyId": l.api_key_id,
            "generation": l.generation,
            "remainingMs": l.remaining_ms,
            "expiresAt": now.saturating_add(l.remaining_ms),
        })
    });
    row["permits"] = permits
        .iter()
        .map(|(node, n)| json!({"node": node, "permits": n}))
        .collect();
    row["generatedAt"] = json!(now);
    Ok(HttpResponse::Ok().json(row))
}

/// `GET /api/cluster/settings`: the stored runtime layer and its version.
pub async fn settings(co: web::Data<Arc<Coordinator>>, _key: ManagementKey) -> ApiResult {
    let (version, persisted) = crate::settings_action::read_settings(&co).await?;
    Ok(HttpResponse::Ok().json(json!({"version": version, "persisted": persisted})))
}
