//! Example-based tests of the stateful and randomised strategies, and of the rules every
//! strategy shares (health tiers, empty pools).

use rand::SeedableRng;
use rand::rngs::{SmallRng, StdRng};

use super::*;

fn pool(n: usize) -> Vec<Candidate> {
    (0..n)
        .map(|i| Candidate::new(i, stable_hash(format!("conn-{i}").as_bytes())))
        .collect()
}

fn picks(s: Strategy, cands: &[Candidate], ctx: &SelectCtx, n: usize, seed: u64) -> Vec<usize> {
    let mut state = StrategyState::new();
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n)
        .filter_map(|_| pick(s, cands, &mut state, ctx, &mut rng))
        .collect()
}

#[test]
fn round_robin_sticks_for_the_limit_then_rotates_in_order() {
    let cands = pool(3);
    let ctx = SelectCtx::new(0);
    assert_eq!(
        picks(Strategy::RoundRobin, &cands, &ctx, 10, 0),
        [0, 0, 0, 1, 1, 1, 2, 2, 2, 0]
    );
    let every = SelectCtx {
        sticky_limit: 1,
        ..ctx
    };
    assert_eq!(
        picks(Strategy::RoundRobin, &cands, &every, 4, 0),
        [0, 1, 2, 0]
    );
    let zero = SelectCtx {
        sticky_limit: 0,
        ..ctx
    };
    assert_eq!(
        picks(Strategy::RoundRobin, &cands, &zero, 4, 0),
        [0, 1, 2, 0]
    );
    let fallback = SelectCtx {
        fallback: true,
        ..ctx
    };
    assert_eq!(
        picks(Strategy::RoundRobin, &cands, &fallback, 4, 0),
        [0, 1, 2, 0]
    );
}

#[test]
fn round_robin_rotates_to_lru_with_lower_backoff_first() {
    let mut cands = pool(4);
    let used = [Some(400), Some(100), Some(50), Some(300)];
    for (c, at) in cands.iter_mut().zip(used) {
        c.last_used_at = at;
    }
    cands[0].consecutive_use_count = 3; // the current one (most recent) has used its turn
    cands[2].backoff_level = 1; // least recently used, but just rate limited
    let mut state = StrategyState::new();
    let ctx = SelectCtx::new(1_000);
    let mut rng = SmallRng::seed_from_u64(0);
    assert_eq!(
        pick(Strategy::RoundRobin, &cands, &mut state, &ctx, &mut rng),
        Some(1)
    );
    assert_eq!(state.sticky(), Some((cands[1].id_hash, 1)));
}

#[test]
fn round_robin_resumes_from_the_views_on_a_fresh_node() {
    let mut cands = pool(3);
    cands[1].last_used_at = Some(900);
    cands[1].consecutive_use_count = 1;
    cands[2].last_used_at = Some(100);
    let ctx = SelectCtx::new(1_000);
    // Current is 1 (most recent, count 1 < 3): two more turns, then rotate to 0 (never used).
    assert_eq!(picks(Strategy::RoundRobin, &cands, &ctx, 3, 0), [1, 1, 0]);
}

#[test]
fn round_robin_failure_ends_stickiness() {
    let cands = pool(3);
    let ctx = SelectCtx::new(0);
    let mut state = StrategyState::new();
    let mut rng = SmallRng::seed_from_u64(0);
    assert_eq!(
        pick(Strategy::RoundRobin, &cands, &mut state, &ctx, &mut rng),
        Some(0)
    );
    state.record_failure(cands[0].id_hash);
    assert_eq!(state.sticky(), None);
}

#[test]
fn strict_random_deals_every_candidate_once_per_cycle() {
    let cands = pool(7);
    let got = picks(
        Strategy::StrictRandom,
        &cands,
        &SelectCtx::new(0),
        7 * 4,
        11,
    );
    let mut cycles: Vec<Vec<usize>> = got.chunks(7).map(<[usize]>::to_vec).collect();
    let shuffled = cycles.windows(2).any(|w| w[0] != w[1]);
    for cycle in &mut cycles {
        cycle.sort_unstable();
        assert_eq!(*cycle, (0..7).collect::<Vec<_>>());
    }
    assert!(shuffled, "each cycle is reshuffled");
}

#[test]
fn strict_random_order_is_the_rest_of_the_deck_first() {
    let cands = pool(5);
    let ctx = SelectCtx::new(0);
    let mut state = StrategyState::new();
    let mut rng = SmallRng::seed_from_u64(3);
    let dealt = pick(Strategy::StrictRandom, &cands, &mut state, &ctx, &mut rng).unwrap();
    let mut out = Vec::new();
    order(
        Strategy::StrictRandom,
        &cands,
        &mut state.clone(),
        &ctx,
        &mut rng,
        &mut out,
    );
    assert_eq!(out.last(), Some(&dealt), "already dealt this cycle: last");
    let next: Vec<usize> = (0..4)
        .filter_map(|_| pick(Strategy::StrictRandom, &cands, &mut state, &ctx, &mut rng))
        .collect();
    assert_eq!(next, out[..4]);
}

