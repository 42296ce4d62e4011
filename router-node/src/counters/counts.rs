//! Counters kept by the actors, as plain atomics on the handles they already write.
//!
//! The actors are the sole writers of breaker and cooldown state and learn about transitions
//! and cooldowns first. Counting into atomics on the provider and connection handles keeps the
//! actor layer free of any Prometheus type, survives actor restarts (the handles outlive the
//! actors) and costs one relaxed add. The scrape-time collector turns them into counter
//! families.

use std::sync::atomic::{AtomicU64, Ordering};

use switchyard_shared::breaker::BreakerState;
use switchyard_shared::outcome::FailureReason;

use super::labels::{BreakerLabel, CooldownReason};

/// Breaker transitions of one provider, by `from` and `to` state.
#[derive(Debug, Default)]
pub struct TransitionCounts([[AtomicU64; BreakerLabel::COUNT]; BreakerLabel::COUNT]);

impl TransitionCounts {
    /// Counts one transition (history entry); `from == to` for a probe expiry or a reset of a
    /// closed breaker.
    pub fn record(&self, from: BreakerState, to: BreakerState) {
        if let Some(c) = self.cell(from.into(), to.into()) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Transitions so far from `from` to `to`.
    pub fn get(&self, from: BreakerLabel, to: BreakerLabel) -> u64 {
        self.cell(from, to).map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Adds `other`'s counts (a config reload hands a provider's counts to its new handle, so
    /// the exported counter does not reset).
    pub fn add(&self, other: &TransitionCounts) {
        for (row, other_row) in self.0.iter().zip(&other.0) {
            add_all(row, other_row);
        }
    }

    fn cell(&self, from: BreakerLabel, to: BreakerLabel) -> Option<&AtomicU64> {
        self.0.get(from.index())?.get(to.index())
    }
}

/// Cooldowns set on one connection, by reason.
#[derive(Debug, Default)]
pub struct CooldownCounts([AtomicU64; CooldownReason::COUNT]);

impl CooldownCounts {
    /// Counts one cooldown.
    pub fn record(&self, reason: FailureReason) {
        if let Some(c) = self.0.get(CooldownReason::from(reason).index()) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Adds `other`'s counts (see [`TransitionCounts::add`]).
    pub fn add(&self, other: &CooldownCounts) {
        add_all(&self.0, &other.0);
    }

    /// Cooldowns so far for `reason`.
    pub fn get(&self, reason: CooldownReason) -> u64 {
        self.0
            .get(reason.index())
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }
}

fn add_all(into: &[AtomicU64], from: &[AtomicU64]) {
    for (a, b) in into.iter().zip(from) {
        a.fetch_add(b.load(Ordering::Relaxed), Ordering::Relaxed);
    }
}
