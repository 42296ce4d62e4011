//! The Redis store of `switchyard-shared` against a real `redis-server`: state, events and
//! leases.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../support/mod.rs"]
mod support;

mod breaker_model;
mod events;
mod leases;
mod resync_reads;
mod state;
mod topologies;
mod versions;
mod wait_lane;
