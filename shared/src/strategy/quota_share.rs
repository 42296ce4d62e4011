//! `quota-share`: deficit round robin (DRR) with power of two choices (P2C) over a shared
//! subscription pool.
//!
//! Why: several client keys share a few subscription accounts that each accept only one to
//! three requests at a time. Plain weighted random lets a burst land on one account; DRR
//! serves every member its `weight` per round, exactly, and P2C spreads the load within a
//! round to the member with the lower in-flight/cap ratio.
//!
//! The rules, as the reference's `selectQuotaShareTarget`:
//!
//! - each member has a deficit counter (requests it is owed); a **round** adds its quantum,
//!   its `weight` (a weight of 0 counts as 1: DRR needs a positive quantum), to every member.
//!   Rounds are added only when no contender is owed a request, as many as make one owed;
//! - the **contenders** are the members under their `max_concurrent` cap. A member at its cap
//!   is only de-prioritised, never refused: when every member is capped, all contend
//!   (fail-open — the per-connection serialisation queue is what holds the line);
//! - P2C: two contenders drawn among those owed a request; the one with the lower
//!   `in_flight / max_concurrent` wins (an uncapped member counts against a cap of 1), ties
//!   to the larger deficit, then to the first drawn. Pools of one or two are compared outright;
//! - the pick is charged one request.
//!
//! Deficits stay within `-quantum..=quantum`, so a member that was capped for a long time
//! bursts at most one round's worth when it frees up. The table is fixed-size (`Copy`, no
//! allocation): [`QUOTA_SHARE_SLOTS`] members are tracked; a slot whose member left the pool is
//! reused. Members past the table have no deficit memory and are picked only when every
//! tracked member is at its cap.

use std::cmp::Ordering;

use rand::Rng;

use super::candidate::Candidate;
use super::ranked::{Entry, Rank};

/// Members whose deficits a combo remembers.
pub const QUOTA_SHARE_SLOTS: usize = 16;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Slot {
    id_hash: u64,
    deficit: i32,
    live: bool,
}

const EMPTY: Slot = Slot {
    id_hash: 0,
    deficit: 0,
    live: false,
};

/// The DRR deficit counters of one combo, keyed by member `id_hash` (part of
/// [`super::StrategyState`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deficits {
    slots: [Slot; QUOTA_SHARE_SLOTS],
}

impl Default for Deficits {
    fn default() -> Self {
        Self::new()
    }
}

impl Deficits {
    pub const fn new() -> Self {
        Self {
            slots: [EMPTY; QUOTA_SHARE_SLOTS],
        }
    }

    /// The member's deficit, `None` when it has no slot.
    pub fn get(&self, id_hash: u64) -> Option<i32> {
        self.slots
            .iter()
            .find(|s| s.live && s.id_hash == id_hash)
            .map(|s| s.deficit)
    }

    fn deficit(&self, id_hash: u64) -> i32 {
        self.get(id_hash).unwrap_or(0)
    }

    fn update(&mut self, id_hash: u64, f: impl FnOnce(i32) -> i32) {
        if let Some(s) = self
            .slots
            .iter_mut()
            .find(|s| s.live && s.id_hash == id_hash)
        {
            s.deficit = f(s.deficit);
        }
    }

    /// Gives every pool member a slot while there is room: a free slot, else one whose member
    /// is not in the pool (it left the combo or is ineligible now).
    fn admit<'a>(&mut self, pool: impl Iterator<Item = Entry<'a>> + Clone) {
        for (_, c) in pool.clone() {
            if self.get(c.id_hash).is_some() {
                continue;
            }
            let free = self.slots.iter().position(|s| !s.live).or_else(|| {
                self.slots
                    .iter()
                    .position(|s| !pool.clone().any(|e| e.1.id_hash == s.id_hash))
            });
            if let Some(k) = free {
                self.slots[k] = Slot {
                    id_hash: c.id_hash,
                    deficit: 0,
                    live: true,
                };
            }
        }
    }
}

/// A member's quantum per round.
fn quantum(c: &Candidate) -> i32 {
    i32::try_from(c.weight.max(1)).unwrap_or(i32::MAX)
}

