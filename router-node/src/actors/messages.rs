//! Messages to the actors. Requests only ever `try_send` observations (never block, never wait);
//! admin actions and half-open probe admission use `send().await`, which is rare.

use std::sync::Arc;

use actix::Message;
use switchyard_shared::Millis;
use switchyard_shared::breaker::{Admission, BreakerStatus, ProbeGeneration};
use switchyard_shared::cooldown::FailureObservation;
use switchyard_shared::lockout::{LockFailure, LockKey};
use switchyard_shared::outcome::BreakerOutcome;
use switchyard_shared::settings::ResilienceSettings;

/// A failed attempt on a connection (connection actor).
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct ObserveFailure {
    /// The upstream model of the attempt.
    pub model: Arc<str>,
    /// The cooldown policy's view of the failure.
    pub observation: FailureObservation,
    /// A model lockout to record, when the failure is model-scoped.
    pub lockout: Option<(LockKey, LockFailure)>,
    pub at: Millis,
}

/// An egress sibling's 429 cools this connection until `until` (never longer, never
/// terminal; see `cooldown::sibling`).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct SiblingLock {
    pub until: Millis,
    /// The origin's failure reason (the cooldown's reason in metrics and the cluster).
    pub reason: switchyard_shared::outcome::FailureReason,
    pub at: Millis,
}

/// A success on a connection whose snapshot said something needs clearing or decaying.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct ObserveSuccess {
    pub model: Arc<str>,
    /// When the successful attempt was dispatched: a success of an attempt older than the
    /// last failure clears nothing (`ConnEvent::Success`).
    pub started: Millis,
    /// The same dispatch time on the wall clock, for the cluster's staleness test.
    pub started_epoch_ms: u64,
    pub at: Millis,
}

/// One attempt's outcome for the provider breaker (accounted exactly once).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct BreakerObserve {
    /// The probe generation when the attempt was a half-open probe.
    pub generation: Option<ProbeGeneration>,
    pub outcome: BreakerOutcome,
    pub at: Millis,
}

/// Ask the breaker to admit a request while it is (or is due to become) HALF_OPEN.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Admission")]
pub struct AdmitProbe {
    pub at: Millis,
}

/// Give a probe lease back without an outcome (the attempt never reached the provider).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct ReleaseProbe {
    pub generation: ProbeGeneration,
    pub at: Millis,
}

/// Operator reset of the provider breaker.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct ResetBreaker {
    pub at: Millis,
}

/// An operator's connection test succeeded: a DEGRADED breaker returns to CLOSED. Replies
/// with the state after.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "switchyard_shared::breaker::BreakerState")]
pub struct ConnectionTestPassed {
    pub at: Millis,
}

/// The breaker's status object for health output.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "BreakerStatus")]
pub struct GetBreakerStatus {
    pub at: Millis,
}

/// Result of an operator clear on one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClearResult {
    Cleared { lockouts_cleared: usize },
    Unchanged,
    SkippedTerminal,
}

/// Operator clear of a connection's cooldown and lockouts (never a terminal state).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "ClearResult")]
pub struct ClearCooldown {
    pub at: Millis,
}

/// Operator reinstatement of a terminal connection; returns whether it was terminal.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "bool")]
pub struct Reinstate {
    pub at: Millis,
}

/// Operator clear of model lockouts on a connection (`model: None` = all); returns the count.
#[derive(Debug, Clone, Message)]
#[rtype(result = "usize")]
pub struct ClearLockouts {
    pub model: Option<String>,
    pub at: Millis,
}

/// Runtime toggle of the connection's explicit rate-limit protection.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct SetRateLimitProtection(pub Option<bool>);

/// Runtime settings change (`PATCH /api/resilience`) for a breaker actor: it takes the new
/// breaker profile of its provider's category, keeps the new connection parameters for future
/// restarts and forwards them to its running connection actors. Returns how many connection
/// actors were told.
#[derive(Debug, Clone, Message)]
#[rtype(result = "usize")]
pub struct ApplySettings {
    pub settings: Arc<ResilienceSettings>,
    pub at: Millis,
}

