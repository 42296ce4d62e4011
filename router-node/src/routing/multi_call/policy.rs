//! When a fusion panel stops waiting, and what it does with the answers it has: pure, with the
//! time passed in, so every edge (quorum, grace, hard timeout) is a unit test.

use switchyard_shared::Millis;
use switchyard_shared::config::FusionOptions;

/// The panel's waiting rules, from `[combos.fusion]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PanelPolicy {
    /// Answers that make a quorum.
    pub min_panel: usize,
    /// After the quorum, how much longer the rest may take.
    pub grace_ms: Millis,
    /// From the start, the hard deadline.
    pub timeout_ms: Millis,
}

impl From<&FusionOptions> for PanelPolicy {
    fn from(o: &FusionOptions) -> Self {
        Self {
            min_panel: (o.min_panel as usize).max(1),
            grace_ms: o.straggler_grace_ms,
            timeout_ms: o.timeout_ms,
        }
    }
}

/// Where the panel stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PanelProgress {
    /// When the first calls went out (node clock).
    pub started: Millis,
    pub answered: usize,
    /// Calls still running.
    pub pending: usize,
    /// When the `min_panel`-th answer came.
    pub quorum_at: Option<Millis>,
}

/// Why the panel stopped waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Every call ended.
    AllDone,
    /// The quorum's straggler grace ran out.
    Grace,
    /// The hard timeout passed.
    Timeout,
}

/// What the panel does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Wait for the next answer, but not past this instant.
    Until(Millis),
    Stop(Stop),
}

/// Decides whether to keep waiting at `now`.
pub fn next(policy: &PanelPolicy, p: &PanelProgress, now: Millis) -> Wait {
    if p.pending == 0 {
        return Wait::Stop(Stop::AllDone);
    }
    let hard = p.started.saturating_add(policy.timeout_ms);
    let grace_end = p
        .quorum_at
        .filter(|_| p.answered >= policy.min_panel)
        .map(|at| at.saturating_add(policy.grace_ms));
    match grace_end {
        Some(end) if end < hard => {
            if now >= end {
                Wait::Stop(Stop::Grace)
            } else {
                Wait::Until(end)
            }
        }
        _ if now >= hard => Wait::Stop(Stop::Timeout),
        _ => Wait::Until(hard),
    }
}

/// What the panel's answers lead to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A quorum: the judge synthesises.
    Judge,
    /// Too few for the judge, but one answer to give.
    BestSingle,
    /// Nothing to give.
    Failed,
}

/// The verdict for `answered` answers.
pub fn verdict(policy: &PanelPolicy, answered: usize) -> Verdict {
    match answered {
        0 => Verdict::Failed,
        n if n >= policy.min_panel => Verdict::Judge,
        _ => Verdict::BestSingle,
    }
}

/// Whether a failed member may be replaced by the next target in configured order: only while
/// targets remain and before the deadline the panel is waiting for.
pub fn may_replace(next_target: usize, targets: usize, wait: Wait) -> bool {
    next_target < targets && matches!(wait, Wait::Until(_))
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: PanelPolicy = PanelPolicy {
        min_panel: 2,
        grace_ms: 8000,
        timeout_ms: 90_000,
    };

    fn at(answered: usize, pending: usize, quorum_at: Option<Millis>) -> PanelProgress {
        PanelProgress {
            started: 1000,
            answered,
            pending,
            quorum_at,
        }
    }

    #[test]
    fn waits_for_everyone_until_the_hard_timeout_without_a_quorum() {
        assert_eq!(next(&P, &at(0, 3, None), 1000), Wait::Until(91_000));
        assert_eq!(next(&P, &at(1, 2, None), 50_000), Wait::Until(91_000));
        assert_eq!(next(&P, &at(1, 2, None), 91_000), Wait::Stop(Stop::Timeout));
    }

    #[test]
    fn a_quorum_starts_the_straggler_grace() {
        assert_eq!(next(&P, &at(2, 1, Some(5000)), 5000), Wait::Until(13_000));
        assert_eq!(next(&P, &at(2, 1, Some(5000)), 12_999), Wait::Until(13_000));
        assert_eq!(
            next(&P, &at(2, 1, Some(5000)), 13_000),
            Wait::Stop(Stop::Grace)
        );
        // The grace never outlasts the hard timeout.
        assert_eq!(
            next(&P, &at(2, 1, Some(88_000)), 88_000),
            Wait::Until(91_000)
        );
        assert_eq!(
            next(&P, &at(2, 1, Some(88_000)), 91_000),
            Wait::Stop(Stop::Timeout)
        );
    }

    #[test]
    fn stops_at_once_when_every_call_ended() {
        assert_eq!(
            next(&P, &at(3, 0, Some(2000)), 2000),
            Wait::Stop(Stop::AllDone)
        );
        assert_eq!(next(&P, &at(0, 0, None), 1000), Wait::Stop(Stop::AllDone));
    }

    #[test]
    fn verdicts_follow_min_panel() {
        assert_eq!(verdict(&P, 0), Verdict::Failed);
        assert_eq!(verdict(&P, 1), Verdict::BestSingle);
        assert_eq!(verdict(&P, 2), Verdict::Judge);
        assert_eq!(verdict(&P, 5), Verdict::Judge);
        let lone = PanelPolicy { min_panel: 1, ..P };
        assert_eq!(verdict(&lone, 1), Verdict::Judge);
    }

    #[test]
    fn a_failed_member_is_replaced_only_while_targets_and_time_remain() {
        assert!(may_replace(3, 4, Wait::Until(5)));
        assert!(!may_replace(4, 4, Wait::Until(5)));
        assert!(!may_replace(3, 4, Wait::Stop(Stop::Timeout)));
    }

    #[test]
    fn options_map_to_the_policy() {
        let p = PanelPolicy::from(&FusionOptions::default());
        assert_eq!(p, P);
        let zero = FusionOptions {
            min_panel: 0,
            ..FusionOptions::default()
        };
        assert_eq!(PanelPolicy::from(&zero).min_panel, 1);
    }
}
