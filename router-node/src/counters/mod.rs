//! The metric label vocabulary and the counters the actors keep on the handles.
//!
//! Why below everything else: the handles carry these counters and the actors write them,
//! while the Prometheus side ([`crate::metrics`]) only reads them at scrape time. Nothing here
//! knows Prometheus.

pub mod counts;
pub mod labels;

pub use counts::{CooldownCounts, TransitionCounts};
