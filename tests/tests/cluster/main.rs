//! Black-box scenarios of several `switchyard-node` processes sharing a real `redis-server`:
//! state sync, breakers, concurrency caps, session leases, Redis outages and throughput.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../support/mod.rs"]
mod support;

mod acl;
mod breaker;
mod caps;
mod changelog;
mod clock;
mod heal;
mod leases;
mod members;
mod operator;
mod outage;
mod permits_idle;
mod probe;
mod sentinel;
mod settings;
mod supervision;
mod sync;
mod throughput;
