//! The low-priority lane of one connection as a pure state machine: an answer, what the
//! request already spent and the time go in; what the request does next comes out.
//!
//! The rules are the OmniRoute resilience guide's ("Claude OAuth usage wall", from the wire
//! contract of Claude Code 2.1.263):
//! - nothing is sent before the first wall 429 (`unified-status: rejected`); when it offers
//!   the lane (`slow-offer: treatment`) the offer is accepted and the same connection retried
//!   at once with `anthropic-usage-limit: slow`, and every request carries the header until
//!   the announced `unified-reset` + 60 s;
//! - `slow-status: active` / `not_needed` keep the lane; `slot_busy` (a 429) or a 529 wait
//!   `slow-retry-after` (20 s by default, clamped to 5–600 s, ±30 % jitter) and retry, as
//!   long as the request's waits stay within `slow-max-wait` (20 min by default, clamped to
//!   1 min–6 h) and within its remaining start budget minus 5 s; past that the lane ends
//!   (`max_wait`) and a 10-minute block keeps it from being accepted again;
//! - `weekly_limit`, `budget_exhausted` (remembered until the budget's reset, at most 8 days),
//!   `off`, `ineligible`, a renewed 5-hour window, or `overage-in-use: true` (`extra_usage`,
//!   whatever the status) end the lane, and that answer takes the normal path;
//! - with `auto_limit_reset` the session-limit reset ([`super::reset`]) is tried first.
//!
//! A wall 429 the lane takes over never reaches the cooldown path: the connection is neither
//! cooled, nor counted on the breaker, nor rotated away.

use super::reset::ResetMemory;
use super::signals::{Signals, SlowStatus};

const SECOND_MS: u64 = 1_000;
const MINUTE_MS: u64 = 60 * SECOND_MS;
const HOUR_MS: u64 = 60 * MINUTE_MS;

/// The lane outlives the announced reset by this margin.
pub const LANE_MARGIN_MS: u64 = MINUTE_MS;
/// The lane's length when the wall announces no reset: the 5-hour window.
pub const DEFAULT_WINDOW_MS: u64 = 5 * HOUR_MS;
/// `slow-retry-after` when absent, and its clamp.
pub const DEFAULT_RETRY_AFTER_MS: u64 = 20 * SECOND_MS;
pub const MIN_RETRY_AFTER_MS: u64 = 5 * SECOND_MS;
pub const MAX_RETRY_AFTER_MS: u64 = 600 * SECOND_MS;
/// The retry wait is spread by up to this share either way.
pub const RETRY_JITTER: f64 = 0.3;
/// `slow-max-wait` when absent, and its clamp.
pub const DEFAULT_MAX_WAIT_MS: u64 = 20 * MINUTE_MS;
pub const MIN_MAX_WAIT_MS: u64 = MINUTE_MS;
pub const MAX_MAX_WAIT_MS: u64 = 6 * HOUR_MS;
/// What the waits leave of the request's start budget.
pub const START_BUDGET_MARGIN_MS: u64 = 5 * SECOND_MS;
/// After a `max_wait` end, the lane is not accepted again for this long.
pub const REACCEPT_BLOCK_MS: u64 = 10 * MINUTE_MS;
/// A spent lane budget is remembered at most this long.
pub const BUDGET_MEMORY_MAX_MS: u64 = 8 * 24 * HOUR_MS;

/// The connection's opt-ins (`low_priority_mode`, `auto_limit_reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Options {
    pub low_priority: bool,
    pub auto_reset: bool,
}

impl Options {
    /// Whether the usage wall is handled at all on this connection.
    pub fn any(self) -> bool {
        self.low_priority || self.auto_reset
    }
}

/// An accepted lane (Unix ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lane {
    pub accepted_at: u64,
    /// The announced `unified-reset`.
    pub reset_at: u64,
    /// Requests carry the slow header until then: the reset plus the margin.
    pub until: u64,
}

/// Why a lane ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    /// Its reset (plus the margin) passed.
    Expired,
    /// Waiting for a free slot would pass `slow-max-wait` or the request's start budget.
    MaxWait,
    WeeklyLimit,
    BudgetExhausted,
    Off,
    Ineligible,
    /// Paid extra usage covers the wall now (`overage-in-use: true`).
    ExtraUsage,
    /// A later answer announced a new 5-hour window.
    WindowRenewed,
    /// A slow request met the wall again with no lane verdict, or a status this build does
    /// not know.
    Refused,
}

impl EndReason {
    /// Every reason, for parsing a label back.
    pub const ALL: [Self; 9] = [
        Self::Expired,
        Self::MaxWait,
        Self::WeeklyLimit,
        Self::BudgetExhausted,
        Self::Off,
        Self::Ineligible,
        Self::ExtraUsage,
        Self::WindowRenewed,
        Self::Refused,
    ];

