//! The connection-level operator surface: the cooldown manager, model cooldowns (lockouts),
//! the per-connection status list and the reinstatement of terminal connections.
//!
//! Terminal states (`banned`, `expired`, `credits_exhausted`) are deliberately *not* cleared by
//! the bulk cooldown clear: they mean a credential needs attention, and a "clear everything"
//! button must not hide that. They are listed as `skippedTerminal`; bringing one back is the
//! explicit, audited `POST /api/resilience/connections/{id}/reinstate`.
//!
//! Every change is a message to the connection's actor (its sole writer), sent concurrently for
//! bulk requests and bounded by [`ACTOR_TIMEOUT`]; a connection whose actor does not answer is
//! reported under `failed` rather than failing the whole request. In redis mode each change is
//! written to Redis first ([`crate::cluster_sync::operator`]): a connection whose write Redis
//! did not take is left alone here and listed under `notWritten`, and the answer is 503
//! `cluster_store_unavailable` naming Redis's reply.

use std::collections::BTreeSet;
use std::sync::Arc;

use actix::Message;
use actix::dev::ToEnvelope;
use actix::{Actor, Handler};
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use serde_json::{Value, json};
use switchyard_shared::admin_kit::clear::{
    CooldownClear, CooldownClearBody, LockoutClear, LockoutClearBody,
};

use super::auth::ManagementKey;
use super::common::{
    ApiError, ApiResult, Catalogue, Now, connection_idx, parse_query, provider_idx, require_json,
    store_unavailable, write_cluster,
};
use super::views::{self, ConnClass};
use super::{ACTOR_TIMEOUT, MAX_LIST};
use crate::actors::ConnHandle;
use crate::actors::{ClearCooldown, ClearLockouts, ClearResult, ConnectionActor, Reinstate};
use crate::cluster_sync::operator::{self, OperatorWrite};
use crate::reload::Rt;
use crate::runtime::Runtime;

/// Sends `msg` to the connection's actor and waits at most [`ACTOR_TIMEOUT`].
pub(super) async fn ask<M>(conn: &ConnHandle, msg: M) -> Option<M::Result>
where
    M: Message + Send + 'static,
    M::Result: Send,
    ConnectionActor: Handler<M>,
    <ConnectionActor as Actor>::Context: ToEnvelope<ConnectionActor, M>,
{
    let addr = conn.actor.load_full()?;
    tokio::time::timeout(ACTOR_TIMEOUT, addr.send(msg))
        .await
        .ok()?
        .ok()
}

/// `?provider=` filter.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderQuery {
    provider: Option<String>,
}

/// The connections of `provider` (all when `None`); 404 for an unknown provider.
fn connections_of<'a>(
    rt: &'a Runtime,
    provider: Option<&str>,
) -> Result<Vec<&'a Arc<ConnHandle>>, ApiError> {
    Ok(match provider {
        Some(id) => {
            let idx = provider_idx(rt, id)?;
            rt.table
                .connections
                .iter()
                .filter(|c| c.provider_idx == idx)
                .collect()
        }
        None => rt.table.connections.iter().collect(),
    })
}

fn meta(total: usize, returned: usize) -> Value {
    json!({"total": total, "returned": returned, "capped": returned < total})
}

// === model cooldowns ===

/// `GET /api/resilience/model-cooldowns[?provider=]`: active lockouts, longest first.
pub async fn list_model_cooldowns(rt: Rt, _key: ManagementKey, req: HttpRequest) -> ApiResult {
    let query: ProviderQuery = parse_query(&req)?;
    let conns = connections_of(&rt, query.provider.as_deref())?;
    let now = Now::read(&rt);
    let mut items: Vec<Value> = conns
        .iter()
        .flat_map(|c| views::lockouts(&c.load(), &now))
        .collect();
    items.sort_by_key(|v| std::cmp::Reverse(v["remainingMs"].as_u64().unwrap_or(0)));
    let total = items.len();
    items.truncate(MAX_LIST);
    let returned = items.len();
    Ok(HttpResponse::Ok().json(json!({
        "items": items,
        "meta": meta(total, returned),
        "generatedAt": now.epoch,
    })))
}

