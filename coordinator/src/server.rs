//! Running a coordinator replica: the listener, the event feed, the leader loop and the
//! janitor, until SIGINT/SIGTERM (then the leader lease is released for a fast takeover).

use std::process::ExitCode;
use std::sync::Arc;

use actix_web::{App, HttpServer, web};

use crate::config::{Settings, redact_url};
use crate::leader;
use crate::service::Coordinator;

/// Serves until stopped.
pub fn run(settings: Settings) -> ExitCode {
    let system = actix_rt::System::new();
    system.block_on(async move {
        let co = match Coordinator::new(settings) {
            Ok(co) => Arc::new(co),
            Err(e) => {
                tracing::error!("{e}");
                return ExitCode::from(1);
            }
        };
        let listen = co.settings.listen;
        tracing::info!(
            id = %co.settings.coordinator_id,
            listen = %listen,
            redis = %redact_url(&co.settings.redis_url),
            providers = co.catalogue.providers.len(),
            connections = co.catalogue.connections.len(),
            lease_ttl_ms = co.settings.lease_ttl_ms,
            "coordinator starting"
        );
        let feed_task = co.feed.spawn(&co.store);
        let leader_task = tokio::spawn(leader::run(Arc::clone(&co)));
        let janitor_task = tokio::spawn(leader::run_janitor(Arc::clone(&co)));
        let refresh_task = tokio::spawn(crate::service::refresh_loop(Arc::clone(&co)));
        let history_task = tokio::spawn(crate::sampler::run(Arc::clone(&co)));
        let data = web::Data::new(Arc::clone(&co));
        let keys = web::Data::new(crate::auth::Keys {
            management: co.settings.management_key_sha256,
            clients: co.settings.client_key_sha256.clone(),
        });
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .app_data(keys.clone())
                .configure(crate::http::configure)
        })
        .workers(2)
        .shutdown_timeout(5)
        .bind(listen);
        let server = match server {
            Ok(s) => s.run(),
            Err(e) => {
                tracing::error!(listen = %listen, error = %e, "cannot listen");
                return ExitCode::from(1);
            }
        };
        tracing::info!(listen = %listen, "coordinator listening");
        let result = server.await;
        // Stop the janitor before giving the lease up.
        janitor_task.abort();
        leader_task.abort();
        feed_task.abort();
        refresh_task.abort();
        history_task.abort();
        leader::release(&co).await;
        match result {
            Ok(()) => {
                tracing::info!("coordinator stopped");
                ExitCode::SUCCESS
            }
            Err(e) => {
                tracing::error!(error = %e, "server error");
                ExitCode::from(1)
            }
        }
    })
}

/// Logs to stderr, filtered by `RUST_LOG` (default `info`).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
