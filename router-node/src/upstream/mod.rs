//! Talking to upstream providers.

pub mod client;
