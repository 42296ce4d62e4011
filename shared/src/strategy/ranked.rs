//! Deterministic strategies: a total order over the candidates, first element wins.
//!
//! Every comparator ends with the caller index and then the slice position, so orders are total
//! and `pick` (the minimum) is always the first element of `order` (the sort).

use std::cmp::Ordering;

use super::candidate::Candidate;
use super::hash::rendezvous_weight;

/// A candidate with its position in the slice handed to `pick`/`order`.
pub(super) type Entry<'a> = (usize, &'a Candidate);

/// Headroom assumed when a candidate reports no quota: neither preferred nor avoided.
const NEUTRAL_REMAINING: f64 = 0.5;

#[derive(Debug, Clone, Copy)]
pub(super) enum Rank {
    /// `priority`: the configured order.
    Config,
    /// `fill-first`: lowest priority value, then configured order.
    Priority,
    /// `cost-optimized`: cheapest known cost, then priority.
    Cost,
    /// `least-used`: oldest (or no) last use, then fewest in flight, then priority.
    LeastUsed,
    /// `latency-optimized`: lowest projected latency, then priority.
    Latency,
    /// `headroom`: most remaining quota, then priority.
    Headroom,
    /// `lkgp`: the remembered last-known-good, then the most recent success, then priority.
    LastGood(Option<u64>),
    /// `cache-optimized`: highest rendezvous weight of the key; no key = `fill-first`.
    Rendezvous(Option<u64>),
}

impl Rank {
    pub(super) fn cmp(self, a: Entry<'_>, b: Entry<'_>) -> Ordering {
        let (ca, cb) = (a.1, b.1);
        match self {
            Self::Config => ca.index.cmp(&cb.index).then(a.0.cmp(&b.0)),
            Self::Priority => ca
                .priority
                .cmp(&cb.priority)
                .then_with(|| Self::Config.cmp(a, b)),
            Self::Cost => ca
                .cost_key()
                .total_cmp(&cb.cost_key())
                .then_with(|| Self::Priority.cmp(a, b)),
            Self::LeastUsed => ca
                .last_used_at
                .cmp(&cb.last_used_at)
                .then(ca.in_flight.cmp(&cb.in_flight))
                .then_with(|| Self::Priority.cmp(a, b)),
            Self::Latency => ca
                .latency_key()
                .total_cmp(&cb.latency_key())
                .then_with(|| Self::Priority.cmp(a, b)),
            Self::Headroom => headroom(cb)
                .total_cmp(&headroom(ca))
                .then_with(|| Self::Priority.cmp(a, b)),
            Self::LastGood(good) => {
                let remembered = |c: &Candidate| good == Some(c.id_hash);
                remembered(cb)
                    .cmp(&remembered(ca))
                    .then(cb.last_success_at.cmp(&ca.last_success_at))
                    .then_with(|| Self::Priority.cmp(a, b))
            }
            Self::Rendezvous(None) => Self::Priority.cmp(a, b),
            Self::Rendezvous(Some(key)) => rendezvous_weight(key, cb.id_hash)
                .cmp(&rendezvous_weight(key, ca.id_hash))
                .then_with(|| Self::Config.cmp(a, b)),
        }
    }
}

fn headroom(c: &Candidate) -> f64 {
    c.remaining().unwrap_or(NEUTRAL_REMAINING)
}

/// The position of the smallest entry under `cmp` (O(n), no allocation).
pub(super) fn best<'a>(
    pool: impl Iterator<Item = Entry<'a>>,
    cmp: impl Fn(Entry<'a>, Entry<'a>) -> Ordering,
) -> Option<usize> {
    pool.min_by(|a, b| cmp(*a, *b)).map(|e| e.0)
}
