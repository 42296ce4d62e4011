//! Criterion benchmarks for the policy hot path.
//!
//! `strategy/pick/<name>` is one connection selection over 16 candidates (the per-request cost
//! a provider pays); `strategy/order/weighted` is a combo's full fallback order over 16 targets.
//! The target is well under a microsecond per selection.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use switchyard_shared::strategy::{
    Candidate, QuotaView, SelectCtx, Strategy, StrategyState, order, pick, stable_hash,
};

const NOW: u64 = 1_700_000_000_000;

/// 16 candidates with varied, realistic views.
fn pool() -> Vec<Candidate> {
    (0..16u32)
        .map(|i| {
            let n = u64::from(i);
            Candidate {
                priority: i % 4,
                weight: 1 + i % 5,
                in_flight: i % 3,
                last_used_at: Some(NOW - 1_000 * n),
                consecutive_use_count: i % 4,
                backoff_level: u32::from(i % 7 == 0),
                cost: Some(0.5 + f64::from(i % 6) * 0.25),
                latency_ms: Some(200.0 + f64::from((i * 37) % 11) * 40.0),
                quota: Some(QuotaView {
                    remaining: f64::from((i * 13) % 16) / 16.0,
                    session_reset_at: Some(NOW + 600_000 * n),
                    weekly_reset_at: Some(NOW + 86_400_000 * (n % 7)),
                }),
                last_success_at: Some(NOW - 5_000 * n),
                ..Candidate::new(i as usize, stable_hash(format!("conn-{i}").as_bytes()))
            }
        })
        .collect()
}

fn strategies(c: &mut Criterion) {
    let cands = pool();
    let ctx = SelectCtx {
        cache_key: Some(stable_hash(b"system prompt prefix")),
        ..SelectCtx::new(NOW)
    };
    for s in [
        Strategy::FillFirst,
        Strategy::RoundRobin,
        Strategy::P2c,
        Strategy::Weighted,
        Strategy::CacheOptimized,
        Strategy::LatencyOptimized,
        Strategy::ResetAware,
    ] {
        let mut state = StrategyState::new();
        let mut rng = SmallRng::seed_from_u64(1);
        c.bench_function(&format!("strategy/pick/{s}"), |b| {
            b.iter(|| pick(s, black_box(&cands), &mut state, black_box(&ctx), &mut rng))
        });
    }

    let mut state = StrategyState::new();
    let mut rng = SmallRng::seed_from_u64(1);
    let mut out = Vec::with_capacity(cands.len());
    c.bench_function("strategy/order/weighted", |b| {
        b.iter(|| {
            order(
                Strategy::Weighted,
                black_box(&cands),
                &mut state,
                &ctx,
                &mut rng,
                &mut out,
            );
            black_box(out.first().copied())
        })
    });
}

criterion_group!(benches, strategies);
criterion_main!(benches);