#[test]
fn weighted_picks_are_roughly_proportional() {
    let mut cands = pool(3);
    for (c, w) in cands.iter_mut().zip([1, 2, 7]) {
        c.weight = w;
    }
    let n = 20_000;
    let mut hits = [0usize; 3];
    for i in picks(Strategy::Weighted, &cands, &SelectCtx::new(0), n, 5) {
        hits[i] += 1;
    }
    for (h, expect) in hits.iter().zip([0.1, 0.2, 0.7]) {
        let share = *h as f64 / n as f64;
        assert!((share - expect).abs() < 0.02, "{hits:?}");
    }
}

#[test]
fn weighted_order_samples_without_replacement_and_zero_weights_go_last() {
    let mut cands = pool(4);
    for (c, w) in cands.iter_mut().zip([0, 5, 0, 5]) {
        c.weight = w;
    }
    let ctx = SelectCtx::new(0);
    let mut rng = StdRng::seed_from_u64(1);
    let mut out = Vec::new();
    let mut first_is_1 = 0;
    for _ in 0..2_000 {
        order(
            Strategy::Weighted,
            &cands,
            &mut StrategyState::new(),
            &ctx,
            &mut rng,
            &mut out,
        );
        assert_eq!(out[2..], [0, 2]);
        first_is_1 += usize::from(out[0] == 1);
    }
    assert!((800..1_200).contains(&first_is_1), "{first_is_1}");
    // All zero: uniform.
    let zero: Vec<Candidate> = pool(2)
        .into_iter()
        .map(|c| Candidate { weight: 0, ..c })
        .collect();
    let ones = picks(Strategy::Weighted, &zero, &ctx, 2_000, 2)
        .iter()
        .filter(|&&i| i == 1)
        .count();
    assert!((800..1_200).contains(&ones), "{ones}");
}

#[test]
fn random_is_reproducible_under_a_seed_and_uniform() {
    let cands = pool(4);
    let ctx = SelectCtx::new(0);
    let mut a = Vec::new();
    let mut b = Vec::new();
    order(
        Strategy::Random,
        &cands,
        &mut StrategyState::new(),
        &ctx,
        &mut StdRng::seed_from_u64(9),
        &mut a,
    );
    order(
        Strategy::Random,
        &cands,
        &mut StrategyState::new(),
        &ctx,
        &mut StdRng::seed_from_u64(9),
        &mut b,
    );
    assert_eq!(a, b);
    let mut hits = [0usize; 4];
    for i in picks(Strategy::Random, &cands, &ctx, 8_000, 4) {
        hits[i] += 1;
    }
    assert!(
        hits.iter().all(|&h| (1_700..2_300).contains(&h)),
        "{hits:?}"
    );
}

#[test]
fn p2c_never_picks_the_unique_worst_and_compares_pairs_outright() {
    let mut cands = pool(5);
    cands[2].backoff_level = 5;
    cands[2].in_flight = 9;
    let ctx = SelectCtx::new(0);
    assert!(
        picks(Strategy::P2c, &cands, &ctx, 2_000, 8)
            .iter()
            .all(|&i| i != 2)
    );
    let pair = [cands[2], cands[4]];
    assert_eq!(picks(Strategy::P2c, &pair, &ctx, 5, 8), [4; 5]);
    let mut out = Vec::new();
    order(
        Strategy::P2c,
        &cands,
        &mut StrategyState::new(),
        &ctx,
        &mut SmallRng::seed_from_u64(0),
        &mut out,
    );
    assert_eq!(out.last(), Some(&2));
}

#[test]
fn unhealthy_candidates_come_after_healthy_ones_in_every_strategy() {
    let mut cands = pool(4);
    cands[0].healthy = false;
    cands[2].healthy = false;
    let ctx = SelectCtx::new(0);
    for s in Strategy::ALL {
        let mut out = Vec::new();
        order(
            s,
            &cands,
            &mut StrategyState::new(),
            &ctx,
            &mut SmallRng::seed_from_u64(1),
            &mut out,
        );
        let mut head = out[..2].to_vec();
        head.sort_unstable();
        assert_eq!(head, [1, 3], "{s}: {out:?}");
        let got = pick(
            s,
            &cands,
            &mut StrategyState::new(),
            &ctx,
            &mut SmallRng::seed_from_u64(1),
        );
        assert!(matches!(got, Some(1 | 3)), "{s}");
    }
    // All unhealthy: nothing to prefer, the strategy decides alone.
    let sick: Vec<Candidate> = pool(3)
        .into_iter()
        .map(|c| Candidate {
            healthy: false,
            ..c
        })
        .collect();
    assert_eq!(picks(Strategy::FillFirst, &sick, &ctx, 1, 0), [0]);
}

#[test]
fn empty_pools_yield_nothing_and_leave_state_alone() {
    let ctx = SelectCtx::new(0);
    for s in Strategy::ALL {
        let mut state = StrategyState::new();
        state.record_success(1);
        let before = state;
        let mut out = vec![42];
        assert_eq!(
            pick(s, &[], &mut state, &ctx, &mut SmallRng::seed_from_u64(0)),
            None
        );
        order(
            s,
            &[],
            &mut state,
            &ctx,
            &mut SmallRng::seed_from_u64(0),
            &mut out,
        );
        assert!(out.is_empty());
        assert_eq!(state, before, "{s}");
    }
}
