//! The connection actor: sole writer of one connection's resilience state.
//!
//! Requests never wait for it. They read the [`ConnSnapshot`] it publishes and `try_send` it
//! the rare observations that change something (a failure, the first success after one), so
//! every handler here is synchronous: apply the pure policy from `switchyard-shared`, publish,
//! return. Holding no await points means there is no interleaving to reason about and a handler
//! can never stall the mailbox behind I/O.
//!
//! The actor keeps no state the handle does not also have: it is seeded from the handle's last
//! published snapshot, so when its supervisor restarts it after a panic, nothing is lost except
//! the observations that were still queued in the dead mailbox.
//!
//! Time comes with the messages (`at`, on the node's monotonic clock). The one timer, lockout
//! pruning, estimates the node's time from the latest `at` it has seen plus the real time
//! elapsed since; that estimate never runs ahead of the node clock, so pruning is at worst a
//! little late, never early.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::{Actor, ActorContext, AsyncContext, Context, Handler, MessageResult, Recipient};
use switchyard_shared::Millis;
use switchyard_shared::cooldown::{self, ConnEvent, ConnState, Effect};
use switchyard_shared::lockout::{LockoutScope, LockoutTable, ModelRef};

use super::change::{LocalChange, StatePublisher, failure_reason_of, lock_target_name};
use super::messages::{
    ApplyRemote, ChildStopped, ClearCooldown, ClearLockouts, ClearResult, InjectPanic,
    ObserveFailure, ObserveSuccess, PruneLockouts, Reinstate, RemoteConn, Resupervise, Retire,
    SetConnParams, SetRateLimitProtection, SiblingLock,
};
use super::params::ConnActorParams;
use crate::actors::{ConnHandle, ConnSnapshot};

/// Mailbox capacity of a connection actor. Observations beyond it are dropped (and counted) by
/// the hot path rather than queued without bound.
pub const MAILBOX_CAPACITY: usize = 256;

/// How often expired lockouts that can no longer escalate are dropped. They already read as
/// unlocked, but while any entry exists every success on the connection is reported, so they
/// should not linger long.
pub const PRUNE_INTERVAL: Duration = Duration::from_secs(15);

/// Tells the supervisor that this actor is gone. It lives inside the actor, so its `Drop` runs
/// whenever the actor is dropped: after a normal stop, when the arbiter shuts down, and while
/// unwinding from a panic in a handler (actix catches nothing; tokio contains the panic and
/// drops the task), which is the case actix's own `Supervisor` misses.
struct DeathNotice {
    supervisor: Recipient<ChildStopped>,
    conn_idx: usize,
    incarnation: u64,
}

impl Drop for DeathNotice {
    fn drop(&mut self) {
        // `do_send` never blocks and ignores a closed mailbox (the supervisor may be gone too
        // during shutdown). Deaths are rare, so the unbounded queueing is harmless.
        self.supervisor.do_send(ChildStopped {
            conn_idx: self.conn_idx,
            incarnation: self.incarnation,
            panicked: std::thread::panicking(),
        });
    }
}

/// The latest node time this actor has seen, and when it saw it.
#[derive(Debug, Clone, Copy)]
pub(super) struct TimeBase {
    at: Millis,
    seen: Instant,
}

impl TimeBase {
    pub(super) fn new(at: Millis) -> Self {
        Self {
            at,
            seen: Instant::now(),
        }
    }

    /// The later of this base and a newly seen `at`.
    pub(super) fn advance(self, at: Millis) -> Self {
        if at > self.now() { Self::new(at) } else { self }
    }

    /// `at` plus the real time since: at most the node clock's reading now, because `at` was
    /// read before the message was sent.
    pub(super) fn now(&self) -> Millis {
        let elapsed = u64::try_from(self.seen.elapsed().as_millis()).unwrap_or(Millis::MAX);
        self.at.saturating_add(elapsed)
    }
}

/// Sole writer of one connection's resilience state (cooldown, terminal status, model
/// lockouts, the rate-limit-protection toggle).
pub struct ConnectionActor {
    handle: Arc<ConnHandle>,
    params: ConnActorParams,
    state: ConnState,
    lockouts: LockoutTable,
    rate_limit_protection: Option<bool>,
    epoch: u64,
    /// `None` until a message with a time arrives (after a restart too): no pruning before.
    time: Option<TimeBase>,
    /// The cluster writer in redis mode: local changes are handed to it, remote ones never.
    cluster: Option<Arc<dyn StatePublisher>>,
    _death_notice: Option<DeathNotice>,
}

