//! The lane's transitions, one rule of the reference per test.

use super::*;
use crate::usage_wall::reset::ResetOutcome;

const NOW: u64 = 1_760_000_000_000;
const RESET: u64 = NOW + 2 * HOUR_MS;

fn both() -> Options {
    Options {
        low_priority: true,
        auto_reset: true,
    }
}

fn lane_only() -> Options {
    Options {
        low_priority: true,
        auto_reset: false,
    }
}

/// The wall 429 as Anthropic sends it when the lane is offered.
fn wall() -> Signals {
    Signals {
        status: Some(429),
        rejected: true,
        slow_offer: true,
        reset_at: Some(RESET),
        ..Signals::default()
    }
}

fn slow(status: u16, slow: SlowStatus) -> Signals {
    Signals {
        status: Some(status),
        slow_status: Some(slow),
        ..Signals::default()
    }
}

fn sent_slow() -> Spent {
    Spent {
        sent_slow: true,
        ..Spent::default()
    }
}

/// A state with an accepted lane.
fn in_lane() -> WallState {
    let mut s = WallState::default();
    let d = s.on_answer(lane_only(), &wall(), Spent::default(), NOW, 0.0);
    assert_eq!(d.action, Action::RetrySlow);
    s
}

#[test]
fn the_wall_offer_is_accepted_and_the_lane_lasts_until_reset_plus_a_minute() {
    let mut s = WallState::default();
    let d = s.on_answer(lane_only(), &wall(), Spent::default(), NOW, 0.0);
    assert_eq!(d, Decision::new(Action::RetrySlow, Event::Accepted));
    assert_eq!(
        s.lane,
        Some(Lane {
            accepted_at: NOW,
            reset_at: RESET,
            until: RESET + LANE_MARGIN_MS
        })
    );
    assert_eq!(s.before_dispatch(NOW + 1), (true, None));
    assert_eq!(s.before_dispatch(RESET + LANE_MARGIN_MS - 1), (true, None));
    assert_eq!(
        s.before_dispatch(RESET + LANE_MARGIN_MS),
        (false, Some(Event::Ended(EndReason::Expired)))
    );
    assert_eq!(s.lane, None);
    assert_eq!(s.before_dispatch(RESET + LANE_MARGIN_MS), (false, None));
}

#[test]
fn without_an_announced_reset_the_lane_covers_the_five_hour_window() {
    let mut s = WallState::default();
    let sig = Signals {
        reset_at: None,
        ..wall()
    };
    s.on_answer(lane_only(), &sig, Spent::default(), NOW, 0.0);
    assert_eq!(
        s.lane.map(|l| l.until),
        Some(NOW + DEFAULT_WINDOW_MS + LANE_MARGIN_MS)
    );
}

#[test]
fn nothing_but_a_wall_429_is_intercepted() {
    let mut s = WallState::default();
    let spike = Signals {
        status: Some(429),
        ..Signals::default()
    };
    for sig in [
        spike,
        Signals {
            status: Some(200),
            ..Signals::default()
        },
        Signals {
            status: Some(529),
            ..Signals::default()
        },
        Signals {
            status: None,
            ..Signals::default()
        },
        // The unified status on a non-429 is no wall.
        Signals {
            status: Some(500),
            ..wall()
        },
    ] {
        assert_eq!(
            s.on_answer(both(), &sig, Spent::default(), NOW, 0.0),
            Decision::pass(),
            "{sig:?}"
        );
    }
    assert_eq!(s, WallState::default(), "nothing remembered");
}

#[test]
fn options_off_leave_the_wall_to_the_normal_path() {
    let mut s = WallState::default();
    let off = Options::default();
    assert!(!off.any());
    assert_eq!(
        s.on_answer(off, &wall(), Spent::default(), NOW, 0.0),
        Decision::pass()
    );
    assert_eq!(s.lane, None);
}

#[test]
fn a_wall_without_the_offer_or_with_overage_is_not_taken() {
    let mut s = WallState::default();
    let no_offer = Signals {
        slow_offer: false,
        ..wall()
    };
    assert_eq!(
        s.on_answer(lane_only(), &no_offer, Spent::default(), NOW, 0.0),
        Decision::pass()
    );
    let overage = Signals {
        overage_in_use: true,
        ..wall()
    };
    assert_eq!(
        s.on_answer(lane_only(), &overage, Spent::default(), NOW, 0.0),
        Decision::pass()
    );
    assert_eq!(s.lane, None);
}

