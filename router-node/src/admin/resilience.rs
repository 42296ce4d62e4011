//! `GET` / `PATCH /api/resilience` (the effective settings, with the source of every value)
//! and `POST /api/resilience/reset` (operator reset of provider breakers).
//!
//! A patch is validated as a whole ([`apply_patch`]): any unknown key, wrong type or
//! out-of-range value rejects it with 400 `invalid_settings` and one `details` entry per field,
//! so nothing is half-applied. An accepted patch is merged into the persisted layer, written to
//! the state store first (a failed write changes nothing), then the effective settings are
//! recomputed from all layers and published: request paths read them on their next load, the
//! windowed provider-cooldown tracker takes its new numbers, and the breaker and connection
//! actors get their new profiles by message. The request queues take their new numbers at
//! once (pacing from the next admission; execution slots resized, a slot in use never
//! revoked) and the session-affinity TTL applies to new pins.
//! Sections this node version does not consult yet are stored and reported in `notApplied`.

use std::sync::Arc;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use serde_json::{Value, json};
use switchyard_shared::admin_kit::settings as admin_settings;
use switchyard_shared::settings::{self, FieldError, apply_patch};

use super::ACTOR_TIMEOUT;
use super::auth::ManagementKey;
use super::common::{
    ApiError, ApiResult, Now, provider_idx, read_json, read_raw, store_unavailable,
};
use crate::actors::{ApplySettings, ResetBreaker};
use crate::cluster_sync::operator::{self, OperatorWrite};
use crate::reload::Rt;
use crate::runtime::Runtime;

/// Settings that are read once when the node starts: a patch stores them, a restart applies
/// them. (Prefixes of dotted paths; none since the queues and the affinity TTL apply live.)
const RESTART_REQUIRED: &[&str] = &[];

/// Settings this node version stores but does not consult yet; a patch of them is accepted
/// for forward compatibility and reported in `notApplied`. (None: `provider_error_rules` are
/// read by classification at every failure, `session_leases.ttl_ms` by every lease
/// operation.)
const NOT_APPLIED: &[&str] = &[];

/// `GET /api/resilience`.
pub async fn get_settings(rt: Rt, _key: ManagementKey) -> ApiResult {
    Ok(HttpResponse::Ok().json(settings_body(&rt)))
}

fn settings_body(rt: &Runtime) -> Value {
    let store = &rt.settings_store;
    let persisted = store.persisted();
    let built = settings::build(&rt.config, store.env(), &persisted);
    json!({
        "settings": built.effective,
        "persisted": &*persisted,
        "persistence": store.persistence(),
        "warnings": field_list(&built.warnings),
    })
}

fn field_list(errors: &[FieldError]) -> Vec<Value> {
    errors
        .iter()
        .map(|e| json!({"field": e.path, "message": e.message}))
        .collect()
}

/// 503 `settings_store_unavailable`: in redis mode the shared settings could not be read or
/// written, so nothing was changed.
fn cluster_unavailable(e: &switchyard_store::StoreError) -> ApiError {
    tracing::warn!(error = %e, "shared settings unavailable");
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "server_error",
        "settings_store_unavailable",
        "The shared settings store (Redis) is unreachable; nothing was changed",
    )
}

