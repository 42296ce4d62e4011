//! Shared, read-mostly state of providers and connections (handles, snapshots, gates, queues).

pub mod conn;
pub mod gate;
pub mod persist;
pub mod provider;
pub mod queue;

pub use conn::{ConnHandle, ConnSnapshot};
pub use gate::Gate;
pub use provider::{BreakerSnapshot, ProviderHandle};
pub use queue::{QueuePermit, RequestQueue};
