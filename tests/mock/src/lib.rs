//! `switchyard-mock`: a mock LLM provider for tests, demos and benchmarks.
//!
//! There is no internet in CI, yet Switchyard must be tested against upstreams that speak the
//! real OpenAI and Anthropic wire formats (the real SDKs parse its output through the
//! gateway) and that fail in every way the resilience mechanisms handle: error statuses with
//! `Retry-After`, slow headers, slow or stalled streams, in-band errors, TCP resets, empty
//! streams and errors disguised as 200s. This crate is that upstream. It is also the
//! "mock direct" baseline of the benchmark harness, so the normal path is kept cheap: one
//! uncontended lock and two label lookups for the counters, histories kept as the request's
//! own buffers until read, `model` and `stream` read without serde from a plain JSON body
//! (`scan`), the plain Chat Completions answer serialised once per shape and copied with a
//! fresh id ([`plain`]), provider headers built once, no timer and no task per request,
//! adjacent SSE frames written together when no delay separates them. The
//! `switchyard-mock-minimal` binary ([`minimal`]) is the bare hyper server it is measured
//! against.
//!
//! It is a crate of its own, apart from the process harness and the scenario tests, so that
//! `switchyard-node demo` can embed it behind the node's optional `demo` feature without
//! pulling test code into the node, and so that the mock's container image builds from this
//! folder alone.
//!
//! Routes: `POST /v1/chat/completions`, `POST /v1/messages`, `POST /v1/responses` (JSON, or
//! SSE with `"stream": true`), `POST /v1/messages/count_tokens` and `GET /v1/models`. With
//! [`MockConfig::agent`] the mock plays a model that calls one tool and then answers
//! ([`AgentScript`]); with [`MockHandle::usage_wall`] (or `POST /__mock/usage-wall`) it plays
//! a Claude subscription at its 5-hour usage wall, with the low-priority lane and the
//! session-limit reset's `/api/oauth/usage` and `/api/organizations/{org}/reset_rate_limits`
//! ([`WallScript`]); with `serve_responses: false` it refuses `/v1/responses` like a
//! chat-only server. Faults are [`FaultSpec`]s queued through
//! [`MockHandle::script`] or `POST /__mock/script` (see the `control` module), or sent with
//! one request in the `x-mock-fault` header. Counters are read with [`MockHandle::stats`] or
//! `GET /__mock/stats`.
//!
//! # As a process
//!
//! The binary `switchyard-mock-upstream` ([`cli`]) serves the same mock:
//!
//! ```text
//! cargo run --release -p switchyard-mock --bin switchyard-mock-upstream -- \
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
//!
//! # In a test
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use switchyard_mock::{FaultSpec, MockConfig, MockUpstream, Route};
//! let mock = MockUpstream::start(MockConfig::default()).await?;
//! mock.script(
//!     FaultSpec::status(429)
//!         .on_route(Route::ChatCompletions)
//!         .header("Retry-After", "2")
//!         .times(1),
//! )
//! .map_err(std::io::Error::other)?;
//! // point the gateway at mock.base_url() …
//! assert_eq!(mock.stats().faults, 0);
//! mock.shutdown().await;
//! # Ok(()) }
//! ```

mod agent;
mod arena;
mod body;
pub mod cli;
mod config;
mod control;
mod fault;
mod ids;
pub mod minimal;
mod plain;
mod respond;
mod scan;
mod server;
mod stats;
pub mod tls_front;
mod usage_wall;
mod wire;

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::net::TcpSocket;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use agent::{AgentScript, AgentSeen};
pub use config::MockConfig;
pub use control::parse_script;
pub use fault::{
    FaultMatch, FaultSpec, MAX_CHUNKS, MAX_QUEUED_FAULTS, PendingFault, Route, ToolCallSpec,
};
pub use respond::FAULT_HEADER;
pub use stats::{
    Arrival, MAX_TRACKED_LABELS, NO_KEY, NO_MODEL, OTHER, RecordedBody, StatsSnapshot,
};
pub use usage_wall::{SLOW_HEADER, SlowAnswer, WallScript, WallSeen};

use agent::AgentLog;
use fault::FaultQueue;
use stats::{Limits, Stats};

/// Listen backlog; benchmarks open many connections at once.
const BACKLOG: u32 = 1024;

/// Locks a mutex, carrying on after a panic elsewhere poisoned it: the counters stay usable
/// and a test failure is reported where it happened rather than here.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// State shared by every connection.
pub(crate) struct Shared {
    pub(crate) config: MockConfig,
    pub(crate) faults: FaultQueue,
    pub(crate) stats: Arc<Stats>,
    pub(crate) agent: AgentLog,
    /// `POST /v1/messages/count_tokens` requests served.
    pub(crate) count_tokens: std::sync::atomic::AtomicU64,
    /// The plain Chat Completions answers, serialised once per shape.
    pub(crate) plain: plain::PlainAnswers,
    /// The scripted Claude OAuth usage wall, when one is.
    pub(crate) usage_wall: usage_wall::UsageWall,
}