/// `PATCH /api/resilience`.
pub async fn patch_settings(
    rt: Rt,
    key: ManagementKey,
    req: HttpRequest,
    payload: web::Payload,
) -> ApiResult {
    let raw = read_raw(&req, payload).await?;
    let text = std::str::from_utf8(&raw)
        .map_err(|_| ApiError::bad_request("invalid_json", "The body is not UTF-8 JSON"))?;
    // The toolkit's rules, the same as the coordinator's: 400 `missing_body` or
    // `invalid_settings` naming every bad field.
    let patch = admin_settings::parse_patch(text)?;
    let paths = admin_settings::changed_paths(&patch);

    let store = &rt.settings_store;
    if let Some(cluster) = &rt.table.cluster {
        // Patch the cluster's newest document, not an older local copy of it.
        crate::cluster_sync::settings::pull(cluster, &rt, None)
            .await
            .map_err(|e| cluster_unavailable(&e))?;
    }
    // One patch at a time: from reading the layer to telling the actors.
    let _writer = store.lock_writer().await;
    let next = apply_patch(&store.persisted(), &patch).map_err(admin_settings::invalid_settings)?;
    let built = settings::build(&rt.config, store.env(), &next);
    if let Some(cluster) = &rt.table.cluster {
        // Redis first: a patch that cannot reach the other nodes changes nothing.
        crate::cluster_sync::settings::persist(cluster, &next)
            .await
            .map_err(|e| cluster_unavailable(&e))?;
    }
    if let Err(e) = store.store(next).await {
        tracing::error!(error = %e, "cannot write the persisted settings");
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "state_write_failed",
            "The settings could not be persisted; nothing was changed",
        ));
    }
    let values = Arc::new(built.values());
    rt.table.settings.store(values.clone());
    // The windowed provider cooldown keeps its windows; only its numbers change.
    if let Ok(mut tracker) = rt.table.provider_cooldown.lock() {
        tracker.set_params(values.provider_cooldown());
    }
    // The queues and the affinity TTL take their new numbers at once.
    for conn in &rt.table.connections {
        conn.queue
            .apply(settings::effective_queue(&values, &conn.config));
    }
    rt.table.affinity.set_ttl(values.session_affinity.ttl_ms);
    let now = Now::read(&rt);
    let asks = rt.table.providers.iter().map(|p| {
        let values = values.clone();
        async move {
            let addr = p.actor.get()?;
            let msg = ApplySettings {
                settings: values,
                at: now.mono,
            };
            tokio::time::timeout(ACTOR_TIMEOUT, addr.send(msg))
                .await
                .ok()?
                .ok()
        }
    });
    let replies = futures_util::future::join_all(asks).await;
    let applied = replies.iter().filter(|r| r.is_some()).count();
    let restart_required: Vec<&String> = paths
        .iter()
        .filter(|p| RESTART_REQUIRED.iter().any(|r| p.starts_with(r)))
        .collect();
    let not_applied: Vec<&String> = paths
        .iter()
        .filter(|p| NOT_APPLIED.iter().any(|r| p.starts_with(r)))
        .collect();
    tracing::warn!(
        key_id = %key.id,
        fields = ?paths,
        providers_applied = applied,
        durable = store.persistence().durable,
        "resilience settings patched by operator"
    );
    let mut body = settings_body(&rt);
    body["ok"] = json!(true);
    body["changed"] = json!(paths);
    body["restartRequired"] = json!(restart_required);
    body["notApplied"] = json!(not_applied);
    body["applied"] = json!({
        "providers": applied,
        "failed": replies.len() - applied,
    });
    Ok(HttpResponse::Ok().json(body))
}

/// Body of `POST /api/resilience/reset`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResetBody {
    provider: String,
}

/// `POST /api/resilience/reset`: every breaker, or `{"provider": id}`.
pub async fn reset_breakers(
    rt: Rt,
    key: ManagementKey,
    req: HttpRequest,
    payload: web::Payload,
) -> ApiResult {
    let body: Option<ResetBody> = read_json(&req, payload).await?;
    let targets: Vec<usize> = match &body {
        Some(b) => vec![provider_idx(&rt, &b.provider)?],
        None => (0..rt.table.providers.len()).collect(),
    };
    let now = Now::read(&rt);
    // Redis first: a reset Redis did not take changes nothing here. The ones it took are
    // applied here too, so this node agrees with Redis whatever the answer.
    let mut written = Vec::new();
    let mut refused = None;
    for p in targets.iter().filter_map(|i| rt.table.providers.get(*i)) {
        match operator::write(&rt, OperatorWrite::ResetBreaker { provider: &p.id }).await {
            Ok(()) => written.push(p),
            Err(e) => {
                refused = Some((e, p.id.clone()));
                break;
            }
        }
    }
    let asks = written.iter().map(|p| async move {
        let ok = match p.actor.get() {
            Some(addr) => matches!(
                tokio::time::timeout(ACTOR_TIMEOUT, addr.send(ResetBreaker { at: now.mono })).await,
                Ok(Ok(()))
            ),
            None => false,
        };
        (p.id.clone(), ok)
    });
    let results = futures_util::future::join_all(asks).await;
    let reset: Vec<&str> = results.iter().filter(|r| r.1).map(|r| &*r.0).collect();
    let failed: Vec<&str> = results.iter().filter(|r| !r.1).map(|r| &*r.0).collect();
    tracing::warn!(
        key_id = %key.id,
        providers = ?reset,
        failed = ?failed,
        "provider breakers reset by operator"
    );
    if let Some((e, at)) = refused {
        let not_written: Vec<&str> = targets
            .iter()
            .filter_map(|i| rt.table.providers.get(*i))
            .map(|p| &*p.id)
            .filter(|id| !written.iter().any(|w| &*w.id == *id))
            .collect();
        return Err(store_unavailable(
            &e,
            &format!("the breakers listed under `notWritten` (from `{at}` on) were not reset"),
        )
        .with_field("providers", json!(reset))
        .with_field("notWritten", json!(not_written)));
    }
    if !failed.is_empty() && reset.is_empty() {
        return Err(ApiError::actor_unavailable("the provider breaker"));
    }
    Ok(HttpResponse::Ok().json(json!({
        "ok": failed.is_empty(),
        "resetCount": reset.len(),
        "providers": reset,
        "failed": failed,
        "message": format!("Reset {} provider breaker(s)", reset.len()),
    })))
}
