//! The provider breaker actor: owner of one provider's breaker and supervisor of its
//! connection actors.
//!
//! The breaker state machine is pure (`switchyard_shared::breaker`); this actor feeds it the
//! observations and probe requests of the provider's requests, logs the transitions it reports
//! and publishes a [`BreakerSnapshot`] after every message, so the hot path decides "closed,
//! open until T, or ask for a probe" from an `ArcSwap` load. Probe leases live only here, which
//! is what makes HALF_OPEN admit exactly its probe budget however many workers ask at once.
//!
//! Supervision is built here because actix's `Supervisor` only restarts an actor that *stops*;
//! a panic in a handler kills the actor for good. Each child carries a death notice whose
//! `Drop` reports to this actor, including while unwinding. A child that died in a panic is
//! restarted with the same `Arc<ConnHandle>`, seeded from the handle's last snapshot, at most
//! [`MAX_RESTARTS_PER_WINDOW`] times per [`RESTART_WINDOW`]. A child that was dropped without a
//! panic is not restarted: that only happens when its arbiter shuts down, and restarting then
//! would loop.
//!
//! The breaker actor itself is restarted the same way: its [`Keeper`] (dropped with the actor)
//! notices a panic and starts a new actor on the same arbiter after a backoff, from the last
//! breaker state it published, and swaps the provider's address. The new actor takes over the
//! connection actors that outlived the old one ([`Resupervise`]) and starts those that did not.
//! Without this a provider whose breaker actor died would stay OPEN for good. Restarts are
//! recorded in [`super::supervision`] as task `breaker:<provider>`.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::dev::channel::AddressReceiver;
use actix::{
    Actor, ActorContext, Addr, AsyncContext, Context, Handler, MessageResult, Recipient, Running,
};
use switchyard_shared::Millis;
use switchyard_shared::breaker::{Breaker, BreakerEffect, BreakerProfile};

use super::ActorStats;
use super::change::{LocalChange, StatePublisher, breaker_params};
use super::connection::ConnectionActor;
use super::messages::{
    AdmitProbe, ApplyRemoteBreaker, ApplySettings, BreakerObserve, ChildStopped,
    ConnectionTestPassed, GetBreaker, GetBreakerStatus, GetTransitionCount, InjectPanic,
    ReleaseProbe, ResetBreaker, Resupervise, Retire, SetConnParams,
};
use super::params::ConnActorParams;
use super::supervision;
use crate::actors::{BreakerSnapshot, ConnHandle, ProviderHandle};
use switchyard_shared::breaker::BreakerState;
use switchyard_shared::outcome::BreakerOutcome;
use switchyard_shared::wire::BreakerPhase;

/// Mailbox capacity of a breaker actor. It aggregates the breaker observations of all of its
/// provider's connections, hence more than a connection actor.
pub const BREAKER_MAILBOX_CAPACITY: usize = 1024;

/// Restarts allowed per child within [`RESTART_WINDOW`]; beyond that the child stays stopped
/// (a crash loop would only burn the control-plane thread) and the hot path counts its
/// observations as dropped.
pub const MAX_RESTARTS_PER_WINDOW: usize = 10;

/// The sliding window of the restart budget.
pub const RESTART_WINDOW: Duration = Duration::from_secs(60);

/// A supervised connection actor.
struct Child {
    handle: Arc<ConnHandle>,
    params: ConnActorParams,
    /// The running actor (`None` before `started()` and once given up).
    addr: Option<Addr<ConnectionActor>>,
    /// A mailbox created before this actor ran (see `start_actors`), so the handle had an
    /// address at once; the first start consumes it.
    mailbox: Option<AddressReceiver<ConnectionActor>>,
    /// Number of the current start; death notices of older ones are ignored.
    incarnation: u64,
    /// Restart instants within the window, oldest first.
    restarts: VecDeque<Instant>,
}

impl Child {
    /// Runs a new incarnation on the current arbiter and returns its address.
    fn start(
        &mut self,
        supervisor: Recipient<ChildStopped>,
        cluster: Option<Arc<dyn StatePublisher>>,
    ) -> Addr<ConnectionActor> {
        self.incarnation += 1;
        let actor = ConnectionActor::new(self.handle.clone(), self.params.clone())
            .with_cluster(cluster)
            .supervised_by(supervisor, self.incarnation);
        let ctx = match self.mailbox.take() {
            Some(rx) => Context::with_receiver(rx),
            None => Context::new(),
        };
        let addr = ctx.run(actor);
        self.addr = Some(addr.clone());
        addr
    }
}

