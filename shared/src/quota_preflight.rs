//! Quota preflight: skip a connection whose quota window is nearly spent, before sending.
//!
//! A subscription account (Codex, Claude) that has used up its 5-hour or weekly window answers
//! every request with a 429 until the reset; sending to it costs a round trip and a cooldown
//! each time. The preflight reads the windows the last responses reported
//! ([`crate::quota_headers`]) and skips the connection with reason `quota_cutoff` while a
//! window's remaining share is at or below its threshold. Thresholds are remaining percent per
//! window kind (the reference's `quotaPreflight`: off by default, 2 % default threshold, 20 %
//! warning, per-provider window overrides).
//!
//! A window stops counting at its reset; a window whose reset is unknown counts for
//! [`UNKNOWN_RESET_HOLD_MS`] after it was observed (the reference's "now + 5 min"), so a stale
//! report never blocks a connection for good.

use crate::Millis;
use crate::quota_headers::{QuotaWindowAt, WindowKind};

/// How long a window without a stated reset keeps counting after it was reported.
pub const UNKNOWN_RESET_HOLD_MS: Millis = 5 * 60_000;

/// Remaining-percent thresholds for one provider (already resolved from the config).
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// Cut off at or below this remaining percent, for window kinds not listed in `windows`.
    pub default_percent: f64,
    /// Report a window as low at or below this remaining percent.
    pub warn_percent: f64,
    /// Per window kind.
    pub windows: Vec<(WindowKind, f64)>,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            default_percent: 2.0,
            warn_percent: 20.0,
            windows: Vec::new(),
        }
    }
}

impl Thresholds {
    /// The cut-off percent of `kind`.
    pub fn percent(&self, kind: WindowKind) -> f64 {
        self.windows
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(self.default_percent, |(_, p)| *p)
    }
}

/// The preflight's verdict for one connection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Preflight {
    /// Send.
    Pass,
    /// Send, but a window is low (for logs and admin views).
    Low { window: WindowKind, remaining: f64 },
    /// Skip with reason `quota_cutoff` until `until` (the binding window's reset).
    Cutoff { window: WindowKind, until: Millis },
}

impl Preflight {
    pub fn is_cutoff(&self) -> bool {
        matches!(self, Self::Cutoff { .. })
    }
}

/// When `w` stops counting.
fn window_end(w: &QuotaWindowAt) -> Millis {
    w.reset_at
        .unwrap_or_else(|| w.observed_at.saturating_add(UNKNOWN_RESET_HOLD_MS))
}

/// The verdict for a connection's last reported `windows` at `now`. Among windows past their
/// threshold, the one that ends last binds (the connection is useless until then); otherwise
/// the lowest window under the warning threshold is reported.
pub fn preflight(windows: &[QuotaWindowAt], t: &Thresholds, now: Millis) -> Preflight {
    let live = windows
        .iter()
        .filter(|w| now < window_end(w) && w.remaining.is_finite());
    let percent = |w: &QuotaWindowAt| w.remaining.clamp(0.0, 1.0) * 100.0;
    let cut = live
        .clone()
        .filter(|w| percent(w) <= t.percent(w.kind))
        .max_by_key(|w| window_end(w));
    if let Some(w) = cut {
        return Preflight::Cutoff {
            window: w.kind,
            until: window_end(w),
        };
    }
    live.filter(|w| percent(w) <= t.warn_percent)
        .min_by(|a, b| a.remaining.total_cmp(&b.remaining))
        .map_or(Preflight::Pass, |w| Preflight::Low {
            window: w.kind,
            remaining: w.remaining,
        })
}

