//! `reset-aware`: prefer quota windows that reset soon.
//!
//! Quota that resets soon is cheap to spend: whatever is left is lost at the reset anyway. The
//! score (higher first) follows the reference: per window, `remaining_weight · remaining +
//! pressure_weight · urgency · used`, where urgency grows from 0 to 1 as the reset approaches
//! (0.5 when the reset is unknown); session (5 h) and weekly (7 d) scores are blended with the
//! configured weights (0.35 / 0.65). A view carries one remaining fraction (the tightest
//! window), used for both windows; no quota at all scores a neutral 0.5.
//!
//! Scores within the tie band of the best are equal and fall back to priority, so tiny quota
//! differences do not flap the choice. Candidates under the exhaustion guard go after all others.

use std::cmp::Ordering;

use rand::Rng;

use crate::Millis;

use super::candidate::{Candidate, QuotaView, ResetAwareWeights};
use super::ranked::{Entry, Rank};

const SESSION_WINDOW_MS: f64 = 5.0 * 3_600_000.0;
const WEEKLY_WINDOW_MS: f64 = 7.0 * 24.0 * 3_600_000.0;
const NEUTRAL_SCORE: f64 = 0.5;

/// The reset-aware score of a quota view at `now`, in `0..=1` (higher is preferred).
pub fn reset_aware_score(quota: Option<&QuotaView>, now: Millis, w: &ResetAwareWeights) -> f64 {
    let Some(q) = quota.filter(|q| !q.remaining.is_nan()) else {
        return NEUTRAL_SCORE;
    };
    let remaining = q.remaining.clamp(0.0, 1.0);
    let window = |reset_at: Option<Millis>, len: f64, rem_w: f64, pressure_w: f64| {
        let urgency = match reset_at {
            None => 0.5,
            Some(at) if at <= now => 1.0,
            Some(at) => (1.0 - (at - now) as f64 / len).clamp(0.0, 1.0),
        };
        rem_w * remaining + pressure_w * urgency * (1.0 - remaining)
    };
    let session = window(q.session_reset_at, SESSION_WINDOW_MS, 0.45, 0.55);
    let weekly = window(q.weekly_reset_at, WEEKLY_WINDOW_MS, 0.25, 0.75);
    let (sw, ww) = (weight(w.session_weight), weight(w.weekly_weight));
    let session_share = if sw + ww > 0.0 { sw / (sw + ww) } else { 0.35 };
    session_share * session + (1.0 - session_share) * weekly
}

fn weight(x: f64) -> f64 {
    if x.is_finite() && x > 0.0 { x } else { 0.0 }
}

fn fraction(x: f64) -> f64 {
    if x.is_finite() {
        x.clamp(0.0, 1.0)
    } else {
        0.0
    }
}

fn guarded(c: &Candidate, w: &ResetAwareWeights) -> bool {
    c.remaining()
        .is_some_and(|r| r < fraction(w.exhaustion_guard))
}

/// The reset-aware choice among `pool` (three O(n) passes, no allocation).
pub(super) fn best<'a>(
    pool: impl Iterator<Item = Entry<'a>> + Clone,
    now: Millis,
    w: &ResetAwareWeights,
) -> Option<usize> {
    // Guarded candidates compete only when nothing else is left.
    let open = pool.clone().any(|e| !guarded(e.1, w));
    let group = pool.filter(move |e| guarded(e.1, w) != open);
    let score = |c: &Candidate| reset_aware_score(c.quota.as_ref(), now, w);
    let top = group
        .clone()
        .map(|e| score(e.1))
        .fold(f64::NEG_INFINITY, f64::max);
    let band = fraction(w.tie_band);
    group
        .filter(|e| score(e.1) >= top - band)
        .min_by(|a, b| Rank::Priority.cmp(*a, *b))
        .map(|e| e.0)
}

/// The earliest reset still ahead of `now` (session or weekly); `None` when none is known.
fn next_reset(c: &Candidate, now: Millis) -> Option<Millis> {
    let q = c.quota?;
    [q.session_reset_at, q.weekly_reset_at]
        .into_iter()
        .flatten()
        .filter(|&at| at > now)
        .min()
}

/// `reset-window`'s order: candidates above the exhaustion guard first, then the soonest
/// upcoming quota reset (unknown resets after known ones), then priority. Quota that resets
/// soonest is the cheapest to spend; the guard keeps an empty window from being chosen just
/// because it is about to refill.
pub(super) fn reset_window_cmp(
    now: Millis,
    w: &ResetAwareWeights,
) -> impl Fn(Entry<'_>, Entry<'_>) -> Ordering + '_ {
    move |a, b| {
        let key = |c: &Candidate| next_reset(c, now).unwrap_or(Millis::MAX);
        guarded(a.1, w)
            .cmp(&guarded(b.1, w))
            .then(key(a.1).cmp(&key(b.1)))
            .then_with(|| Rank::Priority.cmp(a, b))
    }
}

/// `quota-weighted`'s weight: the remaining fraction, neutral when unknown.
fn quota_weight(c: &Candidate) -> f64 {
    c.remaining().unwrap_or(NEUTRAL_SCORE)
}

/// `quota-weighted`: a draw weighted by remaining quota, so load spreads in proportion to what
/// each account has left; a pool with nothing left anywhere is uniform. One RNG draw.
pub(super) fn weighted<'a, R: Rng + ?Sized>(
    pool: impl Iterator<Item = Entry<'a>> + Clone,
    rng: &mut R,
) -> Option<usize> {
    let total: f64 = pool.clone().map(|e| quota_weight(e.1)).sum();
    let n = pool.clone().count();
    if n == 0 {
        return None;
    }
    let r: f64 = rng.random::<f64>();
    if total <= 0.0 {
        let k = ((r * n as f64) as usize).min(n - 1);
        return pool.clone().nth(k).map(|e| e.0);
    }
    let mut left = r * total;
    let mut last = None;
    for e in pool {
        let w = quota_weight(e.1);
        if w > 0.0 {
            last = Some(e.0);
            if left < w {
                return Some(e.0);
            }
            left -= w;
        }
    }
    // Rounding can leave a sliver past the last positive weight.
    last
}
