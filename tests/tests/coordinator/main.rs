//! Black-box tests of the real `switchyard-coordinator` binary against a real `redis-server`:
//! health, actions, leader election and the dashboard in a real browser.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../support/mod.rs"]
mod support;

mod actions;
mod browser;
mod feed_failover;
mod health;
mod leader;
mod openapi;
mod usage;
