//! The deployment artefacts (`deploy/`, `helm/`) checked with the real tools.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../support/mod.rs"]
mod support;

mod chart;
