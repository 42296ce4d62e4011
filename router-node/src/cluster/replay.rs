//! The bounded queue of local changes that could not reach Redis.
//!
//! Why: with Redis down a node keeps serving on local state, and what it learns meanwhile (a
//! 429, a terminal key) must still reach its peers once Redis is back. Every write is
//! extend-only (or idempotent), so replaying them late, twice, or after a peer's newer write
//! is safe. The queue is bounded and drops its oldest entry when full: the newest changes are
//! the ones still likely to matter, and a long outage must not grow memory without bound.

use std::collections::VecDeque;

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

    /// Appends `item`; returns whether an older entry was dropped for it.
    pub fn push(&mut self, item: T) -> bool {
        let dropped = self.items.len() >= self.capacity;
        if dropped {
            self.items.pop_front();
            self.dropped += 1;
        }
        self.items.push_back(item);
        dropped
    }

    /// Puts an entry back at the front (a replay attempt failed again).
    pub fn push_front(&mut self, item: T) {
        if self.items.len() >= self.capacity {
            // The failed entry is the oldest one: it is the one to lose.
            self.dropped += 1;
            return;
        }
        self.items.push_front(item);
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
        q.push_front(0);
        assert_eq!(q.dropped(), 1);
        assert_eq!(q.pop(), Some(1));
    }

    #[test]
    fn zero_capacity_still_holds_one() {
        let mut q = ReplayQueue::new(0);
        assert!(!q.push(1));
        assert!(q.push(2));
        assert_eq!(q.pop(), Some(2));
    }
}
