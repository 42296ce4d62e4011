//! Test support for Switchyard: a mock upstream faithful to the OpenAI and Anthropic wire
//! formats, and helpers that start real processes for black-box scenario tests.
//!
//! # The mock upstream
//!
//! The mock lives in its own crate, `switchyard-mock` (folder `tests/mock/`), so that the node's
//! `demo` can embed it without this crate; [`mock_upstream`] re-exports it under its old path.
//!
//! # The binaries under test
//!
//! This crate depends on the node and the coordinator and builds them again as its own thin
//! binaries (`switchyard-test-node`, `switchyard-test-coordinator`,
//! `switchyard-test-mock-upstream`, see `src/bin/`). Cargo rebuilds a package's binaries
//! before its integration tests, so the black-box tests always run the code of this build,
//! never a stale binary left in `target/`. [`harness::workspace_bin`] resolves them.

pub mod chaos;
pub mod cluster;
pub mod coordinator_process;
pub mod fault_proxy;
pub mod harness;
pub mod load_tally;
pub mod prerequisite;
pub mod python;
pub mod redis_cluster_replicas;
pub mod redis_server;
pub mod redis_topology;

/// The mock upstream, re-exported under the path the tests have always used.
pub use switchyard_mock as mock_upstream;
