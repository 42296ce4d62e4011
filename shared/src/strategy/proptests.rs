//! Properties every strategy must keep, over arbitrary pools, contexts and prior states.

use proptest::prelude::{
    Just, ProptestConfig, any, prop_assert, prop_assert_eq, prop_assume, prop_compose, prop_oneof,
    proptest,
};
use proptest::strategy::Strategy as Gen;
use rand::SeedableRng;
use rand::rngs::SmallRng;

use super::*;

fn opt_f64() -> impl Gen<Value = Option<f64>> {
    prop_oneof![
        Just(None),
        (0.0..5_000.0f64).prop_map(Some),
        Just(Some(f64::NAN)),
        Just(Some(-1.0)),
    ]
}

fn quota() -> impl Gen<Value = Option<QuotaView>> {
    let at = proptest::option::of(0u64..2_000_000_000);
    proptest::option::of((-0.5..1.5f64, at.clone(), at)).prop_map(|q| {
        q.map(|(remaining, session_reset_at, weekly_reset_at)| QuotaView {
            remaining,
            session_reset_at,
            weekly_reset_at,
        })
    })
}

prop_compose! {
    fn candidate()(
        id_hash in any::<u64>(),
        priority in 0u32..4,
        weight in 0u32..5,
        (in_flight, max_concurrent) in (0u32..4, 0u32..3),
        last_used_at in proptest::option::of(0u64..10),
        consecutive_use_count in 0u32..5,
        backoff_level in 0u32..3,
        (cost, latency_ms) in (opt_f64(), opt_f64()),
        quota in quota(),
        last_success_at in proptest::option::of(0u64..10),
        (context_window, tier) in (
            proptest::option::of(1u32..400_000),
            proptest::option::of(proptest::sample::select(vec![
                ModelTier::Premium, ModelTier::Standard, ModelTier::Economy,
            ])),
        ),
        healthy in proptest::bool::weighted(0.8),
    ) -> Candidate {
        Candidate {
            index: 0, id_hash, priority, weight, in_flight, max_concurrent, last_used_at,
            consecutive_use_count,
            backoff_level, cost, latency_ms, quota, last_success_at, context_window, tier, healthy,
        }
    }
}

/// A pool with unique caller indices that are not slice positions.
fn pool() -> impl Gen<Value = Vec<Candidate>> {
    proptest::collection::vec(candidate(), 0..12).prop_map(|mut v| {
        let n = v.len();
        for (pos, c) in v.iter_mut().enumerate() {
            c.index = (pos * 7 + 3) % (n.max(1) * 7) + 100;
        }
        v
    })
}

prop_compose! {
    fn ctx()(
        now in 0u64..2_000_000_000,
        sticky_limit in 0u32..5,
        fallback in any::<bool>(),
        cache_key in proptest::option::of(any::<u64>()),
        prompt_tokens in proptest::option::of(0u32..300_000),
        open_breaker_share in 0.0f64..1.0,
    ) -> SelectCtx {
        SelectCtx {
            now, sticky_limit, fallback, cache_key, prompt_tokens, open_breaker_share,
            ..SelectCtx::new(now)
        }
    }
}

fn strategy() -> impl Gen<Value = Strategy> {
    proptest::sample::select(Strategy::ALL.to_vec())
}

/// A state as earlier traffic would leave it: a few selections, maybe a remembered success.
fn warmed(
    s: Strategy,
    cands: &[Candidate],
    ctx: &SelectCtx,
    steps: usize,
    seed: u64,
) -> StrategyState {
    let mut state = StrategyState::new();
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5eed);
    for _ in 0..steps {
        let picked = pick(s, cands, &mut state, ctx, &mut rng);
        if let Some(c) = cands.iter().find(|c| Some(c.index) == picked) {
            state.record_success(c.id_hash);
        }
    }
    state
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn order_is_a_permutation_and_pick_is_its_head(
        s in strategy(), cands in pool(), ctx in ctx(), steps in 0usize..6, seed in any::<u64>(),
    ) {
        let state = warmed(s, &cands, &ctx, steps, seed);

        let mut ordered_state = state;
        let mut out = vec![usize::MAX];
        order(s, &cands, &mut ordered_state, &ctx, &mut SmallRng::seed_from_u64(seed), &mut out);
        let mut sorted = out.clone();
        sorted.sort_unstable();
        let mut expected: Vec<usize> = cands.iter().map(|c| c.index).collect();
        expected.sort_unstable();
        prop_assert_eq!(sorted, expected);

        let mut picked_state = state;
        let got = pick(s, &cands, &mut picked_state, &ctx, &mut SmallRng::seed_from_u64(seed));
        prop_assert_eq!(got, out.first().copied());
        prop_assert_eq!(picked_state, ordered_state, "both advance the state by one selection");
        if cands.is_empty() {
            prop_assert_eq!(got, None);
            prop_assert_eq!(picked_state, state);
        }
    }

    #[test]
    fn healthy_candidates_always_lead(
        s in strategy(), cands in pool(), ctx in ctx(), seed in any::<u64>(),
    ) {
        let mut out = Vec::new();
        order(s, &cands, &mut StrategyState::new(), &ctx, &mut SmallRng::seed_from_u64(seed), &mut out);
        let healthy = |i: &usize| cands.iter().any(|c| c.index == *i && c.healthy);
        let first_sick = out.iter().position(|i| !healthy(i)).unwrap_or(out.len());
        prop_assert!(out[first_sick..].iter().all(|i| !healthy(i)), "{:?}", out);
    }

    #[test]
    fn deterministic_strategies_ignore_the_rng(
        s in strategy(), cands in pool(), ctx in ctx(), a in any::<u64>(), b in any::<u64>(),
    ) {
        prop_assume!(!s.uses_rng());
        let run = |seed| {
            let mut out = Vec::new();
            order(s, &cands, &mut StrategyState::new(), &ctx, &mut SmallRng::seed_from_u64(seed), &mut out);
            out
        };
        prop_assert_eq!(run(a), run(b));
    }
}
