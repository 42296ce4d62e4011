//! Criterion benchmarks for the policy hot path (filled in by the strategy/breaker work).
use criterion::{Criterion, criterion_group, criterion_main};

fn placeholder(c: &mut Criterion) {
    c.bench_function("noop", |b| b.iter(|| std::hint::black_box(1u64) + 1));
}

criterion_group!(benches, placeholder);
criterion_main!(benches);
