//! Black-box scenarios of several `switchyard-node` processes sharing a real `redis-server`:
//! state sync, breakers, concurrency caps, session leases, Redis outages and throughput.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../support/mod.rs"]
mod support;

mod breaker;
mod caps;
mod heal;
mod leases;
mod operator;
mod outage;
mod permits_idle;
mod probe;
mod settings;
mod sync;
mod throughput;
