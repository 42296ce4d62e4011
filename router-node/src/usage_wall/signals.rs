//! What an upstream answer says about the Claude OAuth usage wall, read from its
//! `anthropic-ratelimit-unified-*` headers (the wire contract of Claude Code 2.1.263, as the
//! OmniRoute resilience guide records it under "Claude OAuth usage wall").
//!
//! Parsing is lenient: a header that does not parse counts as absent.

/// `anthropic-ratelimit-unified-slow-status`: the low-priority lane's own verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlowStatus {
    /// Served in the lane.
    Active,
    /// The wall is not in the way any more; the lane is kept until its reset.
    NotNeeded,
    /// Every low-priority slot is taken: wait `…-slow-retry-after` and try again.
    SlotBusy,
    /// The weekly limit is spent: the lane cannot help.
    WeeklyLimit,
    /// The lane's own budget is spent until its reset.
    BudgetExhausted,
    /// The lane is switched off for the account.
    Off,
    /// The account may not use the lane.
    Ineligible,
    /// A value this build does not know: treated as the end of the lane.
    Unknown,
}

impl SlowStatus {
    fn parse(value: &str) -> Self {
        match value.trim().to_ascii_lowercase().as_str() {
            "active" => Self::Active,
            "not_needed" => Self::NotNeeded,
            "slot_busy" => Self::SlotBusy,
            "weekly_limit" => Self::WeeklyLimit,
            "budget_exhausted" => Self::BudgetExhausted,
            "off" => Self::Off,
            "ineligible" => Self::Ineligible,
            _ => Self::Unknown,
        }
    }
}

/// The usage-wall facts of one answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Signals {
    /// The upstream status, `None` for a transport failure.
    pub status: Option<u16>,
    /// `anthropic-ratelimit-unified-status: rejected`: the 5-hour wall.
    pub rejected: bool,
    /// `anthropic-ratelimit-unified-slow-offer: treatment`: the lane is offered.
    pub slow_offer: bool,
    pub slow_status: Option<SlowStatus>,
    /// `…-slow-retry-after`, in ms (the header is in seconds).
    pub slow_retry_after_ms: Option<u64>,
    /// `…-slow-max-wait`, in ms (the header is in seconds).
    pub slow_max_wait_ms: Option<u64>,
    /// `anthropic-ratelimit-unified-reset`: when the 5-hour window resets (Unix ms).
    pub reset_at: Option<u64>,
    /// `anthropic-ratelimit-unified-overage-in-use: true`: paid extra usage covers the wall.
    pub overage_in_use: bool,
    /// When the lane's spent budget comes back (Unix ms): `…-slow-budget-reset`, else the
    /// weekly window's `…-7d-reset`.
    pub budget_reset_at: Option<u64>,
}

impl Signals {
    /// Reads the headers (lower-case names, as the attempt keeps them).
    pub fn read(status: Option<u16>, headers: &[(String, String)]) -> Self {
        let get = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.trim())
        };
        let seconds = |name: &str| {
            get(name)
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map(|s| (s * 1_000.0) as u64)
        };
        let epoch = |name: &str| get(name).and_then(epoch_ms);
        Self {
            status,
            rejected: get("anthropic-ratelimit-unified-status")
                .is_some_and(|v| v.eq_ignore_ascii_case("rejected")),
            slow_offer: get("anthropic-ratelimit-unified-slow-offer")
                .is_some_and(|v| v.eq_ignore_ascii_case("treatment")),
            slow_status: get("anthropic-ratelimit-unified-slow-status").map(SlowStatus::parse),
            slow_retry_after_ms: seconds("anthropic-ratelimit-unified-slow-retry-after"),
            slow_max_wait_ms: seconds("anthropic-ratelimit-unified-slow-max-wait"),
            reset_at: epoch("anthropic-ratelimit-unified-reset"),
            overage_in_use: get("anthropic-ratelimit-unified-overage-in-use")
                .is_some_and(|v| v.eq_ignore_ascii_case("true")),
            budget_reset_at: epoch("anthropic-ratelimit-unified-slow-budget-reset")
                .or_else(|| epoch("anthropic-ratelimit-unified-7d-reset")),
        }
    }

    /// The wall: a 429 that says the unified limit rejected the request.
    pub fn is_wall(&self) -> bool {
        self.status == Some(429) && self.rejected
    }
}

