//! Example tests of the strategies that read quota, context windows and the auto score:
//! `reset-window`, `quota-weighted`, `context-optimized` and `auto`.

use rand::SeedableRng;
use rand::rngs::SmallRng;

use super::*;

const NOW: Millis = 1_000_000;

use crate::Millis;

fn cand(index: usize) -> Candidate {
    Candidate::new(index, stable_hash(format!("conn-{index}").as_bytes()))
}

fn quota(remaining: f64, session: Option<Millis>, weekly: Option<Millis>) -> Option<QuotaView> {
    Some(QuotaView {
        remaining,
        session_reset_at: session,
        weekly_reset_at: weekly,
    })
}

fn order_with(s: Strategy, cands: &[Candidate], ctx: &SelectCtx, seed: u64) -> Vec<usize> {
    let mut out = Vec::new();
    order(
        s,
        cands,
        &mut StrategyState::new(),
        ctx,
        &mut SmallRng::seed_from_u64(seed),
        &mut out,
    );
    out
}

#[test]
fn reset_window_prefers_the_soonest_upcoming_reset_and_guards_empty_windows() {
    let mut c: Vec<Candidate> = (0..5).map(cand).collect();
    c[0].quota = quota(0.9, Some(NOW + 3_600_000), Some(NOW + 500_000_000));
    c[1].quota = quota(0.5, Some(NOW + 60_000), None);
    // A reset in the past is no longer upcoming: the weekly one counts.
    c[2].quota = quota(0.5, Some(NOW - 1), Some(NOW + 120_000));
    // Resets soonest but is under the 10 % exhaustion guard: last.
    c[3].quota = quota(0.05, Some(NOW + 1_000), None);
    // No quota known: after every known reset.
    let ctx = SelectCtx::new(NOW);
    assert_eq!(
        order_with(Strategy::ResetWindow, &c, &ctx, 0),
        [1, 2, 0, 4, 3]
    );
    // `weekly-reset` is the same strategy.
    assert_eq!(
        "weekly-reset".parse::<Strategy>(),
        Ok(Strategy::ResetWindow)
    );
}

#[test]
fn quota_weighted_draws_in_proportion_to_what_is_left() {
    let mut c: Vec<Candidate> = (0..3).map(cand).collect();
    c[0].quota = quota(0.8, None, None);
    c[1].quota = quota(0.2, None, None);
    c[2].quota = quota(0.0, None, None);
    let ctx = SelectCtx::new(NOW);
    let mut rng = SmallRng::seed_from_u64(3);
    let mut counts = [0u32; 3];
    for _ in 0..4_000 {
        let got = pick(
            Strategy::QuotaWeighted,
            &c,
            &mut StrategyState::new(),
            &ctx,
            &mut rng,
        );
        if let Some(i) = got {
            counts[i] += 1;
        }
    }
    assert_eq!(counts[2], 0, "an empty account is never drawn: {counts:?}");
    // 80 / 20 with a wide margin.
    assert!(counts[0] > 2_900 && counts[0] < 3_500, "{counts:?}");
    // The rest follows headroom.
    let out = order_with(Strategy::QuotaWeighted, &c, &ctx, 1);
    assert_eq!(out.last(), Some(&2));
    // Nothing left anywhere: uniform, still a permutation.
    let empty: Vec<Candidate> = c
        .iter()
        .map(|x| Candidate {
            quota: quota(0.0, None, None),
            ..*x
        })
        .collect();
    let mut seen = [false; 3];
    let mut rng = SmallRng::seed_from_u64(9);
    for _ in 0..200 {
        if let Some(i) = pick(
            Strategy::QuotaWeighted,
            &empty,
            &mut StrategyState::new(),
            &ctx,
            &mut rng,
        ) {
            seen[i] = true;
        }
    }
    assert_eq!(seen, [true; 3]);
}

