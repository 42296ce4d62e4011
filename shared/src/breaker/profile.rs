//! Breaker thresholds per provider category, their normalisation and the reset escalation.

use serde::{Deserialize, Serialize};

use crate::Millis;
use crate::outcome::ProviderCategory;

/// Probe budget of a HALF_OPEN breaker when the config does not say.
pub const DEFAULT_HALF_OPEN_REQUESTS: u32 = 1;

/// Bounds applied by [`BreakerProfile::normalized`] (as the reference's settings validation).
pub const MAX_FAILURE_THRESHOLD: u32 = 1000;
pub const MIN_RESET_TIMEOUT_MS: Millis = 1_000;
pub const MAX_RESET_TIMEOUT_MS: Millis = 86_400_000;

fn default_half_open_requests() -> u32 {
    DEFAULT_HALF_OPEN_REQUESTS
}

/// The thresholds and timings of one provider breaker (`[resilience.provider_breaker.*]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BreakerProfile {
    /// Failures (counted since the last close, minus one per success) that open the breaker.
    pub failure_threshold: u32,
    /// Failures that enter the DEGRADED warning band; `0` means derived: `ceil(60 %)` of
    /// `failure_threshold`. Always kept at most `failure_threshold − 1`.
    pub degradation_threshold: u32,
    /// How long OPEN lasts before a probe may go through, before escalation.
    pub reset_timeout_ms: Millis,
    /// Cap of the escalated reset timeout, as a multiple of `reset_timeout_ms`.
    pub max_backoff_multiplier: u32,
    /// Open cycles (failed probes) tolerated before the reset timeout starts doubling.
    pub backoff_escalation_count: u32,
    /// Concurrent probe leases a HALF_OPEN breaker hands out.
    #[serde(default = "default_half_open_requests")]
    pub half_open_requests: u32,
}

impl Default for BreakerProfile {
    fn default() -> Self {
        Self::for_category(ProviderCategory::default())
    }
}

impl BreakerProfile {
    /// The spec's profile table: oauth 8/5/60 s, apikey 12/7/30 s, local 2/derived/15 s.
    pub fn for_category(category: ProviderCategory) -> Self {
        let (failure_threshold, degradation_threshold, reset_timeout_ms, mult, escalation) =
            match category {
                ProviderCategory::Oauth => (8, 5, 60_000, 8, 2),
                ProviderCategory::Apikey => (12, 7, 30_000, 4, 3),
                ProviderCategory::Local => (2, 0, 15_000, 4, 3),
            };
        Self {
            failure_threshold,
            degradation_threshold,
            reset_timeout_ms,
            max_backoff_multiplier: mult,
            backoff_escalation_count: escalation,
            half_open_requests: DEFAULT_HALF_OPEN_REQUESTS,
        }
    }

    /// The failure count that enters DEGRADED: the configured (or derived) value, kept within
    /// `1 ..= max(1, failure_threshold − 1)`. With a threshold of 1 there is no band: the
    /// OPEN check comes first.
    pub fn degradation_at(&self) -> u32 {
        let threshold = self.failure_threshold.clamp(1, MAX_FAILURE_THRESHOLD);
        let wanted = if self.degradation_threshold == 0 {
            (threshold * 3).div_ceil(5)
        } else {
            self.degradation_threshold
        };
        wanted.clamp(1, threshold.saturating_sub(1).max(1))
    }

    /// The OPEN duration after `open_cycles` failed probes:
    /// `reset · 2^(cycles − escalationCount)` once `cycles > escalationCount`, capped at
    /// `reset · maxMultiplier`; the plain reset timeout before that.
    pub fn effective_reset_timeout_ms(&self, open_cycles: u32) -> Millis {
        let reset = self.reset_timeout_ms;
        if open_cycles <= self.backoff_escalation_count {
            return reset;
        }
        let exponent = open_cycles - self.backoff_escalation_count;
        let cap = reset.saturating_mul(u64::from(self.max_backoff_multiplier.max(1)));
        let scaled = 1u64
            .checked_shl(exponent)
            .map_or(Millis::MAX, |factor| reset.saturating_mul(factor));
        scaled.min(cap).max(reset)
    }

    /// Clamp every field into range and resolve a derived degradation threshold. Never fails:
    /// each adjustment of a configured value yields a warning naming the field.
    pub fn normalized(self) -> (Self, Vec<String>) {
        let mut p = self;
        let mut warnings = Vec::new();
        if p.failure_threshold == 0 || p.failure_threshold > MAX_FAILURE_THRESHOLD {
            let fixed = p.failure_threshold.clamp(1, MAX_FAILURE_THRESHOLD);
            warnings.push(format!(
                "failure_threshold = {} is outside 1..={MAX_FAILURE_THRESHOLD}; using {fixed}",
                p.failure_threshold
            ));
            p.failure_threshold = fixed;
        }
        let band = p.degradation_at();
        if p.degradation_threshold != 0 && p.degradation_threshold != band {
            warnings.push(format!(
                "degradation_threshold = {} must be at most failure_threshold - 1 ({}); using {band}",
                p.degradation_threshold,
                p.failure_threshold.saturating_sub(1)
            ));
        }
        p.degradation_threshold = band;
        if !(MIN_RESET_TIMEOUT_MS..=MAX_RESET_TIMEOUT_MS).contains(&p.reset_timeout_ms) {
            let fixed = p
                .reset_timeout_ms
                .clamp(MIN_RESET_TIMEOUT_MS, MAX_RESET_TIMEOUT_MS);
            warnings.push(format!(
                "reset_timeout_ms = {} is outside {MIN_RESET_TIMEOUT_MS}..={MAX_RESET_TIMEOUT_MS}; using {fixed}",
                p.reset_timeout_ms
            ));
            p.reset_timeout_ms = fixed;
        }
        if p.max_backoff_multiplier == 0 {
            warnings
                .push("max_backoff_multiplier = 0 would shorten the reset timeout; using 1".into());
            p.max_backoff_multiplier = 1;
        }
        if p.half_open_requests == 0 {
            warnings.push("half_open_requests = 0 would never let a probe through; using 1".into());
            p.half_open_requests = 1;
        }
        (p, warnings)
    }
}
