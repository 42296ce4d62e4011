//! Actors: the sole writers of resilience state.
//!
//! - [`ConnectionActor`], one per connection: cooldown, terminal status, model lockouts.
//! - [`ProviderBreakerActor`], one per provider: the breaker state machine and the half-open
//!   probe protocol; it supervises its connection actors (actix's `Supervisor` does not restart
//!   after a panic, so supervision is built here).
//!
//! All transitions are pure functions from `switchyard-shared`; the actors only apply their
//! effects and publish snapshots that the hot path reads. Requests talk to them only through
//! [`observe`], [`observe_success`] and [`observe_breaker`], which never wait, plus a rare
//! [`admit_probe`] while the breaker is due for a probe; its [`ProbeGuard`] hands the probe
//! lease back on drop unless an outcome settles it. A full or closed mailbox costs one counted,
//! dropped observation instead of a stalled request. Keeping actor
//! messages off the success path also keeps actix (in passive maintenance) replaceable: only
//! this module knows it.
//!
//! - [`supervision`]: the record of every supervised task and actor (restarts, backoff); the
//!   breaker actors are restarted after a panic by their own keeper, see `breaker`.
//! - [`handles`]: what the actors publish and the request path reads.
//! - [`change`]: what the actors hand to the cluster, through the narrow
//!   [`StatePublisher`](change::StatePublisher) they are given (so this layer never depends
//!   on how the cluster shares state).

mod breaker;
pub mod change;
mod connection;
pub mod handles;
pub mod messages;
mod params;
pub mod persist;
mod probe;
pub mod supervision;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_sibling;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use actix::dev::ToEnvelope;
use actix::{Actor, Addr, ArbiterHandle, Handler, Message};
use switchyard_shared::breaker::Breaker;
use switchyard_shared::settings::ResilienceSettings;

pub use breaker::{
    BREAKER_MAILBOX_CAPACITY, MAX_RESTARTS_PER_WINDOW, ProviderBreakerActor, RESTART_WINDOW,
};
pub use connection::{ConnectionActor, MAILBOX_CAPACITY, PRUNE_INTERVAL};
pub use handles::{BreakerSnapshot, ConnHandle, ConnSnapshot, ProviderHandle};
pub use messages::*;
pub use params::ConnActorParams;
pub use probe::{Admitted, ProbeGuard, admit_probe};

/// Counters of the actor layer, shared with whoever exports metrics.
#[derive(Debug, Default)]
pub struct ActorStats {
    /// Connection actors restarted after a panic (`actor_restarts_total`).
    pub restarts: AtomicU64,
    /// Connection actors left stopped because they used up their restart budget.
    pub restarts_exhausted: AtomicU64,
    /// Breaker observations dropped because the breaker's mailbox was full or closed.
    pub breaker_dropped_observations: AtomicU64,
    /// Where local changes go (redis mode: the cluster writer), set once before the actors
    /// start; every actor hands its local changes to it.
    pub cluster: std::sync::OnceLock<Arc<dyn change::StatePublisher>>,
}

/// Starts one [`ProviderBreakerActor`] per provider on `arbiter`; each starts the
/// [`ConnectionActor`]s of its connections (matched by `provider_idx`) on the same arbiter when
/// it runs.
///
/// `provider.actor` and every `conn.actor` are set before this returns: each connection's
/// mailbox is created here and handed to its actor, so observations sent before the arbiter
/// gets to run the actors are queued, not dropped. Works from inside a running actix `System`
/// (e.g. under `#[actix_web::main]`, with `Arbiter::current()` or a dedicated `Arbiter`) and
/// from any other thread, since it only sends work to `arbiter`. Call it once: a provider whose
/// actor is already set is skipped with a warning.
pub fn start_actors(
    providers: &[Arc<ProviderHandle>],
    connections: &[Arc<ConnHandle>],
    settings: &ResilienceSettings,
    arbiter: &ArbiterHandle,
    stats: Arc<ActorStats>,
) {
    start_actors_seeded(
        providers,
        connections,
        settings,
        arbiter,
        stats,
        &HashMap::new(),
    );
}

