//! `auto`: one score per candidate from every signal a view carries, with a little exploration.
//!
//! The weights are the reference's (OmniRoute's auto combo): health 0.20, quota 0.15, cost 0.15,
//! latency 0.12, task fit 0.08, and 0.05 each for six minor factors (stability, tier, load,
//! reset urgency, configured priority, freshness). Each factor is in `0..=1`, unknown inputs
//! score a neutral 0.5, so the total is in `0..=1` too. Cost and latency are relative to the
//! pool (cheapest/fastest 1, dearest/slowest 0).
//!
//! - **Exploration:** with probability 5 % the choice is uniform among the viable candidates,
//!   so a candidate that scored badly once gets measured again (one RNG draw per selection).
//! - **Exclusion:** candidates scoring below 0.2 are ordered after every other; the caller can
//!   keep them out for a while with [`AutoExclusion`] (5 min, doubling to 30 min).
//! - **Incident mode:** when more than half of the pool's breakers are OPEN
//!   ([`super::SelectCtx::open_breaker_share`]), exploration stops and cost's weight moves to
//!   health: during an outage the gateway stays on what works.

use std::cmp::Ordering;

use rand::Rng;

use crate::Millis;

use super::candidate::{Candidate, ModelTier, SelectCtx};
use super::context::fits;
use super::quota::reset_aware_score;
use super::ranked::{Entry, Rank};

/// The reference's factor weights (they sum to 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AutoWeights {
    pub health: f64,
    pub quota: f64,
    pub cost: f64,
    pub latency: f64,
    pub task_fit: f64,
    /// Each of the six minor factors.
    pub minor: f64,
}

pub const AUTO_WEIGHTS: AutoWeights = AutoWeights {
    health: 0.20,
    quota: 0.15,
    cost: 0.15,
    latency: 0.12,
    task_fit: 0.08,
    minor: 0.05,
};

/// Probability of a uniform exploratory choice.
pub const AUTO_EXPLORATION: f64 = 0.05;
/// Scores below this are excluded.
pub const AUTO_EXCLUDE_BELOW: f64 = 0.2;
/// First exclusion; each repeat doubles it up to [`AUTO_EXCLUSION_MAX_MS`].
pub const AUTO_EXCLUSION_MS: Millis = 5 * 60_000;
pub const AUTO_EXCLUSION_MAX_MS: Millis = 30 * 60_000;
/// Incident mode above this share of OPEN breakers.
pub const AUTO_INCIDENT_SHARE: f64 = 0.5;
/// A success this recent counts as fully stable.
const STABLE_WITHIN_MS: Millis = 10 * 60_000;
/// A candidate unused this long is fully fresh.
const FRESH_AFTER_MS: Millis = 60_000;
const NEUTRAL: f64 = 0.5;

/// Pool-wide bounds for the relative factors.
#[derive(Debug, Clone, Copy)]
pub(super) struct PoolStats {
    cost: Option<(f64, f64)>,
    latency: Option<(f64, f64)>,
}

impl PoolStats {
    pub(super) fn of<'a>(pool: impl Iterator<Item = Entry<'a>>) -> Self {
        let mut cost: Option<(f64, f64)> = None;
        let mut latency: Option<(f64, f64)> = None;
        let widen = |b: &mut Option<(f64, f64)>, x: Option<f64>| {
            if let Some(x) = x.filter(|v| v.is_finite() && *v >= 0.0) {
                *b = Some(b.map_or((x, x), |(lo, hi)| (lo.min(x), hi.max(x))));
            }
        };
        for (_, c) in pool {
            widen(&mut cost, c.cost);
            widen(&mut latency, c.latency_ms);
        }
        Self { cost, latency }
    }
}

/// 1 at the low bound, 0 at the high bound; neutral when unknown or when all are equal.
fn relative(x: Option<f64>, bounds: Option<(f64, f64)>) -> f64 {
    let (Some(x), Some((lo, hi))) = (x.filter(|v| v.is_finite() && *v >= 0.0), bounds) else {
        return NEUTRAL;
    };
    if hi - lo <= f64::EPSILON {
        1.0
    } else {
        (1.0 - (x - lo) / (hi - lo)).clamp(0.0, 1.0)
    }
}

pub(super) fn incident(ctx: &SelectCtx) -> bool {
    ctx.open_breaker_share.is_finite() && ctx.open_breaker_share > AUTO_INCIDENT_SHARE
}

