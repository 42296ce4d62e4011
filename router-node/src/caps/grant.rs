//! How many of a capped connection's permits this node may admit, decided from what Redis
//! last granted it and when.
//!
//! Why: a grant is good only while Redis still counts it for this node, which is a permit TTL
//! from the moment the script ran, and the script ran after the request that obtained the
//! grant was sent. So a grant's validity is measured on the node's own monotonic clock from
//! that send time, less [`SAFETY_MARGIN_MS`]. While it is valid the node admits at most that
//! grant whatever its calls return: a timeout or a stalled Redis says nothing about what the
//! other nodes hold, and resizing to a share on the first error let a node that held nothing
//! run a request next to the one that held the whole cap.
//!
//! Only when the grant has lapsed does the node fall back to a share of the cap, and not
//! before a permit TTL has passed since it first saw its calls fail: a grant another node
//! obtained just before Redis stopped answering is still valid until then. The share is
//! `ceil(cap / n)` over the last live-node count the node knew (it is kept while Redis is
//! away). A node that never knew a count, because it started while Redis was down, takes no
//! share: it cannot tell whether it is alone or one of fifty, and a cap is a promise to the
//! upstream account. Between the lapse and the fallback it admits nothing new.
//!
//! Everything here is pure, with the time passed in; the leasing task in
//! [`crate::cluster_sync::permits`] does the I/O.

use switchyard_shared::Millis;
use switchyard_store::local_share;

/// Taken off a grant's lifetime: Redis and the node measure the TTL on different clocks, and
/// the node must stop counting on the grant before Redis hands it to another node.
pub const SAFETY_MARGIN_MS: Millis = 500;

/// What the node knows about its block of one connection's permits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Held {
    /// Permits Redis counts for this node for certain: the last grant, or after a failed
    /// report the lower of that grant and the number reported.
    pub grant: u32,
    /// Node monotonic ms until which `grant` is counted for this node (0: never granted).
    pub valid_until: Millis,
    /// When the current run of failed calls was first seen; `None` while Redis answers.
    pub failing_since: Option<Millis>,
}

/// One permit call as the task saw it (node monotonic ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// When the request left the node.
    pub sent_at: Millis,
    /// The permits it reported wanting (the new grant replaces the old one in Redis).
    pub asked: u32,
    /// The grant, or `None` for any error (timeout, refused connection, store down).
    pub granted: Option<u32>,
    /// When the answer or the error came back.
    pub seen_at: Millis,
}

impl Held {
    /// What the node knows after `call`, with permits leased for `ttl_ms`.
    pub fn after(self, call: Call, ttl_ms: Millis) -> Self {
        match call.granted {
            Some(granted) => Self {
                grant: granted,
                valid_until: call
                    .sent_at
                    .saturating_add(ttl_ms)
                    .saturating_sub(SAFETY_MARGIN_MS),
                failing_since: None,
            },
            // The call may or may not have run. If it did not, Redis still counts the old
            // grant until its old expiry; if it did, it counts at least the lower of the old
            // grant and the report (the others held at most the rest), for longer. So the
            // lower of the two, until the old expiry, is certain either way.
            None => Self {
                grant: self.grant.min(call.asked),
                valid_until: self.valid_until,
                failing_since: Some(self.failing_since.unwrap_or(call.seen_at)),
            },
        }
    }

    /// Whether the grant still binds Redis at `now`.
    pub fn valid(&self, now: Millis) -> bool {
        now < self.valid_until
    }

    /// The permits the node may have in existence at `now` for a connection capped at `cap`:
    /// the grant while it is valid, then nothing, then (Redis unreachable for a permit TTL
    /// since the first failure) the share of the last known live-node count (`None`: never
    /// known, no share).
    pub fn limit(&self, now: Millis, cap: u32, ttl_ms: Millis, live_nodes: Option<u32>) -> u32 {
        if self.valid(now) {
            return self.grant.min(cap);
        }
        match self.failing_since {
            Some(since) if now >= since.saturating_add(ttl_ms) => fallback_share(cap, live_nodes),
            _ => 0,
        }
    }

    /// The next moment [`Held::limit`] may change on its own (no call in between), if any.
    pub fn next_change(&self, now: Millis, ttl_ms: Millis) -> Option<Millis> {
        let fallback = self.failing_since.map(|s| s.saturating_add(ttl_ms));
        [Some(self.valid_until), fallback]
            .into_iter()
            .flatten()
            .filter(|t| *t > now)
            .min()
    }

    /// Permits in use at `now` that no valid grant covers: held past their grant's validity,
    /// or taken from a fallback share. Redis may have given them to another node.
    pub fn over_cap(&self, now: Millis, in_use: u32) -> u32 {
        let covered = if self.valid(now) { self.grant } else { 0 };
        in_use.saturating_sub(covered)
    }
}

