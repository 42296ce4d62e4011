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

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
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
    ConnectionTestPassed, GetBreaker, GetBreakerStatus, GetTransitionCount, ReleaseProbe,
    ResetBreaker, Retire, SetConnParams,
};
use super::params::ConnActorParams;
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
        }
    }
}

impl Actor for ProviderBreakerActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(BREAKER_MAILBOX_CAPACITY);
        let supervisor: Recipient<ChildStopped> = ctx.address().recipient();
        for child in &mut self.children {
            let had_mailbox = child.mailbox.is_some();
            let addr = child.start(supervisor.clone(), self.cluster.clone());
            if !had_mailbox {
                child.handle.actor.store(Some(Arc::new(addr)));
            }
        }
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
