//! The handles the actors publish: one per connection and one per provider, shared by the
//! request path (readers of their snapshots and atomics) and their actor (the sole writer of
//! their resilience state).
//!
//! Why they live with the actors: a handle carries its actor's address, and the actor writes
//! its snapshots, so the two cannot be separated without one of them reaching back up.

pub mod conn;
pub mod provider;
pub mod tool_limits;

pub use conn::{ConnHandle, ConnSnapshot};
pub use provider::{BreakerSnapshot, ProviderHandle, endpoint_url};