/// At (or over) its `max_concurrent`; 0 = uncapped.
pub(super) fn at_cap(c: &Candidate) -> bool {
    c.max_concurrent > 0 && c.in_flight >= c.max_concurrent
}

/// `in_flight / max_concurrent`, compared exactly (an uncapped member against a cap of 1).
fn load_cmp(a: &Candidate, b: &Candidate) -> Ordering {
    let lhs = u64::from(a.in_flight) * u64::from(b.max_concurrent.max(1));
    let rhs = u64::from(b.in_flight) * u64::from(a.max_concurrent.max(1));
    lhs.cmp(&rhs)
}

/// Rounds until a member with deficit `d` is owed a request (deficit ≥ 1).
fn rounds_needed(d: i32, q: i32) -> i64 {
    let short = 1 - i64::from(d);
    if short <= 0 {
        0
    } else {
        (short + i64::from(q) - 1) / i64::from(q)
    }
}

/// One selection; charges the pick one request in `table`.
pub(super) fn pick<'a, R: Rng + ?Sized>(
    pool: impl Iterator<Item = Entry<'a>> + Clone,
    table: &mut Deficits,
    rng: &mut R,
) -> Option<usize> {
    pool.clone().next()?;
    table.admit(pool.clone());
    let open = pool.clone().any(|e| !at_cap(e.1));
    let contenders = pool.clone().filter(move |e| !open || !at_cap(e.1));
    let rounds = contenders
        .clone()
        .map(|(_, c)| rounds_needed(table.deficit(c.id_hash), quantum(c)))
        .min()
        .unwrap_or(0);
    if rounds > 0 {
        for (_, c) in pool.clone() {
            let q = quantum(c);
            let add = i64::from(q).saturating_mul(rounds);
            table.update(c.id_hash, |d| {
                i32::try_from((i64::from(d) + add).min(i64::from(q))).unwrap_or(q)
            });
        }
    }
    let table_now = *table;
    let owed = contenders
        .clone()
        .filter(move |e| table_now.deficit(e.1.id_hash) >= 1);
    // Only members past the table can leave nobody owed; then every contender is.
    let chosen = if owed.clone().next().is_some() {
        p2c(owed, &table_now, rng)
    } else {
        p2c(contenders, &table_now, rng)
    }?;
    if let Some((_, c)) = pool.clone().find(|e| e.0 == chosen) {
        let q = quantum(c);
        table.update(c.id_hash, |d| (d - 1).max(-q));
    }
    Some(chosen)
}

/// Two distinct members drawn uniformly; the lower load ratio wins, then the larger deficit.
fn p2c<'a, R: Rng + ?Sized>(
    pool: impl Iterator<Item = Entry<'a>> + Clone,
    table: &Deficits,
    rng: &mut R,
) -> Option<usize> {
    let n = pool.clone().count();
    let (a, b) = match n {
        0 => return None,
        1 => return pool.clone().next().map(|e| e.0),
        2 => (pool.clone().next()?, pool.clone().nth(1)?),
        _ => {
            let i = rng.random_range(0..n);
            let mut j = rng.random_range(0..n - 1);
            if j >= i {
                j += 1;
            }
            (pool.clone().nth(i)?, pool.clone().nth(j)?)
        }
    };
    let cmp = load_cmp(a.1, b.1)
        .then_with(|| table.deficit(b.1.id_hash).cmp(&table.deficit(a.1.id_hash)));
    Some(if cmp.is_le() { a.0 } else { b.0 })
}

/// The order after the pick: members under their cap first, then the most owed, then the
/// lower load ratio, then configured order.
pub(super) fn rest_cmp(table: Deficits) -> impl Fn(Entry<'_>, Entry<'_>) -> Ordering {
    move |a, b| {
        at_cap(a.1)
            .cmp(&at_cap(b.1))
            .then_with(|| table.deficit(b.1.id_hash).cmp(&table.deficit(a.1.id_hash)))
            .then_with(|| load_cmp(a.1, b.1))
            .then_with(|| Rank::Config.cmp(a, b))
    }
}

#[cfg(test)]
#[path = "quota_share_tests.rs"]
mod tests;
