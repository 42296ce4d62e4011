//! A latency estimate for `latency-optimized`: an exponentially weighted moving average whose
//! weight depends on elapsed time, after linkerd's `ewma` (time is passed in; reads never
//! mutate).
//!
//! Reads project the value to `now`, decaying toward zero with time constant `decay_ms`. That
//! is deliberate optimism: a candidate that has not been measured for a while looks fast again,
//! gets a request, and is re-measured, so a once-slow upstream is not shunned forever and no
//! random exploration is needed. A sample blends in with weight `1 − e^(−Δt/τ)`, which makes
//! `observe(x, now)` equal to `get_at(now) + (1 − e^(−Δt/τ))·x`.
//!
//! Invariants: the value is finite and ≥ 0; `last_update` never moves backwards; NaN, infinite
//! or negative samples are ignored. Samples within the same millisecond (or late ones) count as
//! 1 ms apart, so concurrent completions are not dropped.

use crate::Millis;

/// Time-decayed moving average of a latency in ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ewma {
    value: f64,
    last_update: Option<Millis>,
    decay_ms: Millis,
}

impl Ewma {
    /// An empty estimate with time constant `decay_ms` (0 is raised to 1 ms).
    pub const fn new(decay_ms: Millis) -> Self {
        Self {
            value: 0.0,
            last_update: None,
            decay_ms: if decay_ms == 0 { 1 } else { decay_ms },
        }
    }

    /// Blend in a sample taken at `now`. The first sample becomes the value as is.
    pub fn observe(&mut self, sample: f64, now: Millis) {
        if !(sample.is_finite() && sample >= 0.0) {
            return;
        }
        let Some(last) = self.last_update else {
            self.value = sample;
            self.last_update = Some(now);
            return;
        };
        let keep = self.retained(now.saturating_sub(last).max(1));
        self.value = self.value * keep + sample * (1.0 - keep);
        self.last_update = Some(last.max(now));
    }

    /// The estimate projected to `now`; `None` before the first sample.
    pub fn get_at(&self, now: Millis) -> Option<f64> {
        let last = self.last_update?;
        Some(self.value * self.retained(now.saturating_sub(last)))
    }

    /// The raw value at the last update.
    pub fn value(&self) -> Option<f64> {
        self.last_update.map(|_| self.value)
    }

    pub fn last_update(&self) -> Option<Millis> {
        self.last_update
    }

    pub fn decay_ms(&self) -> Millis {
        self.decay_ms
    }

    /// Share of the old value left after `elapsed_ms`: `e^(−elapsed/τ)`.
    fn retained(&self, elapsed_ms: Millis) -> f64 {
        (-(elapsed_ms as f64) / self.decay_ms as f64).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXP_NEG1: f64 = 0.367_879_441_171_442_33;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn empty_until_the_first_sample_which_is_taken_as_is() {
        let mut e = Ewma::new(10_000);
        assert_eq!(e.get_at(5), None);
        e.observe(120.0, 1_000);
        assert_eq!(e.value(), Some(120.0));
        assert_eq!(e.get_at(1_000), Some(120.0));
    }

    #[test]
    fn reads_decay_toward_zero_without_mutating() {
        let mut e = Ewma::new(10_000);
        e.observe(1.0, 1_000);
        let projected = e.get_at(11_000).unwrap_or(f64::NAN);
        assert!(close(projected, EXP_NEG1));
        assert_eq!(e.value(), Some(1.0));
        assert_eq!(e.last_update(), Some(1_000));
        assert!(e.get_at(3_600_000).is_some_and(|v| v < 1e-10));
        // A read from before the last update does not extrapolate backwards.
        assert_eq!(e.get_at(0), Some(1.0));
    }

    #[test]
    fn samples_blend_by_elapsed_time() {
        let mut e = Ewma::new(10_000);
        e.observe(1.0, 1_000);
        e.observe(0.0, 11_000);
        assert!(e.value().is_some_and(|v| close(v, EXP_NEG1)));
        // observe(x, now) == get_at(now) + (1 - e^-1) * x
        let mut f = Ewma::new(10_000);
        f.observe(1.0, 1_000);
        let before = f.get_at(11_000).unwrap_or(f64::NAN);
        f.observe(2.0, 11_000);
        assert!(
            f.value()
                .is_some_and(|v| close(v, before + (1.0 - EXP_NEG1) * 2.0))
        );
    }

    #[test]
    fn same_millisecond_and_late_samples_count_a_little() {
        let mut e = Ewma::new(1_000);
        e.observe(100.0, 5_000);
        e.observe(200.0, 5_000);
        let v = e.value().unwrap_or(f64::NAN);
        assert!(v > 100.0 && v < 101.0, "{v}");
        e.observe(200.0, 4_000);
        assert_eq!(e.last_update(), Some(5_000));
    }

    #[test]
    fn bad_samples_are_ignored_and_zero_decay_is_clamped() {
        let mut e = Ewma::new(0);
        assert_eq!(e.decay_ms(), 1);
        e.observe(f64::NAN, 1);
        e.observe(-3.0, 1);
        e.observe(f64::INFINITY, 1);
        assert_eq!(e.get_at(1), None);
        e.observe(5.0, 1);
        e.observe(7.0, 2);
        assert!(e.get_at(3).is_some_and(f64::is_finite));
    }
}
