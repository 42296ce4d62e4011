//! A connection as the hot path sees it: an immutable snapshot plus atomics.
//!
//! [`ConnHandle`] is shared by request handlers (readers) and the connection's actor (the sole
//! writer of its resilience state). The actor publishes a new [`ConnSnapshot`] after every
//! change; the hot path only loads it (`ArcSwap`), touches atomics and takes permits, so an
//! ordinary success sends no message and holds no lock across an await. The handle outlives
//! actor restarts, so in-flight permits and counters stay valid.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use actix::Addr;
use arc_swap::{ArcSwap, ArcSwapOption};
use switchyard_shared::Millis;
use switchyard_shared::admission::GateLevel;
use switchyard_shared::config::ConnectionConfig;
use switchyard_shared::cooldown::{self, ConnState};
use switchyard_shared::lockout::{LockEntry, LockoutTable, ModelRef};
use switchyard_shared::outcome::TerminalStatus;
use switchyard_shared::quota_headers;
use switchyard_shared::quota_preflight::{self, Preflight, Thresholds};
use switchyard_shared::strategy::{AttemptOutcome, Candidate, Observed};

use crate::actors::ConnectionActor;
use crate::api::scrub::ScrubSecret;
use crate::counters::CooldownCounts;
use crate::state::gate::Gate;
use crate::state::queue::RequestQueue;
use crate::transport::UpstreamClient;

/// Everything the hot path needs to know about a connection's resilience state.
#[derive(Debug, Clone, Default)]
pub struct ConnSnapshot {
    /// Bumped on every change.
    pub epoch: u64,
    /// Cooldown, terminal status and error fields (the pure policy's state).
    pub state: ConnState,
    /// Model lockouts on this connection.
    pub lockouts: LockoutTable,
    /// Runtime toggle of `POST /api/rate-limits` (None = the configured value).
    pub rate_limit_protection: Option<bool>,
}

impl ConnSnapshot {
    /// Whether a success must be reported to the actor (something to clear or decay).
    pub fn needs_success_report(&self) -> bool {
        cooldown::needs_success_report(&self.state) || !self.lockouts.is_empty()
    }

    /// The terminal status, if any.
    pub fn terminal(&self) -> Option<TerminalStatus> {
        self.state.status.terminal()
    }

    /// Milliseconds of connection cooldown left (0 = available).
    pub fn cooldown_remaining(&self, now: Millis) -> Millis {
        cooldown::remaining_ms(&self.state, now)
    }

    /// The active lockout of `model`, if any.
    pub fn model_lock(&self, model: &ModelRef<'_>, now: Millis) -> Option<LockEntry> {
        if self.lockouts.is_empty() {
            return None;
        }
        self.lockouts.model_lock(model, now).copied()
    }
}

/// A connection's shared handle.
pub struct ConnHandle {
    pub idx: usize,
    pub id: Arc<str>,
    pub provider_idx: usize,
    pub config: ConnectionConfig,
    pub snapshot: ArcSwap<ConnSnapshot>,
    /// Requests currently executing on this connection.
    pub inflight: AtomicU32,
    /// Monotonic ms of the last dispatch (0 = never), for least-used and round-robin.
    pub last_used_at: AtomicU64,
    /// Consecutive dispatches on this connection (sticky round-robin).
    pub consecutive_use: AtomicU32,
    /// `max_concurrent`.
    pub gate: Gate,
    /// `model_concurrency` caps by exact upstream model id.
    pub model_gates: HashMap<String, Gate>,
    /// The request queue (rate limit protection), used when enabled.
    pub queue: RequestQueue,
    /// The provider's pooled upstream client (a cheap handle shared by its connections).
    pub client: UpstreamClient,
    /// The upstream credential, if the provider needs one. Never logged.
    pub api_key: Option<String>,
    /// The credential prepared for scrubbing it from relayed answers (built once here).
    pub scrub_secret: Option<ScrubSecret>,
    /// The current actor (replaced when the supervisor restarts it).
    pub actor: ArcSwapOption<Addr<ConnectionActor>>,
    /// Observations dropped because the actor's mailbox was full.
    pub dropped_observations: AtomicU64,
    /// Cooldowns the actor set, by reason (exported as `switchyard_cooldowns_total`).
    pub cooldowns: CooldownCounts,
    /// Latency, last success and reported quota windows, for the strategies and the quota
    /// preflight. A plain mutex: every critical section is a few arithmetic operations.
    pub observed: Mutex<Observed>,
}

