//! Black-box scenarios of one `switchyard-node` process in front of in-process mock upstreams,
//! over real loopback sockets: routing, resilience, streams, errors, the admin API, reloads,
//! the process lifecycle and client SDK compatibility. One binary (one link of the whole stack)
//! with a module per area.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../support/mod.rs"]
mod support;

mod access_log;
mod admin;
mod bad_input;
mod budgets;
mod check;
mod combo_attempt_rules;
mod combo_retries;
mod combo_timeouts;
mod combos;
mod context_relay;
mod degraded_decay;
mod demo;
mod docs_truth;
mod egress_lock;
mod egress_proxy;
mod error_corpus_replay;
mod error_effects_table;
mod error_request_scoped;
mod error_semantics;
mod error_structure;
mod error_wiring;
mod errors;
mod fusion_pipeline;
mod last_resort;
mod lease_moves;
mod leases;
mod lifecycle;
mod malformed_bodies;
mod memory;
mod metrics;
mod midstream;
mod persistence;
mod provider_cooldown;
mod quota_share;
mod reload;
/// The resilience scenarios, one file per concern.
mod resilience {
    mod admission;
    mod breaker;
    mod cooldowns;
    mod lockouts;
    mod replies;
}
mod retry_info;
mod schema_acceptance;
mod sdk_compat;
mod strategy_inputs;
mod stream_recovery;
mod streams;
mod tool_limits;
mod tracing_otlp;
mod upstream_h2;
mod upstream_misbehaviour;
mod usage_wall;
