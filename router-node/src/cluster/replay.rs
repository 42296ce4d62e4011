//! The bounded queue of local changes that could not reach Redis.
//!
//! Why: with Redis down a node keeps serving on local state, and what it learns meanwhile (a
//! 429, a terminal key, a lockout, a breaker failure) must still reach its peers once Redis is
//! back. Only extend-only writes are replayed ([`replayable`]): replaying them late, twice, or
//! after a peer's newer write is safe. A clear, a reinstatement, a decay, a success or a
//! breaker reset replayed after an outage would overwrite whatever newer state another node
//! wrote meanwhile, so they are dropped once Redis fails (operator actions fail closed with a
//! 503 while Redis is unreachable instead). The queue is bounded and drops its oldest entry
//! when full: the newest changes are the ones still likely to matter, and a long outage must
//! not grow memory without bound.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::actors::change::LocalChange;

/// Whether `change` may be replayed after an outage: it only extends state (a cooldown, a
/// terminal status, a lockout, one more failure in the breaker's window).
pub fn replayable(change: &LocalChange) -> bool {
    matches!(
        change,
        LocalChange::Cooldown { .. }
            | LocalChange::Terminal { .. }
            | LocalChange::Lockout { .. }
            | LocalChange::BreakerFailure { .. }
    )
}

/// The connection whose Redis record `change` writes, if any.
pub fn conn_of(change: &LocalChange) -> Option<&Arc<str>> {
    match change {
        LocalChange::Cooldown { conn, .. }
        | LocalChange::Terminal { conn, .. }
        | LocalChange::Success { conn, .. }
        | LocalChange::Cleared { conn }
        | LocalChange::Reinstated { conn }
        | LocalChange::Lockout { conn, .. }
        | LocalChange::LockoutDecay { conn, .. }
        | LocalChange::LockoutCleared { conn, .. } => Some(conn),
        _ => None,
    }
}

/// A FIFO with a capacity that drops the oldest entry to make room.
#[derive(Debug)]
pub struct ReplayQueue<T> {
    items: VecDeque<T>,
    capacity: usize,
    dropped: u64,
}

impl<T> ReplayQueue<T> {
    pub fn new(capacity: usize) -> Self {
        Self {
            items: VecDeque::new(),
            capacity: capacity.max(1),
            dropped: 0,
        }
    }

    /// Appends `item`; returns the older entry dropped for it, if any.
    pub fn push(&mut self, item: T) -> Option<T> {
        let mut lost = None;
        if self.items.len() >= self.capacity {
            lost = self.items.pop_front();
            self.dropped += 1;
        }
        self.items.push_back(item);
        lost
    }

    /// Puts an entry back at the front (a replay attempt failed again); returns it when the
    /// queue is full.
    pub fn push_front(&mut self, item: T) -> Option<T> {
        if self.items.len() >= self.capacity {
            // The failed entry is the oldest one: it is the one to lose.
            self.dropped += 1;
            return Some(item);
        }
        self.items.push_front(item);
        None
    }

    /// Removes and returns every entry for which `keep` is false, keeping the others' order.
    pub fn drain_unless(&mut self, keep: impl Fn(&T) -> bool) -> Vec<T> {
        let mut kept = VecDeque::with_capacity(self.items.len());
        let mut gone = Vec::new();
        for item in self.items.drain(..) {
            if keep(&item) {
                kept.push_back(item);
            } else {
                gone.push(item);
            }
        }
        self.items = kept;
        gone
    }

    pub fn pop(&mut self) -> Option<T> {
        self.items.pop_front()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Entries dropped since the queue was created.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_and_drops_the_oldest_when_full() {
        let mut q = ReplayQueue::new(3);
        for i in 0..5 {
            q.push(i);
        }
        assert_eq!(q.len(), 3);
        assert_eq!(q.dropped(), 2);
        assert_eq!(q.pop(), Some(2));
        q.push_front(2);
        assert_eq!(q.pop(), Some(2));
        assert_eq!(q.pop(), Some(3));
        assert_eq!(q.pop(), Some(4));
        assert!(q.is_empty());
    }

    #[test]
    fn a_failed_replay_is_lost_rather_than_newer_entries() {
        let mut q = ReplayQueue::new(2);
        q.push(1);
        q.push(2);
        assert_eq!(q.push_front(0), Some(0));
        assert_eq!(q.dropped(), 1);
        assert_eq!(q.pop(), Some(1));
    }

    #[test]
    fn zero_capacity_still_holds_one() {
        let mut q = ReplayQueue::new(0);
        assert_eq!(q.push(1), None);
        assert_eq!(q.push(2), Some(1));
        assert_eq!(q.pop(), Some(2));
    }

    #[test]
    fn draining_keeps_the_order_of_what_stays() {
        let mut q = ReplayQueue::new(10);
        for i in 0..6 {
            q.push(i);
        }
        assert_eq!(q.drain_unless(|i| i % 2 == 0), vec![1, 3, 5]);
        assert_eq!(q.pop(), Some(0));
        assert_eq!(q.pop(), Some(2));
        assert_eq!(q.pop(), Some(4));
    }

    #[test]
    fn only_extend_only_changes_are_replayed() {
        let conn: Arc<str> = Arc::from("k");
        let provider: Arc<str> = Arc::from("p");
        assert!(replayable(&LocalChange::Terminal {
            conn: conn.clone(),
            status: switchyard_shared::outcome::TerminalStatus::Banned,
        }));
        for change in [
            LocalChange::Cleared { conn: conn.clone() },
            LocalChange::Reinstated { conn: conn.clone() },
            LocalChange::LockoutCleared {
                provider: provider.clone(),
                conn: conn.clone(),
                model: None,
            },
            LocalChange::BreakerReset {
                provider: provider.clone(),
            },
            LocalChange::Success {
                conn: conn.clone(),
                started_epoch_ms: 1,
            },
        ] {
            assert!(!replayable(&change), "{change:?}");
        }
    }
}