impl ConnHandle {
    /// A handle with a fresh snapshot.
    pub fn new(
        idx: usize,
        provider_idx: usize,
        config: ConnectionConfig,
        client: UpstreamClient,
        api_key: Option<String>,
        queue: RequestQueue,
    ) -> Self {
        let model_gates = config
            .model_concurrency
            .iter()
            .map(|(m, cap)| (m.clone(), Gate::new(GateLevel::Model, *cap)))
            .collect();
        Self {
            idx,
            id: Arc::from(config.id.as_str()),
            provider_idx,
            gate: Gate::new(GateLevel::Connection, config.max_concurrent),
            model_gates,
            config,
            snapshot: ArcSwap::from_pointee(ConnSnapshot::default()),
            inflight: AtomicU32::new(0),
            last_used_at: AtomicU64::new(0),
            consecutive_use: AtomicU32::new(0),
            queue,
            client,
            scrub_secret: ScrubSecret::new(api_key.as_deref()),
            api_key,
            actor: ArcSwapOption::empty(),
            dropped_observations: AtomicU64::new(0),
            cooldowns: CooldownCounts::default(),
            observed: Mutex::new(Observed::default()),
        }
    }

    /// Loads the current snapshot.
    pub fn load(&self) -> arc_swap::Guard<Arc<ConnSnapshot>> {
        self.snapshot.load()
    }

    /// Publishes a new snapshot (the actor is the only caller); in embedded mode with a
    /// state directory the state also goes to the store, off the request path.
    pub fn publish(&self, next: ConnSnapshot) {
        crate::actors::persist::record(&self.id, &next);
        self.snapshot.store(Arc::new(next));
    }

    /// The current snapshot, owned.
    pub fn load_full(&self) -> Arc<ConnSnapshot> {
        self.snapshot.load_full()
    }

    /// Records a dispatch for the selection strategies.
    pub fn mark_used(&self, now: Millis, previous: Option<usize>) {
        self.last_used_at.store(now.max(1), Ordering::Relaxed);
        if previous == Some(self.idx) {
            self.consecutive_use.fetch_add(1, Ordering::Relaxed);
        } else {
            self.consecutive_use.store(1, Ordering::Relaxed);
        }
    }
}

/// Observations for the strategies and the quota preflight.
impl ConnHandle {
    /// A poisoned lock only means a panic elsewhere mid-update of plain numbers; keep using them.
    fn observed(&self) -> MutexGuard<'_, Observed> {
        self.observed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records an attempt that ended at `now` after `latency_ms` (to the first byte of the
    /// answer, or to the timeout).
    pub fn observe_attempt(&self, outcome: AttemptOutcome, latency_ms: Millis, now: Millis) {
        self.observed().observe(outcome, latency_ms, now);
    }

    /// Records the quota windows an upstream response's headers report. `now` is policy time,
    /// `now_epoch_ms` the wall clock (absolute resets are read against it).
    pub fn observe_quota_headers(&self, headers: &[(&str, &str)], now: Millis, now_epoch_ms: u64) {
        let report = quota_headers::parse(headers, now_epoch_ms);
        if !report.windows.is_empty() {
            self.observed().observe_quota(&report, now);
        }
    }

    /// Writes latency, last success and quota into a candidate view.
    pub fn fill_candidate(&self, c: &mut Candidate, now: Millis) {
        self.observed().fill(c, now);
    }

    /// The quota preflight's verdict for this connection at `now`.
    pub fn quota_preflight(&self, thresholds: &Thresholds, now: Millis) -> Preflight {
        quota_preflight::preflight(self.observed().windows(), thresholds, now)
    }
}

impl std::fmt::Debug for ConnHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the credential.
        f.debug_struct("ConnHandle")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