#[test]
fn context_optimized_takes_the_tightest_window_that_fits() {
    let mut c: Vec<Candidate> = (0..5).map(cand).collect();
    c[0].context_window = Some(1_000_000);
    c[1].context_window = Some(128_000);
    c[2].context_window = Some(32_000);
    c[3].context_window = None;
    c[4].context_window = Some(200_000);
    let ctx = SelectCtx {
        prompt_tokens: Some(100_000),
        ..SelectCtx::new(NOW)
    };
    // Fits: 128k, 200k, 1M; unknown; too small.
    assert_eq!(
        order_with(Strategy::ContextOptimized, &c, &ctx, 0),
        [1, 4, 0, 3, 2]
    );
    let huge = SelectCtx {
        prompt_tokens: Some(2_000_000),
        ..SelectCtx::new(NOW)
    };
    // Nothing fits: unknown first, then the closest miss.
    assert_eq!(
        order_with(Strategy::ContextOptimized, &c, &huge, 0),
        [3, 0, 4, 1, 2]
    );
    // Unknown request size: priority order.
    c[0].priority = 5;
    assert_eq!(
        order_with(Strategy::ContextOptimized, &c, &SelectCtx::new(NOW), 0),
        [1, 2, 3, 4, 0]
    );
    assert_eq!(
        "context".parse::<Strategy>(),
        Ok(Strategy::ContextOptimized)
    );
}

/// Makes the second of two candidates better than the first in one respect.
type Tweak = dyn Fn(&mut Candidate, &mut Candidate);

/// Two otherwise equal candidates; `tweak` makes the second one better in one respect.
fn auto_prefers(tweak: impl Fn(&mut Candidate, &mut Candidate), ctx: &SelectCtx) -> Vec<usize> {
    let mut c: Vec<Candidate> = (0..2).map(cand).collect();
    let (a, b) = c.split_at_mut(1);
    tweak(&mut a[0], &mut b[0]);
    let mut scores = Vec::new();
    auto_scores(&c, ctx, &mut scores);
    assert!(scores[1] > scores[0], "{scores:?}");
    assert!(scores.iter().all(|s| (0.0..=1.0).contains(s)), "{scores:?}");
    let mut out = Vec::new();
    order(
        Strategy::Auto,
        &c,
        &mut StrategyState::new(),
        ctx,
        // A seed whose first draw does not explore (the order is then the score order).
        &mut SmallRng::seed_from_u64(11),
        &mut out,
    );
    out
}

#[test]
fn auto_scores_every_factor_in_the_right_direction() {
    let ctx = SelectCtx {
        prompt_tokens: Some(50_000),
        ..SelectCtx::new(NOW)
    };
    let cases: Vec<Box<Tweak>> = vec![
        Box::new(|a, _| a.backoff_level = 2),
        Box::new(|a, b| {
            a.quota = quota(0.1, None, None);
            b.quota = quota(0.9, None, None);
        }),
        Box::new(|a, b| {
            a.cost = Some(15.0);
            b.cost = Some(0.5);
        }),
        Box::new(|a, b| {
            a.latency_ms = Some(4_000.0);
            b.latency_ms = Some(400.0);
        }),
        Box::new(|a, b| {
            a.context_window = Some(32_000);
            b.context_window = Some(128_000);
        }),
        Box::new(|_, b| b.last_success_at = Some(NOW - 1_000)),
        Box::new(|a, b| {
            a.tier = Some(ModelTier::Economy);
            b.tier = Some(ModelTier::Premium);
        }),
        Box::new(|a, _| a.in_flight = 3),
        Box::new(|a, _| a.last_used_at = Some(NOW)),
    ];
    for (i, tweak) in cases.iter().enumerate() {
        assert_eq!(auto_prefers(tweak, &ctx), [1, 0], "case {i}");
    }
}

#[test]
fn auto_weights_are_the_reference_ones() {
    let w = AUTO_WEIGHTS;
    let total = w.health + w.quota + w.cost + w.latency + w.task_fit + 6.0 * w.minor;
    assert!((total - 1.0).abs() < 1e-12, "{total}");
    assert_eq!(
        (w.health, w.quota, w.cost, w.latency, w.task_fit, w.minor),
        (0.20, 0.15, 0.15, 0.12, 0.08, 0.05)
    );
}

#[test]
fn auto_explores_about_five_percent_of_the_time_but_not_in_an_incident() {
    let mut c: Vec<Candidate> = (0..4).map(cand).collect();
    c[0].cost = Some(0.1);
    for x in &mut c[1..] {
        x.cost = Some(10.0);
    }
    let ctx = SelectCtx::new(NOW);
    let mut rng = SmallRng::seed_from_u64(5);
    let n = 10_000;
    let off_best = (0..n)
        .filter(|_| {
            pick(
                Strategy::Auto,
                &c,
                &mut StrategyState::new(),
                &ctx,
                &mut rng,
            ) != Some(0)
        })
        .count();
    // Exploration is 5 % uniform over 4, so 3.75 % lands elsewhere; a wide band.
    assert!((200..600).contains(&off_best), "{off_best}");
    let incident = SelectCtx {
        open_breaker_share: 0.6,
        ..ctx
    };
    let off_best = (0..n)
        .filter(|_| {
            pick(
                Strategy::Auto,
                &c,
                &mut StrategyState::new(),
                &incident,
                &mut rng,
            ) != Some(0)
        })
        .count();
    assert_eq!(off_best, 0);
}

