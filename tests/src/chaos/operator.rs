//! Operator writes under a Redis fault, and the invariant that judges them: no operator write
//! is reported as done when it failed, and none refused is applied later (a queued replay
//! over newer state).
//!
//! Why: under `-OOM` Redis still answers `PING` and reads, so a handler that checks Redis with
//! a ping and then ignores a failed write answers 200 while Redis keeps the old state, and
//! the nodes disagree until their next resync.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use switchyard_store::{HealthPolicy, NoopObserver, RedisStore, RedisStoreConfig};

use super::invariants::Violation;
use super::observe::epoch_ms;
use crate::cluster::MGMT_KEY;

/// What an operator asked for, what the node answered, and what Redis held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorWrite {
    /// Epoch ms of the request.
    pub at: u64,
    pub connection: String,
    pub status: u16,
    pub body: String,
    /// The cooldown Redis held before the clear, ms left.
    pub before_ms: u64,
    /// Right after the answer (the fault still on); `None` when unreadable.
    pub during_ms: Option<u64>,
    /// After the fault healed, and how long after the request that was.
    pub after_ms: Option<u64>,
    pub after_delay_ms: u64,
}

impl OperatorWrite {
    /// 200 with `ok: true` and nothing failed: the node says the write is done.
    pub fn reported_done(&self) -> bool {
        let v: Value = serde_json::from_str(&self.body).unwrap_or(Value::Null);
        self.status == 200 && v["ok"] == true && v["failed"].as_u64() == Some(0)
    }

    /// An error status with `error.type` and `error.code`.
    fn definite_refusal(&self) -> bool {
        let v: Value = serde_json::from_str(&self.body).unwrap_or(Value::Null);
        self.status >= 400 && v["error"]["type"].is_string() && v["error"]["code"].is_string()
    }
}

/// The invariant: a clear reported done left no cooldown in Redis; a clear not reported done
/// was refused with a definite error and did not clear the cooldown later (a cooldown still
/// more than a second from its natural end when read after the heal must still be there).
pub fn operator_writes_honest(ops: &[OperatorWrite]) -> Vec<Violation> {
    let mut out = Vec::new();
    for op in ops {
        let what = format!(
            "clear of {} answered {} {}",
            op.connection,
            op.status,
            op.body.chars().take(160).collect::<String>()
        );
        if op.reported_done() {
            if op.during_ms.is_some_and(|ms| ms > 0) {
                out.push(Violation {
                    at: op.at,
                    detail: format!(
                        "{what}, but Redis kept the cooldown ({:?} ms left)",
                        op.during_ms
                    ),
                });
            }
            continue;
        }
        if !op.definite_refusal() {
            out.push(Violation {
                at: op.at,
                detail: format!("{what}: neither done nor a definite error"),
            });
        }
        let still_due = op.before_ms > op.after_delay_ms + 1_000;
        if still_due && op.after_ms == Some(0) {
            out.push(Violation {
                at: op.at,
                detail: format!(
                    "{what}, yet the cooldown ({} ms left before) was gone from Redis {} ms later: a refused write was applied",
                    op.before_ms, op.after_delay_ms
                ),
            });
        }
    }
    out
}

/// A store reading the chaos cluster's Redis (the nodes' key prefix).
pub(super) fn reader(redis_url: &str) -> Option<RedisStore> {
    RedisStore::connect(
        &RedisStoreConfig {
            url: redis_url.to_owned(),
            key_prefix: "sy-test:".to_owned(),
            timeout_ms: 1_000,
            health: HealthPolicy::default(),
        },
        Arc::new(NoopObserver),
    )
    .ok()
}

/// The cooldown Redis holds for `conn`, ms left (`None` when unreadable).
pub(super) async fn cooldown_left(store: &RedisStore, conn: &str) -> Option<u64> {
    store
        .read_connections(&[conn])
        .await
        .ok()?
        .first()
        .map(|r| r.remaining_ms)
}

/// Waits (up to `within`) until Redis holds a cooldown for `conn`; returns its ms left (0 if
/// none came).
pub(super) async fn wait_cooling(store: &RedisStore, conn: &str, within: Duration) -> u64 {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let left = cooldown_left(store, conn).await.unwrap_or(0);
        if left > 0 || tokio::time::Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `POST /api/resilience/cooldowns {"connectionIds": [conn]}` on `admin`, then Redis read at
/// once. The after-heal read is filled in by the caller.
pub(super) async fn clear(
    admin: SocketAddr,
    store: &RedisStore,
    conn: &str,
    before_ms: u64,
) -> OperatorWrite {
    let at = epoch_ms();
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build();
    let sent = match http {
        Ok(h) => {
            h.post(format!("http://{admin}/api/resilience/cooldowns"))
                .header("authorization", format!("Bearer {MGMT_KEY}"))
                .json(&serde_json::json!({"connectionIds": [conn]}))
                .send()
                .await
        }
        Err(e) => Err(e),
    };
    let (status, body) = match sent {
        Ok(resp) => {
            let status = resp.status().as_u16();
            (status, resp.text().await.unwrap_or_default())
        }
        Err(e) => (0, format!("transport: {e}")),
    };
    let during_ms = cooldown_left(store, conn).await;
    OperatorWrite {
        at,
        connection: conn.to_owned(),
        status,
        body,
        before_ms,
        during_ms,
        after_ms: None,
        after_delay_ms: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(status: u16, body: &str, during: u64, after: u64) -> OperatorWrite {
        OperatorWrite {
            at: 1,
            connection: "b2".to_owned(),
            status,
            body: body.to_owned(),
            before_ms: 30_000,
            during_ms: Some(during),
            after_ms: Some(after),
            after_delay_ms: 5_000,
        }
    }

    const DONE: &str = r#"{"cleared":1,"failed":0,"ok":true}"#;
    const REFUSED: &str = r#"{"error":{"type":"server_error","code":"cluster_store_unavailable","message":"Redis: OOM"}}"#;

    #[test]
    fn a_clear_reported_done_while_redis_kept_the_cooldown_is_a_violation() {
        let v = operator_writes_honest(&[op(200, DONE, 28_000, 23_000)]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("Redis kept"), "{v:?}");
        assert!(operator_writes_honest(&[op(200, DONE, 0, 0)]).is_empty());
    }

    #[test]
    fn a_refusal_must_be_definite_and_never_applied_later() {
        assert!(operator_writes_honest(&[op(503, REFUSED, 28_000, 23_000)]).is_empty());
        let replayed = operator_writes_honest(&[op(503, REFUSED, 28_000, 0)]);
        assert_eq!(replayed.len(), 1, "{replayed:?}");
        assert!(replayed[0].detail.contains("applied"));
        let vague = operator_writes_honest(&[op(200, r#"{"ok":false}"#, 28_000, 23_000)]);
        assert_eq!(vague.len(), 1, "{vague:?}");
        assert!(vague[0].detail.contains("neither"));
        // A cooldown that ran out on its own is no replay.
        let mut expired = op(503, REFUSED, 3_000, 0);
        expired.before_ms = 4_000;
        assert!(operator_writes_honest(&[expired]).is_empty());
    }
}
