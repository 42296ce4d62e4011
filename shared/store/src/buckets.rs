//! Cluster-wide requests-per-minute limits: a token bucket in Redis on the Redis clock.
//!
//! Why: a per-key RPM limit enforced per node multiplies by the node count. The bucket holds
//! `requests_per_minute` tokens and refills continuously at `rpm / 60000` per millisecond; a
//! request takes one token or nothing (all-or-nothing, so a refusal costs the client nothing).
//! Note the bucket admits a full burst and then the refill, so up to about `2 · rpm` requests
//! can pass in one 60 s window; the node's local sliding-window limiter is stricter.

use std::sync::LazyLock;

use redis::{Script, Value};

use super::error::StoreError;
use super::redis_store::RedisStore;
use super::replies as reply;
use switchyard_shared::Millis;

static TAKE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/bucket_take_v1.lua")));

/// The answer to one take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BucketResult {
    /// A token was taken; `remaining` whole tokens are left.
    Allowed { remaining: u32 },
    /// Empty; one token is back in `retry_after_ms` (always > 0).
    Limited { retry_after_ms: Millis },
}

impl RedisStore {
    /// Takes one token from the bucket of `scope` (`key` or `conn`) and `id`.
    /// `requests_per_minute == 0` means unlimited and never touches Redis.
    pub async fn bucket_take(
        &self,
        scope: &str,
        id: &str,
        requests_per_minute: u32,
    ) -> Result<BucketResult, StoreError> {
        const CMD: &str = "bucket_take";
        if requests_per_minute == 0 {
            return Ok(BucketResult::Allowed {
                remaining: u32::MAX,
            });
        }
        let key = self.keys().rate_bucket(scope, id);
        let value: Value = self
            .run(CMD, |mut con| async move {
                TAKE.key(&key)
                    .arg(requests_per_minute)
                    .invoke_async(&mut con)
                    .await
            })
            .await?;
        let [allowed, n] = reply::int_array::<2>(CMD, &value)?;
        let n = reply::non_negative(CMD, n)?;
        match allowed {
            1 => Ok(BucketResult::Allowed {
                remaining: u32::try_from(n)
                    .map_err(|_| reply::protocol(CMD, "remaining out of range"))?,
            }),
            0 => Ok(BucketResult::Limited {
                retry_after_ms: n.max(1),
            }),
            other => Err(reply::protocol(CMD, format!("allowed flag {other}"))),
        }
    }
}