    /// The reason of `label` (a peer's or Redis's); a label this build does not know reads as
    /// `Refused`.
    pub fn from_label(label: &str) -> Self {
        Self::ALL
            .into_iter()
            .find(|r| r.label() == label)
            .unwrap_or(Self::Refused)
    }

    /// Whether an end for this reason withdraws the lane from the other nodes too (redis
    /// mode): every end before the lane's reset is a fact about the account; the lane's own
    /// expiry needs no word, every node's copy lapses at the same time.
    pub fn is_shared(self) -> bool {
        self != Self::Expired
    }

    pub fn label(self) -> &'static str {
        match self {
            Self::Expired => "expired",
            Self::MaxWait => "max_wait",
            Self::WeeklyLimit => "weekly_limit",
            Self::BudgetExhausted => "budget_exhausted",
            Self::Off => "off",
            Self::Ineligible => "ineligible",
            Self::ExtraUsage => "extra_usage",
            Self::WindowRenewed => "window_renewed",
            Self::Refused => "refused",
        }
    }
}

/// What happened, for the metrics (`switchyard_usage_wall_events_total{event}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A wall 429's offer was accepted.
    Accepted,
    /// A slot-busy answer (or a 529) in the lane: the request waits and retries.
    SlotWait,
    Ended(EndReason),
    /// A wall 429 offered the lane, but a `max_wait` block or a spent budget refused it.
    Blocked,
}

impl Event {
    pub fn label(self) -> &'static str {
        match self {
            Self::Accepted => "lane_accepted",
            Self::SlotWait => "slot_wait",
            Self::Blocked => "lane_blocked",
            Self::Ended(EndReason::Expired) => "lane_ended_expired",
            Self::Ended(EndReason::MaxWait) => "lane_ended_max_wait",
            Self::Ended(EndReason::WeeklyLimit) => "lane_ended_weekly_limit",
            Self::Ended(EndReason::BudgetExhausted) => "lane_ended_budget_exhausted",
            Self::Ended(EndReason::Off) => "lane_ended_off",
            Self::Ended(EndReason::Ineligible) => "lane_ended_ineligible",
            Self::Ended(EndReason::ExtraUsage) => "lane_ended_extra_usage",
            Self::Ended(EndReason::WindowRenewed) => "lane_ended_window_renewed",
            Self::Ended(EndReason::Refused) => "lane_ended_refused",
        }
    }
}

/// What the request does with the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The answer takes the normal path (a success, or a failure to classify and cool).
    Pass,
    /// Retry the same connection now, with the slow header.
    RetrySlow,
    /// Wait this long, then retry the same connection with the slow header.
    Wait(u64),
    /// Claim the session-limit reset first ([`super::reset`]), then decide again.
    TryReset,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub action: Action,
    pub event: Option<Event>,
}

impl Decision {
    fn pass() -> Self {
        Self {
            action: Action::Pass,
            event: None,
        }
    }

    fn new(action: Action, event: Event) -> Self {
        Self {
            action,
            event: Some(event),
        }
    }
}

/// What the request spent so far on this connection, and what it has left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Spent {
    /// The answer came to a request sent with the slow header.
    pub sent_slow: bool,
    /// Slot waits already made.
    pub waited_ms: u64,
    /// The request's remaining start budget, `None` when unbounded.
    pub budget_left_ms: Option<u64>,
    /// The session-limit reset was already tried for this request.
    pub reset_tried: bool,
}

/// One connection's usage-wall state (all times Unix ms: the wall's resets are epoch
/// instants).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WallState {
    pub lane: Option<Lane>,
    /// No lane is accepted before then (after a `max_wait` end).
    pub reaccept_blocked_until: Option<u64>,
    /// The lane's budget is spent until then.
    pub budget_exhausted_until: Option<u64>,
    /// The last end and when it happened.
    pub last_end: Option<(EndReason, u64)>,
    pub reset: ResetMemory,
}

impl WallState {
    /// Whether a request dispatched now carries the slow header; a lane past its end is
    /// closed here (`Some(Expired)`).
    pub fn before_dispatch(&mut self, now: u64) -> (bool, Option<Event>) {
        match self.lane {
            Some(lane) if now < lane.until => (true, None),
            Some(_) => {
                self.end(EndReason::Expired, now);
                (false, Some(Event::Ended(EndReason::Expired)))
            }
            None => (false, None),
        }
    }

    /// The decision on one answer. `jitter` is in `[-1, 1]` (drawn by the caller).
    pub fn on_answer(
        &mut self,
        opts: Options,
        sig: &Signals,
        spent: Spent,
        now: u64,
        jitter: f64,
    ) -> Decision {
        let lane = self.lane.filter(|l| now < l.until);
        match lane {
            Some(lane) if spent.sent_slow => self.in_lane(lane, sig, spent, now, jitter),
            // The lane was accepted while this request was under way: join it.
            Some(_) if sig.is_wall() => Decision {
                action: Action::RetrySlow,
                event: None,
            },
            _ => self.at_wall(opts, sig, spent, now),
        }
    }