/// `DELETE /api/resilience/model-cooldowns`: `{provider, connection?, model?}` or `{all:true}`
/// (validated by the admin toolkit, like the coordinator's).
pub async fn delete_model_cooldowns(
    rt: Rt,
    key: ManagementKey,
    req: HttpRequest,
    payload: web::Payload,
) -> ApiResult {
    let body: LockoutClearBody = require_json(&req, payload).await?;
    let (targets, model, all) = match body.validate(&Catalogue(&rt))? {
        LockoutClear::All => (rt.table.connections.iter().collect::<Vec<_>>(), None, true),
        LockoutClear::Provider {
            provider,
            connection,
            model,
        } => {
            let pidx = provider_idx(&rt, &provider)?;
            let targets = rt
                .table
                .connections
                .iter()
                .filter(|c| c.provider_idx == pidx)
                .filter(|c| connection.as_deref().is_none_or(|id| *c.id == *id))
                .collect();
            (targets, model, false)
        }
    };
    let at = rt.table.clock.now();
    let rt = &rt;
    let asks = targets.iter().map(|conn| {
        let msg = ClearLockouts {
            model: model.clone(),
            at,
        };
        async move {
            // Redis first: a clear Redis did not take changes nothing here.
            let write = OperatorWrite::ClearLockouts {
                provider: &rt.table.providers[conn.provider_idx].id,
                conn: &conn.id,
                model: msg.model.as_deref(),
            };
            if let Err(e) = operator::write(rt, write).await {
                return (conn.id.clone(), Err(e));
            }
            (conn.id.clone(), Ok(ask(conn, msg).await))
        }
    });
    let results = futures_util::future::join_all(asks).await;
    let removed: usize = results
        .iter()
        .filter_map(|r| r.1.as_ref().ok().copied().flatten())
        .sum();
    let failed: Vec<&str> = results
        .iter()
        .filter(|r| matches!(r.1, Ok(None)))
        .map(|r| &*r.0)
        .collect();
    if let Some(e) = results.iter().find_map(|r| r.1.as_ref().err()) {
        let not_written: Vec<&str> = results
            .iter()
            .filter(|r| r.1.is_err())
            .map(|r| &*r.0)
            .collect();
        tracing::warn!(key_id = %key.id, removed, not_written = ?not_written, "model lockout clear refused by the cluster store");
        return Err(store_unavailable(
            e,
            "the connections listed under `notWritten` were not changed",
        )
        .with_field("removed", removed)
        .with_field("notWritten", json!(not_written))
        .with_field("failed", json!(failed)));
    }
    tracing::warn!(
        key_id = %key.id,
        connections = targets.len(),
        model = model.as_deref().unwrap_or("*"),
        removed,
        "model lockouts cleared by operator"
    );
    let mut body = json!({"ok": failed.is_empty(), "removed": removed, "failed": failed});
    if all {
        body["clearedAll"] = json!(true);
    }
    Ok(HttpResponse::Ok().json(body))
}

// === cooldown manager ===

/// `GET /api/resilience/cooldowns[?provider=]`.
pub async fn list_cooldowns(rt: Rt, _key: ManagementKey, req: HttpRequest) -> ApiResult {
    let query: ProviderQuery = parse_query(&req)?;
    let conns = connections_of(&rt, query.provider.as_deref())?;
    let now = Now::read(&rt);
    let rows: Vec<Value> = conns
        .iter()
        .take(MAX_LIST)
        .map(|c| views::cooldown_row(c, &now))
        .collect();
    Ok(HttpResponse::Ok().json(json!({
        "connections": rows,
        "meta": meta(conns.len(), rows.len()),
        "generatedAt": now.epoch,
    })))
}

/// `POST /api/resilience/cooldowns`: `{connectionIds:[…]}` or `{all:true, provider?}`
/// (validated by the admin toolkit, like the coordinator's).
pub async fn clear_cooldowns(
    rt: Rt,
    key: ManagementKey,
    req: HttpRequest,
    payload: web::Payload,
) -> ApiResult {
    let body: CooldownClearBody = require_json(&req, payload).await?;
    let targets: Vec<&Arc<ConnHandle>> = match body.validate(&Catalogue(&rt))? {
        CooldownClear::Ids(ids) => ids
            .iter()
            .filter_map(|id| rt.table.connection(id))
            .collect(),
        CooldownClear::All { provider } => connections_of(&rt, provider.as_deref())?,
    };
    let at = rt.table.clock.now();
    let rt = &rt;
    let asks = targets.iter().map(|conn| async move {
        let before = conn.load().terminal();
        // Redis first: a clear Redis did not take changes nothing here.
        let write = OperatorWrite::ClearCooldown { conn: &conn.id };
        match operator::write(rt, write).await {
            Ok(()) => (conn, before, Ok(ask(conn, ClearCooldown { at }).await)),
            Err(e) => (conn, before, Err(e)),
        }
    });
    let results = futures_util::future::join_all(asks).await;
    let mut not_written = Vec::new();
    let mut store_error = None;
    let (mut cleared, mut unchanged, mut skipped, mut lockouts_cleared) = (0, 0, 0, 0);
    let mut failed = Vec::new();
    let rows: Vec<Value> = results
        .iter()
        .map(|(conn, before, result)| {
            let id = &*conn.id;
            let result = match result {
                Ok(result) => result,
                Err(e) => {
                    not_written.push(id);
                    store_error.get_or_insert(e);
                    return json!({"id": id, "result": "not_written", "storeError": e.reason()});
                }
            };
            match result {
                Some(ClearResult::Cleared {
                    lockouts_cleared: n,
                }) => {
                    cleared += 1;
                    lockouts_cleared += n;
                    json!({"id": id, "result": "cleared", "lockoutsCleared": n})
                }
                Some(ClearResult::Unchanged) => {
                    unchanged += 1;
                    json!({"id": id, "result": "unchanged"})
                }
                Some(ClearResult::SkippedTerminal) => {
                    skipped += 1;
                    let status = conn.load().terminal().or(*before).map(|t| t.as_str());
                    json!({"id": id, "result": "skipped_terminal", "status": status})
                }
                None => {
                    failed.push(id);
                    json!({"id": id, "result": "failed"})
                }
            }
        })
        .collect();
    tracing::warn!(
        key_id = %key.id,
        cleared,
        unchanged,
        skipped_terminal = skipped,
        lockouts_cleared,
        failed = failed.len(),
        not_written = not_written.len(),
        "connection cooldowns cleared by operator"
    );
    if let Some(e) = store_error {
        return Err(store_unavailable(
            e,
            "the connections listed under `notWritten` were not changed",
        )
        .with_field("cleared", cleared)
        .with_field("notWritten", json!(not_written))
        .with_field("connections", rows));
    }
    Ok(HttpResponse::Ok().json(json!({
        "ok": failed.is_empty(),
        "cleared": cleared,
        "unchanged": unchanged,
        "skippedTerminal": skipped,
        "lockoutsCleared": lockouts_cleared,
        "failed": failed.len(),
        "connections": rows,
    })))
}

