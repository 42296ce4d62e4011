//! `GET /api/usage[?since=&by=]`: requests and tokens this node served, summed by client key,
//! model, provider or connection, for "who used what".
//!
//! The sums come from the node's [`ShardedLedger`] (one-minute buckets kept for a day, written
//! after every answered request by [`crate::usage_ledger`], summed here); the coordinator adds
//! the answers of every live node. Usage
//! is counted from what the upstream reported (`usage` in a JSON answer, the stream's final
//! usage), so a request whose answer reported none counts as a request with zero tokens.
//!
//! [`ShardedLedger`]: switchyard_shared::usage::ShardedLedger

use actix_web::{HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::json;
use switchyard_shared::usage;

use super::auth::ManagementKey;
use super::common::{ApiResult, parse_query};
use crate::reload::Rt;

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
    let now = rt.table.clock.epoch_ms();
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
