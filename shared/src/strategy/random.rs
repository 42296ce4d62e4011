//! Randomised strategies: `random`, `weighted` and `p2c`.
//!
//! Randomness comes only from the caller's RNG, so a seeded RNG makes every choice
//! reproducible. `pick` draws exactly what `order` draws for its first element, so with the same
//! RNG state `pick` equals `order[0]` here too.

use std::cmp::Ordering;

use rand::Rng;
use rand::seq::SliceRandom;

use super::candidate::Candidate;
use super::ranked::{Entry, Rank, best};

/// Uniform choice.
pub(super) fn uniform<'a, R: Rng + ?Sized>(
    mut pool: impl Iterator<Item = Entry<'a>> + Clone,
    rng: &mut R,
) -> Option<usize> {
    let n = pool.clone().count();
    if n == 0 {
        return None;
    }
    pool.nth(rng.random_range(0..n)).map(|e| e.0)
}

/// `random` after its first element: a uniform shuffle of the rest.
pub(super) fn shuffle_rest<R: Rng + ?Sized>(rest: &mut [usize], rng: &mut R) {
    rest.shuffle(rng);
}

/// Weighted choice by `weight`; a pool whose weights are all zero is uniform.
pub(super) fn weighted<'a, R: Rng + ?Sized>(
    pool: impl Iterator<Item = Entry<'a>> + Clone,
    rng: &mut R,
) -> Option<usize> {
    let total: u64 = pool.clone().map(|e| u64::from(e.1.weight)).sum();
    if total == 0 {
        return uniform(pool, rng);
    }
    let mut r = rng.random_range(0..total);
    for (pos, c) in pool {
        let w = u64::from(c.weight);
        if r < w {
            return Some(pos);
        }
        r -= w;
    }
    None
}

/// `weighted` after its first element: weighted sampling without replacement, one draw per
/// slot (O(n²), n is a handful). Zero-weight candidates follow in configured order once the
/// weighted ones are used up, unless the whole pool is zero-weight (then uniform).
pub(super) fn weighted_rest<R: Rng + ?Sized>(
    cands: &[Candidate],
    uniform: bool,
    rest: &mut [usize],
    rng: &mut R,
) {
    let weight = |p: usize| {
        if uniform {
            1
        } else {
            u64::from(cands[p].weight)
        }
    };
    for k in 0..rest.len() {
        let tail = &mut rest[k..];
        let total: u64 = tail.iter().map(|&p| weight(p)).sum();
        if total == 0 {
            tail.sort_by(|&a, &b| Rank::Config.cmp((a, &cands[a]), (b, &cands[b])));
            return;
        }
        let mut r = rng.random_range(0..total);
        let mut chosen = 0;
        for (j, &p) in tail.iter().enumerate() {
            if r < weight(p) {
                chosen = j;
                break;
            }
            r -= weight(p);
        }
        tail[..=chosen].rotate_right(1);
    }
}

/// Power of two choices: two distinct candidates drawn uniformly, the healthier wins. Pools of
/// one or two are compared outright (no draw).
pub(super) fn p2c<'a, R: Rng + ?Sized>(
    pool: impl Iterator<Item = Entry<'a>> + Clone,
    rng: &mut R,
) -> Option<usize> {
    let n = pool.clone().count();
    if n <= 2 {
        return best(pool, health_cmp);
    }
    let i = rng.random_range(0..n);
    let mut j = rng.random_range(0..n - 1);
    if j >= i {
        j += 1;
    }
    let a = pool.clone().nth(i)?;
    let b = pool.clone().nth(j)?;
    Some(if health_cmp(a, b).is_le() { a.0 } else { b.0 })
}

/// Lower is healthier. Mirrors the reference's p2c score on the signals a view carries: load in
/// flight, rate-limit backoff, quota headroom (unknown counts as a small penalty), stickiness and
/// a slight priority bias.
pub fn health_score(c: &Candidate) -> u32 {
    let load = c.in_flight.saturating_mul(4).min(40);
    let backoff = c.backoff_level.saturating_mul(8).min(40);
    let quota = match c.remaining() {
        None => 4,
        Some(r) => {
            // Whole percent points used, /8 rounded: 0 at full quota, 13 when empty.
            let used = ((1.0 - r) * 100.0 / 8.0).round() as u32;
            let low = if r <= 0.10 {
                10
            } else if r <= 0.25 {
                4
            } else {
                0
            };
            used + low
        }
    };
    let streak = c.consecutive_use_count.saturating_mul(2).min(12);
    let bias = c.priority.saturating_sub(1).min(6);
    load + backoff + quota + streak + bias
}

/// p2c's comparison, also the order of the candidates after the winner: score, then more
/// headroom, then priority.
pub(super) fn health_cmp(a: Entry<'_>, b: Entry<'_>) -> Ordering {
    let room = |c: &Candidate| c.remaining().unwrap_or(-1.0);
    health_score(a.1)
        .cmp(&health_score(b.1))
        .then(room(b.1).total_cmp(&room(a.1)))
        .then_with(|| Rank::Priority.cmp(a, b))
}