#[test]
fn active_and_not_needed_keep_the_lane() {
    let mut s = in_lane();
    for sig in [
        slow(200, SlowStatus::Active),
        slow(200, SlowStatus::NotNeeded),
        Signals {
            status: Some(200),
            ..Signals::default()
        },
        // A failure that says nothing of the lane takes the normal path; the lane stays.
        Signals {
            status: Some(500),
            ..Signals::default()
        },
    ] {
        assert_eq!(
            s.on_answer(lane_only(), &sig, sent_slow(), NOW + 1, 0.0),
            Decision::pass(),
            "{sig:?}"
        );
        assert!(s.lane.is_some(), "{sig:?}");
    }
}

#[test]
fn slot_busy_and_529_wait_the_server_retry_after_with_jitter() {
    for status in [429, 529] {
        let mut s = in_lane();
        let sig = Signals {
            slow_retry_after_ms: Some(30_000),
            ..slow(status, SlowStatus::SlotBusy)
        };
        assert_eq!(
            s.on_answer(lane_only(), &sig, sent_slow(), NOW, 0.0),
            Decision::new(Action::Wait(30_000), Event::SlotWait)
        );
        assert_eq!(
            s.on_answer(lane_only(), &sig, sent_slow(), NOW, 1.0).action,
            Action::Wait(39_000)
        );
        assert_eq!(
            s.on_answer(lane_only(), &sig, sent_slow(), NOW, -1.0)
                .action,
            Action::Wait(21_000)
        );
        // Out-of-range jitter is clamped to ±30 %.
        assert_eq!(
            s.on_answer(lane_only(), &sig, sent_slow(), NOW, 7.0).action,
            Action::Wait(39_000)
        );
        assert!(s.lane.is_some());
    }
    // A bare 529 in the lane waits the default.
    let mut s = in_lane();
    let overloaded = Signals {
        status: Some(529),
        ..Signals::default()
    };
    assert_eq!(
        s.on_answer(lane_only(), &overloaded, sent_slow(), NOW, 0.0)
            .action,
        Action::Wait(DEFAULT_RETRY_AFTER_MS)
    );
}

#[test]
fn the_retry_after_is_clamped_to_five_to_six_hundred_seconds() {
    let mut s = in_lane();
    for (given, want) in [
        (Some(1_000), MIN_RETRY_AFTER_MS),
        (Some(3_600_000), MAX_RETRY_AFTER_MS),
        (None, DEFAULT_RETRY_AFTER_MS),
    ] {
        let sig = Signals {
            slow_retry_after_ms: given,
            slow_max_wait_ms: Some(MAX_MAX_WAIT_MS),
            ..slow(429, SlowStatus::SlotBusy)
        };
        assert_eq!(
            s.on_answer(lane_only(), &sig, sent_slow(), NOW, 0.0).action,
            Action::Wait(want),
            "{given:?}"
        );
    }
}

#[test]
fn waits_past_max_wait_end_the_lane_and_block_reacceptance_for_ten_minutes() {
    let mut s = in_lane();
    let sig = Signals {
        slow_retry_after_ms: Some(20_000),
        slow_max_wait_ms: Some(60_000),
        ..slow(429, SlowStatus::SlotBusy)
    };
    let spent = Spent {
        waited_ms: 40_000,
        ..sent_slow()
    };
    assert_eq!(
        s.on_answer(lane_only(), &sig, spent, NOW, 0.0).action,
        Action::Wait(20_000),
        "exactly at the limit is still within it"
    );
    let spent = Spent {
        waited_ms: 40_001,
        ..sent_slow()
    };
    assert_eq!(
        s.on_answer(lane_only(), &sig, spent, NOW, 0.0),
        Decision::new(Action::Pass, Event::Ended(EndReason::MaxWait))
    );
    assert_eq!(s.lane, None);
    assert_eq!(s.reaccept_blocked_until, Some(NOW + REACCEPT_BLOCK_MS));
    assert_eq!(s.last_end, Some((EndReason::MaxWait, NOW)));
    // The next wall is refused inside the block, accepted after it.
    let blocked = s.on_answer(lane_only(), &wall(), Spent::default(), NOW + 1, 0.0);
    assert_eq!(
        blocked,
        Decision {
            action: Action::Pass,
            event: Some(Event::Blocked)
        }
    );
    let later = NOW + REACCEPT_BLOCK_MS;
    assert_eq!(
        s.on_answer(lane_only(), &wall(), Spent::default(), later, 0.0)
            .action,
        Action::RetrySlow
    );
}

