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
mod params;

pub use messages::*;
pub use params::{ConnActorParams, breaker_profile, cooldown_params, lockout_settings};

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
