//! Making a connection's local state equal to Redis's record: the messages that do it.
//!
//! Why a plan: the connection actor knows remote changes only as merges (extend-only
//! cooldowns and lockouts) and as the explicit lowering events (a peer's clear, reinstatement
//! or eased cooldown). When such an event was lost, the resync that reads a newer record
//! version ([`crate::cluster::versions`]) replays the lowering the record implies, then raises
//! to the record. Lowering messages are sent only when the local state is actually above
//! Redis's, so adopting a record that this node already holds changes nothing and publishes
//! nothing. Pure: the local view and the time are passed in.

use switchyard_shared::Millis;
use switchyard_shared::lockout::LockKey;
use switchyard_store::{ConnRecord, LockoutRecord};

use crate::actors::RemoteConn;
use crate::actors::change::{lock_reason_of, lock_target_name, lock_target_of};

/// A local cooldown or lockout at most this much longer than Redis's counts as the same one
/// (the two remaining times are read at slightly different instants).
pub const TOLERANCE_MS: Millis = 1_000;

/// What a connection's snapshot says, as far as the shared record covers it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalView {
    pub terminal: bool,
    pub cooldown_remaining_ms: Millis,
    pub backoff_level: u32,
    /// Active lockouts with their remaining time.
    pub lockouts: Vec<(LockKey, Millis)>,
}

/// The messages that make the local state equal to `record` and its `lockouts`, in order.
/// `reinstated`: the record was reinstated after the version this node adopted last. A terminal
/// status is lowered only then: a record that merely lacks it (re-created after Redis lost
/// data) does not lift it. `now` is node time (the instant the messages are applied at).
pub fn plan(
    local: &LocalView,
    record: &ConnRecord,
    lockouts: &[LockoutRecord],
    reinstated: bool,
    now: Millis,
) -> Vec<RemoteConn> {
    let mut out = Vec::new();
    if record.terminal.is_none() && (!local.terminal || reinstated) {
        let mut level = local.backoff_level;
        let mut cooldown = local.cooldown_remaining_ms;
        if local.terminal {
            // A reinstatement starts afresh (no cooldown, level 0).
            out.push(RemoteConn::Reinstated);
            level = 0;
            cooldown = 0;
        }
        let stale_lock = local.lockouts.iter().any(|(key, remaining)| {
            let name = lock_target_name(&key.model);
            !lockouts.iter().any(|r| {
                r.provider == key.provider
                    && r.model == name
                    && r.remaining_ms.saturating_add(TOLERANCE_MS) >= *remaining
            })
        });
        let longer = cooldown > record.remaining_ms.saturating_add(TOLERANCE_MS);
        if longer || stale_lock || level > record.backoff_level {
            // A clear drops the cooldown and every lockout and keeps the level; each eased
            // success then lowers the level by one (nothing is stale after the clear).
            out.push(RemoteConn::Cleared);
            for _ in record.backoff_level..level {
                out.push(RemoteConn::Eased { started: now });
            }
        }
    }
    if record.remaining_ms > 0 || record.backoff_level > 0 || record.terminal.is_some() {
        out.push(RemoteConn::Cooldown {
            remaining_ms: record.remaining_ms,
            level: record.backoff_level,
            terminal: record.terminal,
        });
    }
    for lock in lockouts.iter().filter(|l| l.remaining_ms > 0) {
        out.push(RemoteConn::Lockout {
            key: LockKey {
                provider: lock.provider.clone(),
                connection: lock.conn.clone(),
                model: lock_target_of(&lock.model),
            },
            reason: lock_reason_of(
                lock.reason
                    .unwrap_or(switchyard_shared::outcome::FailureReason::Unknown),
            ),
            remaining_ms: lock.remaining_ms,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use switchyard_shared::lockout::LockTarget;
    use switchyard_shared::outcome::{FailureReason, TerminalStatus};

    use super::*;

    fn record(remaining_ms: Millis, level: u32, terminal: Option<TerminalStatus>) -> ConnRecord {
        ConnRecord {
            conn: "k".to_owned(),
            remaining_ms,
            backoff_level: level,
            reason: None,
            terminal,
        }
    }

    fn key(model: &str) -> LockKey {
        LockKey {
            provider: "p".to_owned(),
            connection: "k".to_owned(),
            model: LockTarget::Model(model.to_owned()),
        }
    }

    fn lock(model: &str, remaining_ms: Millis) -> LockoutRecord {
        LockoutRecord {
            provider: "p".to_owned(),
            conn: "k".to_owned(),
            model: model.to_owned(),
            remaining_ms,
            failure_count: 1,
            reason: Some(FailureReason::ModelCapacity),
        }
    }

    #[test]
    fn a_lost_reinstatement_is_replayed() {
        let local = LocalView {
            terminal: true,
            ..LocalView::default()
        };
        assert_eq!(
            plan(&local, &record(0, 0, None), &[], true, 5),
            vec![RemoteConn::Reinstated]
        );
    }

    #[test]
    fn a_record_without_a_reinstatement_never_lifts_a_terminal_status() {
        let local = LocalView {
            terminal: true,
            ..LocalView::default()
        };
        // Re-created after Redis lost data: a cooldown, but no reinstatement on record.
        let plan = plan(&local, &record(5_000, 1, None), &[], false, 5);
        assert!(
            !plan.contains(&RemoteConn::Reinstated) && !plan.contains(&RemoteConn::Cleared),
            "{plan:?}"
        );
    }

    #[test]
    fn a_lost_clear_or_ease_lowers_the_cooldown_and_the_level() {
        let local = LocalView {
            cooldown_remaining_ms: 30_000,
            backoff_level: 3,
            lockouts: vec![(key("m"), 10_000)],
            ..LocalView::default()
        };
        // Eased in Redis: no cooldown, level 2, the lockout gone.
        assert_eq!(
            plan(&local, &record(0, 2, None), &[], false, 5),
            vec![
                RemoteConn::Cleared,
                RemoteConn::Eased { started: 5 },
                RemoteConn::Cooldown {
                    remaining_ms: 0,
                    level: 2,
                    terminal: None
                },
            ]
        );
    }

    #[test]
    fn a_record_the_node_already_holds_only_raises() {
        let local = LocalView {
            cooldown_remaining_ms: 30_000,
            backoff_level: 1,
            lockouts: vec![(key("m"), 10_000)],
            ..LocalView::default()
        };
        let plan = plan(
            &local,
            &record(29_900, 1, None),
            &[lock("m", 9_950)],
            false,
            5,
        );
        assert!(
            plan.iter()
                .all(|m| matches!(m, RemoteConn::Cooldown { .. } | RemoteConn::Lockout { .. })),
            "{plan:?}"
        );
        assert_eq!(plan.len(), 2);
    }

    #[test]
    fn a_terminal_record_is_raised_to_and_never_lowered() {
        let local = LocalView {
            cooldown_remaining_ms: 30_000,
            ..LocalView::default()
        };
        let banned = Some(TerminalStatus::Banned);
        assert_eq!(
            plan(&local, &record(0, 0, banned), &[], false, 5),
            vec![RemoteConn::Cooldown {
                remaining_ms: 0,
                level: 0,
                terminal: banned
            }]
        );
    }

    #[test]
    fn a_clean_record_and_a_clean_node_need_nothing() {
        assert!(plan(&LocalView::default(), &record(0, 0, None), &[], false, 5).is_empty());
    }
}