#[test]
fn max_wait_is_clamped_to_one_minute_to_six_hours() {
    let busy = |max_wait: Option<u64>| Signals {
        slow_retry_after_ms: Some(20_000),
        slow_max_wait_ms: max_wait,
        ..slow(429, SlowStatus::SlotBusy)
    };
    // Asked for 1 s: a minute still allows 40 s spent + 20 s.
    let mut s = in_lane();
    let spent = Spent {
        waited_ms: 40_000,
        ..sent_slow()
    };
    assert_eq!(
        s.on_answer(lane_only(), &busy(Some(1_000)), spent, NOW, 0.0)
            .action,
        Action::Wait(20_000)
    );
    // Asked for a day: six hours is the most.
    let spent = Spent {
        waited_ms: MAX_MAX_WAIT_MS - 19_999,
        ..sent_slow()
    };
    assert_eq!(
        s.on_answer(lane_only(), &busy(Some(86_400_000)), spent, NOW, 0.0)
            .event,
        Some(Event::Ended(EndReason::MaxWait))
    );
    // None given: 20 minutes.
    let mut s = in_lane();
    let spent = Spent {
        waited_ms: DEFAULT_MAX_WAIT_MS - 20_000,
        ..sent_slow()
    };
    assert_eq!(
        s.on_answer(lane_only(), &busy(None), spent, NOW, 0.0)
            .action,
        Action::Wait(20_000)
    );
}

#[test]
fn the_request_start_budget_minus_five_seconds_bounds_the_wait() {
    let mut s = in_lane();
    let sig = Signals {
        slow_retry_after_ms: Some(20_000),
        ..slow(429, SlowStatus::SlotBusy)
    };
    let spent = Spent {
        budget_left_ms: Some(25_000),
        ..sent_slow()
    };
    assert_eq!(
        s.on_answer(lane_only(), &sig, spent, NOW, 0.0).action,
        Action::Wait(20_000)
    );
    let spent = Spent {
        budget_left_ms: Some(24_999),
        ..sent_slow()
    };
    assert_eq!(
        s.on_answer(lane_only(), &sig, spent, NOW, 0.0).event,
        Some(Event::Ended(EndReason::MaxWait))
    );
    // A budget already below the margin ends it too.
    let mut s = in_lane();
    let spent = Spent {
        budget_left_ms: Some(1_000),
        ..sent_slow()
    };
    assert_eq!(
        s.on_answer(lane_only(), &sig, spent, NOW, 0.0).event,
        Some(Event::Ended(EndReason::MaxWait))
    );
}

#[test]
fn terminal_slow_statuses_end_the_lane_and_take_the_normal_path() {
    for (status, reason) in [
        (SlowStatus::WeeklyLimit, EndReason::WeeklyLimit),
        (SlowStatus::Off, EndReason::Off),
        (SlowStatus::Ineligible, EndReason::Ineligible),
        (SlowStatus::Unknown, EndReason::Refused),
        (SlowStatus::BudgetExhausted, EndReason::BudgetExhausted),
    ] {
        let mut s = in_lane();
        assert_eq!(
            s.on_answer(lane_only(), &slow(429, status), sent_slow(), NOW, 0.0),
            Decision::new(Action::Pass, Event::Ended(reason)),
            "{status:?}"
        );
        assert_eq!(s.lane, None);
        assert_eq!(s.last_end, Some((reason, NOW)));
        // Only a max-wait end blocks re-acceptance.
        assert_eq!(s.reaccept_blocked_until, None);
    }
    // A terminal status on a 529 ends the lane as well rather than waiting.
    let mut s = in_lane();
    assert_eq!(
        s.on_answer(
            lane_only(),
            &slow(529, SlowStatus::WeeklyLimit),
            sent_slow(),
            NOW,
            0.0
        )
        .event,
        Some(Event::Ended(EndReason::WeeklyLimit))
    );
}

#[test]
fn overage_in_use_ends_the_lane_as_extra_usage_whatever_the_status() {
    for status in [
        SlowStatus::Ineligible,
        SlowStatus::Active,
        SlowStatus::SlotBusy,
    ] {
        let mut s = in_lane();
        let sig = Signals {
            overage_in_use: true,
            ..slow(429, status)
        };
        assert_eq!(
            s.on_answer(lane_only(), &sig, sent_slow(), NOW, 0.0).event,
            Some(Event::Ended(EndReason::ExtraUsage)),
            "{status:?}"
        );
    }
}

