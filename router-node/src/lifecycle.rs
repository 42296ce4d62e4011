//! Graceful shutdown.
//!
//! On SIGTERM (or SIGINT) the node fails `/readyz` at once, keeps serving for a short drain
//! delay so load balancers and Kubernetes endpoints notice, then stops accepting connections
//! and lets in-flight requests and streams finish within `shutdown_grace_ms`. A second signal
//! during the drain stops immediately.
//!
//! SIGHUP reloads the config file (see [`crate::reload`]); any number of reloads may come
//! before the termination signal.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use actix::ArbiterHandle;
use actix_web::dev::ServerHandle;
use tokio::signal::unix::{SignalKind, signal};

use crate::reload::RuntimeCell;

/// The delay between failing readiness and closing the listeners: long enough for an endpoint
/// controller to drop the pod, short enough to stay well inside the grace period.
pub fn drain_delay_ms(shutdown_grace_ms: u64) -> u64 {
    (shutdown_grace_ms / 6).clamp(0, 5_000)
}

/// Waits for signals: reloads the config on SIGHUP (actors of a new config start on
/// `arbiter`), drives the shutdown of both servers on SIGTERM/SIGINT.
pub async fn handle_signals(
    cell: Arc<RuntimeCell>,
    client: ServerHandle,
    admin: ServerHandle,
    arbiter: ArbiterHandle,
) {
    let (mut term, mut int, mut hup) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) {
        (Ok(t), Ok(i), Ok(h)) => (t, i, h),
        _ => {
            tracing::error!("cannot install signal handlers; the node will stop only when killed");
            return;
        }
    };
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = hup.recv() => {
                tracing::info!("SIGHUP: reloading the config");
                cell.reload(&arbiter).await;
            }
        }
    }
    let rt = cell.load();
    rt.lifecycle.draining.store(true, Ordering::Release);
    let grace = rt.config.server.shutdown_grace_ms;
    let delay = drain_delay_ms(grace);
    tracing::info!(
        drain_delay_ms = delay,
        shutdown_grace_ms = grace,
        "draining: /readyz now fails"
    );
    let immediate = tokio::select! {
        () = tokio::time::sleep(Duration::from_millis(delay)) => false,
        _ = term.recv() => true,
        _ = int.recv() => true,
    };
    if immediate {
        tracing::warn!("second signal: stopping now");
        tokio::join!(client.stop(false), admin.stop(false));
        return;
    }
    tracing::info!(
        in_flight = rt.stats.inflight.load(Ordering::Relaxed),
        "closing listeners; waiting for in-flight requests"
    );
    let graceful = client.stop(true);
    tokio::select! {
        () = graceful => {}
        _ = term.recv() => {
            tracing::warn!("second signal: stopping now");
            client.stop(false).await;
        }
        _ = int.recv() => {
            tracing::warn!("second signal: stopping now");
            client.stop(false).await;
        }
    }
    admin.stop(true).await;
    tracing::info!("stopped");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drain_delay_stays_inside_the_grace_period() {
        assert_eq!(drain_delay_ms(30_000), 5_000);
        assert_eq!(drain_delay_ms(6_000), 1_000);
        assert_eq!(drain_delay_ms(0), 0);
    }
}