/// Epoch values above this are milliseconds, below it seconds (2286 in epoch seconds).
const EPOCH_MS_THRESHOLD: u64 = 10_000_000_000;

/// An epoch instant in seconds (Anthropic's form) or milliseconds, as Unix ms.
fn epoch_ms(value: &str) -> Option<u64> {
    let n = value.parse::<u64>().ok()?;
    Some(if n > EPOCH_MS_THRESHOLD {
        n
    } else {
        n.saturating_mul(1_000)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_wall_and_its_offer_are_read() {
        let s = Signals::read(
            Some(429),
            &h(&[
                ("anthropic-ratelimit-unified-status", "rejected"),
                ("anthropic-ratelimit-unified-slow-offer", "treatment"),
                ("anthropic-ratelimit-unified-reset", "1760000000"),
                ("anthropic-ratelimit-unified-overage-in-use", "false"),
            ]),
        );
        assert!(s.is_wall());
        assert!(s.slow_offer);
        assert!(!s.overage_in_use);
        assert_eq!(s.reset_at, Some(1_760_000_000_000));
        assert_eq!(s.slow_status, None);
    }

    #[test]
    fn a_429_without_unified_headers_is_no_wall() {
        let s = Signals::read(Some(429), &h(&[("retry-after", "3")]));
        assert!(!s.is_wall());
        let s = Signals::read(
            Some(500),
            &h(&[("anthropic-ratelimit-unified-status", "rejected")]),
        );
        assert!(!s.is_wall(), "only a 429 is the wall");
        let s = Signals::read(
            Some(429),
            &h(&[("anthropic-ratelimit-unified-status", "allowed")]),
        );
        assert!(!s.is_wall());
    }

    #[test]
    fn slow_status_values_and_durations_are_read() {
        let s = Signals::read(
            Some(429),
            &h(&[
                ("anthropic-ratelimit-unified-slow-status", "SLOT_BUSY"),
                ("anthropic-ratelimit-unified-slow-retry-after", "7.5"),
                ("anthropic-ratelimit-unified-slow-max-wait", "120"),
                ("anthropic-ratelimit-unified-7d-reset", "1760600000"),
            ]),
        );
        assert_eq!(s.slow_status, Some(SlowStatus::SlotBusy));
        assert_eq!(s.slow_retry_after_ms, Some(7_500));
        assert_eq!(s.slow_max_wait_ms, Some(120_000));
        assert_eq!(s.budget_reset_at, Some(1_760_600_000_000));
        for (text, want) in [
            ("active", SlowStatus::Active),
            ("not_needed", SlowStatus::NotNeeded),
            ("weekly_limit", SlowStatus::WeeklyLimit),
            ("budget_exhausted", SlowStatus::BudgetExhausted),
            ("off", SlowStatus::Off),
            ("ineligible", SlowStatus::Ineligible),
            ("something_new", SlowStatus::Unknown),
        ] {
            assert_eq!(SlowStatus::parse(text), want, "{text}");
        }
    }

    #[test]
    fn unparsable_values_count_as_absent() {
        let s = Signals::read(
            Some(429),
            &h(&[
                ("anthropic-ratelimit-unified-slow-retry-after", "soon"),
                ("anthropic-ratelimit-unified-slow-max-wait", "-4"),
                ("anthropic-ratelimit-unified-reset", "tomorrow"),
                (
                    "anthropic-ratelimit-unified-slow-budget-reset",
                    "1760000000123",
                ),
            ]),
        );
        assert_eq!(s.slow_retry_after_ms, None);
        assert_eq!(s.slow_max_wait_ms, None);
        assert_eq!(s.reset_at, None);
        assert_eq!(s.budget_reset_at, Some(1_760_000_000_123), "ms stay ms");
    }
}
