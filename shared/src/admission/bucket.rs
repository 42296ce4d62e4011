//! A pure requests-per-minute limiter with minimum spacing, for per-key RPM and per-connection
//! queue pacing.
//!
//! Why not a classic token bucket: a bucket of `rpm` tokens refilled continuously admits up to
//! about `2 · rpm` requests inside one 60 s window (a full burst, then the refill), and a
//! fixed-window reservoir does the same across a window boundary. Switchyard promises **at most
//! `rpm` admissions in any 60 s window**, so this is a sliding window over 61 one-second slots.
//! The slot that straddles the window edge is counted whole, which makes the limiter slightly
//! conservative (by at most one second's worth of the oldest slot) but never permissive, with
//! fixed memory whatever the rate.
//!
//! Invariants: acquisition is all-or-nothing (a refusal changes nothing); [`RateState::next_slot`]
//! is exact (a request at that instant is admitted, one a millisecond earlier is not); time
//! that goes backwards is treated as "no time passed".

use crate::Millis;

/// The sliding window the rate applies to.
pub const WINDOW_MS: Millis = 60_000;
const SLOT_MS: Millis = 1_000;
const SLOTS: usize = 61; // the slot of `now` plus the 60 before it

/// Limits for one key or connection. `0` disables a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RateLimit {
    /// Admissions allowed in any 60 s window; `0` = unlimited.
    pub requests_per_minute: u32,
    /// Minimum gap between two admissions; `0` = none.
    pub min_time_between_requests_ms: Millis,
}

/// Limiter state. Create one per key (or per connection) and feed it the same clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateState {
    limit: RateLimit,
    /// Admissions per slot, indexed by `slot % SLOTS`.
    counts: [u32; SLOTS],
    /// Absolute index of the newest slot the ring holds.
    head_slot: u64,
    /// Time of the last admission, for spacing.
    last_admit: Option<Millis>,
    /// Latest time seen, so a clock step backwards cannot rewind the window.
    last_now: Millis,
    /// No admission before this instant: the upstream asked for a pause (a 429 body's
    /// `RetryInfo` within the wait budget); `0` = none.
    paused_until: Millis,
}

impl RateState {
    /// An empty limiter.
    pub fn new(limit: RateLimit) -> Self {
        Self {
            limit,
            counts: [0; SLOTS],
            head_slot: 0,
            last_admit: None,
            last_now: 0,
            paused_until: 0,
        }
    }

    /// Holds every admission until `until` (a later pause wins; an earlier one changes
    /// nothing): the upstream's own pacing, sat out in the queue.
    pub fn pause_until(&mut self, until: Millis) {
        self.paused_until = self.paused_until.max(until);
    }

    /// The end of the pause in force at `now`, if any.
    pub fn paused_until(&self, now: Millis) -> Option<Millis> {
        (self.paused_until > now).then_some(self.paused_until)
    }

    /// The current limits.
    pub fn limit(&self) -> RateLimit {
        self.limit
    }

    /// Changes the limits (e.g. learned from upstream headers) without forgetting history.
    pub fn set_limit(&mut self, limit: RateLimit) {
        self.limit = limit;
    }

    /// Admits one request at `now`, or refuses with the delay in ms until [`Self::next_slot`].
    /// A refusal leaves the state untouched.
    pub fn try_acquire(&mut self, now: Millis) -> Result<(), Millis> {
        let now = now.max(self.last_now);
        let next = self.next_slot(now);
        if next > now {
            return Err(next - now);
        }
        self.last_now = now;
        if self.limit.requests_per_minute > 0 {
            let slot = now / SLOT_MS;
            self.advance(slot);
            let idx = (slot % SLOTS as u64) as usize;
            self.counts[idx] = self.counts[idx].saturating_add(1);
        }
        self.last_admit = Some(now);
        Ok(())
    }

    /// The time of the last admission (what [`Self::give_back`] needs to undo one).
    pub fn last_admit(&self) -> Option<Millis> {
        self.last_admit
    }

    /// Undoes the admission made at `at` that was never used (the request did not execute),
    /// so its slot counts for the next request. `previous` is [`Self::last_admit`] from before
    /// that admission, restored for the spacing when nothing was admitted since.
    pub fn give_back(&mut self, at: Millis, previous: Option<Millis>) {
        if self.limit.requests_per_minute > 0 {
            let slot = at / SLOT_MS;
            if slot <= self.head_slot && self.head_slot - slot < SLOTS as u64 {
                let idx = (slot % SLOTS as u64) as usize;
                self.counts[idx] = self.counts[idx].saturating_sub(1);
            }
        }
        if self.last_admit == Some(at) {
            self.last_admit = previous;
        }
    }

    /// The earliest instant `>= now` at which [`Self::try_acquire`] would succeed.
    pub fn next_slot(&self, now: Millis) -> Millis {
        let now = now.max(self.last_now);
        let spacing = match (self.last_admit, self.limit.min_time_between_requests_ms) {
            (Some(last), gap) if gap > 0 => last.saturating_add(gap),
            _ => now,
        };
        spacing
            .max(self.rpm_slot(now))
            .max(self.paused_until)
            .max(now)
    }

    /// Admissions counted in the window ending at `now` (including the straddling slot).
    pub fn in_window(&self, now: Millis) -> u64 {
        let slot = now.max(self.last_now) / SLOT_MS;
        (0..SLOTS as u64)
            .map(|back| self.count_at(slot, back))
            .sum()
    }

    /// Count of the slot `back` slots before `slot`, as seen from `slot`.
    fn count_at(&self, slot: u64, back: u64) -> u64 {
        let Some(s) = slot.checked_sub(back) else {
            return 0;
        };
        // Slots newer than the head were never written; slots that fell off the ring are gone.
        if s > self.head_slot || self.head_slot - s >= SLOTS as u64 {
            return 0;
        }
        u64::from(self.counts[(s % SLOTS as u64) as usize])
    }

    /// Earliest instant `>= now` when the window holds fewer than `rpm` admissions.
    fn rpm_slot(&self, now: Millis) -> Millis {
        let rpm = u64::from(self.limit.requests_per_minute);
        if rpm == 0 {
            return now;
        }
        let slot = now / SLOT_MS;
        let mut total = self.in_window(now);
        if total < rpm {
            return now;
        }
        // Move forward slot by slot; each step drops the oldest slot of the window.
        for step in 1..=SLOTS as u64 {
            total = total.saturating_sub(self.count_at(slot, SLOTS as u64 - step));
            if total < rpm {
                return (slot + step).saturating_mul(SLOT_MS);
            }
        }
        (slot + SLOTS as u64).saturating_mul(SLOT_MS)
    }

    /// Makes `slot` the head, zeroing the slots that were skipped.
    fn advance(&mut self, slot: u64) {
        if slot <= self.head_slot && self.head_slot - slot < SLOTS as u64 {
            return;
        }
        let gap = slot.saturating_sub(self.head_slot).min(SLOTS as u64);
        for i in 0..gap {
            let s = slot - i;
            self.counts[(s % SLOTS as u64) as usize] = 0;
        }
        self.head_slot = slot;
    }
}

#[cfg(test)]
#[path = "bucket_tests.rs"]
mod tests;
