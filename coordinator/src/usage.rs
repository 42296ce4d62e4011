//! `GET /api/cluster/usage[?since=&by=]`: the cluster's "who used what", the sum of every live
//! node's `GET /api/usage`.
//!
//! Usage lives in each node's memory (one-minute buckets kept for a day), not in Redis: the
//! request path writes nothing shared for it. So the coordinator asks each live node's admin
//! listener, with the caller's own management bearer (the cluster shares one management key;
//! the coordinator keeps only its digest and could not sign a request itself), and adds the
//! answers group by group. A node that does not answer is named in `nodes.failed`, and the
//! sums are then partial, which the answer says (`complete: false`).

use std::sync::Arc;
use std::time::Duration;

use actix_web::http::header::AUTHORIZATION;
use actix_web::{HttpRequest, HttpResponse, web};
use futures_util::future::join_all;
use serde::Deserialize;
use serde_json::json;
use switchyard_shared::admin_kit::AdminError;
use switchyard_shared::usage::{self, Row};

use crate::auth::ManagementKey;
use crate::error::{ApiError, ApiResult};
use crate::read::epoch_ms;
use crate::sampler;
use crate::service::Coordinator;

/// A node that does not answer within this is left out (and named).
const NODE_TIMEOUT: Duration = Duration::from_secs(3);

/// `GET /api/cluster/usage` query, as a node takes it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageQuery {
    since: Option<String>,
    by: Option<String>,
}

/// One node's answer, as far as the sum needs it.
#[derive(Debug, Deserialize)]
struct NodeAnswer {
    rows: Vec<Row>,
}

/// `since` and `by` are checked here with the nodes' rules ([`usage::parse_query`]), so a
/// bad query is one 400, not one per node.
/// `GET /api/cluster/usage`.
pub async fn usage(
    co: web::Data<Arc<Coordinator>>,
    _key: ManagementKey,
    req: HttpRequest,
) -> ApiResult {
    let query = web::Query::<UsageQuery>::from_query(req.query_string())
        .map_err(|e| AdminError::bad_request("invalid_query", format!("Invalid query: {e}")))?;
    let now = epoch_ms();
    let (since, by) = usage::parse_query(query.since.as_deref(), query.by.as_deref(), now)?;
    // A late node may still answer, and holds usage no other node has: ask it too.
    let nodes = sampler::live_admin_addresses(&co, true)
        .await
        .map_err(|e| ApiError::store_unavailable(&e))?;
    let bearer = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let client = reqwest::Client::builder()
        .timeout(NODE_TIMEOUT)
        .no_proxy()
        .build()
        .map_err(|_| ApiError::internal("internal_error", "no HTTP client"))?;
    let by_name = serde_json::to_value(by)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let asks = nodes.iter().map(|(node, base)| {
        let url = format!("{base}/api/usage?since={since}&by={by_name}");
        let request = client.get(url).header("authorization", &bearer);
        async move {
            let answer = match request.send().await {
                Ok(r) if r.status().is_success() => r
                    .json::<NodeAnswer>()
                    .await
                    .map_err(|e| format!("unreadable answer: {e}")),
                Ok(r) => Err(format!("HTTP {}", r.status().as_u16())),
                Err(e) if e.is_timeout() => Err("timed out".to_owned()),
                Err(_) => Err("unreachable".to_owned()),
            };
            (node.clone(), answer)
        }
    });
    let mut answered = Vec::new();
    let mut failed = Vec::new();
    let mut rows = Vec::new();
    for (node, answer) in join_all(asks).await {
        match answer {
            Ok(a) => {
                answered.push(node);
                rows.push(a.rows);
            }
            Err(error) => failed.push(json!({"node": node, "error": error})),
        }
    }
    let rows = usage::merge_rows(rows);
    Ok(HttpResponse::Ok().json(json!({
        "since": since,
        "until": now,
        "by": by,
        "complete": failed.is_empty(),
        "totals": usage::total(&rows),
        "rows": rows,
        "nodes": {"asked": nodes.len(), "answered": answered, "failed": failed},
    })))
}
