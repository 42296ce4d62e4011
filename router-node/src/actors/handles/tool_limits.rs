//! The tool limits one provider learned from "too many tools" answers, by model, as pure
//! policy with the time passed in.
//!
//! Why they age: one client's odd request (a 400 that says "too many tools" for a reason of
//! its own) would otherwise lock every client out of the target above that count for good.
//! A learned limit therefore lives `tool_limit_ttl_ms` (6 h by default), and a success that
//! carried more tools than the limit proves it wrong and drops it at once.
//!
//! - A lower limit wins and starts a fresh TTL; the same limit learned again extends it; a
//!   higher one while a lower is live changes nothing (the lower one was seen, and is still
//!   fresh).
//! - A peer's limit (redis mode) is merged by the same rules, with the peer's remaining time.

use std::collections::BTreeMap;

use switchyard_shared::Millis;

/// One learned limit and when it lapses (node clock, [`crate::clock::Clock::now`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Learned {
    pub limit: u32,
    pub expires_at: Millis,
}

/// A provider's learned tool limits, by model.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolLimits {
    by_model: BTreeMap<Box<str>, Learned>,
}

impl ToolLimits {
    /// Merges `limit` for `model`, live until `expires_at`; returns the stored entry when it
    /// changed (a lower limit, or a later expiry of the same one).
    pub fn merge(
        &mut self,
        model: &str,
        limit: u32,
        expires_at: Millis,
        now: Millis,
    ) -> Option<Learned> {
        self.by_model.retain(|_, l| l.expires_at > now);
        if expires_at <= now {
            return None;
        }
        let new = Learned { limit, expires_at };
        let Some(stored) = self.by_model.get_mut(model) else {
            self.by_model.insert(Box::from(model), new);
            return Some(new);
        };
        let merged = if new.limit < stored.limit {
            new
        } else if new.limit == stored.limit {
            Learned {
                limit,
                expires_at: stored.expires_at.max(expires_at),
            }
        } else {
            *stored
        };
        let changed = merged != *stored;
        *stored = merged;
        changed.then_some(merged)
    }

    /// The live limit of `model`, if any.
    pub fn get(&self, model: &str, now: Millis) -> Option<Learned> {
        self.by_model
            .get(model)
            .copied()
            .filter(|l| l.expires_at > now)
    }

    /// A success that carried `tools` tools: a live limit below that count was wrong and is
    /// dropped. Returns the dropped limit.
    pub fn on_success(&mut self, model: &str, tools: usize) -> Option<u32> {
        let learned = self.by_model.get(model)?;
        if (learned.limit as usize) < tools {
            let limit = learned.limit;
            self.by_model.remove(model);
            return Some(limit);
        }
        None
    }

    /// Every live limit, in model order.
    pub fn live(&self, now: Millis) -> Vec<(String, Learned)> {
        self.by_model
            .iter()
            .filter(|(_, l)| l.expires_at > now)
            .map(|(m, l)| (m.to_string(), *l))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Millis = 1_000;

    #[test]
    fn a_learned_limit_lapses_after_its_ttl() {
        let mut t = ToolLimits::default();
        assert!(t.merge("m", 2, 100 + TTL, 100).is_some());
        assert_eq!(t.get("m", 100 + TTL - 1).map(|l| l.limit), Some(2));
        assert_eq!(t.get("m", 100 + TTL), None);
        assert!(t.live(100 + TTL).is_empty());
        // A lapsed entry is pruned on the next write, and a fresh one starts over.
        assert!(t.merge("n", 5, 5_000, 2_000).is_some());
        assert_eq!(t.live(2_000).len(), 1);
    }

    #[test]
    fn a_lower_limit_wins_and_the_same_one_extends() {
        let mut t = ToolLimits::default();
        t.merge("m", 10, 1_000, 0);
        // Higher while the lower is live: nothing changes.
        assert_eq!(t.merge("m", 20, 5_000, 10), None);
        assert_eq!(
            t.get("m", 10),
            Some(Learned {
                limit: 10,
                expires_at: 1_000
            })
        );
        // Same: the later expiry.
        assert_eq!(
            t.merge("m", 10, 3_000, 10).map(|l| l.expires_at),
            Some(3_000)
        );
        assert_eq!(t.merge("m", 10, 2_000, 10), None);
        // Lower: wins with its own expiry.
        assert_eq!(
            t.merge("m", 4, 1_500, 10),
            Some(Learned {
                limit: 4,
                expires_at: 1_500
            })
        );
        // An already lapsed merge (a late peer event) is ignored.
        assert_eq!(t.merge("m", 1, 5, 10), None);
    }

    #[test]
    fn a_success_above_the_limit_drops_it_one_within_keeps_it() {
        let mut t = ToolLimits::default();
        t.merge("m", 3, 1_000, 0);
        assert_eq!(t.on_success("m", 3), None);
        assert_eq!(t.on_success("other", 9), None);
        assert_eq!(t.get("m", 0).map(|l| l.limit), Some(3));
        assert_eq!(t.on_success("m", 4), Some(3));
        assert_eq!(t.get("m", 0), None);
    }
}
