//! Cluster-wide caps: `max_concurrent` permits leased from Redis, and per-key requests per
//! minute as a token bucket on the Redis clock.
//!
//! Why: a cap enforced per node multiplies by the node count — `max_concurrent = 1` across
//! five nodes is five. In redis mode each node leases a block of a capped connection's permits
//! and sizes its local gate to the block ([`gates`]; the leasing tasks are in
//! [`crate::cluster_sync::permits`]), so requests never wait on Redis for a
//! permit the node already holds, the sum of the blocks never exceeds the cap, and a killed
//! node's block returns when its lease expires. A block binds until its validity lapses on
//! the node's own clock, whatever Redis does meanwhile ([`grant`]), and after a Redis master
//! switch a node re-asserts its block before it grows again ([`switch_hold`]). Per-key RPM limits take
//! one token per request from a shared bucket ([`rpm`]). In embedded mode neither exists: the local gate and the
//! local limiter are already the whole cluster.

pub mod gates;
pub mod grant;
pub mod rpm;
pub mod switch_hold;