    /// An answer to a slow request.
    fn in_lane(
        &mut self,
        lane: Lane,
        sig: &Signals,
        spent: Spent,
        now: u64,
        jitter: f64,
    ) -> Decision {
        if sig.overage_in_use {
            return self.ended(EndReason::ExtraUsage, now);
        }
        let failed = sig.status.is_none_or(|s| !(200..300).contains(&s));
        match sig.slow_status {
            Some(SlowStatus::SlotBusy) => self.slot_wait(sig, spent, now, jitter),
            Some(SlowStatus::WeeklyLimit) => self.ended(EndReason::WeeklyLimit, now),
            Some(SlowStatus::BudgetExhausted) => {
                let until = sig
                    .budget_reset_at
                    .filter(|&at| at > now)
                    .unwrap_or(u64::MAX)
                    .min(now.saturating_add(BUDGET_MEMORY_MAX_MS));
                self.budget_exhausted_until = Some(until);
                self.ended(EndReason::BudgetExhausted, now)
            }
            Some(SlowStatus::Off) => self.ended(EndReason::Off, now),
            Some(SlowStatus::Ineligible) => self.ended(EndReason::Ineligible, now),
            Some(SlowStatus::Unknown) => self.ended(EndReason::Refused, now),
            _ if sig.status == Some(529) => self.slot_wait(sig, spent, now, jitter),
            None if sig.is_wall() => self.ended(EndReason::Refused, now),
            // A new 5-hour window: the wall is behind us.
            _ if !failed
                && !sig.rejected
                && sig
                    .reset_at
                    .is_some_and(|at| at > lane.reset_at.saturating_add(LANE_MARGIN_MS)) =>
            {
                self.ended(EndReason::WindowRenewed, now)
            }
            // `active`, `not_needed`, or an answer that says nothing of the lane.
            _ => Decision::pass(),
        }
    }

    /// A slot-busy answer: wait and retry, or end the lane when the wait would pass what
    /// the request may spend.
    fn slot_wait(&mut self, sig: &Signals, spent: Spent, now: u64, jitter: f64) -> Decision {
        let base = sig
            .slow_retry_after_ms
            .unwrap_or(DEFAULT_RETRY_AFTER_MS)
            .clamp(MIN_RETRY_AFTER_MS, MAX_RETRY_AFTER_MS);
        let spread = 1.0 + RETRY_JITTER * jitter.clamp(-1.0, 1.0);
        let wait = (base as f64 * spread) as u64;
        let max_wait = sig
            .slow_max_wait_ms
            .unwrap_or(DEFAULT_MAX_WAIT_MS)
            .clamp(MIN_MAX_WAIT_MS, MAX_MAX_WAIT_MS);
        let limit = spent.budget_left_ms.map_or(max_wait, |left| {
            max_wait.min(left.saturating_sub(START_BUDGET_MARGIN_MS))
        });
        if spent.waited_ms.saturating_add(wait) > limit {
            self.reaccept_blocked_until = Some(now.saturating_add(REACCEPT_BLOCK_MS));
            return self.ended(EndReason::MaxWait, now);
        }
        Decision::new(Action::Wait(wait), Event::SlotWait)
    }

    /// An answer to a request sent at full speed: is it the wall, and what takes it?
    fn at_wall(&mut self, opts: Options, sig: &Signals, spent: Spent, now: u64) -> Decision {
        if !sig.is_wall() {
            return Decision::pass();
        }
        if opts.auto_reset && !spent.reset_tried && self.reset.may_try(now) {
            return Decision {
                action: Action::TryReset,
                event: None,
            };
        }
        if !opts.low_priority || !sig.slow_offer || sig.overage_in_use {
            return Decision::pass();
        }
        let blocked = |until: Option<u64>| until.is_some_and(|t| now < t);
        if blocked(self.reaccept_blocked_until) || blocked(self.budget_exhausted_until) {
            return Decision {
                action: Action::Pass,
                event: Some(Event::Blocked),
            };
        }
        let reset_at = sig
            .reset_at
            .filter(|&at| at > now)
            .unwrap_or(now.saturating_add(DEFAULT_WINDOW_MS));
        self.lane = Some(Lane {
            accepted_at: now,
            reset_at,
            until: reset_at.saturating_add(LANE_MARGIN_MS),
        });
        Decision::new(Action::RetrySlow, Event::Accepted)
    }

    fn ended(&mut self, reason: EndReason, now: u64) -> Decision {
        self.end(reason, now);
        Decision::new(Action::Pass, Event::Ended(reason))
    }

    pub(super) fn end(&mut self, reason: EndReason, now: u64) {
        self.lane = None;
        self.last_end = Some((reason, now));
    }
}

#[cfg(test)]
#[path = "lane_tests.rs"]
mod tests;