#[test]
fn auto_incident_mode_moves_cost_weight_to_health() {
    // A cheap candidate that is rate limited against a dear healthy one.
    let mut c: Vec<Candidate> = (0..2).map(cand).collect();
    c[0].cost = Some(0.1);
    c[0].backoff_level = 1;
    c[1].cost = Some(10.0);
    let mut normal = Vec::new();
    auto_scores(&c, &SelectCtx::new(NOW), &mut normal);
    let mut incident = Vec::new();
    let ctx = SelectCtx {
        open_breaker_share: 0.75,
        ..SelectCtx::new(NOW)
    };
    auto_scores(&c, &ctx, &mut incident);
    assert!(normal[0] > normal[1], "{normal:?}");
    assert!(incident[1] > incident[0], "{incident:?}");
}

#[test]
fn auto_orders_excluded_candidates_last() {
    let mut c: Vec<Candidate> = (0..3).map(cand).collect();
    // Everything bad at once: unhealthy is separate, so make it healthy but hopeless.
    let bad = &mut c[0];
    bad.backoff_level = 8;
    bad.quota = quota(0.0, None, None);
    bad.cost = Some(100.0);
    bad.latency_ms = Some(60_000.0);
    bad.context_window = Some(1);
    bad.in_flight = 64;
    bad.priority = 64;
    bad.last_used_at = Some(NOW);
    bad.tier = Some(ModelTier::Economy);
    c[1].cost = Some(1.0);
    c[1].latency_ms = Some(100.0);
    c[2].cost = Some(1.0);
    c[2].latency_ms = Some(100.0);
    let ctx = SelectCtx {
        prompt_tokens: Some(1_000),
        ..SelectCtx::new(NOW)
    };
    let mut scores = Vec::new();
    auto_scores(&c, &ctx, &mut scores);
    assert!(scores[0] < AUTO_EXCLUDE_BELOW, "{scores:?}");
    for seed in 0..50 {
        let out = order_with(Strategy::Auto, &c, &ctx, seed);
        assert_eq!(out.last(), Some(&0), "seed {seed}: {out:?}");
    }
}

#[test]
fn auto_exclusion_lasts_five_minutes_then_grows_to_thirty() {
    let min = 60_000;
    assert_eq!(AutoExclusion::after(None, 0.5, 0), None);
    let first = AutoExclusion::after(None, 0.1, 0);
    assert_eq!(
        first,
        Some(AutoExclusion {
            until: 5 * min,
            strikes: 1
        })
    );
    // While active, nothing changes, whatever the score.
    assert_eq!(AutoExclusion::after(first, 0.0, min), first);
    assert_eq!(AutoExclusion::after(first, 0.9, min), first);
    // Low again after it ended: twice as long, then capped at 30 min.
    let second = AutoExclusion::after(first, 0.1, 5 * min);
    assert_eq!(second.map(|e| e.until - 5 * min), Some(10 * min));
    let third = AutoExclusion::after(second, 0.1, 15 * min);
    assert_eq!(third.map(|e| e.until - 15 * min), Some(20 * min));
    let fourth = AutoExclusion::after(third, 0.1, 35 * min);
    assert_eq!(fourth.map(|e| e.until - 35 * min), Some(30 * min));
    let many = (0..40).fold(fourth, |e, _| {
        AutoExclusion::after(e, 0.0, e.map_or(0, |x| x.until))
    });
    let start = many.map_or(0, |e| e.until);
    let next = AutoExclusion::after(many, 0.0, start);
    assert_eq!(next.map(|e| e.until - start), Some(30 * min));
    assert!(next.is_some_and(|e| e.strikes > 40));
    // A passing score after it ended clears it (and its strikes).
    assert_eq!(AutoExclusion::after(fourth, 0.5, 65 * min), None);
    assert!(fourth.is_some_and(|e| e.active(64 * min) && !e.active(65 * min)));
}