/// When every connection of a provider is cut off: the earliest moment one comes back (the
/// `Retry-After` of the resulting 429), `None` if any passes.
pub fn all_cut_until(verdicts: &[Preflight]) -> Option<Millis> {
    let mut earliest: Option<Millis> = None;
    for v in verdicts {
        match v {
            Preflight::Cutoff { until, .. } => {
                earliest = Some(earliest.map_or(*until, |e| e.min(*until)));
            }
            _ => return None,
        }
    }
    earliest
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quota_headers::parse;

    fn window(kind: WindowKind, remaining: f64, reset_at: Option<Millis>) -> QuotaWindowAt {
        QuotaWindowAt {
            kind,
            remaining,
            observed_at: 1_000,
            reset_at,
        }
    }

    fn codex() -> Thresholds {
        Thresholds {
            windows: vec![(WindowKind::Session, 5.0), (WindowKind::Weekly, 2.0)],
            ..Thresholds::default()
        }
    }

    #[test]
    fn a_spent_codex_session_window_cuts_off_until_its_reset() {
        // The corpus entry codex-chatgpt/five-hour-usage-limit: primary 100 %, secondary 80 %.
        let headers = [
            ("x-codex-primary-used-percent", "100"),
            ("x-codex-secondary-used-percent", "80"),
            ("x-codex-primary-window-minutes", "300"),
            ("x-codex-secondary-window-minutes", "10080"),
            ("x-codex-primary-reset-after-seconds", "13873"),
            ("x-codex-secondary-reset-after-seconds", "316705"),
        ];
        let windows = parse(&headers, 0).windows_at(1_000);
        let t = codex();
        assert_eq!(
            preflight(&windows, &t, 2_000),
            Preflight::Cutoff {
                window: WindowKind::Session,
                until: 1_000 + 13_873_000
            }
        );
        // At the reset the window no longer counts; the weekly one (20 % left) is only low.
        assert!(matches!(
            preflight(&windows, &t, 1_000 + 13_873_000),
            Preflight::Low {
                window: WindowKind::Weekly,
                ..
            }
        ));
    }

    #[test]
    fn thresholds_are_per_window_and_the_longest_cut_binds() {
        let t = codex();
        // 4 % left of the session window is under its 5 % threshold; 3 % of the weekly is not
        // under its 2 %.
        let w = [
            window(WindowKind::Session, 0.04, Some(10_000)),
            window(WindowKind::Weekly, 0.03, Some(900_000)),
        ];
        assert_eq!(
            preflight(&w, &t, 2_000),
            Preflight::Cutoff {
                window: WindowKind::Session,
                until: 10_000
            }
        );
        let both = [
            window(WindowKind::Session, 0.0, Some(10_000)),
            window(WindowKind::Weekly, 0.01, Some(900_000)),
        ];
        assert_eq!(
            preflight(&both, &t, 2_000),
            Preflight::Cutoff {
                window: WindowKind::Weekly,
                until: 900_000
            }
        );
        // Kinds without their own threshold use the default (2 %).
        let tokens = [window(WindowKind::Tokens, 0.02, Some(5_000))];
        assert!(preflight(&tokens, &t, 2_000).is_cutoff());
        let tokens = [window(WindowKind::Tokens, 0.021, Some(5_000))];
        assert!(!preflight(&tokens, &t, 2_000).is_cutoff());
    }

    #[test]
    fn low_windows_warn_and_healthy_ones_pass() {
        let t = Thresholds::default();
        let w = [
            window(WindowKind::Requests, 0.5, Some(60_000)),
            window(WindowKind::Tokens, 0.15, Some(60_000)),
        ];
        assert_eq!(
            preflight(&w, &t, 2_000),
            Preflight::Low {
                window: WindowKind::Tokens,
                remaining: 0.15
            }
        );
        assert_eq!(preflight(&w[..1], &t, 2_000), Preflight::Pass);
        assert_eq!(preflight(&[], &t, 2_000), Preflight::Pass);
    }

    #[test]
    fn an_unknown_reset_holds_five_minutes_from_the_report() {
        let t = Thresholds::default();
        let w = [window(WindowKind::Unified, 0.0, None)];
        assert_eq!(
            preflight(&w, &t, 1_000),
            Preflight::Cutoff {
                window: WindowKind::Unified,
                until: 1_000 + UNKNOWN_RESET_HOLD_MS
            }
        );
        assert_eq!(
            preflight(&w, &t, 1_000 + UNKNOWN_RESET_HOLD_MS),
            Preflight::Pass
        );
        let nan = [window(WindowKind::Tokens, f64::NAN, None)];
        assert_eq!(preflight(&nan, &t, 1_000), Preflight::Pass);
    }

    #[test]
    fn a_provider_is_blocked_only_when_every_connection_is_cut() {
        let cut = |until| Preflight::Cutoff {
            window: WindowKind::Session,
            until,
        };
        assert_eq!(all_cut_until(&[cut(9), cut(5), cut(7)]), Some(5));
        assert_eq!(all_cut_until(&[cut(9), Preflight::Pass]), None);
        assert_eq!(
            all_cut_until(&[
                cut(9),
                Preflight::Low {
                    window: WindowKind::Tokens,
                    remaining: 0.1
                }
            ]),
            None
        );
        assert_eq!(all_cut_until(&[]), None);
    }
}
