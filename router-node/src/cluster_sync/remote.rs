//! Turning a cluster event into messages for this node's actors.
//!
//! Why separate: the same mapping serves peers' events, the coordinator's, a resync and this
//! node's own store replies (when Redis knew more than the node, e.g. a longer cooldown set by
//! a peer). Messages go with `do_send`: remote state is rare and must not be lost to a full
//! mailbox, and none of it is ever written back to Redis (no echo).

use switchyard_shared::Millis;
use switchyard_shared::lockout::LockKey;
use switchyard_shared::wire::{BreakerPhase, WireEvent};

use crate::actors::change::{lock_reason_of, lock_target_of};
use crate::actors::{ApplyRemote, ApplyRemoteBreaker, RemoteConn};
use crate::cluster_sync::learned;
use crate::runtime::Runtime;

/// What became of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Handed to an actor.
    Applied,
    /// No such connection or provider here, or its actor is not running.
    Dropped,
    /// Not an actor's business (settings, leases): the caller handles it or it is informational.
    NotForActors,
}

/// Sends `change` to the connection `conn`'s actor.
pub fn to_connection(rt: &Runtime, conn: &str, change: RemoteConn) -> Applied {
    let Some(handle) = rt.table.connection(conn) else {
        return Applied::Dropped;
    };
    match &*handle.actor.load() {
        Some(addr) => {
            addr.do_send(ApplyRemote {
                change,
                at: rt.table.clock.now(),
            });
            Applied::Applied
        }
        None => Applied::Dropped,
    }
}

/// Sends a cluster breaker phase to `provider`'s breaker actor (`resync`: read from the keys
/// rather than announced).
pub fn to_breaker(
    rt: &Runtime,
    provider: &str,
    to: BreakerPhase,
    generation: u64,
    retry_after_ms: Millis,
    resync: bool,
) -> Applied {
    let Some(addr) = rt.table.provider(provider).and_then(|p| p.actor.get()) else {
        return Applied::Dropped;
    };
    addr.do_send(ApplyRemoteBreaker {
        to,
        generation,
        retry_after_ms,
        at: rt.table.clock.now(),
        resync,
    });
    Applied::Applied
}

/// Puts a peer's `CooldownEased` on this node's wall clock. The event carries the attempt's
/// dispatch instant on the origin's wall clock; read as this node's time, an origin whose clock
/// runs ahead would make its success look newer than a fresh failure here and clear it. Only
/// the attempt's age at publish (`origin_ts_ms - started_epoch_ms`, both on the origin's clock,
/// so its skew cancels) is used, anchored at `received_epoch_ms` on this node's clock. The
/// delay from the hand-over to the writer until delivery is not subtracted (no shared clock
/// measures it): the success looks that much (milliseconds) newer than it was, instead of a
/// whole clock skew.
pub fn on_local_clock(event: WireEvent, origin_ts_ms: u64, received_epoch_ms: u64) -> WireEvent {
    match event {
        WireEvent::CooldownEased {
            connection,
            backoff_level,
            started_epoch_ms,
        } if started_epoch_ms > 0 => {
            let age_ms = origin_ts_ms.saturating_sub(started_epoch_ms);
            WireEvent::CooldownEased {
                connection,
                backoff_level,
                started_epoch_ms: received_epoch_ms.saturating_sub(age_ms).max(1),
            }
        }
        other => other,
    }
}

/// Applies one event from another origin to this node's actors.
pub fn apply_event(rt: &Runtime, event: &WireEvent) -> Applied {
    match event {
        WireEvent::CooldownSet {
            connection,
            until_remaining_ms,
            backoff_level,
            terminal,
            ..
        } => to_connection(
            rt,
            connection,
            RemoteConn::Cooldown {
                remaining_ms: *until_remaining_ms,
                level: *backoff_level,
                terminal: *terminal,
            },
        ),
        WireEvent::CooldownCleared { connection } => {
            to_connection(rt, connection, RemoteConn::Cleared)
        }
        WireEvent::CooldownEased {
            connection,
            started_epoch_ms,
            ..
        } => {
            let started = rt.table.clock.at_of_epoch(*started_epoch_ms);
            to_connection(rt, connection, RemoteConn::Eased { started })
        }
        WireEvent::TerminalSet { connection, status } => to_connection(
            rt,
            connection,
            RemoteConn::Cooldown {
                remaining_ms: 0,
                level: 0,
                terminal: Some(*status),
            },
        ),
        WireEvent::TerminalReinstated { connection } => {
            to_connection(rt, connection, RemoteConn::Reinstated)
        }
        WireEvent::LockoutSet {
            provider,
            connection,
            model,
            remaining_ms,
            reason,
            ..
        } => to_connection(
            rt,
            connection,
            RemoteConn::Lockout {
                key: LockKey {
                    provider: provider.clone(),
                    connection: connection.clone(),
                    model: lock_target_of(model),
                },
                reason: lock_reason_of(*reason),
                remaining_ms: *remaining_ms,
            },
        ),
        WireEvent::LockoutCleared {
            connection, model, ..
        } => to_connection(
            rt,
            connection,
            RemoteConn::LockoutCleared {
                model: (model != ALL_MODELS && !model.is_empty()).then(|| model.clone()),
            },
        ),
        WireEvent::BreakerTransition {
            provider,
            to,
            generation,
            retry_after_ms,
            ..
        } => to_breaker(rt, provider, *to, *generation, *retry_after_ms, false),
        WireEvent::SettingsVersion { .. } | WireEvent::LeaseEvent { .. } => Applied::NotForActors,
        WireEvent::UsageWallShared { .. }
        | WireEvent::ToolLimitLearned { .. }
        | WireEvent::ToolLimitCleared { .. }
        | WireEvent::UsageWallLaneEnded { .. }
        | WireEvent::QueuePaused { .. } => learned::apply(rt, event),
    }
}

/// The `model` of a `LockoutCleared` that clears every lockout of the connection.
pub const ALL_MODELS: &str = "*";

#[cfg(test)]
mod tests {
    use super::*;

    fn eased(started_epoch_ms: u64) -> WireEvent {
        WireEvent::CooldownEased {
            connection: "k".to_owned(),
            backoff_level: 0,
            started_epoch_ms,
        }
    }

    #[test]
    fn an_eased_cooldown_keeps_its_age_but_not_the_origins_clock() {
        // The origin's clock runs a minute ahead: its attempt started 300 ms before it
        // published, 60 s "in the future" of this node.
        let origin_ahead = 60_000;
        let received = 1_000_000;
        let started = received + origin_ahead - 300;
        let published = received + origin_ahead;
        assert_eq!(
            on_local_clock(eased(started), published, received),
            eased(received - 300)
        );
        // A clock behind is corrected the same way.
        assert_eq!(
            on_local_clock(eased(received - 5_300), received - 5_000, received),
            eased(received - 300)
        );
        // Unknown start stays unknown; other events pass unchanged.
        assert_eq!(on_local_clock(eased(0), published, received), eased(0));
        let cleared = WireEvent::CooldownCleared {
            connection: "k".to_owned(),
        };
        assert_eq!(on_local_clock(cleared.clone(), 1, 2), cleared);
    }
}
