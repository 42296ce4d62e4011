//! Request-path state that no actor owns: concurrency gates and request queues (changed only
//! through the permits they hand out), session-affinity pins, the homes of relayed sessions, the lease policy and the
//! persisted settings layer. The provider and connection handles, which the actors write,
//! live with the actors (`crate::actors::handles`).

pub mod affinity;
pub mod gate;
pub mod lease_policy;
pub mod queue;
pub mod relay_homes;
pub mod settings_store;

pub use affinity::Affinity;
pub use gate::Gate;
pub use lease_policy::LeasePolicy;
pub use queue::{QueuePermit, RequestQueue};
pub use relay_homes::RelayHomes;
pub use settings_store::SettingsStore;
