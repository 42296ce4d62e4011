//! The coordinator's one HTTP listener: probes, metrics, the cluster API and the dashboard.

mod body;
mod read_routes;
mod write_routes;

use std::sync::Arc;

use actix_web::{HttpRequest, HttpResponse, web};

use switchyard_shared::admin_kit::routes;

use crate::dashboard;
use crate::error::ApiError;
use crate::service::Coordinator;

pub use body::MAX_BODY_BYTES;

/// Every route, as `(method, path)`, for the fallback's 405 and the docs.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/api/openapi.json"),
    ("GET", "/api/cluster/health"),
    ("GET", "/api/cluster/history"),
    ("GET", "/api/cluster/nodes"),
    ("GET", "/api/cluster/usage"),
    ("GET", "/api/cluster/providers/{id}"),
    ("POST", "/api/cluster/providers/{id}/reset"),
    ("POST", "/api/cluster/reset"),
    ("GET", "/api/cluster/connections/{id}"),
    ("POST", "/api/cluster/connections/{id}/reinstate"),
    ("POST", "/api/cluster/cooldowns"),
    ("DELETE", "/api/cluster/model-cooldowns"),
    ("DELETE", "/api/cluster/leases/{id}"),
    ("GET", "/api/cluster/settings"),
    ("PATCH", "/api/cluster/settings"),
];

/// Registers every route.
pub fn configure(cfg: &mut web::ServiceConfig) {
    // Room above the limit so an oversized body gets our 413 envelope, not the framework's text.
    cfg.app_data(web::PayloadConfig::new(4 * MAX_BODY_BYTES))
        .route("/healthz", web::get().to(healthz))
        .route("/readyz", web::get().to(readyz))
        .route("/metrics", web::get().to(metrics))
        .route("/api/openapi.json", web::get().to(crate::openapi::document))
        .route("/api/cluster/health", web::get().to(read_routes::health))
        .route("/api/cluster/history", web::get().to(read_routes::history))
        .route("/api/cluster/nodes", web::get().to(read_routes::nodes))
        .route("/api/cluster/usage", web::get().to(crate::usage::usage))
        .route(
            "/api/cluster/providers/{id}",
            web::get().to(read_routes::provider),
        )
        .route(
            "/api/cluster/providers/{id}/reset",
            web::post().to(write_routes::reset_one),
        )
        .route("/api/cluster/reset", web::post().to(write_routes::reset))
        .route(
            "/api/cluster/connections/{id}",
            web::get().to(read_routes::connection),
        )
        .route(
            "/api/cluster/connections/{id}/reinstate",
            web::post().to(write_routes::reinstate),
        )
        .route(
            "/api/cluster/cooldowns",
            web::post().to(write_routes::clear_cooldowns),
        )
        .route(
            "/api/cluster/model-cooldowns",
            web::delete().to(write_routes::clear_lockouts),
        )
        .route(
            "/api/cluster/leases/{id}",
            web::delete().to(write_routes::revoke_lease),
        )
        .route(
            "/api/cluster/settings",
            web::get().to(read_routes::settings),
        )
        .route(
            "/api/cluster/settings",
            web::patch().to(write_routes::patch_settings),
        )
        .route("/", web::get().to(dashboard::index))
        .route("/assets/{name}", web::get().to(dashboard::asset))
        .default_service(web::to(not_found));
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(serde_json::json!({"status": "ok"}))
}

/// Ready while Redis is not known to be down: a coordinator without Redis has nothing to show.
async fn readyz(co: web::Data<Arc<Coordinator>>) -> HttpResponse {
    match co.store.ping().await {
        Ok(()) => HttpResponse::Ok().json(serde_json::json!({"status": "ready"})),
        Err(e) => HttpResponse::ServiceUnavailable()
            .json(serde_json::json!({"status": "not_ready", "reason": e.kind()})),
    }
}

async fn metrics(co: web::Data<Arc<Coordinator>>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(co.metrics.encode())
}

/// 405 for a known path with another method, else 404, both in the error envelope.
async fn not_found(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(routes::fallback(req.method().as_str(), req.path(), ROUTES).into())
}
