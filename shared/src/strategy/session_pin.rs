//! A session's pin to a combo's target order, and its clearing after repeated failures.
//!
//! Why: a session sticks to the target its key hashes to (`cache-optimized`'s rendezvous
//! ranking), so its prompt cache stays warm. When that order keeps failing the session, the
//! reference clears the session's pin after `COMBO_FAILURE_THRESHOLD = 3` consecutive combo
//! failures, so the session does not keep starting where it keeps failing. A rendezvous pin
//! cannot be deleted, so clearing re-seeds it: the session's key is mixed with a generation
//! that each clear increments, and the session lands on a new order. A success resets the
//! count. Pure and time-free; the caller keeps one per node behind a mutex.

use std::collections::HashMap;

use super::hash::fmix64;

/// Consecutive combo failures of one session that clear its pin (the reference's
/// `COMBO_FAILURE_THRESHOLD`).
pub const COMBO_FAILURE_THRESHOLD: u32 = 3;

/// Sessions tracked at most; beyond that the map starts over (pins re-form on their own).
const MAX_SESSIONS: usize = 100_000;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Entry {
    failures: u32,
    generation: u64,
}

/// Per-session failure counts and pin generations, keyed by a hash of (combo, session).
#[derive(Debug, Default)]
pub struct SessionPins {
    map: HashMap<u64, Entry>,
}

impl SessionPins {
    pub fn new() -> Self {
        Self::default()
    }

    /// The rendezvous key of a session: its own hash until a clear, then re-seeded.
    pub fn cache_key(&self, key: u64, session_hash: u64) -> u64 {
        match self.map.get(&key) {
            Some(e) if e.generation > 0 => fmix64(session_hash ^ fmix64(e.generation)),
            _ => session_hash,
        }
    }

    /// A combo request of the session succeeded: its failure count starts over.
    pub fn record_success(&mut self, key: u64) {
        if let Some(e) = self.map.get_mut(&key) {
            e.failures = 0;
            if e.generation == 0 {
                self.map.remove(&key);
            }
        }
    }

    /// A combo request of the session failed. Returns whether this failure cleared the pin.
    pub fn record_failure(&mut self, key: u64) -> bool {
        if self.map.len() >= MAX_SESSIONS && !self.map.contains_key(&key) {
            self.map.clear();
        }
        let e = self.map.entry(key).or_default();
        e.failures += 1;
        if e.failures >= COMBO_FAILURE_THRESHOLD {
            e.failures = 0;
            e.generation += 1;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_third_consecutive_failure_reseeds_the_pin() {
        let mut p = SessionPins::new();
        let (key, session) = (7, 42);
        assert_eq!(p.cache_key(key, session), session);
        assert!(!p.record_failure(key));
        assert!(!p.record_failure(key));
        assert_eq!(
            p.cache_key(key, session),
            session,
            "two failures keep the pin"
        );
        assert!(p.record_failure(key));
        let reseeded = p.cache_key(key, session);
        assert_ne!(reseeded, session);
        // The new pin holds, and a success starts the count over.
        assert!(!p.record_failure(key));
        p.record_success(key);
        assert!(!p.record_failure(key));
        assert!(!p.record_failure(key));
        assert_eq!(p.cache_key(key, session), reseeded);
        assert!(p.record_failure(key));
        assert_ne!(
            p.cache_key(key, session),
            reseeded,
            "each clear is a new order"
        );
    }

    #[test]
    fn a_success_between_failures_keeps_the_pin() {
        let mut p = SessionPins::new();
        for _ in 0..10 {
            assert!(!p.record_failure(1));
            assert!(!p.record_failure(1));
            p.record_success(1);
        }
        assert_eq!(p.cache_key(1, 9), 9);
        assert!(p.map.is_empty(), "nothing kept for a session never cleared");
    }
}