/// What a restarted breaker actor is rebuilt from: the last published breaker and the
/// children's current parameters.
struct Recovery {
    breaker: Breaker,
    children: Vec<(Arc<ConnHandle>, ConnActorParams)>,
    cluster_generation: u64,
    /// Deaths in the current burst (a quiet [`RESTART_WINDOW`] starts a new one).
    recent: u32,
    last_death: Option<Instant>,
}

/// Restarts its breaker actor when the actor is dropped while panicking (a normal stop, e.g.
/// a runtime retired by a config reload, restarts nothing).
struct Keeper {
    provider: Arc<ProviderHandle>,
    stats: Arc<ActorStats>,
    recovery: Arc<Mutex<Recovery>>,
}

impl Drop for Keeper {
    fn drop(&mut self) {
        if std::thread::panicking() {
            restart_later(
                self.provider.clone(),
                self.stats.clone(),
                self.recovery.clone(),
            );
        }
    }
}

fn task_name(provider: &str) -> String {
    format!("breaker:{provider}")
}

/// Starts a new breaker actor for `provider` on the current arbiter after the backoff.
fn restart_later(
    provider: Arc<ProviderHandle>,
    stats: Arc<ActorStats>,
    recovery: Arc<Mutex<Recovery>>,
) {
    let task = task_name(&provider.id);
    let delay = match recovery.lock() {
        Ok(mut r) => {
            let now = Instant::now();
            if r.last_death
                .is_some_and(|at| now.duration_since(at) >= RESTART_WINDOW)
            {
                r.recent = 0;
            }
            let delay = supervision::backoff(r.recent);
            r.recent = r.recent.saturating_add(1);
            r.last_death = Some(now);
            delay
        }
        Err(_) => supervision::backoff(0),
    };
    supervision::died(&task, "panic in a handler", wall_ms());
    let Some(arbiter) = actix::Arbiter::try_current() else {
        tracing::error!(
            provider = &*provider.id,
            "breaker actor died outside an arbiter; not restarted"
        );
        return;
    };
    let id = provider.id.clone();
    let spawned = arbiter.spawn(async move {
        tokio::time::sleep(delay).await;
        let Ok(r) = recovery
            .lock()
            .map(|r| (r.breaker.clone(), r.children.clone(), r.cluster_generation))
        else {
            return;
        };
        let (breaker, children, cluster_generation) = r;
        let profile = *breaker.profile();
        let mut actor = ProviderBreakerActor::new(provider.clone(), profile, stats)
            .with_breaker(breaker, profile);
        actor.cluster_generation = cluster_generation;
        actor.recovery = Some(recovery);
        for (handle, params) in children {
            actor = actor.with_child(handle, params, None);
        }
        let addr = actor.start();
        provider.actor.replace(addr);
        tracing::warn!(
            provider = &*provider.id,
            "restarted breaker actor after a panic"
        );
    });
    if !spawned {
        tracing::error!(
            provider = &*id,
            "breaker actor's arbiter is gone; not restarted"
        );
    }
}

fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Owner of one provider's breaker; supervisor of its connection actors.
pub struct ProviderBreakerActor {
    provider: Arc<ProviderHandle>,
    breaker: Breaker,
    children: Vec<Child>,
    stats: Arc<ActorStats>,
    /// Transitions applied since start (history entries, `probe-expired` included).
    transitions: u64,
    stopping: bool,
    /// Where local changes go in redis mode (from `stats.cluster`).
    cluster: Option<Arc<dyn StatePublisher>>,
    /// The newest cluster breaker generation applied; older transitions are stale.
    cluster_generation: u64,
    /// Set on a restarted actor (it adopts the children that outlived its predecessor), and
    /// by `started` on a first one.
    recovery: Option<Arc<Mutex<Recovery>>>,
    /// Restarts this actor if it dies in a panic (declared last: dropped after the state).
    _keeper: Option<Keeper>,
}

impl ProviderBreakerActor {
    /// A CLOSED breaker with no children yet.
    pub fn new(
        provider: Arc<ProviderHandle>,
        profile: BreakerProfile,
        stats: Arc<ActorStats>,
    ) -> Self {
        Self {
            provider,
            breaker: Breaker::new(profile),
            children: Vec::new(),
            cluster: stats.cluster.get().cloned(),
            stats,
            transitions: 0,
            stopping: false,
            cluster_generation: 0,
            recovery: None,
            _keeper: None,
        }
    }

