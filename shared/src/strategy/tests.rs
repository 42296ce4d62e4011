//! Example-based tests: each strategy's order on a small pool, the stateful rotations, and the
//! distribution and stability claims.

use rand::SeedableRng;
use rand::rngs::StdRng;

use super::*;

fn cand(index: usize) -> Candidate {
    Candidate::new(index, stable_hash(format!("conn-{index}").as_bytes()))
}

fn pool(n: usize) -> Vec<Candidate> {
    (0..n).map(cand).collect()
}

fn order_of(
    s: Strategy,
    cands: &[Candidate],
    state: &mut StrategyState,
    ctx: &SelectCtx,
) -> Vec<usize> {
    let mut out = Vec::new();
    order(
        s,
        cands,
        state,
        ctx,
        &mut StdRng::seed_from_u64(7),
        &mut out,
    );
    out
}

fn ranked(s: Strategy, cands: &[Candidate]) -> Vec<usize> {
    order_of(s, cands, &mut StrategyState::new(), &SelectCtx::new(1_000))
}

#[test]
fn names_round_trip_through_from_str_and_serde() {
    let config_names = [
        "priority",
        "weighted",
        "round-robin",
        "fill-first",
        "random",
        "strict-random",
        "least-used",
        "p2c",
        "cost-optimized",
        "latency-optimized",
        "reset-aware",
        "headroom",
        "cache-optimized",
        "lkgp",
        "reset-window",
        "quota-weighted",
        "auto",
        "context-optimized",
        "quota-share",
        "fusion",
        "pipeline",
        "context-relay",
    ];
    assert_eq!(config_names.len(), Strategy::ALL.len());
    for (s, name) in Strategy::ALL.into_iter().zip(config_names) {
        assert_eq!(s.as_str(), name);
        assert_eq!(name.parse::<Strategy>(), Ok(s));
        assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{name}\""));
        assert_eq!(
            serde_json::from_str::<Strategy>(&format!("\"{name}\"")).unwrap(),
            s
        );
    }
    // The reference's aliases; anything else stays an error for `FromStr` and serde.
    assert_eq!("usage".parse::<Strategy>(), Ok(Strategy::LeastUsed));
    assert_eq!(
        "context".parse::<Strategy>(),
        Ok(Strategy::ContextOptimized)
    );
    assert_eq!(
        serde_json::from_str::<Strategy>("\"weekly-reset\"").unwrap(),
        Strategy::ResetWindow
    );
    assert_eq!(
        "fastest".parse::<Strategy>(),
        Err(UnknownStrategy("fastest".into()))
    );
    assert_eq!(
        Strategy::parse_lenient("fastest"),
        (Strategy::Priority, Some(UnknownStrategy("fastest".into())))
    );
    assert_eq!(
        Strategy::parse_lenient("usage"),
        (Strategy::LeastUsed, None)
    );
    assert!(serde_json::from_str::<Strategy>("\"FillFirst\"").is_err());
    assert_eq!(Strategy::CONNECTION_DEFAULT, Strategy::FillFirst);
}

#[test]
fn priority_is_configured_order_and_fill_first_is_priority_order() {
    let mut cands = pool(4);
    for (c, p) in cands.iter_mut().zip([3, 1, 1, 2]) {
        c.priority = p;
    }
    cands.reverse(); // slice position must not matter, only `index`
    assert_eq!(ranked(Strategy::Priority, &cands), [0, 1, 2, 3]);
    assert_eq!(ranked(Strategy::FillFirst, &cands), [1, 2, 3, 0]);
}

#[test]
fn cost_optimized_is_cheapest_known_first_ties_by_priority() {
    let mut cands = pool(5);
    let costs = [Some(2.0), None, Some(0.5), Some(0.5), Some(f64::NAN)];
    for (c, cost) in cands.iter_mut().zip(costs) {
        c.cost = cost;
    }
    cands[2].priority = 5;
    assert_eq!(ranked(Strategy::CostOptimized, &cands), [3, 2, 0, 1, 4]);
}

#[test]
fn least_used_is_oldest_first_then_fewest_in_flight() {
    let mut cands = pool(4);
    let used = [Some(50), None, Some(10), Some(10)];
    for (c, at) in cands.iter_mut().zip(used) {
        c.last_used_at = at;
    }
    cands[2].in_flight = 2;
    assert_eq!(ranked(Strategy::LeastUsed, &cands), [1, 3, 2, 0]);
}

#[test]
fn latency_optimized_tries_unmeasured_first_then_fastest() {
    let mut cands = pool(4);
    let lat = [Some(300.0), None, Some(80.0), Some(-1.0)];
    for (c, l) in cands.iter_mut().zip(lat) {
        c.latency_ms = l;
    }
    assert_eq!(ranked(Strategy::LatencyOptimized, &cands), [1, 3, 2, 0]);
}

fn quota(remaining: f64) -> Option<QuotaView> {
    Some(QuotaView {
        remaining,
        session_reset_at: None,
        weekly_reset_at: None,
    })
}

#[test]
fn headroom_is_most_remaining_first_unknown_is_neutral() {
    let mut cands = pool(4);
    for (c, q) in cands
        .iter_mut()
        .zip([quota(0.9), None, quota(0.2), quota(1.5)])
    {
        c.quota = q;
    }
    assert_eq!(ranked(Strategy::Headroom, &cands), [3, 0, 1, 2]);
}