// === per-connection status ===

/// `GET /api/resilience/connections` query.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConnectionsQuery {
    provider: Option<String>,
    limit: Option<usize>,
}

/// `GET /api/resilience/connections[?provider=&limit=]`.
pub async fn list_connections(rt: Rt, _key: ManagementKey, req: HttpRequest) -> ApiResult {
    let query: ConnectionsQuery = parse_query(&req)?;
    let limit = query.limit.unwrap_or(MAX_LIST);
    if !(1..=MAX_LIST).contains(&limit) {
        return Err(ApiError::bad_request(
            "invalid_query",
            format!("`limit` must be between 1 and {MAX_LIST}"),
        )
        .with_details(vec![("limit".into(), "out of range".into())]));
    }
    let conns = connections_of(&rt, query.provider.as_deref())?;
    let now = Now::read(&rt);
    let settings = rt.table.settings.load();
    let statuses = views::breaker_statuses(&rt, &now).await;
    let mut cooling = 0;
    let mut terminal = 0;
    for conn in &conns {
        match ConnClass::of(&conn.load(), &now) {
            ConnClass::CoolingDown => cooling += 1,
            ConnClass::Terminal => terminal += 1,
            _ => {}
        }
    }
    let rows: Vec<Value> = conns
        .iter()
        .take(limit)
        .filter_map(|conn| {
            let provider = rt.table.providers.get(conn.provider_idx)?;
            Some(views::connection_row(provider, conn, &settings, &now))
        })
        .collect();
    let providers: BTreeSet<usize> = conns.iter().map(|c| c.provider_idx).collect();
    let breakers: Vec<Value> = providers
        .iter()
        .filter_map(|i| {
            let provider = rt.table.providers.get(*i)?;
            let status = statuses.get(*i).and_then(Option::as_ref);
            Some(views::breaker(provider, status, &now))
        })
        .collect();
    let unhealthy = breakers.iter().filter(|b| b["state"] != "CLOSED").count();
    let mut m = meta(conns.len(), rows.len());
    m["limit"] = json!(limit);
    m["coolingDownCount"] = json!(cooling);
    m["terminalCount"] = json!(terminal);
    m["unhealthyBreakerCount"] = json!(unhealthy);
    Ok(HttpResponse::Ok().json(json!({
        "connections": rows,
        "breakers": breakers,
        "meta": m,
        "generatedAt": now.epoch,
    })))
}

/// `POST /api/resilience/connections/{id}/reinstate`: clears a terminal state (audited).
pub async fn reinstate(rt: Rt, key: ManagementKey, path: web::Path<String>) -> ApiResult {
    let id = path.into_inner();
    let conn = rt
        .table
        .connections
        .get(connection_idx(&rt, &id)?)
        .ok_or_else(|| ApiError::not_found("connection_not_found", "No such connection"))?;
    write_cluster(&rt, OperatorWrite::Reinstate { conn: &conn.id }).await?;
    let previous = conn.load().terminal();
    let at = rt.table.clock.now();
    let Some(was_terminal) = ask(conn, Reinstate { at }).await else {
        return Err(ApiError::actor_unavailable("the connection"));
    };
    let previous = previous.map(|t| t.as_str());
    tracing::warn!(
        connection = &*conn.id,
        key_id = %key.id,
        was_terminal,
        previous_status = previous.unwrap_or("none"),
        "connection reinstated by operator"
    );
    let now = Now::read(&rt);
    let status = ConnClass::of(&conn.load(), &now).as_str();
    Ok(HttpResponse::build(StatusCode::OK).json(json!({
        "ok": true,
        "connectionId": &*conn.id,
        "reinstated": was_terminal,
        "previousStatus": previous,
        "status": status,
    })))
}
