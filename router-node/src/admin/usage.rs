//! `GET /api/usage[?since=&by=]`: requests and tokens this node served, summed by client key,
//! model, provider or connection, for "who used what".
//!
//! The sums come from the node's [`UsageLedger`] (one-minute buckets kept for a day, written
//! after every answered request); the coordinator adds the answers of every live node. Usage
//! is counted from what the upstream reported (`usage` in a JSON answer, the stream's final
//! usage), so a request whose answer reported none counts as a request with zero tokens.
//!
//! [`UsageLedger`]: switchyard_shared::usage::UsageLedger

use actix_web::{HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::json;
use switchyard_shared::usage::{self, GroupBy, Totals, Tuple};

use super::auth::ManagementKey;
use super::common::{ApiError, ApiResult, parse_query};
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
    let (since, by) = parse(&query, now)?;
    let (rows, retained_since) = match rt.stats.usage.lock() {
        Ok(ledger) => (ledger.query(since, by), ledger.retained_since()),
        Err(_) => (Vec::new(), None),
    };
    Ok(HttpResponse::Ok().json(json!({
        "since": since,
        "until": now,
        "by": by,
        "retainedSince": retained_since,
        "totals": usage::total(&rows),
        "rows": rows,
    })))
}

/// `since` and `by` (default: the retained day, by model): 400 `invalid_query` naming the
/// parameter.
fn parse(query: &UsageQuery, now: u64) -> Result<(u64, GroupBy), ApiError> {
    let invalid = |field: &str, message: String| {
        ApiError::bad_request("invalid_query", message.clone())
            .with_details(vec![(field.to_owned(), message)])
    };
    let since = usage::parse_since(query.since.as_deref(), now).map_err(|m| invalid("since", m))?;
    let by = match query.by.as_deref() {
        None => GroupBy::Model,
        Some(raw) => GroupBy::parse(raw)
            .ok_or_else(|| invalid("by", format!("`by` must be {}", GroupBy::NAMES)))?,
    };
    Ok((since, by))
}

/// Records one answered request: the client key (when one was required), the model the
/// provider served, and where it went; and the key's token counters
/// (`switchyard_client_key_token_usage_total`).
pub fn record(
    rt: &Runtime,
    key: Option<&str>,
    model: &str,
    provider: &str,
    connection: &str,
    reported: Option<&switchyard_shared::sse::Usage>,
) {
    let tuple = Tuple {
        key: key.unwrap_or(usage::OTHER).into(),
        model: model.into(),
        provider: provider.into(),
        connection: connection.into(),
    };
    if let (Some(key), Some(reported)) = (key, reported) {
        rt.metrics.key_usage(key, reported);
    }
    let now = rt.clock.epoch_ms();
    if let Ok(mut ledger) = rt.stats.usage.lock() {
        ledger.record(now, tuple, Totals::of_request(reported));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_parameters_are_named() {
        let q = |since: Option<&str>, by: Option<&str>| UsageQuery {
            since: since.map(str::to_owned),
            by: by.map(str::to_owned),
        };
        let now = 1_700_000_000_000;
        assert_eq!(parse(&q(None, None), now).unwrap().1, GroupBy::Model);
        assert_eq!(
            parse(&q(Some("1h"), Some("key")), now).unwrap(),
            (now - 3_600_000, GroupBy::Key)
        );
        let e = parse(&q(None, Some("user")), now).unwrap_err();
        assert_eq!(e.0.code, "invalid_query");
        assert_eq!(e.0.fields["details"][0]["field"], "by");
        let e = parse(&q(Some("soon"), None), now).unwrap_err();
        assert_eq!(e.0.fields["details"][0]["field"], "since");
    }
}
