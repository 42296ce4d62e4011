//! What one connection's usage-wall state tells the other nodes in redis mode, as pure
//! functions of the state and the time.
//!
//! Why: a Claude subscription's wall is the account's, not a node's. Without sharing, every
//! node pays its own wall 429 before it takes the lane, and a node that never saw the lane's
//! budget run out would accept it again. The shared part is every deadline: the lane (until
//! the announced reset + 60 s, and the reset itself), the `max_wait` re-acceptance block, the
//! spent budget, and the session-limit reset's hold (claimed/used, or the error back-off).
//!
//! Times travel as remaining milliseconds (the wire's rule: node clocks are skewed); Redis
//! turns them into deadlines on its own clock. A merge only ever extends: a later deadline
//! wins, an earlier one changes nothing, so replays and crossing writes are safe. The one
//! lowering is explicit: a lane that ends early on one node (weekly limit, spent budget, `off`,
//! …) is withdrawn from the others ([`WallState::end_shared`]): the same lane ends everywhere,
//! a newer one (a later reset) stays. A reset claim under way (`pending`) stays node-local.

use super::lane::{EndReason, Lane, WallState};
use super::reset::Held;

/// A connection's shareable deadlines, each as the time left from one instant; 0 = none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Shared {
    pub lane_ms: u64,
    pub lane_reset_ms: u64,
    pub reaccept_blocked_ms: u64,
    pub budget_exhausted_ms: u64,
    pub reset_hold_ms: u64,
    /// `reset_hold_ms` is the error back-off (else the next available reset).
    pub reset_backoff: bool,
}

impl Shared {
    /// Nothing to share.
    pub fn is_empty(&self) -> bool {
        self.lane_ms == 0
            && self.reaccept_blocked_ms == 0
            && self.budget_exhausted_ms == 0
            && self.reset_hold_ms == 0
    }
}

fn left(until: Option<u64>, now: u64) -> u64 {
    until.map_or(0, |t| t.saturating_sub(now))
}

/// `current`, extended to `now + ms` when that is later (`ms` = 0: unchanged).
fn extend(current: &mut Option<u64>, ms: u64, now: u64) -> bool {
    if ms == 0 {
        return false;
    }
    let until = now.saturating_add(ms);
    if current.is_some_and(|t| t >= until) {
        return false;
    }
    *current = Some(until);
    true
}

impl WallState {
    /// The shareable deadlines, as the time left at `now` (Unix ms).
    pub fn shared(&self, now: u64) -> Shared {
        let lane = self.lane.filter(|l| l.until > now);
        Shared {
            lane_ms: left(lane.map(|l| l.until), now),
            lane_reset_ms: left(lane.map(|l| l.reset_at), now),
            reaccept_blocked_ms: left(self.reaccept_blocked_until, now),
            budget_exhausted_ms: left(self.budget_exhausted_until, now),
            reset_hold_ms: left(self.reset.not_before, now),
            reset_backoff: self.reset.held == Some(Held::Backoff),
        }
    }

    /// Merges a peer's (or Redis's) deadlines at `now`, extend-only; `true` when anything
    /// changed. An adopted lane starts now: this node accepted nothing itself.
    pub fn adopt(&mut self, shared: &Shared, now: u64) -> bool {
        let mut changed = false;
        if shared.lane_ms > 0 {
            let until = now.saturating_add(shared.lane_ms);
            if self.lane.is_none_or(|l| l.until < until) {
                let reset_at = if shared.lane_reset_ms > 0 {
                    now.saturating_add(shared.lane_reset_ms)
                } else {
                    until.saturating_sub(super::lane::LANE_MARGIN_MS)
                };
                self.lane = Some(Lane {
                    accepted_at: self.lane.map_or(now, |l| l.accepted_at),
                    reset_at,
                    until,
                });
                changed = true;
            }
        }
        changed |= extend(
            &mut self.reaccept_blocked_until,
            shared.reaccept_blocked_ms,
            now,
        );
        changed |= extend(
            &mut self.budget_exhausted_until,
            shared.budget_exhausted_ms,
            now,
        );
        if extend(&mut self.reset.not_before, shared.reset_hold_ms, now) {
            self.reset.held = Some(if shared.reset_backoff {
                Held::Backoff
            } else {
                Held::NextAvailable
            });
            changed = true;
        }
        changed
    }
}

