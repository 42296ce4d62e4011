//! The Claude OAuth usage wall, per connection: the low-priority lane (`low_priority_mode`)
//! and the session-limit reset (`auto_limit_reset`), both opt-ins, off by default.
//!
//! Why a module of its own: a Claude subscription that hits its 5-hour wall answers 429, and
//! the normal path would cool the connection until the window resets. Anthropic offers two
//! ways past the wall that Claude Code uses (`/low-priority`, `/limit-reset`): a slower lane
//! on the same account, and a weekly reset of the session limit. This module keeps the state
//! both need and decides, as pure functions of an answer's headers and the time
//! ([`lane`], [`reset`], [`signals`]); the request pipeline makes the calls and the retries
//! (`routing::pipeline::wall`, `routing::limit_reset`).
//!
//! In embedded mode the state is node-local, as in the reference: a restart or a config
//! reload costs one more wall 429 to accept the lane again. In redis mode its deadlines are
//! shared ([`share`]): one node's accepted lane, spent budget, re-acceptance block or reset
//! hold holds on every node, so the others take the lane without a wall 429 of their own.

pub mod lane;
pub mod reset;
pub mod share;
pub mod signals;

use std::sync::{Mutex, PoisonError};

pub use lane::{Action, Decision, EndReason, Event, Options, Spent, WallState};
pub use reset::ResetOutcome;
pub use share::Shared;
pub use signals::Signals;

/// The usage-wall state of every connection of a routing table, by connection index.
#[derive(Debug, Default)]
pub struct UsageWall {
    states: Vec<Mutex<WallState>>,
}

impl UsageWall {
    /// A fresh state for each of `connections` connections.
    pub fn new(connections: usize) -> Self {
        Self {
            states: (0..connections)
                .map(|_| Mutex::new(WallState::default()))
                .collect(),
        }
    }

    /// Runs `f` on connection `idx`'s state; `None` for an unknown index. A poisoned lock is
    /// taken over: the state is plain data, valid after any panic.
    pub fn with<R>(&self, idx: usize, f: impl FnOnce(&mut WallState) -> R) -> Option<R> {
        let state = self.states.get(idx)?;
        let mut guard = state.lock().unwrap_or_else(PoisonError::into_inner);
        Some(f(&mut guard))
    }

    /// A copy of connection `idx`'s state, for the admin view.
    pub fn snapshot(&self, idx: usize) -> Option<WallState> {
        self.with(idx, |s| s.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_are_per_connection_and_unknown_indexes_are_none() {
        let wall = UsageWall::new(2);
        let blocked = wall.with(1, |s| {
            s.reaccept_blocked_until = Some(42);
            s.reaccept_blocked_until
        });
        assert_eq!(blocked, Some(Some(42)));
        assert_eq!(
            wall.snapshot(0).map(|s| s.reaccept_blocked_until),
            Some(None)
        );
        assert_eq!(
            wall.snapshot(1).map(|s| s.reaccept_blocked_until),
            Some(Some(42))
        );
        assert!(wall.snapshot(2).is_none());
    }
}