impl ConnectionActor {
    /// An unsupervised actor seeded from the handle's current snapshot.
    pub fn new(handle: Arc<ConnHandle>, params: ConnActorParams) -> Self {
        let snapshot = handle.snapshot.load_full();
        Self {
            params,
            state: snapshot.state.clone(),
            lockouts: snapshot.lockouts.clone(),
            rate_limit_protection: snapshot.rate_limit_protection,
            epoch: snapshot.epoch,
            handle,
            time: None,
            cluster: None,
            _death_notice: None,
        }
    }

    /// Hands this actor's local changes to the cluster writer (redis mode).
    pub fn with_cluster(mut self, cluster: Option<Arc<dyn StatePublisher>>) -> Self {
        self.cluster = cluster;
        self
    }

    /// Hands a local change to the cluster writer; never waits.
    fn emit(&self, change: LocalChange) {
        if let Some(cluster) = &self.cluster {
            cluster.publish(change);
        }
    }

    /// The cluster writes a cooldown transition's effects call for.
    fn emit_effects(&self, effects: &[Effect], at: Millis) {
        if self.cluster.is_none() {
            return;
        }
        let conn = self.handle.id.clone();
        for effect in effects {
            match *effect {
                Effect::CooldownSet {
                    until,
                    level,
                    reason,
                } => self.emit(LocalChange::Cooldown {
                    conn: conn.clone(),
                    duration_ms: until.saturating_sub(at),
                    level,
                    reason,
                    last_error: self.state.last_error.clone().unwrap_or_default(),
                }),
                Effect::BecameTerminal(status) => self.emit(LocalChange::Terminal {
                    conn: conn.clone(),
                    status,
                }),
                _ => {}
            }
        }
    }

    /// Reports this actor's death to `supervisor` as start number `incarnation`.
    pub fn supervised_by(mut self, supervisor: Recipient<ChildStopped>, incarnation: u64) -> Self {
        self._death_notice = Some(DeathNotice {
            supervisor,
            conn_idx: self.handle.idx,
            incarnation,
        });
        self
    }

    /// Moves the time base forward when `at` is later than the current estimate.
    fn note_time(&mut self, at: Millis) {
        self.time = Some(match self.time {
            Some(time) => time.advance(at),
            None => TimeBase::new(at),
        });
    }

    /// Publishes the current state as a new snapshot with the next epoch.
    fn publish(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        self.handle.publish(ConnSnapshot {
            epoch: self.epoch,
            state: self.state.clone(),
            lockouts: self.lockouts.clone(),
            rate_limit_protection: self.rate_limit_protection,
        });
    }

    /// Applies a cooldown event; returns whether the state changed.
    fn apply(&mut self, event: &ConnEvent, at: Millis) -> bool {
        self.apply_with_effects(event, at).0
    }

    /// Applies a cooldown event; returns whether the state changed and what it did.
    fn apply_with_effects(&mut self, event: &ConnEvent, at: Millis) -> (bool, Vec<Effect>) {
        self.note_time(at);
        let (next, effects) = cooldown::on_event(&self.state, event, &self.params.cooldown, at);
        self.log_effects(&effects);
        let changed = next != self.state;
        self.state = next;
        (changed, effects)
    }

    fn log_effects(&self, effects: &[Effect]) {
        let connection = &*self.handle.id;
        for effect in effects {
            match effect {
                Effect::BecameTerminal(status) => {
                    tracing::warn!(
                        connection,
                        status = status.as_str(),
                        "connection became terminal"
                    );
                }
                Effect::Reinstated(status) => {
                    tracing::info!(connection, was = status.as_str(), "connection reinstated");
                }
                Effect::CooldownSet {
                    until,
                    level,
                    reason,
                } => {
                    self.handle.cooldowns.record(*reason);
                    tracing::debug!(
                        connection,
                        until,
                        level,
                        reason = reason.as_str(),
                        "cooldown set"
                    );
                }
                other => tracing::trace!(connection, effect = ?other, "cooldown effect"),
            }
        }
    }

    /// Clears the cooldown, error fields and every lockout; never a terminal state.
    fn operator_clear(&mut self, at: Millis) -> ClearResult {
        if cooldown::is_terminal(&self.state) {
            return ClearResult::SkippedTerminal;
        }
        let state_changed = self.apply(&ConnEvent::OperatorClear, at);
        let lockouts_cleared = self.lockouts.len();
        if lockouts_cleared > 0 {
            self.lockouts = LockoutTable::new();
        }
        if !state_changed && lockouts_cleared == 0 {
            return ClearResult::Unchanged;
        }
        tracing::info!(
            connection = &*self.handle.id,
            lockouts_cleared,
            "cooldown cleared by operator"
        );
        self.publish();
        ClearResult::Cleared { lockouts_cleared }
    }

    /// Drops lockout entries that expired and can no longer escalate; publishes if any went.
    fn prune(&mut self, now: Millis) -> usize {
        if self.lockouts.is_empty() {
            return 0;
        }
        let pruned = self.lockouts.prune_expired(now);
        if pruned > 0 {
            self.publish();
        }
        pruned
    }
}

