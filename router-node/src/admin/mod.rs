//! The management API on the admin listener (`/api/*`).
//!
//! Operators inspect and steer a node here: breaker and connection health, the effective
//! resilience settings and runtime patches to them, operator clears of cooldowns, lockouts and
//! terminal states, and the rate-limit-protection toggle. Everything needs the management
//! bearer ([`auth`]) except the OpenAPI document.
//!
//! Handlers never sit on the client request path: they read the snapshots the hot path reads
//! (`ArcSwap` loads, atomics) and send the rare state change to the owning actor with
//! `send().await` under [`ACTOR_TIMEOUT`], so a slow actor costs the operator a timeout, never a
//! client request. Nothing here returns a credential: connection views are built field by field
//! from an explicit whitelist.
//!
//! Routes are declared once, in the `routes!` invocation below: the same list registers them
//! ([`configure`]) and is exported as [`ADMIN_ROUTES`], which a test compares with the OpenAPI
//! document so the document cannot silently fall behind the server.

pub mod auth;
pub mod cooldowns;
pub mod health;
pub mod openapi;
pub mod provider_test;
pub mod queue_pauses;
pub mod rate_limits;
pub mod resilience;
pub mod tool_limits;
pub mod usage;
pub mod usage_wall;

mod common;
mod views;

use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, web};
use switchyard_shared::admin_kit;

pub use common::ApiError;

/// How long an admin handler waits for an actor before giving up on it.
pub const ACTOR_TIMEOUT: Duration = Duration::from_secs(2);

/// Largest admin request body; anything bigger is refused with 413 before parsing.
pub const MAX_BODY_BYTES: usize = admin_kit::MAX_BODY_BYTES;

/// Most rows a list endpoint returns (and most ids one clear request may name).
pub const MAX_LIST: usize = admin_kit::MAX_IDS;

macro_rules! routes {
    ($( $method:ident $path:literal => $handler:path; )*) => {
        /// Every management route this module registers, as `(method, path)` with the path in
        /// actix (and OpenAPI) template syntax.
        pub const ADMIN_ROUTES: &[(&str, &str)] = &[$( (stringify!($method), $path), )*];

        /// Registers every route of [`ADMIN_ROUTES`] on the admin listener's app.
        pub fn configure(cfg: &mut web::ServiceConfig) {
            $( cfg.route($path, web::$method().to($handler)); )*
        }
    };
}

routes! {
    get "/api/openapi.json" => openapi::document;
    get "/api/monitoring/health" => health::health;
    get "/api/resilience" => resilience::get_settings;
    patch "/api/resilience" => resilience::patch_settings;
    post "/api/resilience/reset" => resilience::reset_breakers;
    get "/api/resilience/model-cooldowns" => cooldowns::list_model_cooldowns;
    delete "/api/resilience/model-cooldowns" => cooldowns::delete_model_cooldowns;
    get "/api/resilience/cooldowns" => cooldowns::list_cooldowns;
    post "/api/resilience/cooldowns" => cooldowns::clear_cooldowns;
    get "/api/resilience/connections" => cooldowns::list_connections;
    get "/api/resilience/tool-limits" => tool_limits::list;
    get "/api/resilience/queue-pauses" => queue_pauses::list;
    get "/api/resilience/usage-wall" => usage_wall::list;
    post "/api/resilience/connections/{id}/reinstate" => cooldowns::reinstate;
    post "/api/providers/{id}/test" => provider_test::test;
    get "/api/rate-limits" => rate_limits::list;
    post "/api/rate-limits" => rate_limits::toggle;
    get "/api/usage" => usage::usage;
}

/// The admin listener's fallback: 405 for a known path with another method, else 404, both in
/// the error envelope (the admin toolkit's answer, the same as the coordinator's).
pub async fn not_found(req: HttpRequest) -> HttpResponse {
    let method = req.method().as_str();
    let routes = ADMIN_ROUTES.iter().chain(LISTENER_ROUTES);
    ApiError::from(admin_kit::routes::fallback(method, req.path(), routes)).response()
}

/// Routes of the admin listener registered outside this module (probes, metrics); listed so
/// the fallback can answer 405 for them and the OpenAPI test can require them.
pub const LISTENER_ROUTES: &[(&str, &str)] =
    &[("get", "/healthz"), ("get", "/readyz"), ("get", "/metrics")];
