//! Black-box scenarios of several `switchyard-node` processes sharing a real `redis-server`:
//! state sync, breakers, concurrency caps, session leases, Redis outages, Redis Sentinel and
//! Redis Cluster failovers, and throughput.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../support/mod.rs"]
mod support;

mod acl;
mod breaker;
mod caps;
mod changelog;
mod clock;
mod failover;
mod heal;
mod heartbeat_cost;
mod learned_resync;
mod lease_failover;
mod leases;
mod members;
mod operator;
mod outage;
mod permit_failover;
mod permit_stall;
mod permits_idle;
mod probe;
mod queue_pause;
mod redis_cluster;
mod redis_cluster_failover;
mod sentinel;
mod sentinel_switch;
mod settings;
mod store_faults;
mod supervision;
mod sync;
mod throughput;
mod usage_wall_shared;
