//! # switchyard-node
//!
//! The Switchyard data plane. A router node accepts OpenAI- and Anthropic-format requests on
//! its client listener, routes each one over providers, connections and combos, and applies the
//! resilience policy of `switchyard-shared` on real traffic: breakers, cooldowns, lockouts,
//! gates, queues, stream watchdogs and fallback. Operators use the admin listener.
//!
//! The hot path reads immutable snapshots and touches atomics; state changes go to actors
//! (one per connection, one breaker actor per provider) that are the sole writers.

// GatewayError is large (extra fields, headers) but only travels the cold error path; boxing
// it would add an allocation to every error for no measurable gain.
#![allow(clippy::result_large_err)]

pub mod access_log;
pub mod actors;
pub mod admin;
pub mod api;
pub mod caps;
pub mod cli;
pub mod clock;
pub mod cluster;
pub mod cluster_sync;
pub mod counters;
#[cfg(feature = "demo")]
pub mod demo;
pub mod entry;
pub mod http;
pub mod leases;
pub mod lifecycle;
pub mod logwriter;
pub mod metrics;
pub mod reload;
pub mod routing;
pub mod runtime;
pub mod state;
pub mod telemetry;
pub mod transport;
pub mod upstream;
pub mod usage_ledger;
pub mod usage_wall;
