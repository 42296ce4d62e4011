//! The session-limit reset (`auto_limit_reset`) as pure policy: when it may be tried, what
//! the usage and claim answers say, and what is remembered afterwards.
//!
//! The wire contract (Claude Code 2.1.263's `/limit-reset`, as the OmniRoute resilience guide
//! records it under "Claude OAuth usage wall"): `GET /api/oauth/usage?at_wall=1&skip_spend=1`
//! answers a `juniper_tide` block; when it says `arm: "reset"` and `available: true`,
//! `POST /api/organizations/{org}/reset_rate_limits` with `{"program":"juniper_tide"}` claims
//! it. `result: reset | not_limited` lets the request go again at full speed;
//! `already_used` / `not_offered` (and an unavailable block) are remembered until
//! `next_available_at` (a week when absent); any error backs off 15 minutes. The reset is
//! offered once a week, so a claimed one is remembered for a week too.
//!
//! The calls themselves are made by the request pipeline (`routing::limit_reset`).

use serde::Deserialize;
use serde_json::Value;

const MINUTE_MS: u64 = 60_000;

/// After any error, the reset is not tried again for this long.
pub const ERROR_BACKOFF_MS: u64 = 15 * MINUTE_MS;
/// When the answer names no `next_available_at`: a week.
pub const DEFAULT_NEXT_AVAILABLE_MS: u64 = 7 * 24 * 60 * MINUTE_MS;
/// The program the reset is claimed under.
pub const PROGRAM: &str = "juniper_tide";

/// Why the reset is not tried before [`ResetMemory::not_before`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Claimed (or reported used / not offered): the next one is due then.
    NextAvailable,
    /// An error: the 15-minute back-off.
    Backoff,
}

/// What a connection remembers of its session-limit reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResetMemory {
    /// Unix ms before which the reset is not tried.
    pub not_before: Option<u64>,
    pub held: Option<Held>,
    /// A request is claiming it right now: the others do not call as well.
    pub pending: bool,
    /// The last outcome and when it came.
    pub last: Option<(ResetOutcome, u64)>,
}

/// What the usage call and the claim came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetOutcome {
    /// `result: reset`.
    Reset,
    /// `result: not_limited`: nothing to reset, the limit is already lifted.
    NotLimited,
    /// `already_used`, `not_offered`, or an unavailable `juniper_tide` block; when it comes
    /// back (Unix ms) if the answer said.
    Unavailable { next_at: Option<u64> },
    /// A transport error, an error status, or an answer that does not parse.
    Error,
}

impl ResetOutcome {
    pub fn label(self) -> &'static str {
        match self {
            Self::Reset => "reset_done",
            Self::NotLimited => "reset_not_limited",
            Self::Unavailable { .. } => "reset_unavailable",
            Self::Error => "reset_error",
        }
    }
}

impl ResetMemory {
    /// Whether a request at the wall may try the reset now.
    pub fn may_try(&self, now: u64) -> bool {
        !self.pending && self.not_before.is_none_or(|t| now >= t)
    }

    /// Claims the attempt for one request; `false` when another holds it or it is not due.
    pub fn begin(&mut self, now: u64) -> bool {
        if !self.may_try(now) {
            return false;
        }
        self.pending = true;
        true
    }

    /// Records the outcome; `true` when the request goes again at full speed.
    pub fn settle(&mut self, outcome: ResetOutcome, now: u64) -> bool {
        self.pending = false;
        self.last = Some((outcome, now));
        let (held, until) = match outcome {
            ResetOutcome::Reset => (
                Some(Held::NextAvailable),
                Some(now.saturating_add(DEFAULT_NEXT_AVAILABLE_MS)),
            ),
            ResetOutcome::NotLimited => (None, None),
            ResetOutcome::Unavailable { next_at } => (
                Some(Held::NextAvailable),
                Some(
                    next_at
                        .filter(|&at| at > now)
                        .unwrap_or(now.saturating_add(DEFAULT_NEXT_AVAILABLE_MS)),
                ),
            ),
            ResetOutcome::Error => (
                Some(Held::Backoff),
                Some(now.saturating_add(ERROR_BACKOFF_MS)),
            ),
        };
        self.held = held;
        self.not_before = until;
        matches!(outcome, ResetOutcome::Reset | ResetOutcome::NotLimited)
    }
}

