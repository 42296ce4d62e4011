//! Routing strategies: how a combo orders its targets and how a provider picks a connection.
//!
//! Building blocks first: process-independent hashing (cache affinity must agree across the
//! nodes of a cluster) and a time-decayed latency estimate. Both are pure: time is passed in.

mod ewma;
mod hash;

pub use ewma::Ewma;
pub use hash::{fmix64, fnv1a64, rendezvous_weight, stable_hash};
