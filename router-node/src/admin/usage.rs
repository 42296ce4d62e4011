//! `GET /api/usage[?since=&by=]`: requests and tokens this node served, summed by client key,
//! model, provider or connection, for "who used what".
//!
//! The sums come from the node's [`ShardedLedger`] (one-minute buckets kept for a day, written
//! after every answered request into the recording worker's own shard, summed here); the
//! coordinator adds the answers of every live node. Usage
//! is counted from what the upstream reported (`usage` in a JSON answer, the stream's final
//! usage), so a request whose answer reported none counts as a request with zero tokens.
//!
//! [`ShardedLedger`]: switchyard_shared::usage::ShardedLedger

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use actix_web::{HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::json;
use switchyard_shared::usage::{self, Totals, Tuple};

use super::auth::ManagementKey;
use super::common::{ApiResult, parse_query};
use crate::reload::Rt;
use crate::runtime::Runtime;

/// `GET /api/usage` query.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct UsageQuery {
    since: Option<String>,
    by: Option<String>,
}

/// `GET /api/usage`.
pub async fn usage(rt: Rt, _key: ManagementKey, req: HttpRequest) -> ApiResult {
    let query: UsageQuery = parse_query(&req)?;
    let now = rt.clock.epoch_ms();
    let (since, by) = usage::parse_query(query.since.as_deref(), query.by.as_deref(), now)?;
    let rows = rt.stats.usage.query(since, by);
    let retained_since = rt.stats.usage.retained_since();
    Ok(HttpResponse::Ok().json(json!({
        "since": since,
        "until": now,
        "by": by,
        "retainedSince": retained_since,
        "totals": usage::total(&rows),
        "rows": rows,
    })))
}

/// Records one answered request: the client key (when one was required), the model the
/// provider served, and where it went; and the key's token counters
/// (`switchyard_client_key_token_usage_total`).
pub fn record(
    rt: &Runtime,
    key: Option<&str>,
    model: &Arc<str>,
    provider: &Arc<str>,
    connection: &Arc<str>,
    reported: Option<&switchyard_shared::sse::Usage>,
) {
    let tuple = Tuple {
        key: key.unwrap_or(usage::OTHER).into(),
        model: model.clone(),
        provider: provider.clone(),
        connection: connection.clone(),
    };
    if let (Some(key), Some(reported)) = (key, reported) {
        rt.metrics.key_usage(key, reported);
    }
    let now = rt.clock.epoch_ms();
    rt.stats
        .usage
        .record(worker_shard(), now, tuple, Totals::of_request(reported));
}

/// This thread's shard of the usage ledger: each worker thread takes the next index the
/// first time it records, so workers do not share a shard's lock.
fn worker_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    SHARD.with(|shard| *shard)
}