#[test]
fn budget_exhausted_is_remembered_until_its_reset_and_at_most_eight_days() {
    let mut s = in_lane();
    let sig = Signals {
        budget_reset_at: Some(NOW + 3 * 24 * HOUR_MS),
        ..slow(429, SlowStatus::BudgetExhausted)
    };
    s.on_answer(lane_only(), &sig, sent_slow(), NOW, 0.0);
    assert_eq!(s.budget_exhausted_until, Some(NOW + 3 * 24 * HOUR_MS));
    assert_eq!(
        s.on_answer(lane_only(), &wall(), Spent::default(), NOW + 1, 0.0)
            .event,
        Some(Event::Blocked)
    );
    let after = NOW + 3 * 24 * HOUR_MS;
    assert_eq!(
        s.on_answer(lane_only(), &wall(), Spent::default(), after, 0.0)
            .action,
        Action::RetrySlow
    );
    // Too far, or not stated: eight days.
    for budget_reset_at in [Some(NOW + 30 * 24 * HOUR_MS), None] {
        let mut s = in_lane();
        let sig = Signals {
            budget_reset_at,
            ..slow(429, SlowStatus::BudgetExhausted)
        };
        s.on_answer(lane_only(), &sig, sent_slow(), NOW, 0.0);
        assert_eq!(s.budget_exhausted_until, Some(NOW + BUDGET_MEMORY_MAX_MS));
    }
}

#[test]
fn a_renewed_five_hour_window_ends_the_lane() {
    let mut s = in_lane();
    // The same window announced again keeps it.
    let same = Signals {
        reset_at: Some(RESET),
        ..slow(200, SlowStatus::Active)
    };
    assert_eq!(
        s.on_answer(lane_only(), &same, sent_slow(), NOW, 0.0),
        Decision::pass()
    );
    let renewed = Signals {
        status: Some(200),
        reset_at: Some(RESET + 5 * HOUR_MS),
        ..Signals::default()
    };
    assert_eq!(
        s.on_answer(lane_only(), &renewed, sent_slow(), NOW, 0.0),
        Decision::new(Action::Pass, Event::Ended(EndReason::WindowRenewed))
    );
    assert_eq!(s.lane, None);
}

#[test]
fn a_slow_request_walled_without_a_verdict_ends_the_lane() {
    let mut s = in_lane();
    let again = Signals {
        slow_offer: false,
        ..wall()
    };
    assert_eq!(
        s.on_answer(lane_only(), &again, sent_slow(), NOW, 0.0)
            .event,
        Some(Event::Ended(EndReason::Refused))
    );
}

#[test]
fn a_request_sent_before_the_acceptance_joins_the_lane() {
    let mut s = in_lane();
    let d = s.on_answer(lane_only(), &wall(), Spent::default(), NOW + 5, 0.0);
    assert_eq!(
        d,
        Decision {
            action: Action::RetrySlow,
            event: None
        }
    );
    assert_eq!(
        s.lane.map(|l| l.accepted_at),
        Some(NOW),
        "not accepted twice"
    );
}

#[test]
fn an_expired_lane_is_not_joined_but_accepted_afresh() {
    let mut s = in_lane();
    let later = RESET + LANE_MARGIN_MS + 1;
    let next_reset = later + HOUR_MS;
    let sig = Signals {
        reset_at: Some(next_reset),
        ..wall()
    };
    let d = s.on_answer(lane_only(), &sig, sent_slow(), later, 0.0);
    assert_eq!(d, Decision::new(Action::RetrySlow, Event::Accepted));
    assert_eq!(s.lane.map(|l| l.reset_at), Some(next_reset));
}

#[test]
fn with_both_on_the_reset_is_tried_first_and_once_per_request() {
    let mut s = WallState::default();
    assert_eq!(
        s.on_answer(both(), &wall(), Spent::default(), NOW, 0.0),
        Decision {
            action: Action::TryReset,
            event: None
        }
    );
    assert_eq!(s.lane, None, "nothing accepted yet");
    // The reset did not help: the same answer then takes the lane.
    let tried = Spent {
        reset_tried: true,
        ..Spent::default()
    };
    assert_eq!(
        s.on_answer(both(), &wall(), tried, NOW, 0.0).action,
        Action::RetrySlow
    );
}

#[test]
fn a_remembered_reset_is_not_tried_again() {
    let mut s = WallState::default();
    assert!(s.reset.begin(NOW));
    s.reset
        .settle(ResetOutcome::Unavailable { next_at: None }, NOW);
    assert_eq!(
        s.on_answer(both(), &wall(), Spent::default(), NOW + 1, 0.0)
            .action,
        Action::RetrySlow,
        "straight to the lane"
    );
    let reset_only = Options {
        low_priority: false,
        auto_reset: true,
    };
    let mut s = WallState::default();
    s.reset.settle(ResetOutcome::Error, NOW);
    assert_eq!(
        s.on_answer(reset_only, &wall(), Spent::default(), NOW + 1, 0.0),
        Decision::pass(),
        "backing off, and no lane to fall back on"
    );
}
