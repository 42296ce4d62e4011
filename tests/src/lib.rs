//! Test support for Switchyard: a mock upstream faithful to the OpenAI and Anthropic wire
//! formats, and helpers that start real processes for black-box scenario tests.
//!
//! # The mock upstream
//!
//! [`mock_upstream`] is both a library (start it inside a test with
//! [`mock_upstream::MockUpstream::start`]) and a binary, `switchyard-mock-upstream`, for
//! black-box tests, demos and benchmarks:
//!
//! ```text
//! cargo run --release -p switchyard-tests --bin switchyard-mock-upstream -- \
//!     --listen 127.0.0.1:0 [--workers 1] [--chunks 20] [--chunk-delay-ms 0] \
//!     [--first-chunk-delay-ms 0] [--fault-file faults.json] \
//!     [--require-key] [--valid-key KEY]... [--models a,b,c]
//! ```
//!
//! The first line on stdout is the bound address (`127.0.0.1:PORT`); tests read it to learn
//! the port. The process then serves until SIGINT or SIGTERM. Script it over HTTP:
//!
//! ```text
//! curl -s -XPOST http://ADDR/__mock/script \
//!      -d '{"match":{"route":"chat_completions"},"times":1,"status":429,"headers":{"Retry-After":"2"}}'
//! curl -s http://ADDR/__mock/stats
//! curl -s -XPOST http://ADDR/__mock/reset
//! ```
//!
//! `--fault-file` takes the same JSON as `POST /__mock/script` (one fault object or an array)
//! and queues it before the address is printed.

pub mod chaos;
pub mod cluster;
pub mod coordinator_process;
pub mod fault_proxy;
pub mod harness;
pub mod mock_upstream;
pub mod python;
pub mod redis_server;
pub mod redis_topology;
