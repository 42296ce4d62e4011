//! The shared state store: how router nodes (and the coordinator) share resilience state.
//!
//! A crate of its own, beside `switchyard-shared` (the pure policy and the wire events it
//! stores): the policy crate stays free of I/O and builds without Redis, tokio or TLS, and
//! whatever needs only the policy (the fuzz targets, the criterion benches) does not compile
//! the Redis client.
//!
//! Why: in cluster mode a 429 or a breaker trip seen by one node must stop every node, leases
//! and probes must be fenced, and caps must hold across nodes. Redis is that shared memory.
//! Nothing here sits on the ordinary request path: nodes decide from their local snapshots and
//! write here in the background (cooldowns, lockouts, breaker failures); only leased requests
//! and cluster-wide caps wait for Redis, and never longer than the per-command timeout.
//!
//! - [`RedisFault`]: what a failed call means (`OOM`, `READONLY`, `LOADING`, a timeout, …),
//!   whether it passes by itself, and whether the server still serves reads.
//! - [`keys`]: every key name, hash-tagged so each script's keys share one Redis Cluster slot;
//!   on Redis Cluster the prefix is the tag, so one install's keys all share one slot.
//! - [`health`]: the pure Up/Degraded/Down policy that lets a node skip Redis while it is down
//!   instead of paying a timeout per call.
//! - [`RedisStore`]: the connections (one for commands, a second one for the resync's bulk
//!   reads; each a [`StoreConnection`] over one server, a Sentinel-named master or a Redis
//!   Cluster: modules `sentinel`, `cluster`, `connection`), the timeout on every command, the
//!   health gate and the command observer (latency/error metrics). The operations live in one module per concern, each
//!   with its versioned Lua scripts under `lua/`.
//! - [`connections`], [`lockouts`]: extend-only cooldowns, sticky terminal states and model
//!   lockouts, with the cluster-wide thundering-herd guard inside the scripts.
//! - [`changelog`]: the bounded stream of record versions those scripts append to, so a node's
//!   periodic resync reads only what changed (and when to fall back to a full scan).
//! - [`breaker`]: windowed failure counting, transitions and the single fenced half-open probe.
//! - [`settings`], [`membership`]: versioned runtime settings and node heartbeats (JSON).
//! - [`events`]: publishing wire events and the pub/sub subscriber that reports reconnects.
//! - [`leases`]: fenced leases (exclusive session leases, the coordinator's leader lease);
//!   [`embedded`] is the same lease semantics in process for embedded mode.
//! - [`permits`]: cluster-wide `max_concurrent` as leased blocks of permits per node.
//! - [`buckets`]: cluster-wide requests-per-minute token buckets.
//!
//! Every script takes its time from Redis (`TIME`), never from a node clock, and script names
//! carry a version (`_v1`) so two releases can run side by side during a rolling deploy.

pub mod breaker;
pub mod buckets;
pub mod changelog;
mod cluster;
mod connection;
pub mod connections;
pub mod embedded;
mod error;
pub mod events;
mod fault;
pub mod health;
pub mod heartbeat;
pub mod keys;
pub mod learned;
pub mod learned_read;
pub mod leases;
pub mod lockouts;
mod master_generation;
pub mod membership;
pub mod permits;
mod redis_store;
mod replies;
mod sentinel;
pub mod sentinel_watch;
pub mod settings;
mod url;

pub use breaker::{BreakerChange, BreakerParams, ProbeGrant, SharedBreaker};
pub use buckets::BucketResult;
pub use changelog::{ChangeEntry, FullReason, LogPage, ResyncPlan, StreamId};
pub use connection::{ClusterLink, StoreConnection};
pub use connections::{
    ConnRecord, ConnState, ConnWrite, CooldownApplied, CooldownWrite, LEVEL_RETENTION_MS,
    SuccessApplied,
};
pub use embedded::EmbeddedLeases;
pub use error::StoreError;
pub use events::{Subscriber, SubscriberEvent, SubscriberHandle};
pub use fault::RedisFault;
pub use health::{HealthPolicy, HealthTracker, RedisState};
pub use heartbeat::NodeHeartbeat;
pub use keys::KeySpace;
pub use learned::{LaneEnd, LearnedKey, ToolLimitStored, WallDeadlines, WallMerged};
pub use learned_read::{ToolLimitRecord, ToolLimitState, WallRecord};
pub use leases::{
    FenceCheck, LeaseAcquire, LeaseGrant, LeaseInfo, LeaseKeys, LeaseMove, owner_hash,
};
pub use lockouts::{LockoutApplied, LockoutRecord};
pub use master_generation::MasterSeen;
pub use membership::Membership;
pub use permits::local_share;
pub use redis_store::{NoopObserver, RedisStore, RedisStoreConfig, StoreObserver};
pub use sentinel_watch::{MasterSwitch, MasterSwitches};
pub use settings::SettingsWrite;
pub use url::{REDIS_URL_ENV, effective_url, redact_url};
