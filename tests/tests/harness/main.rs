//! The test tools themselves: the mock upstream and the fault-injecting TCP proxy.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../support/mod.rs"]
mod support;

mod fault_proxy;
mod mock_upstream;
