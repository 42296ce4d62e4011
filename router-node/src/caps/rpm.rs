//! Per-key requests per minute across the cluster: one token per request from a bucket in
//! Redis (capacity `requests_per_minute`, continuous refill, on the Redis clock).
//!
//! The node's local limiter still runs at ingress, so a key never exceeds its rate on one
//! node; this bucket makes the same rate hold for the sum of all nodes. With Redis unreachable
//! it fails open to the local limiter: a rate limit is not worth refusing traffic over.

use actix_web::http::StatusCode;
use switchyard_shared::store::BucketResult;

use crate::http::auth::ClientKey;
use crate::http::errors::{ErrorSource, GatewayError};
use crate::runtime::Runtime;

/// Takes one token of `key`'s cluster bucket (redis mode only).
pub async fn check_key(rt: &Runtime, key: &ClientKey) -> Result<(), GatewayError> {
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
