//! # switchyard-shared
//!
//! Everything a Switchyard router node and coordinator must agree on, kept free of I/O so it can
//! be tested exhaustively:
//!
//! - the **config contract** ([`config`]) and the effective **resilience settings**
//!   ([`settings`]) with their precedence chain;
//! - the **pure resilience policy**: provider [`breaker`], connection [`cooldown`], model
//!   [`lockout`], error [`classify`]ication with status [`restatement`] and upstream retry
//!   [`hints`], queue and concurrency [`admission`], and routing [`strategy`];
//! - the bincode [`wire`] events nodes exchange, and the SSE [`sse`] tap parser;
//! - request, response and stream [`translate`]ion between the three wire formats.
//!
//! Policy code never reads a clock: time is passed in as [`Millis`] so state machines can be
//! driven by property tests and a fake clock, and so the same code runs against Redis `TIME` in
//! cluster mode. The shared vocabulary of outcomes lives in [`outcome`].
//!
//! The Redis store that carries this state between nodes is its own crate, `switchyard-store`
//! (in `shared/store/`), so this one builds without a Redis client, an async runtime or TLS.

pub mod admin_kit;
pub mod admission;
pub mod breaker;
pub mod classify;
pub mod config;
pub mod cooldown;
pub mod endpoint;
pub mod hints;
pub mod lockout;
pub mod model_catalog;
pub mod outcome;
pub mod provider_cooldown;
pub mod quota_headers;
pub mod quota_preflight;
pub mod request_body;
pub mod restatement;
pub mod settings;
pub mod sse;
pub mod strategy;
pub mod translate;
pub mod usage;
pub mod verdict;
pub mod wire;

/// Milliseconds on whatever clock the caller uses (a monotonic node clock, or Redis `TIME` in
/// cluster mode). Policy functions take it as a parameter and never read a clock themselves.
pub type Millis = u64;
