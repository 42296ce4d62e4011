//! Stateful rotations: `round-robin` (sticky) and `strict-random` (a deck).
//!
//! Round-robin stays on the current candidate while it has been chosen fewer than
//! `sticky_limit` times in a row, then rotates to the least recently used one, lower backoff
//! level first (a candidate that was just rate limited is not re-selected right after its
//! cooldown). Ties on usage go to the next candidate after the current one in configured order,
//! so a caller that does not track `last_used_at` still gets an even rotation. With an empty
//! state (a fresh node) the current candidate is the most recently used one of the views and its
//! `consecutive_use_count`, which is the reference's rule exactly.
//!
//! Strict-random deals every candidate once per cycle. The deck is not a list: a per-cycle
//! random seed permutes candidates by `fmix64(id_hash ^ seed)` and the state keeps the last
//! position dealt, so a deal is O(n), allocation-free, and survives candidates leaving and
//! rejoining the pool mid-cycle.

use std::cmp::Ordering;

use rand::Rng;

use super::candidate::{Candidate, Deck, SelectCtx, Sticky, StrategyState};
use super::hash::fmix64;
use super::ranked::{Entry, Rank};

pub(super) fn round_robin<'a>(
    pool: impl Iterator<Item = Entry<'a>> + Clone,
    state: &mut StrategyState,
    ctx: &SelectCtx,
) -> Option<usize> {
    let current = state.sticky.or_else(|| most_recent(pool.clone()));
    if let Some(cur) = current.filter(|s| !ctx.fallback && s.count < ctx.sticky_limit.max(1))
        && let Some((pos, c)) = pool.clone().find(|e| e.1.id_hash == cur.id_hash)
    {
        let count = cur.count.saturating_add(1);
        state.sticky = Some(Sticky {
            id_hash: c.id_hash,
            index: c.index,
            count,
        });
        return Some(pos);
    }
    let cmp = rotation_cmp(current);
    let others = pool
        .clone()
        .filter(|e| current.is_none_or(|s| s.id_hash != e.1.id_hash));
    let (pos, c) = others
        .min_by(|a, b| cmp(*a, *b))
        .or_else(|| pool.min_by(|a, b| cmp(*a, *b)))?;
    state.sticky = Some(Sticky {
        id_hash: c.id_hash,
        index: c.index,
        count: 1,
    });
    Some(pos)
}

/// The most recently used candidate of the views, as the reference derives "current".
fn most_recent<'a>(pool: impl Iterator<Item = Entry<'a>>) -> Option<Sticky> {
    pool.filter(|e| e.1.last_used_at.is_some())
        .max_by(|a, b| {
            a.1.last_used_at
                .cmp(&b.1.last_used_at)
                .then_with(|| Rank::Priority.cmp(*b, *a))
        })
        .map(|(_, c)| Sticky {
            id_hash: c.id_hash,
            index: c.index,
            count: c.consecutive_use_count,
        })
}

/// Rotation order relative to `current`: lower backoff, least recently used (never used first),
/// then the candidates after `current` in configured order before those at or before it.
pub(super) fn rotation_cmp(current: Option<Sticky>) -> impl Fn(Entry<'_>, Entry<'_>) -> Ordering {
    let after = current.map(|s| s.index);
    move |a, b| {
        let wraps = |c: &Candidate| after.is_some_and(|i| c.index <= i);
        a.1.backoff_level
            .cmp(&b.1.backoff_level)
            .then(a.1.last_used_at.cmp(&b.1.last_used_at))
            .then(wraps(a.1).cmp(&wraps(b.1)))
            .then_with(|| Rank::Config.cmp(a, b))
    }
}

fn deck_pos(seed: u64, c: &Candidate) -> (u64, usize) {
    (fmix64(c.id_hash ^ seed), c.index)
}

pub(super) fn strict_random<'a, R: Rng + ?Sized>(
    pool: impl Iterator<Item = Entry<'a>> + Clone,
    state: &mut StrategyState,
    rng: &mut R,
) -> Option<usize> {
    if let Some(deck) = state.deck {
        let next = pool
            .clone()
            .map(|(pos, c)| (deck_pos(deck.seed, c), pos))
            .filter(|(k, _)| deck.last.is_none_or(|last| *k > last))
            .min();
        if let Some((k, pos)) = next {
            state.deck = Some(Deck {
                seed: deck.seed,
                last: Some(k),
            });
            return Some(pos);
        }
    }
    // Cycle over (or first use): reshuffle. An empty pool keeps the current deck.
    pool.clone().next()?;
    let seed = rng.random::<u64>();
    let (k, pos) = pool.map(|(pos, c)| (deck_pos(seed, c), pos)).min()?;
    state.deck = Some(Deck {
        seed,
        last: Some(k),
    });
    Some(pos)
}

/// Deck order: the rest of the current cycle, then the candidates already dealt in it.
pub(super) fn deck_cmp(deck: Option<Deck>) -> impl Fn(Entry<'_>, Entry<'_>) -> Ordering {
    move |a, b| {
        let key = |e: Entry<'_>| {
            let seed = deck.map_or(0, |d| d.seed);
            let k = deck_pos(seed, e.1);
            let dealt = deck.and_then(|d| d.last).is_some_and(|last| k <= last);
            (dealt, k, e.0)
        };
        key(a).cmp(&key(b))
    }
}