/// An end withdraws a lane whose reset is not later than the ended one's by more than this:
/// the same lane, learned with some delay (a receiver's copy starts from its own clock); a
/// later reset is a newer lane. (`usage_wall_merge_v2.lua` uses the same bound.)
pub const SAME_LANE_MS: u64 = 5_000;

impl WallState {
    /// A peer (or Redis's record) says the lane whose reset is `reset_ms` from `now` ended
    /// early for `reason`: this node's lane ends too when it is that lane (its reset not
    /// later by more than [`SAME_LANE_MS`]); `true` when it ended here.
    pub fn end_shared(&mut self, reason: EndReason, reset_ms: u64, now: u64) -> bool {
        let ended_reset = now.saturating_add(reset_ms);
        match self.lane {
            Some(lane) if lane.reset_at <= ended_reset.saturating_add(SAME_LANE_MS) => {
                self.end(reason, now);
                true
            }
            _ => false,
        }
    }

    /// Makes this state equal to the record Redis holds (a resync): its deadlines are adopted
    /// as from a peer (extend-only), and a lane the record says ended is ended here
    /// ([`WallState::end_shared`]). A lane is lowered only by a recorded end, never because
    /// the record lacks it (this node's own accept may not have been written). `true` when
    /// anything changed.
    pub fn adopt_record(
        &mut self,
        shared: &Shared,
        ended: Option<(EndReason, u64)>,
        now: u64,
    ) -> bool {
        let mut changed = false;
        if shared.lane_ms == 0
            && let Some((reason, reset_ms)) = ended
        {
            changed |= self.end_shared(reason, reset_ms, now);
        }
        changed | self.adopt(shared, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ended_lane_ends_the_same_lane_elsewhere_but_not_a_newer_one() {
        let lane = Lane {
            accepted_at: NOW,
            reset_at: NOW + 3_600_000,
            until: NOW + 3_660_000,
        };
        let mut b = WallState {
            lane: Some(lane),
            ..WallState::default()
        };
        // Ended on a peer whose copy's reset reads 2 s earlier (learned with delay): the same.
        assert!(b.end_shared(EndReason::WeeklyLimit, 3_598_000, NOW));
        assert!(b.lane.is_none());
        assert_eq!(b.last_end, Some((EndReason::WeeklyLimit, NOW)));
        assert!(
            !b.before_dispatch(NOW + 1).0,
            "no slow header after the end"
        );
        // A lane with a later reset (a new window) is not the one that ended.
        let mut c = WallState {
            lane: Some(lane),
            ..WallState::default()
        };
        assert!(!c.end_shared(EndReason::Off, 60_000, NOW));
        assert_eq!(c.lane, Some(lane));
        // Nothing to end: nothing changes.
        let mut d = WallState::default();
        assert!(!d.end_shared(EndReason::Off, 3_600_000, NOW));
        assert_eq!(d, WallState::default());
    }

    #[test]
    fn a_record_raises_deadlines_and_ends_a_lane_only_when_it_says_so() {
        let lane = Lane {
            accepted_at: NOW,
            reset_at: NOW + 3_600_000,
            until: NOW + 3_660_000,
        };
        let mut b = WallState {
            lane: Some(lane),
            ..WallState::default()
        };
        // A record without a lane and without an end: this node's lane stays.
        let budget = Shared {
            budget_exhausted_ms: 60_000,
            ..Shared::default()
        };
        assert!(b.adopt_record(&budget, None, NOW));
        assert_eq!(b.lane, Some(lane));
        assert_eq!(b.budget_exhausted_until, Some(NOW + 60_000));
        // The record says the lane ended (budget spent): it ends here, the budget holds.
        assert!(b.adopt_record(&budget, Some((EndReason::BudgetExhausted, 3_600_000)), NOW));
        assert!(b.lane.is_none());
        assert_eq!(b.last_end.map(|(r, _)| r.label()), Some("budget_exhausted"));
        assert!(!b.adopt_record(&budget, Some((EndReason::BudgetExhausted, 3_600_000)), NOW));
    }

    #[test]
    fn end_reasons_read_back_from_their_labels() {
        for r in EndReason::ALL {
            assert_eq!(EndReason::from_label(r.label()), r);
        }
        assert_eq!(EndReason::from_label("something_new"), EndReason::Refused);
        assert!(!EndReason::Expired.is_shared());
        assert!(EndReason::MaxWait.is_shared());
    }

    const NOW: u64 = 1_800_000_000_000;

    #[test]
    fn an_accepted_lane_is_shared_as_time_left_and_adopted_from_now() {
        let a = WallState {
            lane: Some(Lane {
                accepted_at: NOW,
                reset_at: NOW + 3_600_000,
                until: NOW + 3_660_000,
            }),
            ..WallState::default()
        };
        let s = a.shared(NOW + 1_000);
        assert_eq!(s.lane_ms, 3_659_000);
        assert_eq!(s.lane_reset_ms, 3_599_000);
        assert!(!s.is_empty());

        // Another node, its clock 5 s behind: the lane ends at the same moment in real time.
        let other_now = NOW + 1_000 - 5_000;
        let mut b = WallState::default();
        assert!(b.adopt(&s, other_now));
        let lane = b.lane.unwrap_or_else(|| unreachable!());
        assert_eq!(lane.until, other_now + 3_659_000);
        assert_eq!(lane.reset_at, other_now + 3_599_000);
        assert!(b.before_dispatch(other_now).0);
        // The same share again changes nothing; a shorter one neither.
        assert!(!b.adopt(&s, other_now));
        let shorter = Shared { lane_ms: 10, ..s };
        assert!(!b.adopt(&shorter, other_now));
        assert_eq!(b.lane.map(|l| l.until), Some(other_now + 3_659_000));
    }

    #[test]
    fn blocks_and_the_reset_hold_only_extend() {
        let mut a = WallState {
            reaccept_blocked_until: Some(NOW + 600_000),
            budget_exhausted_until: Some(NOW + 86_400_000),
            ..WallState::default()
        };
        a.reset.not_before = Some(NOW + 900_000);
        a.reset.held = Some(Held::Backoff);
        let s = a.shared(NOW);
        assert_eq!(
            s,
            Shared {
                lane_ms: 0,
                lane_reset_ms: 0,
                reaccept_blocked_ms: 600_000,
                budget_exhausted_ms: 86_400_000,
                reset_hold_ms: 900_000,
                reset_backoff: true,
            }
        );
        let mut b = WallState {
            reaccept_blocked_until: Some(NOW + 700_000),
            ..WallState::default()
        };
        assert!(b.adopt(&s, NOW));
        // The longer local block stays.
        assert_eq!(b.reaccept_blocked_until, Some(NOW + 700_000));
        assert_eq!(b.budget_exhausted_until, Some(NOW + 86_400_000));
        assert_eq!(b.reset.not_before, Some(NOW + 900_000));
        assert_eq!(b.reset.held, Some(Held::Backoff));
        assert!(b.lane.is_none());
        assert!(!b.adopt(&s, NOW));
    }

    #[test]
    fn past_deadlines_share_nothing() {
        let a = WallState {
            lane: Some(Lane {
                accepted_at: NOW - 10,
                reset_at: NOW - 5,
                until: NOW,
            }),
            budget_exhausted_until: Some(NOW - 1),
            ..WallState::default()
        };
        let s = a.shared(NOW);
        assert!(s.is_empty(), "{s:?}");
        let mut b = WallState::default();
        assert!(!b.adopt(&s, NOW));
        assert_eq!(b, WallState::default());
    }

    #[test]
    fn an_adopted_budget_refuses_the_next_offer() {
        use super::super::lane::{Action, Event, Options, Spent};
        use super::super::signals::Signals;
        let s = Shared {
            budget_exhausted_ms: 60_000,
            ..Shared::default()
        };
        let mut b = WallState::default();
        b.adopt(&s, NOW);
        let wall = Signals {
            status: Some(429),
            rejected: true,
            slow_offer: true,
            ..Signals::default()
        };
        let opts = Options {
            low_priority: true,
            auto_reset: false,
        };
        let d = b.on_answer(opts, &wall, Spent::default(), NOW + 1, 0.0);
        assert_eq!(d.action, Action::Pass);
        assert_eq!(d.event, Some(Event::Blocked));
    }
}