/// The `juniper_tide` block of the usage answer.
#[derive(Debug, Default, Deserialize)]
struct Offer {
    #[serde(default)]
    arm: Option<String>,
    #[serde(default)]
    available: Option<bool>,
    #[serde(default)]
    next_available_at: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Usage {
    juniper_tide: Option<Offer>,
}

#[derive(Debug, Deserialize)]
struct Claim {
    result: String,
    #[serde(default)]
    next_available_at: Option<Value>,
}

/// The usage answer: `Ok(())` when the reset may be claimed, else the outcome to settle.
pub fn read_usage(body: &[u8]) -> Result<(), ResetOutcome> {
    let usage: Usage = serde_json::from_slice(body).map_err(|_| ResetOutcome::Error)?;
    let offer = usage.juniper_tide.unwrap_or_default();
    if offer.arm.as_deref() == Some("reset") && offer.available == Some(true) {
        Ok(())
    } else {
        Err(ResetOutcome::Unavailable {
            next_at: offer.next_available_at.as_ref().and_then(instant),
        })
    }
}

/// The claim's answer.
pub fn read_claim(body: &[u8]) -> ResetOutcome {
    let Ok(claim) = serde_json::from_slice::<Claim>(body) else {
        return ResetOutcome::Error;
    };
    match claim.result.as_str() {
        "reset" => ResetOutcome::Reset,
        "not_limited" => ResetOutcome::NotLimited,
        "already_used" | "not_offered" => ResetOutcome::Unavailable {
            next_at: claim.next_available_at.as_ref().and_then(instant),
        },
        _ => ResetOutcome::Error,
    }
}

/// The claim's body.
pub fn claim_body() -> Value {
    serde_json::json!({ "program": PROGRAM })
}

/// `next_available_at` as Unix ms: an RFC 3339 instant, or epoch seconds or milliseconds.
fn instant(v: &Value) -> Option<u64> {
    const EPOCH_MS_THRESHOLD: u64 = 10_000_000_000;
    let n = match v {
        Value::String(s) => {
            if let Some(ms) = switchyard_shared::hints::parse_rfc3339_epoch_ms(s) {
                return Some(ms);
            }
            s.trim().parse::<u64>().ok()?
        }
        Value::Number(n) => n.as_u64()?,
        _ => return None,
    };
    Some(if n > EPOCH_MS_THRESHOLD {
        n
    } else {
        n.saturating_mul(1_000)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_760_000_000_000;

    #[test]
    fn an_available_offer_is_claimed_and_anything_else_is_remembered() {
        assert_eq!(
            read_usage(br#"{"juniper_tide":{"arm":"reset","available":true}}"#),
            Ok(())
        );
        assert_eq!(
            read_usage(
                br#"{"juniper_tide":{"arm":"reset","available":false,"next_available_at":"2025-10-16T08:53:20Z"}}"#
            ),
            Err(ResetOutcome::Unavailable {
                next_at: Some(1_760_604_800_000)
            })
        );
        assert_eq!(
            read_usage(br#"{"juniper_tide":{"arm":"none","available":true}}"#),
            Err(ResetOutcome::Unavailable { next_at: None })
        );
        assert_eq!(
            read_usage(br#"{"five_hour":{}}"#),
            Err(ResetOutcome::Unavailable { next_at: None })
        );
        assert_eq!(read_usage(b"<html>"), Err(ResetOutcome::Error));
    }

    #[test]
    fn claim_results_are_read() {
        assert_eq!(read_claim(br#"{"result":"reset"}"#), ResetOutcome::Reset);
        assert_eq!(
            read_claim(br#"{"result":"not_limited"}"#),
            ResetOutcome::NotLimited
        );
        assert_eq!(
            read_claim(br#"{"result":"already_used","next_available_at":1760600000}"#),
            ResetOutcome::Unavailable {
                next_at: Some(1_760_600_000_000)
            }
        );
        assert_eq!(
            read_claim(br#"{"result":"not_offered"}"#),
            ResetOutcome::Unavailable { next_at: None }
        );
        assert_eq!(read_claim(br#"{"result":"what"}"#), ResetOutcome::Error);
        assert_eq!(read_claim(b"{}"), ResetOutcome::Error);
        assert_eq!(claim_body(), serde_json::json!({"program": "juniper_tide"}));
    }

    #[test]
    fn a_reset_or_not_limited_goes_again_at_full_speed() {
        let mut m = ResetMemory::default();
        assert!(m.begin(NOW));
        assert!(!m.may_try(NOW), "one request claims at a time");
        assert!(m.settle(ResetOutcome::Reset, NOW));
        assert_eq!(m.not_before, Some(NOW + DEFAULT_NEXT_AVAILABLE_MS));
        assert!(!m.may_try(NOW + DEFAULT_NEXT_AVAILABLE_MS - 1));
        assert!(m.may_try(NOW + DEFAULT_NEXT_AVAILABLE_MS));

        let mut m = ResetMemory::default();
        assert!(m.begin(NOW));
        assert!(m.settle(ResetOutcome::NotLimited, NOW));
        assert!(m.may_try(NOW), "nothing was used up");
    }

    #[test]
    fn unavailable_is_remembered_until_next_available_or_a_week() {
        let mut m = ResetMemory::default();
        assert!(m.begin(NOW));
        let next_at = Some(NOW + 3_600_000);
        assert!(!m.settle(ResetOutcome::Unavailable { next_at }, NOW));
        assert_eq!(m.not_before, next_at);
        assert_eq!(m.held, Some(Held::NextAvailable));
        // A date in the past means nothing: a week.
        let mut m = ResetMemory::default();
        assert!(!m.settle(
            ResetOutcome::Unavailable {
                next_at: Some(NOW - 1)
            },
            NOW
        ));
        assert_eq!(m.not_before, Some(NOW + DEFAULT_NEXT_AVAILABLE_MS));
    }

    #[test]
    fn an_error_backs_off_fifteen_minutes() {
        let mut m = ResetMemory::default();
        assert!(m.begin(NOW));
        assert!(!m.settle(ResetOutcome::Error, NOW));
        assert_eq!(m.held, Some(Held::Backoff));
        assert!(!m.may_try(NOW + ERROR_BACKOFF_MS - 1));
        assert!(m.may_try(NOW + ERROR_BACKOFF_MS));
        assert!(!m.pending);
    }
}
