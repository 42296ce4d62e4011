//! The write side of `/api/cluster/*`: request bodies (the node's shapes) to [`crate::actions`].

use std::collections::BTreeSet;
use std::sync::Arc;

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;

use super::body::{self, check_id};
use super::read_routes::known_connection;
use crate::actions;
use crate::auth::ManagementKey;
use crate::error::{ApiError, ApiResult};
use crate::service::Coordinator;

/// Most ids one request may name.
const MAX_IDS: usize = 1000;

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
    check_id(id, "provider")?;
    if co.catalogue.has_provider(id) {
        Ok(())
    } else {
        Err(ApiError::not_found(
            "provider_not_found",
            format!("No provider with id {id:?}"),
        ))
    }
}

/// Body of `POST /api/cluster/cooldowns` (the node's).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ClearBody {
    connection_ids: Option<Vec<String>>,
    all: Option<bool>,
    provider: Option<String>,
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
    let body: ClearBody = body::require(&req, &payload)?;
    let targets = match body {
        ClearBody {
            connection_ids: Some(ids),
            all: None,
            provider: None,
        } => {
            if ids.is_empty() || ids.len() > MAX_IDS {
                return Err(ApiError::field(
                    "connectionIds",
                    "`connectionIds` must list 1 to 1000 connection ids",
                ));
            }
            let unique: BTreeSet<String> = ids.into_iter().collect();
            let mut unknown = Vec::new();
            for (i, id) in unique.iter().enumerate() {
                check_id(id, "connection").map_err(|e| {
                    e.with_details(vec![(format!("connectionIds[{i}]"), "invalid id".into())])
                })?;
                if co.catalogue.provider_of(id).is_none() {
                    unknown.push(id.clone());
                }
            }
            if !unknown.is_empty() {
                return Err(ApiError::not_found(
                    "connection_not_found",
                    format!("Unknown connection id(s): {}", unknown.join(", ")),
                ));
            }
            unique.into_iter().collect()
        }
        ClearBody {
            connection_ids: None,
            all: Some(true),
            provider,
        } => connections_of(&co, provider.as_deref())?,
        _ => {
            return Err(ApiError::field(
                "connectionIds",
                "send either {\"connectionIds\": [...]} or {\"all\": true, \"provider\"?: id}",
            ));
        }
    };
    fresh(&co, actions::clear_cooldowns(&co, &key, targets).await?).await
}

/// Body of `DELETE /api/cluster/model-cooldowns` (the node's).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeleteLockouts {
    provider: Option<String>,
    #[serde(alias = "connectionId")]
    connection: Option<String>,
    model: Option<String>,
    all: Option<bool>,
}

/// `DELETE /api/cluster/model-cooldowns`: `{provider, connection?, model?}` or `{all:true}`.
pub async fn clear_lockouts(
    co: web::Data<Arc<Coordinator>>,
    key: ManagementKey,
    req: HttpRequest,
    payload: web::Bytes,
) -> ApiResult {
    let body: DeleteLockouts = body::require(&req, &payload)?;
    let (targets, provider, model, all) = match body {
        DeleteLockouts {
            all: Some(true),
            provider: None,
            connection: None,
            model: None,
        } => (connections_of(&co, None)?, None, None, true),
        DeleteLockouts { all: Some(_), .. } => {
            return Err(ApiError::field(
                "all",
                "`all` must be true and cannot be combined with provider, connection or model",
            ));
        }
        DeleteLockouts { provider: None, .. } => {
            return Err(ApiError::field(
                "provider",
                "`provider` is required (or send {\"all\": true})",
            ));
        }
        DeleteLockouts {
            provider: Some(provider),
            connection,
            model,
            all: None,
        } => {
            provider_check(&co, &provider)?;
            if let Some(m) = &model
                && (m.is_empty() || m.len() > 256)
            {
                return Err(ApiError::field(
                    "model",
                    "`model` must be 1 to 256 characters",
                ));
            }
            let targets = match connection {
                Some(id) => {
                    if known_connection(&co, &id)? != provider {
                        return Err(ApiError::not_found(
                            "connection_not_found",
                            format!("Provider {provider:?} has no connection {id:?}"),
                        ));
                    }
                    vec![id]
                }
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
