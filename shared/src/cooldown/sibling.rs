//! The egress-bucketed sibling lock (docs/policy.md, `cooldown`; the opencode family).
//!
//! Some providers bucket their rate limits by the caller's IP, not by the account: a quota or
//! rate 429 on one connection says every other connection of the family that leaves through
//! the same egress will fail the same way. Switchyard cannot see its egress IP, so connections
//! declare an `egress` bucket and the lock goes by bucket. Pure rules, time passed in; the
//! router picks the siblings and each sibling's actor applies its own lock.

use crate::Millis;
use crate::outcome::{FailureReason, TerminalSignal};

use super::{ConnState, ConnStatus, CooldownParams, is_terminal};

/// One connection as the sibling rule sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EgressMember<'a> {
    /// The caller's handle on the connection (an index or an id).
    pub idx: usize,
    /// The connection's provider id.
    pub provider: &'a str,
    /// The declared egress bucket; `None` is never sibling-locked.
    pub egress: Option<&'a str>,
}

/// Whether a failure spreads to the egress siblings: an upstream 429 read as a spent quota or
/// a rate limit, on a credential that is not terminal. A 401, a 5xx or a request's own fault
/// never spreads.
pub fn spreads(
    status: Option<u16>,
    reason: FailureReason,
    terminal: TerminalSignal,
    request_scoped: bool,
) -> bool {
    status == Some(429)
        && matches!(
            reason,
            FailureReason::QuotaExhausted | FailureReason::RateLimitExceeded
        )
        && terminal == TerminalSignal::None
        && !request_scoped
}

/// The members that share `origin`'s egress bucket within the allowlisted `providers`
/// (the family), `origin` itself left out. An origin without a bucket, or outside the family,
/// has no siblings.
pub fn siblings<'a>(
    origin: &EgressMember<'_>,
    members: impl IntoIterator<Item = EgressMember<'a>>,
    providers: &[String],
) -> Vec<usize> {
    let in_family = |p: &str| providers.iter().any(|f| f == p);
    let Some(bucket) = origin.egress.filter(|b| !b.is_empty()) else {
        return Vec::new();
    };
    if !in_family(origin.provider) {
        return Vec::new();
    }
    members
        .into_iter()
        .filter(|m| m.idx != origin.idx)
        .filter(|m| m.egress == Some(bucket) && in_family(m.provider))
        .map(|m| m.idx)
        .collect()
}

/// The state a sibling takes when the origin cools until `until`: the same deadline, never
/// longer, with the backoff level and error message left as they are (the sibling did not
/// fail). Like a peer's cooldown, it counts as a failure seen now for `success_is_stale`: a
/// success of an attempt dispatched before the lock does not lift it.
/// `None` when nothing changes: the sibling is terminal (never overwritten, never made
/// terminal), opted out of cooling, or already cooling at least as long.
pub fn sibling_lock(
    state: &ConnState,
    until: Millis,
    params: &CooldownParams,
    now: Millis,
) -> Option<ConnState> {
    if is_terminal(state) || params.disable_cooling || until <= now {
        return None;
    }
    if state.rate_limited_until.is_some_and(|u| u >= until) {
        return None;
    }
    let mut next = state.clone();
    next.rate_limited_until = Some(until);
    next.status = ConnStatus::Unavailable;
    next.last_error_at = Some(now);
    Some(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::TerminalStatus;

    fn family() -> Vec<String> {
        vec!["opencode".to_owned(), "opencode-go".to_owned()]
    }

    fn m(
        idx: usize,
        provider: &'static str,
        egress: Option<&'static str>,
    ) -> EgressMember<'static> {
        EgressMember {
            idx,
            provider,
            egress,
        }
    }

    #[test]
    fn same_bucket_in_the_family_only() {
        let members = [
            m(0, "opencode", Some("proxy-a")),
            m(1, "opencode", Some("proxy-a")),
            m(2, "opencode", Some("proxy-b")),
            m(3, "opencode-go", Some("proxy-a")),
            m(4, "openai", Some("proxy-a")),
            m(5, "opencode", None),
        ];
        assert_eq!(siblings(&members[0], members, &family()), vec![1, 3]);
    }

    #[test]
    fn no_bucket_or_outside_the_family_has_no_siblings() {
        let members = [m(0, "opencode", None), m(1, "opencode", None)];
        assert!(siblings(&members[0], members, &family()).is_empty());
        let members = [m(0, "openai", Some("a")), m(1, "openai", Some("a"))];
        assert!(siblings(&members[0], members, &family()).is_empty());
        let members = [m(0, "opencode", Some("a")), m(1, "opencode", Some("a"))];
        assert!(siblings(&members[0], members, &[]).is_empty());
    }

    #[test]
    fn only_quota_and_rate_429s_spread() {
        let none = TerminalSignal::None;
        assert!(spreads(
            Some(429),
            FailureReason::RateLimitExceeded,
            none,
            false
        ));
        assert!(spreads(
            Some(429),
            FailureReason::QuotaExhausted,
            none,
            false
        ));
        assert!(!spreads(
            Some(401),
            FailureReason::AuthError,
            TerminalSignal::AuthFailure,
            false
        ));
        assert!(!spreads(Some(503), FailureReason::ServerError, none, false));
        assert!(!spreads(
            Some(429),
            FailureReason::RateLimitExceeded,
            none,
            true
        ));
        assert!(!spreads(
            Some(429),
            FailureReason::QuotaExhausted,
            TerminalSignal::CreditsExhausted,
            false
        ));
    }

    #[test]
    fn lock_copies_the_deadline_and_keeps_the_level() {
        let state = ConnState {
            backoff_level: 2,
            ..ConnState::default()
        };
        let next = sibling_lock(&state, 5_000, &CooldownParams::default(), 1_000);
        let next = next.unwrap_or_default();
        assert_eq!(next.rate_limited_until, Some(5_000));
        assert_eq!(next.status, ConnStatus::Unavailable);
        assert_eq!(next.backoff_level, 2);
        assert_eq!(next.last_error, None);
    }

    #[test]
    fn never_shortens_never_touches_terminal_or_opted_out() {
        let params = CooldownParams::default();
        let cooling = ConnState {
            rate_limited_until: Some(9_000),
            status: ConnStatus::Unavailable,
            ..ConnState::default()
        };
        assert_eq!(sibling_lock(&cooling, 5_000, &params, 1_000), None);
        let terminal = ConnState {
            status: ConnStatus::Terminal(TerminalStatus::Banned),
            ..ConnState::default()
        };
        assert_eq!(sibling_lock(&terminal, 5_000, &params, 1_000), None);
        let off = CooldownParams {
            disable_cooling: true,
            ..params
        };
        assert_eq!(
            sibling_lock(&ConnState::default(), 5_000, &off, 1_000),
            None
        );
        assert_eq!(
            sibling_lock(&ConnState::default(), 1_000, &params, 1_000),
            None
        );
    }
}