impl Actor for ConnectionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(MAILBOX_CAPACITY);
        ctx.run_interval(PRUNE_INTERVAL, |actor, _| {
            if let Some(time) = actor.time {
                actor.prune(time.now());
            }
        });
    }
}

impl Handler<ObserveFailure> for ConnectionActor {
    type Result = ();

    fn handle(&mut self, msg: ObserveFailure, _: &mut Self::Context) {
        let ObserveFailure {
            observation,
            lockout,
            at,
            ..
        } = msg;
        let (mut changed, effects) = self.apply_with_effects(&ConnEvent::Failure(observation), at);
        self.emit_effects(&effects, at);
        if let Some((key, mut failure)) = lockout {
            if failure.reset_after_ms == 0 {
                failure.reset_after_ms = self.params.lockout_reset_after_ms;
            }
            let provider = key.provider.clone();
            let model = lock_target_name(&key.model);
            if let Some(entry) =
                self.lockouts
                    .record_failure(key, failure, &self.params.lockout, at)
            {
                changed = true;
                self.emit(LocalChange::Lockout {
                    provider: Arc::from(provider.as_str()),
                    conn: self.handle.id.clone(),
                    model,
                    remaining_ms: entry.remaining_ms(at),
                    failure_count: entry.failure_count,
                    reason: failure_reason_of(entry.reason),
                });
            }
        }
        if changed {
            self.publish();
        }
    }
}

impl Handler<SiblingLock> for ConnectionActor {
    type Result = ();

    /// Cools the connection with its egress sibling: the origin's deadline, the level and the
    /// error fields left alone. Published to the cluster like any local cooldown, so peers
    /// merge it extend-only.
    fn handle(&mut self, msg: SiblingLock, _: &mut Self::Context) {
        self.note_time(msg.at);
        let Some(next) =
            cooldown::sibling::sibling_lock(&self.state, msg.until, &self.params.cooldown, msg.at)
        else {
            return;
        };
        self.state = next;
        self.log_effects(&[Effect::CooldownSet {
            until: msg.until,
            level: self.state.backoff_level,
            reason: msg.reason,
        }]);
        if self.cluster.is_some() {
            self.emit(LocalChange::Cooldown {
                conn: self.handle.id.clone(),
                duration_ms: msg.until.saturating_sub(msg.at),
                level: self.state.backoff_level,
                reason: msg.reason,
                last_error: "cooled with an egress sibling".to_owned(),
            });
        }
        self.publish();
    }
}

impl Handler<ObserveSuccess> for ConnectionActor {
    type Result = ();

    fn handle(&mut self, msg: ObserveSuccess, _: &mut Self::Context) {
        let success = ConnEvent::Success {
            started: msg.started,
        };
        let mut changed = self.apply(&success, msg.at);
        if changed {
            self.emit(LocalChange::Success {
                conn: self.handle.id.clone(),
                started_epoch_ms: msg.started_epoch_ms,
            });
        }
        if !self.lockouts.is_empty() {
            // The message carries no quota family, so only the exact model's entry decays; a
            // family lock runs out on its own (or on an operator clear).
            let model = ModelRef {
                provider: &self.handle.config.provider,
                connection: &self.handle.id,
                model: &msg.model,
                family: None,
                per_model_quota: false,
            };
            // An existing entry has a count of at least 1, so decaying it always changes it;
            // a lockout newer than the attempt is not decayed by it.
            let decays = self
                .lockouts
                .get(&model.key(LockoutScope::Model))
                .is_some_and(|e| e.last_failure_at <= msg.started);
            changed |= decays;
            if decays {
                self.lockouts.decay_model(&model);
                self.emit(LocalChange::LockoutDecay {
                    provider: Arc::from(self.handle.config.provider.as_str()),
                    conn: self.handle.id.clone(),
                    model: msg.model.to_string(),
                });
            }
        }
        if changed {
            self.publish();
        }
    }
}

impl Handler<ClearCooldown> for ConnectionActor {
    type Result = MessageResult<ClearCooldown>;

    fn handle(&mut self, msg: ClearCooldown, _: &mut Self::Context) -> Self::Result {
        let result = self.operator_clear(msg.at);
        // Cleared everywhere, even when this node had nothing to clear: a peer may have.
        if result != ClearResult::SkippedTerminal {
            self.emit(LocalChange::Cleared {
                conn: self.handle.id.clone(),
            });
        }
        MessageResult(result)
    }
}

impl Handler<Reinstate> for ConnectionActor {
    type Result = bool;