/// The share of `cap` a node takes without Redis: `ceil(cap / n)` over the last known count,
/// nothing when no count was ever known.
pub fn fallback_share(cap: u32, live_nodes: Option<u32>) -> u32 {
    match live_nodes {
        Some(n) if n > 0 => local_share(cap, n),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Millis = 3_000;

    fn ok(sent_at: Millis, asked: u32, granted: u32) -> Call {
        Call {
            sent_at,
            asked,
            granted: Some(granted),
            seen_at: sent_at + 5,
        }
    }

    fn failed(sent_at: Millis, asked: u32, seen_at: Millis) -> Call {
        Call {
            sent_at,
            asked,
            granted: None,
            seen_at,
        }
    }

    #[test]
    fn a_grant_is_valid_from_its_send_time_less_the_margin() {
        let held = Held::default().after(ok(1_000, 2, 2), TTL);
        assert_eq!(held.grant, 2);
        assert_eq!(held.valid_until, 1_000 + TTL - SAFETY_MARGIN_MS);
        assert!(held.valid(held.valid_until - 1));
        assert!(!held.valid(held.valid_until));
        assert_eq!(held.limit(1_100, 5, TTL, Some(5)), 2);
    }

    #[test]
    fn an_error_keeps_the_grant_and_never_adds_the_share() {
        // Cap 1 over five nodes: this node holds nothing and one call times out.
        let nothing = Held::default().after(ok(0, 0, 0), TTL);
        let after = nothing.after(failed(1_000, 1, 1_250), TTL);
        assert_eq!(
            after.limit(1_250, 1, TTL, Some(5)),
            0,
            "no share on one error"
        );
        // A node holding two of four keeps two, not ceil(4 / 3) = 2 + whatever.
        let two = Held::default().after(ok(0, 2, 2), TTL);
        let after = two.after(failed(900, 3, 1_150), TTL);
        assert_eq!(
            after.grant, 2,
            "asking for more on a failed call grants nothing"
        );
        assert_eq!(after.limit(1_150, 4, TTL, Some(3)), 2);
    }

    #[test]
    fn a_failed_report_of_fewer_permits_counts_only_the_lower_number() {
        let three = Held::default().after(ok(0, 3, 3), TTL);
        let after = three.after(failed(500, 1, 750), TTL);
        assert_eq!(after.grant, 1);
        assert_eq!(after.valid_until, three.valid_until, "the old expiry stays");
        assert_eq!(after.limit(800, 4, TTL, Some(2)), 1);
    }

    #[test]
    fn the_share_comes_only_after_the_grant_and_a_ttl_of_failures() {
        let held = Held::default().after(ok(0, 1, 1), TTL);
        let failing = held.after(failed(1_000, 1, 1_300), TTL);
        let again = failing.after(failed(1_400, 1, 1_700), TTL);
        assert_eq!(again.failing_since, Some(1_300), "the first failure counts");
        assert_eq!(again.limit(2_000, 4, TTL, Some(2)), 1, "still valid");
        let lapsed = TTL - SAFETY_MARGIN_MS;
        assert_eq!(
            again.limit(lapsed, 4, TTL, Some(2)),
            0,
            "lapsed, no share yet"
        );
        assert_eq!(again.limit(1_300 + TTL, 4, TTL, Some(2)), 2, "ceil(4 / 2)");
        assert_eq!(
            again.limit(1_300 + TTL, 4, TTL, Some(1)),
            4,
            "a node that knew it was alone"
        );
    }

    #[test]
    fn a_quiet_node_that_fails_waits_a_ttl_before_its_share() {
        // Its last (zero) report is long past: the grants others took just before Redis
        // stopped answering are still valid.
        let quiet = Held::default().after(ok(0, 0, 0), TTL);
        let failing = quiet.after(failed(60_000, 1, 60_250), TTL);
        assert_eq!(failing.limit(60_250, 2, TTL, Some(2)), 0);
        assert_eq!(failing.limit(60_250 + TTL - 1, 2, TTL, Some(2)), 0);
        assert_eq!(failing.limit(60_250 + TTL, 2, TTL, Some(2)), 1);
    }

    #[test]
    fn a_node_that_never_knew_the_membership_takes_no_share() {
        let fresh = Held::default().after(failed(0, 1, 250), TTL);
        assert_eq!(fresh.limit(250 + TTL, 10, TTL, None), 0);
        assert_eq!(fresh.limit(250 + 100 * TTL, 10, TTL, None), 0);
        assert_eq!(fallback_share(10, Some(0)), 0);
        assert_eq!(fallback_share(10, Some(3)), 4);
    }

    #[test]
    fn an_answer_ends_the_fallback_and_a_slow_one_is_not_trusted() {
        let failing = Held::default().after(failed(0, 1, 250), TTL);
        assert_eq!(failing.limit(250 + TTL, 4, TTL, Some(4)), 1);
        let answered = failing.after(ok(4_000, 1, 0), TTL);
        assert_eq!(answered.failing_since, None);
        assert_eq!(answered.limit(4_010, 4, TTL, Some(4)), 0, "Redis said none");
        // An answer that took longer than the grant's validity proves nothing about now.
        let slow = Held::default().after(
            Call {
                sent_at: 0,
                asked: 2,
                granted: Some(2),
                seen_at: TTL,
            },
            TTL,
        );
        assert_eq!(slow.limit(TTL, 2, TTL, Some(1)), 0);
    }

    #[test]
    fn permits_past_their_validity_are_over_the_cap() {
        let held = Held::default().after(ok(0, 2, 2), TTL);
        assert_eq!(held.over_cap(100, 2), 0);
        assert_eq!(
            held.over_cap(100, 3),
            1,
            "a grant shrunk under held permits"
        );
        assert_eq!(held.over_cap(TTL, 2), 2, "lapsed: none is covered");
        assert_eq!(Held::default().over_cap(0, 0), 0);
    }

    #[test]
    fn the_next_change_is_the_lapse_then_the_fallback() {
        let held = Held::default().after(ok(0, 1, 1), TTL);
        let failing = held.after(failed(1_000, 1, 1_200), TTL);
        assert_eq!(
            failing.next_change(1_300, TTL),
            Some(TTL - SAFETY_MARGIN_MS)
        );
        assert_eq!(failing.next_change(TTL, TTL), Some(1_200 + TTL));
        assert_eq!(failing.next_change(1_200 + TTL, TTL), None);
    }
}
