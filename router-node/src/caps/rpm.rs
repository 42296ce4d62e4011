//! Per-key requests per minute across the cluster: one token per request from a bucket in
//! Redis (capacity `requests_per_minute`, continuous refill, on the Redis clock).
//!
//! Connections' request-queue `requests_per_minute` works the same way ([`pace_connection`]):
//! the local queue paces this node, the `conn` bucket paces the sum, and a request waits for a
//! token only within what is left of the queue's wait budget.
//!
//! The node's local limiter still runs at ingress, so a key never exceeds its rate on one
//! node; this bucket makes the same rate hold for the sum of all nodes. With Redis unreachable
//! it fails open to the local limiter: a rate limit is not worth refusing traffic over.

use std::time::Duration;

use actix_web::http::StatusCode;
use switchyard_shared::Millis;
use switchyard_store::BucketResult;

use crate::actors::ConnHandle;
use crate::api::auth::ClientKey;
use crate::api::errors::{ErrorSource, GatewayError};
use crate::runtime::RoutingTable;

/// Why a connection's cluster bucket refused a request within its wait budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnRateExceeded {
    pub waited_ms: Millis,
    pub retry_after_ms: Millis,
}

/// Takes one token of `key`'s cluster bucket (redis mode only).
pub async fn check_key(rt: &RoutingTable, key: &ClientKey) -> Result<(), GatewayError> {
    let Some(cluster) = &rt.cluster else {
        return Ok(());
    };
    if key.requests_per_minute == 0 {
        return Ok(());
    }
    match cluster
        .store
        .bucket_take("key", &key.id, key.requests_per_minute)
        .await
    {
        Ok(BucketResult::Allowed { .. }) => Ok(()),
        Ok(BucketResult::Limited { retry_after_ms }) => Err(GatewayError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "key_rate_limit_exceeded",
            "This API key exceeded its requests per minute",
        )
        .with_source(ErrorSource::Downstream)
        .with_retry_after_ms(retry_after_ms)),
        Err(e) => {
            tracing::debug!(error = %e, "cluster rate bucket unavailable; local limit only");
            Ok(())
        }
    }
}

/// Waits for a token of `conn`'s cluster bucket (redis mode, queue RPM set) for at most
/// `budget_ms`. Redis trouble fails open to the local queue's pacing, like the key bucket.
pub async fn pace_connection(
    rt: &RoutingTable,
    conn: &ConnHandle,
    requests_per_minute: u32,
    budget_ms: Millis,
) -> Result<(), ConnRateExceeded> {
    let Some(cluster) = &rt.cluster else {
        return Ok(());
    };
    if requests_per_minute == 0 {
        return Ok(());
    }
    let start = rt.clock.now();
    loop {
        match cluster
            .store
            .bucket_take("conn", &conn.id, requests_per_minute)
            .await
        {
            Ok(BucketResult::Allowed { .. }) => return Ok(()),
            Ok(BucketResult::Limited { retry_after_ms }) => {
                let waited_ms = rt.clock.now().saturating_sub(start);
                if waited_ms.saturating_add(retry_after_ms) > budget_ms {
                    return Err(ConnRateExceeded {
                        waited_ms,
                        retry_after_ms,
                    });
                }
                tokio::time::sleep(Duration::from_millis(retry_after_ms.max(1))).await;
            }
            Err(e) => {
                tracing::debug!(error = %e, "cluster connection bucket unavailable; local pacing only");
                return Ok(());
            }
        }
    }
}