    fn handle(&mut self, msg: Reinstate, _: &mut Self::Context) -> bool {
        let was_terminal = cooldown::is_terminal(&self.state);
        if self.apply(&ConnEvent::Reinstate, msg.at) {
            self.publish();
        }
        self.emit(LocalChange::Reinstated {
            conn: self.handle.id.clone(),
        });
        was_terminal
    }
}

impl Handler<ClearLockouts> for ConnectionActor {
    type Result = usize;

    fn handle(&mut self, msg: ClearLockouts, _: &mut Self::Context) -> usize {
        self.note_time(msg.at);
        let cleared = match msg.model.as_deref() {
            None => {
                let all = self.lockouts.len();
                self.lockouts = LockoutTable::new();
                all
            }
            Some(model) => self
                .lockouts
                .clear(&self.handle.config.provider, None, Some(model)),
        };
        if cleared > 0 {
            self.publish();
        }
        self.emit(LocalChange::LockoutCleared {
            provider: Arc::from(self.handle.config.provider.as_str()),
            conn: self.handle.id.clone(),
            model: msg.model,
        });
        cleared
    }
}

impl Handler<SetRateLimitProtection> for ConnectionActor {
    type Result = ();

    fn handle(&mut self, msg: SetRateLimitProtection, _: &mut Self::Context) {
        if self.rate_limit_protection != msg.0 {
            self.rate_limit_protection = msg.0;
            self.publish();
        }
    }
}

impl Handler<SetConnParams> for ConnectionActor {
    type Result = ();

    fn handle(&mut self, msg: SetConnParams, _: &mut Self::Context) {
        self.params = msg.0;
    }
}

impl Handler<PruneLockouts> for ConnectionActor {
    type Result = usize;

    fn handle(&mut self, msg: PruneLockouts, _: &mut Self::Context) -> usize {
        self.note_time(msg.at);
        self.prune(msg.at)
    }
}

impl Handler<Retire> for ConnectionActor {
    type Result = ();

    fn handle(&mut self, _: Retire, ctx: &mut Self::Context) {
        ctx.stop();
    }
}

impl Handler<Resupervise> for ConnectionActor {
    type Result = ();

    fn handle(&mut self, msg: Resupervise, _: &mut Self::Context) {
        // The old notice goes to the dead supervisor's closed mailbox: a no-op.
        self._death_notice = Some(DeathNotice {
            supervisor: msg.supervisor,
            conn_idx: self.handle.idx,
            incarnation: msg.incarnation,
        });
    }
}

impl Handler<InjectPanic> for ConnectionActor {
    type Result = ();

    // Panicking is the whole point of this test hook: it proves that the breaker actor restarts
    // a connection actor that died in a handler, with its state intact.
    #[allow(clippy::panic)]
    fn handle(&mut self, _: InjectPanic, _: &mut Self::Context) {
        // actix drains the mailbox once more while it drops a dead actor; a second panic
        // during that unwinding would abort the process.
        if std::thread::panicking() {
            return;
        }
        panic!(
            "injected panic in the actor of connection {}",
            self.handle.id
        );
    }
}

impl Handler<ApplyRemote> for ConnectionActor {
    type Result = ();

    fn handle(&mut self, msg: ApplyRemote, _: &mut Self::Context) {
        let at = msg.at;
        let changed = match msg.change {
            RemoteConn::Cooldown {
                remaining_ms,
                level,
                terminal,
            } => {
                let remote = cooldown::RemoteCooldown {
                    until: (remaining_ms > 0).then(|| at.saturating_add(remaining_ms)),
                    backoff_level: level,
                    terminal,
                };
                self.apply(&ConnEvent::Remote(remote), at)
            }
            RemoteConn::Cleared => {
                // operator_clear publishes what it changed.
                let _ = self.operator_clear(at);
                false
            }
            RemoteConn::Eased { started } => self.apply(&ConnEvent::Success { started }, at),
            RemoteConn::Reinstated => {
                let changed = self.apply(&ConnEvent::Reinstate, at);
                if changed {
                    self.publish();
                }
                // Published above; nothing more to do.
                false
            }
            RemoteConn::Lockout {
                key,
                reason,
                remaining_ms,
            } => {
                self.note_time(at);
                let before = self.lockouts.get(&key).copied();
                let after = self.lockouts.lock(key, reason, remaining_ms, at);
                before.is_none_or(|b| b.until != after.until)
            }
            RemoteConn::LockoutCleared { model } => {
                self.note_time(at);
                let provider = self.handle.config.provider.clone();
                let cleared = match model {
                    None => {
                        let all = self.lockouts.len();
                        self.lockouts = LockoutTable::new();
                        all
                    }
                    Some(name) => {
                        let target = super::change::lock_target_of(&name);
                        self.lockouts.clear(&provider, None, Some(target.name()))
                    }
                };
                cleared > 0
            }
        };
        if changed {
            self.publish();
        }
    }
}
