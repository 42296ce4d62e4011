//! Actors: the sole writers of resilience state.
//!
//! - [`ConnectionActor`], one per connection: cooldown, terminal status, model lockouts.
//! - [`ProviderBreakerActor`], one per provider: the breaker state machine and the half-open
//!   probe protocol; it supervises its connection actors (actix's `Supervisor` does not restart
//!   after a panic, so supervision is built here).
//!
//! All transitions are pure functions from `switchyard-shared`; the actors only apply their
//! effects and publish snapshots that the hot path reads.

pub mod messages;

pub use messages::*;

use actix::{Actor, Context};

/// Sole writer of one connection's resilience state.
pub struct ConnectionActor {}

impl Actor for ConnectionActor {
    type Context = Context<Self>;
}

/// Owner of one provider's breaker; supervisor of its connection actors.
pub struct ProviderBreakerActor {}

impl Actor for ProviderBreakerActor {
    type Context = Context<Self>;
}

// ---- TEMPORARY interface stubs ----
#[derive(Debug, Default)]
pub struct ActorStats {
    pub restarts: std::sync::atomic::AtomicU64,
}
pub fn start_actors(
    _p: &[std::sync::Arc<crate::state::ProviderHandle>],
    _c: &[std::sync::Arc<crate::state::ConnHandle>],
    _s: &switchyard_shared::settings::ResilienceSettings,
    _a: &actix::ArbiterHandle,
    _st: std::sync::Arc<ActorStats>,
) {
}
pub fn observe(_h: &crate::state::ConnHandle, _m: ObserveFailure) {}
pub fn observe_success(_h: &crate::state::ConnHandle, _m: ObserveSuccess) {}
pub fn observe_breaker(_p: &crate::state::ProviderHandle, _m: BreakerObserve) {}
pub fn release_probe(
    _p: &crate::state::ProviderHandle,
    _g: switchyard_shared::breaker::ProbeGeneration,
    _at: switchyard_shared::Millis,
) {
}
impl actix::Handler<AdmitProbe> for ProviderBreakerActor {
    type Result = actix::MessageResult<AdmitProbe>;
    fn handle(&mut self, _m: AdmitProbe, _c: &mut Self::Context) -> Self::Result {
        actix::MessageResult(switchyard_shared::breaker::Admission::Allowed)
    }
}
impl actix::Handler<InjectPanic> for ConnectionActor {
    type Result = ();
    fn handle(&mut self, _m: InjectPanic, _c: &mut Self::Context) {}
}
