//! The node's clocks.
//!
//! Policy code in `switchyard-shared` never reads a clock; it takes [`Millis`]. The node feeds it
//! milliseconds on a monotonic clock that starts at process start, so a wall-clock step never
//! shortens or extends a cooldown. Absolute upstream hints (HTTP dates, epoch resets) need the
//! wall clock, which [`Clock::epoch_ms`] provides.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use switchyard_shared::Millis;

/// Monotonic milliseconds since the node started, plus wall-clock access.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    /// A clock whose monotonic zero is now.
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
        }
    }

    /// Monotonic milliseconds since start; the time base of every policy decision.
    pub fn now(&self) -> Millis {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Wall-clock milliseconds since the Unix epoch (0 if the clock is before 1970).
    pub fn epoch_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    }

    /// The wall-clock milliseconds of a past policy time (for other nodes, whose monotonic
    /// clocks have other origins).
    pub fn epoch_of(&self, at: Millis) -> u64 {
        self.epoch_ms()
            .saturating_sub(self.now().saturating_sub(at))
    }

    /// The policy time of a past wall-clock instant (the inverse of [`Clock::epoch_of`];
    /// off by the clock skew when the instant came from another node).
    pub fn at_of_epoch(&self, epoch_ms: u64) -> Millis {
        self.now()
            .saturating_sub(self.epoch_ms().saturating_sub(epoch_ms))
    }

    /// The monotonic instant of a policy time, for arming timers.
    pub fn instant_at(&self, at: Millis) -> Instant {
        self.start + std::time::Duration::from_millis(at)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_conversions_round_trip_past_times() {
        let c = Clock::new();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let at = c.now() - 20;
        let epoch = c.epoch_of(at);
        assert!(epoch.abs_diff(c.epoch_ms() - 20) <= 5, "{epoch}");
        assert!(c.at_of_epoch(epoch).abs_diff(at) <= 5);
        // Before the node started: the node's time zero, never an underflow.
        assert_eq!(c.at_of_epoch(0), 0);
    }

    #[test]
    fn monotonic_time_never_goes_backwards() {
        let c = Clock::new();
        let a = c.now();
        let b = c.now();
        assert!(b >= a);
        assert!(c.epoch_ms() > 1_600_000_000_000);
        assert_eq!(
            c.instant_at(5) - c.instant_at(0),
            std::time::Duration::from_millis(5)
        );
    }
}