    /// Keeps what a restart would need in step with this actor.
    fn remember(&self) {
        if let Some(Ok(mut r)) = self.recovery.as_ref().map(|r| r.lock()) {
            r.breaker = self.breaker.clone();
            r.cluster_generation = self.cluster_generation;
            r.children = self
                .children
                .iter()
                .map(|c| (c.handle.clone(), c.params.clone()))
                .collect();
        }
    }

    /// Hands a local breaker change to the cluster writer (redis mode); never waits.
    fn emit(&self, change: impl FnOnce(Arc<str>) -> LocalChange) {
        if let Some(cluster) = &self.cluster {
            cluster.publish(change(self.provider.id.clone()));
        }
    }

    /// Starts from `breaker` (carried over from the previous runtime on a config reload)
    /// instead of a CLOSED one; `profile` still applies, since settings may have changed.
    pub(super) fn with_breaker(mut self, mut breaker: Breaker, profile: BreakerProfile) -> Self {
        breaker.set_profile(profile);
        self.breaker = breaker;
        self
    }

    /// Adds a connection to supervise; its actor starts with this actor. When `mailbox` is
    /// given, the handle already holds an address of it and messages sent there are kept.
    pub(super) fn with_child(
        mut self,
        handle: Arc<ConnHandle>,
        params: ConnActorParams,
        mailbox: Option<AddressReceiver<ConnectionActor>>,
    ) -> Self {
        self.children.push(Child {
            handle,
            params,
            addr: None,
            mailbox,
            incarnation: 0,
            restarts: VecDeque::new(),
        });
        self
    }

    /// Logs and counts the breaker's transitions.
    fn apply(&mut self, effects: Vec<BreakerEffect>) {
        for BreakerEffect::Transition(t) in effects {
            self.transitions += 1;
            self.provider.transitions.record(t.from, t.to);
            tracing::info!(
                provider = &*self.provider.id,
                from = t.from.as_str(),
                to = t.to.as_str(),
                reason = t.reason.as_str(),
                failure_count = t.failure_count,
                "breaker transition"
            );
        }
    }

    /// Publishes the breaker as of `at` when the readers' view differs.
    fn publish(&self, at: Millis) {
        let next = BreakerSnapshot {
            view: self.breaker.view(at),
            failure_count: self.breaker.failure_count(),
        };
        if **self.provider.breaker.load() != next {
            // Embedded mode with a state directory: an open breaker survives a restart.
            crate::actors::persist::record_breaker(&self.provider.id, &next);
            self.provider.breaker.store(Arc::new(next));
            self.remember();
        }
    }
}

impl Actor for ProviderBreakerActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(BREAKER_MAILBOX_CAPACITY);
        let supervisor: Recipient<ChildStopped> = ctx.address().recipient();
        let restarted = self.recovery.is_some();
        for child in &mut self.children {
            if restarted
                && let Some(addr) = child.handle.actor.load_full()
                && addr.connected()
            {
                // It outlived the previous breaker actor: supervise it from now on.
                child.incarnation += 1;
                addr.do_send(Resupervise {
                    supervisor: supervisor.clone(),
                    incarnation: child.incarnation,
                });
                child.addr = Some((*addr).clone());
                continue;
            }
            let had_mailbox = child.mailbox.is_some();
            let addr = child.start(supervisor.clone(), self.cluster.clone());
            if !had_mailbox {
                child.handle.actor.store(Some(Arc::new(addr)));
            }
        }
        if self.recovery.is_none() {
            self.recovery = Some(Arc::new(Mutex::new(Recovery {
                breaker: self.breaker.clone(),
                children: Vec::new(),
                cluster_generation: self.cluster_generation,
                recent: 0,
                last_death: None,
            })));
            self.remember();
        }
        if let Some(recovery) = &self.recovery {
            self._keeper = Some(Keeper {
                provider: self.provider.clone(),
                stats: self.stats.clone(),
                recovery: recovery.clone(),
            });
        }
        supervision::running(&task_name(&self.provider.id));
    }

    fn stopping(&mut self, _: &mut Self::Context) -> Running {
        self.stopping = true;
        Running::Stop
    }
}

impl Handler<BreakerObserve> for ProviderBreakerActor {
    type Result = ();

