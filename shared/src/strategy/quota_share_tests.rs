use proptest::prelude::*;
use proptest::strategy::Strategy as _;
use rand::SeedableRng;
use rand::rngs::SmallRng;

use super::*;
use crate::strategy::{SelectCtx, Strategy, StrategyState, order, pick as pick_any};

fn member(index: usize, weight: u32, in_flight: u32, max_concurrent: u32) -> Candidate {
    Candidate {
        weight,
        in_flight,
        max_concurrent,
        ..Candidate::new(index, 1_000 + index as u64)
    }
}

/// How often each member is picked over `n` selections (views unchanged between picks).
fn counts(pool: &[Candidate], n: usize, seed: u64) -> Vec<usize> {
    let mut state = StrategyState::new();
    let mut rng = SmallRng::seed_from_u64(seed);
    let ctx = SelectCtx::new(0);
    let mut out = vec![0; pool.len()];
    for _ in 0..n {
        let got = pick_any(Strategy::QuotaShare, pool, &mut state, &ctx, &mut rng);
        let pos = pool.iter().position(|c| Some(c.index) == got).unwrap();
        out[pos] += 1;
    }
    out
}

#[test]
fn every_round_serves_each_member_its_weight_exactly() {
    let pool = [member(0, 1, 0, 0), member(1, 2, 0, 0), member(2, 3, 0, 0)];
    assert_eq!(counts(&pool, 30, 7), vec![5, 10, 15]);
    // Part of a round: nobody ahead by more than its quantum.
    assert_eq!(counts(&pool, 6, 9), vec![1, 2, 3]);
}

#[test]
fn a_weight_of_zero_counts_as_one() {
    let pool = [member(0, 0, 0, 0), member(1, 0, 0, 0)];
    assert_eq!(counts(&pool, 10, 1), vec![5, 5]);
}

#[test]
fn a_capped_member_waits_while_another_has_room() {
    // Member 0 is owed the most but is at its cap of 1.
    let pool = [member(0, 5, 1, 1), member(1, 1, 0, 1), member(2, 1, 0, 0)];
    let got = counts(&pool, 12, 3);
    assert_eq!(got[0], 0, "{got:?}");
    assert_eq!(got[1] + got[2], 12);
    assert_eq!(got[1], got[2], "the uncapped two share evenly: {got:?}");
}

#[test]
fn when_every_member_is_capped_all_still_contend() {
    let pool = [member(0, 1, 1, 1), member(1, 1, 2, 2)];
    assert_eq!(
        counts(&pool, 4, 5),
        vec![2, 2],
        "fail-open: nobody is refused"
    );
}

#[test]
fn p2c_prefers_the_lower_load_ratio_within_a_round() {
    // Both owed one request; member 1 carries 1 of 4, member 0 carries 1 of 2.
    let pool = [member(0, 1, 1, 2), member(1, 1, 1, 4)];
    let mut state = StrategyState::new();
    let mut rng = SmallRng::seed_from_u64(0);
    let ctx = SelectCtx::new(0);
    let first = pick_any(Strategy::QuotaShare, &pool, &mut state, &ctx, &mut rng);
    assert_eq!(first, Some(1));
    // Member 1 was charged: the next pick is member 0, the only one still owed.
    let second = pick_any(Strategy::QuotaShare, &pool, &mut state, &ctx, &mut rng);
    assert_eq!(second, Some(0));
    assert_eq!(state.quota_share_deficit(1_000), Some(0));
    assert_eq!(state.quota_share_deficit(1_001), Some(0));
}

#[test]
fn a_long_capped_member_bursts_at_most_one_round() {
    let capped = [member(0, 2, 1, 1), member(1, 1, 0, 0)];
    let mut state = StrategyState::new();
    let mut rng = SmallRng::seed_from_u64(0);
    let ctx = SelectCtx::new(0);
    for _ in 0..50 {
        pick_any(Strategy::QuotaShare, &capped, &mut state, &ctx, &mut rng);
    }
    assert_eq!(
        state.quota_share_deficit(1_000),
        Some(2),
        "clamped to its quantum"
    );
    let freed = [member(0, 2, 0, 1), member(1, 1, 0, 0)];
    let mut next = Vec::new();
    for _ in 0..6 {
        next.push(pick_any(
            Strategy::QuotaShare,
            &freed,
            &mut state,
            &ctx,
            &mut rng,
        ));
    }
    // The two owed requests first, then rounds as usual: member 1 is served within them
    // (unclamped, fifty rounds of owed requests would keep it out).
    assert_eq!(&next[..2], &[Some(0), Some(0)]);
    assert!(next.contains(&Some(1)), "{next:?}");
}

