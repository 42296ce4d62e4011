//! Shared, read-mostly state of providers and connections (handles, snapshots, gates, queues).

pub mod affinity;
pub mod gate;
pub mod lease_policy;
pub mod queue;
pub mod settings_store;

pub use affinity::Affinity;
pub use gate::Gate;
pub use lease_policy::LeasePolicy;
pub use queue::{QueuePermit, RequestQueue};
pub use settings_store::SettingsStore;