    fn handle(&mut self, msg: BreakerObserve, _: &mut Self::Context) {
        if let Some(cluster) = &self.cluster {
            let params = breaker_params(self.breaker.profile());
            match (msg.generation, msg.outcome) {
                (_, BreakerOutcome::Ignore) => {}
                (Some(local), outcome) => {
                    match cluster.take_probe(&self.provider.id, local.0) {
                        Some(generation) => {
                            let success = outcome == BreakerOutcome::Success;
                            self.emit(|provider| LocalChange::ProbeResult {
                                provider,
                                generation,
                                success,
                                params,
                            });
                        }
                        // A probe of this node's own OPEN (Redis away, or the shared breaker
                        // closed): its failure still counts in the shared window.
                        None if outcome != BreakerOutcome::Success => {
                            self.emit(|provider| LocalChange::BreakerFailure { provider, params });
                        }
                        None => {}
                    }
                }
                (None, BreakerOutcome::Failure(_)) => {
                    self.emit(|provider| LocalChange::BreakerFailure { provider, params });
                }
                (None, BreakerOutcome::Success) => {
                    self.emit(|provider| LocalChange::BreakerSuccess { provider });
                }
            }
        }
        let effects = self.breaker.on_outcome(msg.generation, msg.outcome, msg.at);
        self.apply(effects);
        self.publish(msg.at);
    }
}

impl Handler<AdmitProbe> for ProviderBreakerActor {
    type Result = MessageResult<AdmitProbe>;

    fn handle(&mut self, msg: AdmitProbe, _: &mut Self::Context) -> Self::Result {
        let (admission, effects) = self.breaker.admit(msg.at);
        self.apply(effects);
        self.publish(msg.at);
        MessageResult(admission)
    }
}

impl Handler<ReleaseProbe> for ProviderBreakerActor {
    type Result = ();

    fn handle(&mut self, msg: ReleaseProbe, _: &mut Self::Context) {
        if let Some(cluster) = &self.cluster {
            // The probe never reached upstream: its cluster lease goes back too.
            cluster.release_probe(&self.provider.id, msg.generation.0);
        }
        self.breaker.release_probe(msg.generation, msg.at);
        self.publish(msg.at);
    }
}

impl Handler<ResetBreaker> for ProviderBreakerActor {
    type Result = ();

    fn handle(&mut self, msg: ResetBreaker, _: &mut Self::Context) {
        self.emit(|provider| LocalChange::BreakerReset { provider });
        let effects = self.breaker.reset(msg.at);
        self.apply(effects);
        self.publish(msg.at);
    }
}

impl Handler<ConnectionTestPassed> for ProviderBreakerActor {
    type Result = MessageResult<ConnectionTestPassed>;

    fn handle(&mut self, msg: ConnectionTestPassed, _: &mut Self::Context) -> Self::Result {
        // Local: the shared breaker (redis mode) learns of the close from this node's next
        // outcome, as with any other recovery.
        let effects = self.breaker.connection_test_passed(msg.at);
        self.apply(effects);
        self.publish(msg.at);
        MessageResult(self.breaker.state())
    }
}

impl Handler<GetBreakerStatus> for ProviderBreakerActor {
    type Result = MessageResult<GetBreakerStatus>;

    fn handle(&mut self, msg: GetBreakerStatus, _: &mut Self::Context) -> Self::Result {
        let (status, effects) = self.breaker.status(msg.at);
        self.apply(effects);
        self.publish(msg.at);
        MessageResult(status)
    }
}

impl Handler<ApplySettings> for ProviderBreakerActor {
    type Result = usize;

    fn handle(&mut self, msg: ApplySettings, _: &mut Self::Context) -> usize {
        let category = self.provider.config.category;
        self.breaker
            .set_profile(msg.settings.breaker_profile(category));
        // A new reset timeout applies at once, so the published OPEN deadline may move.
        self.publish(msg.at);
        let mut told = 0;
        for child in &mut self.children {
            child.params = ConnActorParams::new(&msg.settings, category, &child.handle.config);
            if let Some(addr) = &child.addr {
                // Settings changes are rare operator actions: queue even past the capacity.
                addr.do_send(SetConnParams(child.params.clone()));
                told += 1;
            }
        }
        self.remember();
        tracing::info!(
            provider = &*self.provider.id,
            connections = told,
            "resilience settings applied"
        );
        told
    }
}