#[test]
fn order_puts_capped_members_last_and_owed_members_first() {
    let pool = [member(0, 1, 1, 1), member(1, 1, 0, 0), member(2, 3, 0, 0)];
    let mut state = StrategyState::new();
    let mut out = Vec::new();
    order(
        Strategy::QuotaShare,
        &pool,
        &mut state,
        &SelectCtx::new(0),
        &mut SmallRng::seed_from_u64(2),
        &mut out,
    );
    assert_eq!(out.last(), Some(&0), "{out:?}");
    // After the pick, member 2 (weight 3) is still owed more than member 1.
    if out[0] == 1 {
        assert_eq!(out, vec![1, 2, 0]);
    } else {
        assert_eq!(out, vec![2, 1, 0]);
    }
}

#[test]
fn a_full_table_reuses_the_slots_of_members_that_left() {
    let first: Vec<Candidate> = (0..QUOTA_SHARE_SLOTS).map(|i| member(i, 1, 0, 0)).collect();
    let second: Vec<Candidate> = (100..100 + QUOTA_SHARE_SLOTS)
        .map(|i| member(i, 1, 0, 0))
        .collect();
    let mut state = StrategyState::new();
    let mut rng = SmallRng::seed_from_u64(4);
    let ctx = SelectCtx::new(0);
    pick_any(Strategy::QuotaShare, &first, &mut state, &ctx, &mut rng);
    pick_any(Strategy::QuotaShare, &second, &mut state, &ctx, &mut rng);
    assert!(
        second
            .iter()
            .all(|c| state.quota_share_deficit(c.id_hash).is_some())
    );
    assert!(
        first
            .iter()
            .all(|c| state.quota_share_deficit(c.id_hash).is_none())
    );
}

#[test]
fn members_past_the_table_are_still_picked() {
    let pool: Vec<Candidate> = (0..QUOTA_SHARE_SLOTS + 4)
        .map(|i| member(i, 1, 0, 0))
        .collect();
    let got = counts(&pool, 200, 11);
    assert_eq!(got.iter().sum::<usize>(), 200);
    assert!(got[..QUOTA_SHARE_SLOTS].iter().all(|&n| n > 0), "{got:?}");
}

fn pool() -> impl proptest::strategy::Strategy<Value = Vec<Candidate>> {
    proptest::collection::vec((0u32..5, 0u32..4, 0u32..3), 1..8).prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (w, f, cap))| member(i, w, f, cap))
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Over many picks each member's share follows its weight: never off by more than one
    /// quantum (DRR serves exactly `weight` per full round). Caps are lifted for this one.
    #[test]
    fn shares_follow_weights_within_one_quantum(
        pool in pool(), n in 1usize..200, seed in any::<u64>(),
    ) {
        let pool: Vec<Candidate> =
            pool.into_iter().map(|c| Candidate { max_concurrent: 0, ..c }).collect();
        let got = counts(&pool, n, seed);
        let total: u64 = pool.iter().map(|c| u64::from(c.weight.max(1))).sum();
        for (c, &k) in pool.iter().zip(&got) {
            let q = f64::from(c.weight.max(1));
            let fair = n as f64 * q / total as f64;
            prop_assert!((k as f64 - fair).abs() <= q, "{got:?} for {pool:?}");
        }
    }

    /// A capped member (in_flight ≥ max_concurrent) is picked only when every member is.
    #[test]
    fn a_capped_member_is_picked_only_when_all_are_capped(
        pool in pool(), steps in 1usize..20, seed in any::<u64>(),
    ) {
        let mut state = StrategyState::new();
        let mut rng = SmallRng::seed_from_u64(seed);
        let ctx = SelectCtx::new(0);
        let all_capped = pool.iter().all(at_cap);
        for _ in 0..steps {
            let got = pick_any(Strategy::QuotaShare, &pool, &mut state, &ctx, &mut rng);
            let c = pool.iter().find(|c| Some(c.index) == got).unwrap();
            prop_assert!(!at_cap(c) || all_capped, "{c:?} of {pool:?}");
        }
        for c in &pool {
            let d = state.quota_share_deficit(c.id_hash).unwrap();
            let q = i32::try_from(c.weight.max(1)).unwrap();
            prop_assert!((-q..=q).contains(&d), "deficit {d} outside ±{q}");
        }
    }
}
