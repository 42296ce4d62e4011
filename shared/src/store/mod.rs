//! The shared state store: how router nodes (and the coordinator) share resilience state.
//!
//! Why: in cluster mode a 429 or a breaker trip seen by one node must stop every node, leases
//! and probes must be fenced, and caps must hold across nodes. Redis is that shared memory.
//! Nothing here sits on the ordinary request path: nodes decide from their local snapshots and
//! write here in the background (cooldowns, lockouts, breaker failures); only leased requests
//! and cluster-wide caps wait for Redis, and never longer than the per-command timeout.
//!
//! - [`keys`]: every key name, hash-tagged so each script's keys share one Redis Cluster slot.
//! - [`health`]: the pure Up/Degraded/Down policy that lets a node skip Redis while it is down
//!   instead of paying a timeout per call.
//! - [`RedisStore`]: the connection (a `ConnectionManager`), the timeout on every command, the
//!   health gate and the command observer (latency/error metrics). The operations live in
//!   one module per concern, each with its versioned Lua scripts under `lua/`.
//!
//! Every script takes its time from Redis (`TIME`), never from a node clock, and script names
//! carry a version (`_v1`) so two releases can run side by side during a rolling deploy.

mod breaker;
mod connections;
mod error;
mod events;
pub mod health;
pub mod heartbeat;
pub mod keys;
mod lockouts;
mod membership;
mod redis_store;
mod script_reply;
mod settings;

pub use breaker::{BreakerChange, BreakerParams, ProbeGrant, SharedBreaker};
pub use connections::{ConnRecord, CooldownApplied, CooldownWrite, LEVEL_RETENTION_MS};
pub use error::StoreError;
pub use events::{Subscriber, SubscriberEvent, SubscriberHandle};
pub use health::{HealthPolicy, HealthTracker, RedisState};
pub use heartbeat::NodeHeartbeat;
pub use keys::KeySpace;
pub use lockouts::LockoutRecord;
pub use redis_store::{NoopObserver, RedisStore, RedisStoreConfig, StoreObserver};
