//! Routing strategies: how a combo orders its targets and how a provider picks a connection.
//!
//! Every strategy is a pure function of the candidate views, the caller-owned
//! [`StrategyState`], a [`SelectCtx`] (the clock among other things) and the caller's RNG: no
//! I/O, no clock reads, no hidden globals, so a seeded RNG replays any decision. Two entry
//! points share one implementation per strategy:
//!
//! - [`order`] writes the full fallback order (combos try targets in it);
//! - [`pick`] returns the first of that order, in O(n) over the slice and without allocating
//!   (connection selection runs it on every request).
//!
//! Invariants, checked by property tests: `order` is a permutation of the candidates' `index`
//! values; with the same state and RNG state, `pick` returns `order`'s first element for every
//! strategy; an empty slice yields `None` and touches neither state nor RNG. Candidates arrive
//! already eligible; unhealthy ones (`healthy == false`) are ordered after all healthy ones
//! (each group in the strategy's own order) and picked only when no healthy one is left.

mod auto;
mod candidate;
mod context;
mod ewma;
mod hash;
mod name;
mod observed;
mod quota;
mod quota_share;
mod random;
mod ranked;
mod rotation;
mod session_pin;

#[cfg(test)]
mod draw_tests;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod quota_strategy_tests;
#[cfg(test)]
mod tests;

use rand::Rng;

pub use auto::{
    AUTO_EXCLUDE_BELOW, AUTO_EXCLUSION_MAX_MS, AUTO_EXCLUSION_MS, AUTO_EXPLORATION,
    AUTO_INCIDENT_SHARE, AUTO_WEIGHTS, AutoExclusion, AutoWeights, auto_scores,
};
pub use candidate::{
    Candidate, DEFAULT_STICKY_LIMIT, ModelTier, QuotaView, ResetAwareWeights, SelectCtx,
    StrategyState,
};
pub use ewma::Ewma;
pub use hash::{fmix64, fnv1a64, rendezvous_weight, stable_hash};
pub use name::{Strategy, UnknownStrategy};
pub use observed::{AttemptOutcome, DEFAULT_LATENCY_DECAY_MS, Observed};
pub use quota::reset_aware_score;
pub use quota_share::{Deficits as QuotaShareDeficits, QUOTA_SHARE_SLOTS};
pub use random::health_score;
pub use session_pin::{COMBO_FAILURE_THRESHOLD, SessionPins};

use ranked::{Entry, Rank};

/// Which candidates a selection considers: healthy ones first, the rest only as a fallback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tier {
    All,
    Healthy,
}

impl Tier {
    fn of(cands: &[Candidate]) -> Self {
        let any_healthy = cands.iter().any(|c| c.healthy);
        let any_unhealthy = cands.iter().any(|c| !c.healthy);
        if any_healthy && any_unhealthy {
            Self::Healthy
        } else {
            Self::All
        }
    }
}

/// The first candidate of `strategy`'s order: its caller `index`, or `None` for an empty slice.
///
/// O(n) in `cands.len()` and allocation-free. Stateful strategies advance `state` by one
/// selection.
pub fn pick<R: Rng + ?Sized>(
    strategy: Strategy,
    cands: &[Candidate],
    state: &mut StrategyState,
    ctx: &SelectCtx,
    rng: &mut R,
) -> Option<usize> {
    let tier = Tier::of(cands);
    let pool = cands
        .iter()
        .enumerate()
        .filter(move |e| tier == Tier::All || e.1.healthy);
    let pos = choose(strategy, pool, state, ctx, rng)?;
    cands.get(pos).map(|c| c.index)
}

/// The full fallback order of `strategy`, as caller indices, into `out` (cleared first).
///
/// Healthy candidates come first, each group in the strategy's order. Stateful strategies
/// advance `state` by one selection (the first element); ordering the unhealthy group does not
/// advance it.
pub fn order<R: Rng + ?Sized>(
    strategy: Strategy,
    cands: &[Candidate],
    state: &mut StrategyState,
    ctx: &SelectCtx,
    rng: &mut R,
    out: &mut Vec<usize>,
) {
    out.clear();
    match Tier::of(cands) {
        Tier::All => {
            out.extend(0..cands.len());
            arrange(strategy, cands, out, state, ctx, rng);
        }
        Tier::Healthy => {
            out.extend((0..cands.len()).filter(|&p| cands[p].healthy));
            arrange(strategy, cands, out, state, ctx, rng);
            let split = out.len();
            out.extend((0..cands.len()).filter(|&p| !cands[p].healthy));
            let mut scratch = *state;
            arrange(strategy, cands, &mut out[split..], &mut scratch, ctx, rng);
        }
    }
    for slot in out.iter_mut() {
        *slot = cands[*slot].index;
    }
}

/// The candidates at `positions`, as entries.
fn entries<'a>(
    cands: &'a [Candidate],
    positions: &'a [usize],
) -> impl Iterator<Item = Entry<'a>> + Clone + 'a {
    positions
        .iter()
        .filter_map(move |&p| cands.get(p).map(|c| (p, c)))
}