impl Handler<GetTransitionCount> for ProviderBreakerActor {
    type Result = u64;

    fn handle(&mut self, _: GetTransitionCount, _: &mut Self::Context) -> u64 {
        self.transitions
    }
}

impl Handler<GetBreaker> for ProviderBreakerActor {
    type Result = MessageResult<GetBreaker>;

    fn handle(&mut self, _: GetBreaker, _: &mut Self::Context) -> Self::Result {
        MessageResult(self.breaker.clone())
    }
}

impl Handler<Retire> for ProviderBreakerActor {
    type Result = ();

    fn handle(&mut self, _: Retire, ctx: &mut Self::Context) {
        // Set first, so the children's death notices do not restart them.
        self.stopping = true;
        for child in &mut self.children {
            if let Some(addr) = child.addr.take() {
                addr.do_send(Retire);
            }
            child.handle.actor.store(None);
        }
        ctx.stop();
    }
}

impl Handler<ChildStopped> for ProviderBreakerActor {
    type Result = ();

    fn handle(&mut self, msg: ChildStopped, ctx: &mut Self::Context) {
        let provider = &*self.provider.id;
        let Some(child) = self
            .children
            .iter_mut()
            .find(|child| child.handle.idx == msg.conn_idx)
        else {
            return;
        };
        let handle = child.handle.clone();
        let connection = &*handle.id;
        if msg.incarnation != child.incarnation {
            tracing::debug!(
                provider,
                connection,
                incarnation = msg.incarnation,
                "stale death notice"
            );
            return;
        }
        if !msg.panicked || self.stopping {
            tracing::debug!(provider, connection, "connection actor stopped");
            child.addr = None;
            return;
        }
        let now = Instant::now();
        while child
            .restarts
            .front()
            .is_some_and(|at| now.duration_since(*at) >= RESTART_WINDOW)
        {
            child.restarts.pop_front();
        }
        if child.restarts.len() >= MAX_RESTARTS_PER_WINDOW {
            tracing::error!(
                provider,
                connection,
                restarts = child.restarts.len(),
                "connection actor keeps panicking; leaving it stopped"
            );
            child.addr = None;
            child.handle.actor.store(None);
            self.stats
                .restarts_exhausted
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        child.restarts.push_back(now);
        let addr = child.start(ctx.address().recipient(), self.cluster.clone());
        child.handle.actor.store(Some(Arc::new(addr)));
        self.stats.restarts.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            provider,
            connection,
            incarnation = child.incarnation,
            "restarted connection actor after a panic"
        );
    }
}

impl Handler<InjectPanic> for ProviderBreakerActor {
    type Result = ();

    // Panicking is the whole point of this test hook: it proves that a breaker actor that died
    // in a handler is restarted with its state.
    #[allow(clippy::panic)]
    fn handle(&mut self, _: InjectPanic, _: &mut Self::Context) {
        // A second panic while the dead actor's mailbox is drained would abort the process.
        if std::thread::panicking() {
            return;
        }
        panic!(
            "injected panic in the breaker actor of provider {}",
            self.provider.id
        );
    }
}

impl Handler<ApplyRemoteBreaker> for ProviderBreakerActor {
    type Result = ();

    fn handle(&mut self, msg: ApplyRemoteBreaker, _: &mut Self::Context) {
        // CLOSED only through a newer transition: a resync reading an old CLOSED must not
        // close an OPEN this node reached on its own (e.g. while Redis was down).
        let stale = match msg.to {
            BreakerPhase::Closed => msg.generation <= self.cluster_generation,
            _ => msg.generation < self.cluster_generation,
        };
        if stale {
            if !(msg.resync && msg.generation < self.cluster_generation) {
                return;
            }
            // The shared generation went backwards: Redis lost its data (a restart without
            // persistence). Count from its generation again, but never close on that alone.
            self.cluster_generation = msg.generation;
            if msg.to == BreakerPhase::Closed {
                return;
            }
        }
        self.cluster_generation = msg.generation;
        let to = match msg.to {
            BreakerPhase::Closed => BreakerState::Closed,
            BreakerPhase::Degraded => BreakerState::Degraded,
            BreakerPhase::Open => BreakerState::Open,
            BreakerPhase::HalfOpen => BreakerState::HalfOpen,
        };
        let effects = self.breaker.apply_remote(to, msg.retry_after_ms, msg.at);
        self.apply(effects);
        self.publish(msg.at);
    }
}