/// [`start_actors`], with breakers carried over from a previous runtime (by provider id) on a
/// config reload. Connection actors seed themselves from their handle's snapshot.
pub fn start_actors_seeded(
    providers: &[Arc<ProviderHandle>],
    connections: &[Arc<ConnHandle>],
    settings: &ResilienceSettings,
    arbiter: &ArbiterHandle,
    stats: Arc<ActorStats>,
    breakers: &HashMap<String, Breaker>,
) {
    for provider in providers {
        if provider.actor.get().is_some() {
            tracing::warn!(
                provider = &*provider.id,
                "breaker actor already started; skipped"
            );
            continue;
        }
        let category = provider.config.category;
        let profile = settings.breaker_profile(category);
        let mut breaker = ProviderBreakerActor::new(provider.clone(), profile, stats.clone());
        if let Some(seed) = breakers.get(&*provider.id) {
            breaker = breaker.with_breaker(seed.clone(), profile);
        }
        for conn in connections
            .iter()
            .filter(|c| c.provider_idx == provider.idx)
        {
            let params = ConnActorParams::new(settings, category, &conn.config);
            let (tx, rx) = actix::dev::channel::channel(MAILBOX_CAPACITY);
            conn.actor.store(Some(Arc::new(Addr::new(tx))));
            breaker = breaker.with_child(conn.clone(), params, Some(rx));
        }
        let addr = ProviderBreakerActor::start_in_arbiter(arbiter, move |_| breaker);
        if provider.actor.set(addr).is_err() {
            // Only possible when two calls race, which "call it once" rules out.
            tracing::warn!(provider = &*provider.id, "breaker actor started twice");
        }
    }
    for conn in connections {
        if !providers.iter().any(|p| p.idx == conn.provider_idx) {
            tracing::warn!(
                connection = &*conn.id,
                "connection has no provider; no actor started"
            );
        }
    }
}

/// Hot path: reports a failure to the connection's actor without waiting. Returns whether it
/// was queued; if not (mailbox full, actor stopped or not started) it is counted in
/// `handle.dropped_observations`.
pub fn observe(handle: &ConnHandle, msg: ObserveFailure) -> bool {
    deliver(handle, msg)
}

/// Hot path: cools an egress sibling of a failed connection; same delivery rules as
/// [`observe`].
pub fn sibling_lock(handle: &ConnHandle, msg: SiblingLock) -> bool {
    deliver(handle, msg)
}

/// Hot path: reports a success the snapshot asked for (see
/// [`crate::actors::ConnSnapshot::needs_success_report`]); same delivery rules as [`observe`].
pub fn observe_success(handle: &ConnHandle, msg: ObserveSuccess) -> bool {
    deliver(handle, msg)
}

/// Hot path: reports an attempt's breaker outcome without waiting. Returns whether it was
/// queued; if not it is counted in `stats.breaker_dropped_observations`. (The provider handle
/// has no counter of its own, hence `stats`.)
pub fn observe_breaker(provider: &ProviderHandle, stats: &ActorStats, msg: BreakerObserve) -> bool {
    deliver_to_breaker(provider, stats, msg)
}

fn deliver_to_breaker<M>(provider: &ProviderHandle, stats: &ActorStats, msg: M) -> bool
where
    M: Message + Send + 'static,
    M::Result: Send,
    ProviderBreakerActor: Handler<M>,
    <ProviderBreakerActor as Actor>::Context: ToEnvelope<ProviderBreakerActor, M>,
{
    let delivered = provider
        .actor
        .get()
        .is_some_and(|addr| addr.try_send(msg).is_ok());
    if !delivered {
        stats
            .breaker_dropped_observations
            .fetch_add(1, Ordering::Relaxed);
    }
    delivered
}

fn deliver<M>(handle: &ConnHandle, msg: M) -> bool
where
    M: Message + Send + 'static,
    M::Result: Send,
    ConnectionActor: Handler<M>,
    <ConnectionActor as Actor>::Context: ToEnvelope<ConnectionActor, M>,
{
    let delivered = match &*handle.actor.load() {
        Some(addr) => addr.try_send(msg).is_ok(),
        None => false,
    };
    if !delivered {
        handle.dropped_observations.fetch_add(1, Ordering::Relaxed);
    }
    delivered
}
