//! The two listeners: client API and admin API.

use std::sync::Arc;
use std::time::Duration;

use actix_web::{App, HttpServer, web};

use super::{admin_routes, client_routes, fallback};
use crate::reload::RuntimeCell;

/// Builds and binds both servers; returns them ready to run. Handlers load the current
/// runtime from `cell` per request; listeners and workers come from the first one.
pub fn bind(
    cell: Arc<RuntimeCell>,
) -> std::io::Result<(actix_web::dev::Server, actix_web::dev::Server)> {
    let rt = cell.load();
    let cfg = &rt.config.server;
    let workers = if cfg.workers == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        cfg.workers as usize
    };
    let grace = Duration::from_millis(cfg.shutdown_grace_ms)
        .as_secs()
        .max(1);
    let client_addr = cfg.listen_addr().map_err(std::io::Error::other)?;
    let admin_addr = cfg.admin_listen_addr().map_err(std::io::Error::other)?;

    // Cluster-wide max_concurrent: capped gates follow the blocks leased from Redis.
    crate::cluster_sync::permits::start(&cell);
    let data = web::Data::from(cell);
    let client = HttpServer::new({
        let data = data.clone();
        move || {
            App::new()
                .app_data(data.clone())
                .route(
                    "/v1/chat/completions",
                    web::post().to(client_routes::chat_completions),
                )
                .route("/v1/messages", web::post().to(client_routes::messages))
                .route(
                    "/v1/messages/count_tokens",
                    web::post().to(super::count_tokens::count_tokens),
                )
                .route("/v1/responses", web::post().to(client_routes::responses))
                .route("/v1/models", web::get().to(client_routes::models))
                .route(
                    "/api/v1/session-leases",
                    web::post().to(super::leases::session_leases),
                )
                .default_service(web::to(fallback::not_found))
        }
    })
    // Nagle would hold a stream's last small write (the chunked terminator, or a small SSE
    // frame) until the client's delayed ACK, 40 ms on Linux: every stream ended 40 ms late.
    .on_connect(set_nodelay)
    .workers(workers)
    .shutdown_timeout(grace)
    // Signals are handled by `lifecycle`, which fails readiness before closing listeners.
    .disable_signals()
    // Long LLM generations: never cut a slow request at actix's 5 s default.
    .client_request_timeout(Duration::from_secs(60))
    .keep_alive(Duration::from_secs(75))
    .backlog(4096)
    .bind(client_addr)?
    .run();

    let test_hooks = rt.test_hooks;
    let admin = HttpServer::new(move || {
        let app = App::new()
            .app_data(data.clone())
            .route("/healthz", web::get().to(admin_routes::healthz))
            .route("/readyz", web::get().to(admin_routes::readyz))
            .route("/metrics", web::get().to(super::admin_routes::scrape))
            .configure(crate::admin::configure)
            .default_service(web::to(crate::admin::not_found));
        if test_hooks {
            app.route(
                "/test-hooks/connections/{id}/panic",
                web::post().to(admin_routes::inject_panic),
            )
            .route(
                "/test-hooks/actor-restarts",
                web::get().to(admin_routes::actor_restarts),
            )
            .route(
                "/test-hooks/providers/{id}/panic",
                web::post().to(admin_routes::inject_breaker_panic),
            )
            .route(
                "/test-hooks/cluster/writer/panic",
                web::post().to(admin_routes::inject_writer_panic),
            )
        } else {
            app
        }
    })
    .workers(1)
    .shutdown_timeout(grace)
    .disable_signals()
    .bind(admin_addr)?
    .run();
    Ok((client, admin))
}

/// Turns Nagle's algorithm off on an accepted client connection (plain TCP).
fn set_nodelay(conn: &dyn std::any::Any, _ext: &mut actix_web::dev::Extensions) {
    if let Some(tcp) = conn.downcast_ref::<actix_web::rt::net::TcpStream>()
        && let Err(e) = tcp.set_nodelay(true)
    {
        tracing::debug!("cannot set TCP_NODELAY on a client connection: {e}");
    }
}
