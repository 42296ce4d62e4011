//! What a node remembers about one connection for the strategies: a latency estimate, the last
//! success, and the quota windows the last response reported.
//!
//! `latency-optimized`, `lkgp`, `reset-aware`, `reset-window`, `headroom`, `quota-weighted` and
//! `auto` read these from the [`Candidate`] view; [`Observed`] is the state behind it. The node
//! calls [`Observed::observe`] after every attempt and [`Observed::observe_quota`] with the
//! response headers, and [`Observed::fill`] when it builds candidates. Pure: time is passed in.
//!
//! Only what the attempt says about the connection is recorded. A success and a timeout are
//! latency samples (a timeout is a pessimistic one: the upstream took at least that long);
//! an upstream error answered quickly says nothing about speed, so only its time is kept. A
//! request-scoped failure (the request itself was bad) changes nothing at all.

use crate::Millis;
use crate::quota_headers::{QuotaReport, QuotaWindowAt};

use super::candidate::{Candidate, QuotaView};
use super::ewma::Ewma;

/// Latency time constant: a sample's weight halves in about 40 s, and an unmeasured connection
/// looks fast again after a few minutes of silence (see [`Ewma`]).
pub const DEFAULT_LATENCY_DECAY_MS: Millis = 60_000;

/// What one attempt on the connection came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// The upstream answered successfully (for streams: the first content arrived).
    Success,
    /// The attempt timed out (connect, headers or first content).
    Timeout,
    /// The upstream answered with an error about the connection, model or provider.
    Failure,
    /// The error was caused by the request itself; nothing is learnt about the connection.
    RequestError,
}

/// Per-connection observations.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    latency: Ewma,
    last_success_at: Option<Millis>,
    last_failure_at: Option<Millis>,
    quota: Option<QuotaView>,
    windows: Vec<QuotaWindowAt>,
}

impl Default for Observed {
    fn default() -> Self {
        Self::new(DEFAULT_LATENCY_DECAY_MS)
    }
}

impl Observed {
    pub fn new(latency_decay_ms: Millis) -> Self {
        Self {
            latency: Ewma::new(latency_decay_ms),
            last_success_at: None,
            last_failure_at: None,
            quota: None,
            windows: Vec::new(),
        }
    }

    /// Records an attempt that ended at `now` after `latency_ms` (time to the first byte of the
    /// answer, or until the timeout fired).
    pub fn observe(&mut self, outcome: AttemptOutcome, latency_ms: Millis, now: Millis) {
        match outcome {
            AttemptOutcome::Success => {
                self.latency.observe(latency_ms as f64, now);
                self.last_success_at = Some(self.last_success_at.map_or(now, |t| t.max(now)));
            }
            AttemptOutcome::Timeout => {
                self.latency.observe(latency_ms as f64, now);
                self.last_failure_at = Some(now);
            }
            AttemptOutcome::Failure => self.last_failure_at = Some(now),
            AttemptOutcome::RequestError => {}
        }
    }

    /// Records the quota windows of a response received at `now` (policy clock). A response
    /// that reports no window leaves the last report in place: most providers send the headers
    /// on every answer, and an error page without them says nothing about quota.
    pub fn observe_quota(&mut self, report: &QuotaReport, now: Millis) {
        if let Some(view) = report.view(now) {
            self.quota = Some(view);
            self.windows = report.windows_at(now);
        }
    }

    /// The latency estimate at `now`.
    pub fn latency_ms(&self, now: Millis) -> Option<f64> {
        self.latency.get_at(now)
    }

    pub fn last_success_at(&self) -> Option<Millis> {
        self.last_success_at
    }

    pub fn last_failure_at(&self) -> Option<Millis> {
        self.last_failure_at
    }

    /// The quota view at `now`: `None` once every reset it names has passed (the windows have
    /// refilled, so the reported remaining share is stale) or when nothing was reported.
    pub fn quota(&self, now: Millis) -> Option<QuotaView> {
        let q = self.quota?;
        let resets = [q.session_reset_at, q.weekly_reset_at];
        let known = resets.iter().flatten().count();
        let passed = resets.iter().flatten().filter(|&&at| at <= now).count();
        (known == 0 || passed < known).then_some(q)
    }

    /// The last reported windows, for the quota preflight
    /// ([`crate::quota_preflight::preflight`]).
    pub fn windows(&self) -> &[QuotaWindowAt] {
        &self.windows
    }

    /// Writes the observations into a candidate view built at `now`.
    pub fn fill(&self, c: &mut Candidate, now: Millis) {
        c.latency_ms = self.latency_ms(now);
        c.last_success_at = self.last_success_at;
        c.quota = self.quota(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quota_headers::parse;

    #[test]
    fn successes_and_timeouts_are_latency_samples_and_errors_are_not() {
        let mut o = Observed::new(10_000);
        assert_eq!(o.latency_ms(0), None);
        o.observe(AttemptOutcome::Success, 400, 1_000);
        assert_eq!(o.latency_ms(1_000), Some(400.0));
        assert_eq!(o.last_success_at(), Some(1_000));
        // A fast 429 does not make the connection look fast.
        o.observe(AttemptOutcome::Failure, 5, 1_001);
        assert!(o.latency_ms(1_001).is_some_and(|v| v > 399.0));
        assert_eq!(o.last_failure_at(), Some(1_001));
        // A bad request is not the connection's doing.
        let before = o.clone();
        o.observe(AttemptOutcome::RequestError, 1, 1_002);
        assert_eq!(o, before);
        // A timeout is a slow sample.
        o.observe(AttemptOutcome::Timeout, 30_000, 11_000);
        assert!(o.latency_ms(11_000).is_some_and(|v| v > 10_000.0));
        assert_eq!(o.last_success_at(), Some(1_000));
        // A late success report never moves last success backwards.
        o.observe(AttemptOutcome::Success, 100, 500);
        assert_eq!(o.last_success_at(), Some(1_000));
    }

    #[test]
    fn quota_reports_fill_the_view_until_their_resets_pass() {
        let mut o = Observed::default();
        let report = parse(
            &[
                ("x-ratelimit-remaining-requests", "10"),
                ("x-ratelimit-limit-requests", "100"),
                ("x-ratelimit-reset-requests", "30s"),
            ],
            0,
        );
        o.observe_quota(&report, 5_000);
        let q = o.quota(6_000);
        assert_eq!(q.map(|q| q.remaining), Some(0.1));
        assert_eq!(q.and_then(|q| q.session_reset_at), Some(35_000));
        assert_eq!(o.windows().len(), 1);
        // A response without quota headers keeps the last report.
        o.observe_quota(&parse(&[], 0), 7_000);
        assert!(o.quota(7_000).is_some());
        // After the reset the share is stale.
        assert_eq!(o.quota(35_000), None);

        let mut c = Candidate::new(0, 1);
        o.observe(AttemptOutcome::Success, 250, 8_000);
        o.fill(&mut c, 8_000);
        assert_eq!(c.latency_ms, Some(250.0));
        assert_eq!(c.last_success_at, Some(8_000));
        assert!(c.quota.is_some_and(|q| q.remaining == 0.1));
        o.fill(&mut c, 40_000);
        assert_eq!(c.quota, None);
    }

    #[test]
    fn a_view_without_resets_stays() {
        let mut o = Observed::default();
        o.observe_quota(
            &parse(
                &[
                    ("anthropic-ratelimit-tokens-remaining", "5"),
                    ("anthropic-ratelimit-tokens-limit", "10"),
                ],
                0,
            ),
            1,
        );
        assert!(o.quota(u64::MAX).is_some());
    }
}