/// Entry point: starts a mock upstream on the current tokio runtime.
#[derive(Debug, Clone, Copy)]
pub struct MockUpstream;

impl MockUpstream {
    /// Binds `config.listen` and serves until the handle is shut down or dropped.
    pub async fn start(config: MockConfig) -> io::Result<MockHandle> {
        let socket = if config.listen.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        socket.bind(config.listen)?;
        let listener = socket.listen(BACKLOG)?;
        let addr = listener.local_addr()?;

        let shared = Arc::new(Shared {
            stats: Arc::new(Stats::new(Limits {
                header_history: config.header_history,
                body_history: config.body_history,
                body_capture_limit: config.body_capture_limit,
                arrival_log: config.arrival_log,
            })),
            faults: FaultQueue::default(),
            agent: AgentLog::default(),
            count_tokens: std::sync::atomic::AtomicU64::new(0),
            plain: plain::PlainAnswers::default(),
            usage_wall: usage_wall::UsageWall::default(),
            config,
        });
        let cancel = CancellationToken::new();
        let task = tokio::spawn(server::serve(listener, Arc::clone(&shared), cancel.clone()));
        Ok(MockHandle {
            addr,
            shared,
            cancel,
            task: Some(task),
        })
    }
}

/// A running mock upstream. Dropping it stops the server (open connections are closed).
pub struct MockHandle {
    addr: SocketAddr,
    shared: Arc<Shared>,
    cancel: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for MockHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockHandle")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl MockHandle {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`, without a trailing slash; provider paths start with `/v1/`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The configuration the mock runs with.
    pub fn config(&self) -> &MockConfig {
        &self.shared.config
    }

    /// Queues one fault. Returns an error (queueing nothing) when it is invalid or the queue
    /// is full.
    pub fn script(&self, fault: FaultSpec) -> Result<(), String> {
        self.shared.faults.push_all(vec![fault]).map(|_| ())
    }

    /// Queues several faults in order, all or none.
    pub fn script_all(&self, faults: impl IntoIterator<Item = FaultSpec>) -> Result<(), String> {
        self.shared
            .faults
            .push_all(faults.into_iter().collect())
            .map(|_| ())
    }

    /// Faults still queued, with their remaining uses.
    pub fn pending_faults(&self) -> Vec<PendingFault> {
        self.shared.faults.pending()
    }

    /// Drops every queued fault.
    pub fn clear_faults(&self) {
        self.shared.faults.clear();
    }

    /// A copy of the counters.
    pub fn stats(&self) -> StatsSnapshot {
        self.shared.stats.snapshot(self.shared.faults.len())
    }

    /// Requests in arrival order with their wall-clock time, at most `arrival_log` of the
    /// newest (empty when the log is off).
    pub fn arrivals(&self) -> Vec<Arrival> {
        self.shared.stats.arrivals()
    }

    /// What the scripted agent model ([`MockConfig::agent`]) saw so far.
    pub fn agent_seen(&self) -> AgentSeen {
        self.shared.agent.snapshot()
    }

    /// `POST /v1/messages/count_tokens` requests served so far.
    pub fn count_tokens_requests(&self) -> u64 {
        self.shared
            .count_tokens
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Scripts the Claude OAuth usage wall (replacing any scripted before).
    pub fn usage_wall(&self, script: WallScript) {
        self.shared.usage_wall.arm(script);
    }

    /// Lifts the scripted usage wall; what it saw stays readable.
    pub fn clear_usage_wall(&self) {
        self.shared.usage_wall.disarm();
    }

    /// What the scripted usage wall and its OAuth endpoints saw so far.
    pub fn usage_wall_seen(&self) -> WallSeen {
        self.shared.usage_wall.seen()
    }

    /// Zeroes the counters (requests in flight stay counted as in flight).
    pub fn reset_stats(&self) {
        self.shared.stats.reset();
    }

    /// Drops queued faults and zeroes the counters, like `POST /__mock/reset`.
    pub fn reset(&self) {
        self.clear_faults();
        self.reset_stats();
        self.shared.agent.reset();
        self.shared.usage_wall.reset();
    }

    /// Stops accepting, closes open connections and waits for the accept loop to end.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        if let Some(task) = self.task.take() {
            // The loop only ends by cancellation; a join error means it panicked, which the
            // test that caused it reports on its own.
            let _ = task.await;
        }
    }
}

impl Drop for MockHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}
