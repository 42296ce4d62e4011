//! The test tools themselves: the mock upstream, the fault-injecting TCP proxy and the scale
//! simulator.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../support/mod.rs"]
mod support;

mod fault_proxy;
mod mock_upstream;
mod sim;
