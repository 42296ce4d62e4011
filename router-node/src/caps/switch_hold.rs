//! After a Redis master switch or restart: re-assert the permits held, and grow only a permit
//! TTL later.
//!
//! Why: replication is asynchronous, so the promoted replica may lack the grants the old
//! master made last, or hold them with expiries that have already passed. A node that asked
//! the new master first was granted permits another node still had in use, and a cap of 1
//! peaked at 2 in flight. The nodes are the truth of their own in-flight requests, so on a new
//! master each node reports what it holds (no more) until a permit TTL after it first reached
//! that master. That is enough, without any node knowing about the others: every grant the
//! old master made was counted from a call sent before the switch, so by a TTL after the
//! switch each one has either lapsed on its holder's own clock ([`super::grant`]) or been
//! re-asserted on the new master, where the script counts it against the cap.
//!
//! Pure, with the time passed in; the leasing task in [`crate::cluster_sync::permits`] reads
//! the store's master generation after each call and does the I/O.

use switchyard_shared::Millis;

/// The master generation the task has seen, and until when it must not grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchHold {
    generation: u64,
    /// Node monotonic ms until which the task reports only what it holds.
    until: Option<Millis>,
}

impl SwitchHold {
    /// A task that starts on the master of `generation` holds nothing yet: no hold.
    pub fn new(generation: u64) -> Self {
        Self {
            generation,
            until: None,
        }
    }

    /// Called with the store's master generation read after a call, and when the store
    /// first saw that server (the task's clock). Returns whether the generation is new:
    /// the hold then lasts until `ttl_ms` after the store first saw the new server, and the call's
    /// grant is bounded like an ask ([`SwitchHold::bound`]), since the call may have run there.
    pub fn after_call(&mut self, generation: u64, since: Millis, ttl_ms: Millis) -> bool {
        if generation == self.generation {
            return false;
        }
        self.generation = generation;
        self.until = Some(since.saturating_add(ttl_ms));
        true
    }

    /// Whether the task must not grow at `now`.
    pub fn holding(&self, now: Millis) -> bool {
        self.until.is_some_and(|until| now < until)
    }

    /// When the hold ends, while it lasts.
    pub fn ends_at(&self, now: Millis) -> Option<Millis> {
        self.until.filter(|until| now < *until)
    }

    /// What to ask for, or accept from a grant, at `now`: `wanted` out of a hold, else no
    /// more than `holding`, the permits that exist on this node.
    pub fn bound(&self, now: Millis, wanted: u32, holding: u32) -> u32 {
        if self.holding(now) {
            wanted.min(holding)
        } else {
            wanted
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SwitchHold;

    const TTL: u64 = 3_000;

    #[test]
    fn the_same_master_never_holds() {
        let mut h = SwitchHold::new(0);
        assert!(!h.after_call(0, 10, TTL));
        assert!(!h.holding(10));
        assert_eq!(h.bound(10, 5, 1), 5);
    }

    #[test]
    fn a_new_master_holds_the_node_at_what_it_has_for_a_ttl_from_the_switch() {
        let mut h = SwitchHold::new(0);
        assert!(
            h.after_call(1, 900, TTL),
            "the call may have reached the new master"
        );
        assert!(h.holding(1_000));
        assert_eq!(h.bound(1_000, 3, 1), 1, "re-assert what is held, no more");
        assert_eq!(h.bound(1_000, 0, 1), 0, "shrinking is always allowed");
        assert_eq!(h.ends_at(2_000), Some(3_900));
        assert!(h.holding(3_899));
        assert!(!h.holding(3_900));
        assert_eq!(
            h.bound(3_900, 3, 1),
            3,
            "a TTL after the switch it grows again"
        );
        assert_eq!(h.ends_at(3_900), None);
    }

    #[test]
    fn a_switch_long_past_when_the_task_first_calls_holds_nothing() {
        // An idle connection's task makes no calls; its first one after the switch comes late.
        let mut h = SwitchHold::new(0);
        assert!(h.after_call(1, 1_000, TTL));
        assert!(!h.holding(60_000));
        assert_eq!(h.bound(60_000, 2, 0), 2);
    }

    #[test]
    fn a_second_switch_during_the_hold_starts_it_again() {
        let mut h = SwitchHold::new(0);
        assert!(h.after_call(1, 1_000, TTL));
        assert!(
            !h.after_call(1, 1_000, TTL),
            "the same new master is no new switch"
        );
        assert!(h.after_call(2, 3_500, TTL));
        assert!(h.holding(6_000));
        assert!(!h.holding(6_500));
    }
}
