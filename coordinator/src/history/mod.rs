//! The cluster over time: requests/s, errors/s and p95 upstream latency per provider over the
//! last 15 minutes, for the dashboard's charts.
//!
//! Why sampled here: nodes already count everything in their Prometheus exposition; the
//! coordinator reads each live node's `/metrics` (admin listener) every interval, turns the
//! counter increases into rates and keeps a bounded ring per provider, so an operator sees a
//! breaker storm as a shape without running Prometheus. The sampling and aggregation are pure
//! ([`exposition`], [`ring`]) with time passed in; `crate::sampler` is the loop that fetches.
//!
//! - requests/s: upstream attempts (`switchyard_upstream_request_duration_seconds_count`);
//! - errors/s: failed upstream attempts, before or after the commit point
//!   (`switchyard_upstream_attempt_failures_total`, all kinds; from a node too old to export
//!   it, the cooldowns it set);
//! - p95: from the increase of the attempt-duration histogram's buckets across all nodes, as
//!   Prometheus' `histogram_quantile` would compute it.

pub mod exposition;
pub mod ring;

pub use ring::History;

/// How far back the charts look.
pub const WINDOW_MS: u64 = 15 * 60 * 1000;
/// The default sampling interval (90 points in the window).
pub const DEFAULT_INTERVAL_MS: u64 = 10_000;