/// One selection over `pool`, as a slice position. Both entry points go through here, which is
/// what makes `pick == order[0]`.
fn choose<'a, R: Rng + ?Sized>(
    strategy: Strategy,
    pool: impl Iterator<Item = Entry<'a>> + Clone,
    state: &mut StrategyState,
    ctx: &SelectCtx,
    rng: &mut R,
) -> Option<usize> {
    let ranked = |rank: Rank| ranked::best(pool.clone(), move |a, b| rank.cmp(a, b));
    match strategy {
        // The multi-call strategies use their targets in configured order.
        Strategy::Priority | Strategy::Fusion | Strategy::Pipeline | Strategy::ContextRelay => {
            ranked(Rank::Config)
        }
        Strategy::FillFirst => ranked(Rank::Priority),
        Strategy::CostOptimized => ranked(Rank::Cost),
        Strategy::LeastUsed => ranked(Rank::LeastUsed),
        Strategy::LatencyOptimized => ranked(Rank::Latency),
        Strategy::Headroom => ranked(Rank::Headroom),
        Strategy::Lkgp => ranked(Rank::LastGood(state.last_good)),
        Strategy::CacheOptimized => ranked(Rank::Rendezvous(ctx.cache_key)),
        Strategy::Random => random::uniform(pool, rng),
        Strategy::Weighted => random::weighted(pool, rng),
        Strategy::P2c => random::p2c(pool, rng),
        Strategy::ResetAware => quota::best(pool, ctx.now, &ctx.reset_aware),
        Strategy::RoundRobin => rotation::round_robin(pool, state, ctx),
        Strategy::StrictRandom => rotation::strict_random(pool, state, rng),
        Strategy::ResetWindow => {
            ranked::best(pool, quota::reset_window_cmp(ctx.now, &ctx.reset_aware))
        }
        Strategy::QuotaWeighted => quota::weighted(pool, rng),
        Strategy::Auto => auto::best(pool, ctx, rng),
        Strategy::ContextOptimized => ranked::best(pool, context::fit_cmp(ctx.prompt_tokens)),
        Strategy::QuotaShare => quota_share::pick(pool, &mut state.quota_share, rng),
    }
}

/// Reorder `positions` (slice positions into `cands`) into `strategy`'s order: the selection
/// first, then the rest.
fn arrange<R: Rng + ?Sized>(
    strategy: Strategy,
    cands: &[Candidate],
    positions: &mut [usize],
    state: &mut StrategyState,
    ctx: &SelectCtx,
    rng: &mut R,
) {
    let Some(first) = choose(strategy, entries(cands, positions), state, ctx, rng) else {
        return;
    };
    if let Some(k) = positions.iter().position(|&p| p == first) {
        positions[..=k].rotate_right(1);
    }
    let (head, rest) = positions.split_at_mut(1);
    let sort = |rest: &mut [usize], cmp: &dyn Fn(Entry<'_>, Entry<'_>) -> std::cmp::Ordering| {
        rest.sort_by(|&a, &b| cmp((a, &cands[a]), (b, &cands[b])));
    };
    match strategy {
        Strategy::Random => random::shuffle_rest(rest, rng),
        Strategy::Weighted => {
            let uniform = head
                .iter()
                .chain(rest.iter())
                .all(|&p| cands[p].weight == 0);
            random::weighted_rest(cands, uniform, rest, rng);
        }
        Strategy::P2c => sort(rest, &random::health_cmp),
        Strategy::RoundRobin => sort(rest, &rotation::rotation_cmp(state.sticky)),
        Strategy::StrictRandom => sort(rest, &rotation::deck_cmp(state.deck)),
        Strategy::ResetAware => {
            for k in 0..rest.len() {
                let tail = &mut rest[k..];
                let next = quota::best(entries(cands, tail), ctx.now, &ctx.reset_aware);
                if let Some(j) = tail.iter().position(|&p| Some(p) == next) {
                    tail[..=j].rotate_right(1);
                }
            }
        }
        Strategy::Priority | Strategy::Fusion | Strategy::Pipeline | Strategy::ContextRelay => {
            sort(rest, &|a, b| Rank::Config.cmp(a, b));
        }
        Strategy::FillFirst => sort(rest, &|a, b| Rank::Priority.cmp(a, b)),
        Strategy::CostOptimized => sort(rest, &|a, b| Rank::Cost.cmp(a, b)),
        Strategy::LeastUsed => sort(rest, &|a, b| Rank::LeastUsed.cmp(a, b)),
        Strategy::LatencyOptimized => sort(rest, &|a, b| Rank::Latency.cmp(a, b)),
        Strategy::Headroom => sort(rest, &|a, b| Rank::Headroom.cmp(a, b)),
        Strategy::Lkgp => sort(rest, &|a, b| Rank::LastGood(state.last_good).cmp(a, b)),
        Strategy::CacheOptimized => {
            sort(rest, &|a, b| Rank::Rendezvous(ctx.cache_key).cmp(a, b));
        }
        Strategy::ResetWindow => sort(rest, &quota::reset_window_cmp(ctx.now, &ctx.reset_aware)),
        Strategy::QuotaWeighted => sort(rest, &|a, b| Rank::Headroom.cmp(a, b)),
        Strategy::Auto => {
            let stats = auto::PoolStats::of(entries(cands, head).chain(entries(cands, rest)));
            sort(rest, &auto::cmp(&stats, ctx));
        }
        Strategy::ContextOptimized => sort(rest, &context::fit_cmp(ctx.prompt_tokens)),
        Strategy::QuotaShare => sort(rest, &quota_share::rest_cmp(state.quota_share)),
    }
}
