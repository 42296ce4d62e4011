//! The write side of `/api/cluster/*`: request bodies (the node's shapes) to [`crate::actions`].

use std::sync::Arc;

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use switchyard_shared::admin_kit::clear::{
    self, CooldownClear, CooldownClearBody, LockoutClear, LockoutClearBody,
};

use super::body;
use super::read_routes::known_connection;
use crate::actions;
use crate::auth::ManagementKey;
use crate::error::{ApiError, ApiResult};
use crate::service::Coordinator;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResetBody {
    provider: String,
}

/// `POST /api/cluster/reset`: every breaker, or `{"provider": id}`.
pub async fn reset(
    co: web::Data<Arc<Coordinator>>,
    key: ManagementKey,
    req: HttpRequest,
    payload: web::Bytes,
) -> ApiResult {
    let body: Option<ResetBody> = body::json(&req, &payload)?;
    let targets = match body {
        Some(b) => {
            provider_check(&co, &b.provider)?;
            vec![b.provider]
        }
        None => co.catalogue.providers.clone(),
    };
    fresh(&co, actions::reset_breakers(&co, &key, targets).await?).await
}

/// `POST /api/cluster/providers/{id}/reset`.
pub async fn reset_one(
    co: web::Data<Arc<Coordinator>>,
    key: ManagementKey,
    path: web::Path<String>,
) -> ApiResult {
    let id = path.into_inner();
    provider_check(&co, &id)?;
    fresh(&co, actions::reset_breakers(&co, &key, vec![id]).await?).await
}

fn provider_check(co: &Coordinator, id: &str) -> Result<(), ApiError> {
    Ok(clear::known_provider(&co.catalogue, id)?)
}

fn connections_of(co: &Coordinator, provider: Option<&str>) -> Result<Vec<String>, ApiError> {
    if let Some(p) = provider {
        provider_check(co, p)?;
    }
    Ok(co
        .catalogue
        .connections
        .iter()
        .filter(|(_, p)| provider.is_none_or(|want| want == p))
        .map(|(c, _)| c.clone())
        .collect())
}

/// `POST /api/cluster/cooldowns`: `{connectionIds:[…]}` or `{all:true, provider?}`.
pub async fn clear_cooldowns(
    co: web::Data<Arc<Coordinator>>,
    key: ManagementKey,
    req: HttpRequest,
    payload: web::Bytes,
) -> ApiResult {
    let body: CooldownClearBody = body::require(&req, &payload)?;
    let targets = match body.validate(&co.catalogue)? {
        CooldownClear::Ids(ids) => ids,
        CooldownClear::All { provider } => connections_of(&co, provider.as_deref())?,
    };
    fresh(&co, actions::clear_cooldowns(&co, &key, targets).await?).await
}

/// `DELETE /api/cluster/model-cooldowns`: `{provider, connection?, model?}` or `{all:true}`.
pub async fn clear_lockouts(
    co: web::Data<Arc<Coordinator>>,
    key: ManagementKey,
    req: HttpRequest,
    payload: web::Bytes,
) -> ApiResult {
    let body: LockoutClearBody = body::require(&req, &payload)?;
    let (targets, provider, model, all) = match body.validate(&co.catalogue)? {
        LockoutClear::All => (connections_of(&co, None)?, None, None, true),
        LockoutClear::Provider {
            provider,
            connection,
            model,
        } => {
            let targets = match connection {
                Some(id) => vec![id],
                None => connections_of(&co, Some(&provider))?,
            };
            (targets, Some(provider), model, false)
        }
    };
    let mut result = actions::clear_lockouts(&co, &key, targets, provider, model).await?;
    if all {
        result["clearedAll"] = serde_json::json!(true);
    }
    fresh(&co, result).await
}

/// `POST /api/cluster/connections/{id}/reinstate`.
pub async fn reinstate(
    co: web::Data<Arc<Coordinator>>,
    key: ManagementKey,
    path: web::Path<String>,
) -> ApiResult {
    let id = path.into_inner();
    known_connection(&co, &id)?;
    fresh(&co, actions::reinstate(&co, &key, &id).await?).await
}

/// `DELETE /api/cluster/leases/{id}`: revoke the session lease on connection `id`.
pub async fn revoke_lease(
    co: web::Data<Arc<Coordinator>>,
    key: ManagementKey,
    path: web::Path<String>,
) -> ApiResult {
    let id = path.into_inner();
    known_connection(&co, &id)?;
    fresh(&co, actions::revoke_lease(&co, &key, &id).await?).await
}

/// `PATCH /api/cluster/settings`.
pub async fn patch_settings(
    co: web::Data<Arc<Coordinator>>,
    key: ManagementKey,
    req: HttpRequest,
    payload: web::Bytes,
) -> ApiResult {
    let text = body::text(&req, &payload)?;
    fresh(
        &co,
        crate::settings_action::patch_settings(&co, &key, text).await?,
    )
    .await
}

/// Re-reads the state after an action, so the next health answer (the dashboard's refresh)
/// already shows its effect.
async fn fresh(co: &Coordinator, result: serde_json::Value) -> ApiResult {
    co.refresh().await;
    Ok(HttpResponse::Ok().json(result))
}