/// The auto score of `c` in `0..=1` (higher is better).
pub(super) fn score(c: &Candidate, stats: &PoolStats, ctx: &SelectCtx) -> f64 {
    let w = AUTO_WEIGHTS;
    let (health_w, cost_w) = if incident(ctx) {
        (w.health + w.cost, 0.0)
    } else {
        (w.health, w.cost)
    };
    let now = ctx.now;
    let health = if c.healthy { 1.0 } else { 0.25 } / f64::from(1 + c.backoff_level.min(8));
    let quota = c.remaining().unwrap_or(NEUTRAL);
    let cost = relative(c.cost, stats.cost);
    let latency = relative(c.latency_ms, stats.latency);
    let task_fit = match fits(c, ctx.prompt_tokens) {
        Some(true) => 1.0,
        Some(false) => 0.0,
        None => NEUTRAL,
    };
    let stability = if c.backoff_level > 0 {
        0.0
    } else {
        match c.last_success_at {
            Some(at) if now.saturating_sub(at) <= STABLE_WITHIN_MS => 1.0,
            Some(_) => 0.75,
            None => NEUTRAL,
        }
    };
    let tier = match c.tier {
        Some(ModelTier::Premium) => 1.0,
        Some(ModelTier::Standard) => 0.7,
        Some(ModelTier::Economy) => 0.4,
        None => NEUTRAL,
    };
    let load = 1.0 / f64::from(1 + c.in_flight.min(64));
    let reset = reset_aware_score(c.quota.as_ref(), now, &ctx.reset_aware);
    let priority = 1.0 / f64::from(1 + c.priority.min(64));
    let freshness = match c.last_used_at {
        None => 1.0,
        Some(at) => (now.saturating_sub(at) as f64 / FRESH_AFTER_MS as f64).min(1.0),
    };
    health_w * health
        + w.quota * quota
        + cost_w * cost
        + w.latency * latency
        + w.task_fit * task_fit
        + w.minor * (stability + tier + load + reset + priority + freshness)
}

/// Higher score first, excluded ones last, ties by priority.
pub(super) fn cmp<'s>(
    stats: &'s PoolStats,
    ctx: &'s SelectCtx,
) -> impl Fn(Entry<'_>, Entry<'_>) -> Ordering + 's {
    move |a, b| {
        let (sa, sb) = (score(a.1, stats, ctx), score(b.1, stats, ctx));
        let excluded = |s: f64| s < AUTO_EXCLUDE_BELOW;
        excluded(sa)
            .cmp(&excluded(sb))
            .then(sb.total_cmp(&sa))
            .then_with(|| Rank::Priority.cmp(a, b))
    }
}

/// The auto choice: the best score, or with [`AUTO_EXPLORATION`] probability (not in incident
/// mode) a uniform pick among the candidates that are not excluded. One RNG draw (two when
/// exploring) per non-empty pool.
pub(super) fn best<'a, R: Rng + ?Sized>(
    pool: impl Iterator<Item = Entry<'a>> + Clone,
    ctx: &SelectCtx,
    rng: &mut R,
) -> Option<usize> {
    let stats = PoolStats::of(pool.clone());
    let top = pool.clone().min_by(|a, b| cmp(&stats, ctx)(*a, *b))?;
    let explore = rng.random::<f64>() < AUTO_EXPLORATION;
    if !explore || incident(ctx) {
        return Some(top.0);
    }
    let viable = pool.filter(|e| score(e.1, &stats, ctx) >= AUTO_EXCLUDE_BELOW);
    let n = viable.clone().count();
    if n == 0 {
        return Some(top.0);
    }
    viable.clone().nth(rng.random_range(0..n)).map(|e| e.0)
}

/// Every candidate's auto score, in slice order, for the caller's [`AutoExclusion`] updates and
/// for admin views.
pub fn auto_scores(cands: &[Candidate], ctx: &SelectCtx, out: &mut Vec<f64>) {
    let stats = PoolStats::of(cands.iter().enumerate());
    out.clear();
    out.extend(cands.iter().map(|c| score(c, &stats, ctx)));
}

/// A candidate's timed exclusion from `auto`, owned by the caller (one per target or
/// connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoExclusion {
    /// Excluded while `now < until`.
    pub until: Millis,
    /// Consecutive exclusions; each doubles the next one's length.
    pub strikes: u32,
}

impl AutoExclusion {
    pub fn active(&self, now: Millis) -> bool {
        now < self.until
    }

    /// The exclusion after scoring `score` at `now`: a score below
    /// [`AUTO_EXCLUDE_BELOW`] (re)starts it for 5 min × 2^(strikes) up to 30 min; a passing
    /// score after the exclusion ended clears it. While it is active nothing changes, so a
    /// candidate cannot be re-scored into a longer exclusion without being tried.
    pub fn after(prev: Option<Self>, score: f64, now: Millis) -> Option<Self> {
        if let Some(p) = prev
            && p.active(now)
        {
            return Some(p);
        }
        if score.is_nan() || score >= AUTO_EXCLUDE_BELOW {
            return None;
        }
        let strikes = prev.map_or(0, |p| p.strikes).saturating_add(1);
        let len = AUTO_EXCLUSION_MS
            .saturating_mul(1 << (strikes - 1).min(16))
            .min(AUTO_EXCLUSION_MAX_MS);
        Some(Self {
            until: now.saturating_add(len),
            strikes,
        })
    }
}
