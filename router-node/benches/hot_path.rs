//! Criterion benchmarks for the node's per-request state reads.
//!
//! `snapshot/load + eligibility` is what routing does per candidate connection: load the
//! actor-published snapshot (an `ArcSwap` read) and ask it for cooldown, terminal state and a
//! model lockout. `gate/acquire + release` is the connection's concurrency permit on the
//! uncontended path (a free permit, nobody waiting). Together they are the state cost of one
//! attempt on the success path; the target is tens of nanoseconds, far below the socket work.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use switchyard_node::runtime::Runtime;
use switchyard_shared::config::Config;

const CONFIG: &str = r#"
[auth]
require_api_key = false
management_key_env = ""

[[providers]]
id = "openai"
category = "apikey"
format = "openai"
base_url = "http://127.0.0.1:9/v1"
models = ["gpt-4o-mini"]

[[connections]]
id = "openai-1"
provider = "openai"
api_key_env = "BENCH_UPSTREAM_KEY"
max_concurrent = 64
"#;

fn runtime() -> Result<Arc<Runtime>, String> {
    let config = Config::from_toml_str(CONFIG).map_err(|e| format!("{e:?}"))?;
    Runtime::build(config, &|k| {
        (k == "BENCH_UPSTREAM_KEY").then(|| "bench".to_owned())
    })
    .map(Arc::new)
    .map_err(|e| format!("{e:?}"))
}

fn hot_path(c: &mut Criterion) {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bench config did not load, nothing measured: {e}");
            return;
        }
    };
    let (Some(conn), Some(provider)) = (rt.table.connections.first(), rt.table.providers.first())
    else {
        return;
    };
    let model = provider.model_ref("openai-1", "gpt-4o-mini");
    let now = 1_700_000_000_000u64;
    c.bench_function("snapshot/load + eligibility", |b| {
        b.iter(|| {
            let snap = conn.load();
            let cooling = snap.cooldown_remaining(black_box(now)) > 0;
            let terminal = snap.terminal().is_some();
            let locked = snap.model_lock(black_box(&model), now).is_some();
            cooling || terminal || locked
        })
    });
    let Ok(tokio_rt) = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    else {
        return;
    };
    c.bench_function("gate/acquire + release", |b| {
        b.iter(|| {
            tokio_rt.block_on(async {
                let permit = conn.gate.acquire(black_box(64), 1_000).await;
                black_box(permit.is_ok())
            })
        })
    });
}

criterion_group!(benches, hot_path);
criterion_main!(benches);