/// New cooldown and lockout parameters for a connection actor (sent by its breaker actor on
/// [`ApplySettings`]). State is kept; the new numbers apply from the next observation.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct SetConnParams(pub super::params::ConnActorParams);

/// Test hook: make the connection actor panic inside a handler (only honoured when the node
/// runs with test hooks enabled). Used to prove supervision restarts it with state intact.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct InjectPanic;

/// A restarted breaker actor takes over supervision of a connection actor that outlived the
/// previous one: its death notice goes to `supervisor` as `incarnation` from now on.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Resupervise {
    pub supervisor: actix::Recipient<ChildStopped>,
    pub incarnation: u64,
}

/// Run the periodic lockout pruning now, at `at`; returns how many entries were dropped. The
/// connection actor also does this on its own timer.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "usize")]
pub struct PruneLockouts {
    pub at: Millis,
}

/// How many breaker transitions (history entries, including `probe-expired`) this breaker
/// actor has applied since it started.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "u64")]
pub struct GetTransitionCount;

/// Sent by a connection actor's death notice to its breaker actor when the actor is dropped.
/// Only a death during a panic leads to a restart: a normal stop happens when the arbiter shuts
/// down, and restarting then would loop.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct ChildStopped {
    /// [`crate::actors::ConnHandle::idx`] of the connection.
    pub conn_idx: usize,
    /// Which start of that connection's actor died; a notice about an older one is ignored.
    pub incarnation: u64,
    /// Whether the actor was dropped while its thread was unwinding from a panic.
    pub panicked: bool,
}

/// A cluster peer's (or the coordinator's) change to a connection, applied as remote state:
/// extend-only for cooldowns and lockouts, and never written back to the store (no echo).
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct ApplyRemote {
    pub change: RemoteConn,
    pub at: Millis,
}

/// What a peer changed on a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteConn {
    /// A cooldown (and level, and maybe a terminal status) to merge, extend-only.
    Cooldown {
        remaining_ms: Millis,
        level: u32,
        terminal: Option<switchyard_shared::outcome::TerminalStatus>,
    },
    /// Operator clear elsewhere: cooldown and lockouts (never a terminal state).
    Cleared,
    /// A success elsewhere ended the cooldown; `started` is when that attempt was dispatched,
    /// on this node's clock. Stale against a later failure seen here, like a local success.
    Eased { started: Millis },
    /// Operator reinstatement elsewhere.
    Reinstated,
    /// A model lockout to merge, extend-only.
    Lockout {
        key: LockKey,
        reason: switchyard_shared::lockout::LockReason,
        remaining_ms: Millis,
    },
    /// Lockouts cleared elsewhere: one lock target's name, or all (`None`).
    LockoutCleared { model: Option<String> },
}

/// A cluster breaker transition for this provider (from a peer, the coordinator, a resync or
/// this node's own store write). `generation` orders transitions; older ones are ignored.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct ApplyRemoteBreaker {
    pub to: switchyard_shared::wire::BreakerPhase,
    pub generation: u64,
    pub retry_after_ms: Millis,
    pub at: Millis,
    /// Read by a resync (the shared state now), rather than announced by an event.
    pub resync: bool,
}

/// Config reload: a copy of the provider's breaker, to seed the breaker actor of the same
/// provider in the new runtime (so an OPEN breaker stays open across a reload).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "switchyard_shared::breaker::Breaker")]
pub struct GetBreaker;

/// Config reload: the runtime this actor belongs to was replaced and no request uses it any
/// more. A breaker actor forwards it to its connection actors, clears their addresses from
/// the handles (breaking the handle/actor cycle) and stops; a connection actor stops.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct Retire;