#[test]
fn reset_aware_prefers_soon_resets_and_puts_exhausted_last() {
    let now = 1_000_000_000;
    let hour = 3_600_000;
    let mut cands = pool(4);
    // 0: plenty left, resets far away. 1: mostly used, both windows reset within the hour.
    // 2: no quota information (neutral). 3: nearly exhausted (under the 10 % guard), resets at once.
    cands[0].quota = Some(QuotaView {
        remaining: 0.9,
        session_reset_at: Some(now + 5 * hour),
        weekly_reset_at: Some(now + 160 * hour),
    });
    cands[1].quota = Some(QuotaView {
        remaining: 0.3,
        session_reset_at: Some(now + hour / 2),
        weekly_reset_at: Some(now + hour),
    });
    cands[3].quota = Some(QuotaView {
        remaining: 0.05,
        session_reset_at: Some(now),
        weekly_reset_at: Some(now),
    });
    let ctx = SelectCtx::new(now);
    let w = ctx.reset_aware;
    let s: Vec<f64> = cands
        .iter()
        .map(|c| reset_aware_score(c.quota.as_ref(), now, &w))
        .collect();
    assert!(
        s[1] > s[2] + w.tie_band && s[2] > s[0] + w.tie_band,
        "{s:?}"
    );
    assert!(s[3] > s[1], "the guard, not the score, sends 3 last: {s:?}");
    let got = order_of(
        Strategy::ResetAware,
        &cands,
        &mut StrategyState::new(),
        &ctx,
    );
    assert_eq!(got, [1, 2, 0, 3]);
}

#[test]
fn reset_aware_tie_band_falls_back_to_priority() {
    let now = 1_000_000_000;
    let hour = 3_600_000;
    let at = |session: u64| QuotaView {
        remaining: 0.5,
        session_reset_at: Some(now + session),
        weekly_reset_at: None,
    };
    let mut cands = pool(2);
    cands[0].quota = Some(at(3 * hour));
    cands[1].quota = Some(at(5 * hour / 2)); // resets a little sooner: inside the 5 % band
    let ctx = SelectCtx::new(now);
    let run = |cands: &[Candidate]| {
        order_of(Strategy::ResetAware, cands, &mut StrategyState::new(), &ctx)
    };
    assert_eq!(run(&cands), [0, 1]);
    cands[1].quota = Some(at(0)); // resets now: well outside the band
    assert_eq!(run(&cands), [1, 0]);
}

#[test]
fn lkgp_is_remembered_then_most_recent_success_then_priority() {
    let mut cands = pool(4);
    cands[2].last_success_at = Some(500);
    cands[3].last_success_at = Some(900);
    assert_eq!(ranked(Strategy::Lkgp, &cands), [3, 2, 0, 1]);
    let mut state = StrategyState::new();
    state.record_success(cands[1].id_hash);
    assert_eq!(
        order_of(Strategy::Lkgp, &cands, &mut state, &SelectCtx::new(0)),
        [1, 3, 2, 0]
    );
    state.record_failure(cands[1].id_hash);
    assert_eq!(state.last_good(), None);
}

#[test]
fn cache_optimized_without_a_key_is_fill_first_and_with_one_is_stable() {
    let mut cands = pool(6);
    cands[0].priority = 9;
    assert_eq!(ranked(Strategy::CacheOptimized, &cands), [1, 2, 3, 4, 5, 0]);
    let ctx = SelectCtx {
        cache_key: Some(stable_hash(b"prompt-prefix")),
        ..SelectCtx::new(0)
    };
    let first = order_of(
        Strategy::CacheOptimized,
        &cands,
        &mut StrategyState::new(),
        &ctx,
    );
    cands.reverse();
    let again = order_of(
        Strategy::CacheOptimized,
        &cands,
        &mut StrategyState::new(),
        &ctx,
    );
    assert_eq!(first, again);
}

#[test]
fn stable_hash_values_are_pinned_for_the_cluster() {
    assert_eq!(stable_hash(b""), fmix64(0xcbf2_9ce4_8422_2325));
    assert_eq!(stable_hash(b"openai-key-1"), PINNED_ID_HASH);
    assert_eq!(rendezvous_weight(1, 2), PINNED_WEIGHT);
}

const PINNED_ID_HASH: u64 = 5_406_378_811_313_141_961;
const PINNED_WEIGHT: u64 = 2_714_486_797_602_074_777;

#[test]
fn rendezvous_removal_only_moves_keys_of_the_removed_candidate() {
    let cands = pool(8);
    let owner = |cands: &[Candidate], key: u64| {
        let ctx = SelectCtx {
            cache_key: Some(key),
            ..SelectCtx::new(0)
        };
        pick(
            Strategy::CacheOptimized,
            cands,
            &mut StrategyState::new(),
            &ctx,
            &mut StdRng::seed_from_u64(0),
        )
    };
    let without: Vec<Candidate> = cands.iter().copied().filter(|c| c.index != 3).collect();
    let mut per_owner = [0u32; 8];
    for k in 0..4_000u64 {
        let key = stable_hash(&k.to_le_bytes());
        let before = owner(&cands, key).unwrap();
        let after = owner(&without, key).unwrap();
        per_owner[before] += 1;
        if before != 3 {
            assert_eq!(before, after, "key {k} moved off a surviving candidate");
        }
    }
    // Keys spread roughly evenly (expected 500 each).
    assert!(
        per_owner.iter().all(|&n| (350..650).contains(&n)),
        "{per_owner:?}"
    );
}
