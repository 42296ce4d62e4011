//! Cluster-wide `max_concurrent`: each node leases a block of a connection's permits.
//!
//! Why: without it a cap of 1 across five nodes is a cap of 5, and a Redis round trip per
//! request is too slow. So a node asks for the permits it expects to need (its recent peak
//! in-flight plus headroom), sizes its local semaphore to the grant, and renews at about a
//! third of the TTL by asking again. The script purges expired nodes on the Redis clock, so a
//! dead node's permits come back after its TTL, and the live grants never sum above the cap.
//! Without Redis a node falls back to [`local_share`].

use std::sync::LazyLock;

use redis::{Script, Value};

use super::error::StoreError;
use super::redis_store::RedisStore;
use super::replies as reply;
use switchyard_shared::Millis;

static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/permits_acquire_v2.lua")));
static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/permits_release_v1.lua")));

/// A node's share of a cap when Redis is out of reach: `ceil(cap / max(live_nodes, 1))`.
pub fn local_share(cap: u32, live_nodes: u32) -> u32 {
    cap.div_ceil(live_nodes.max(1))
}

impl RedisStore {
    /// Leases up to `want` of the connection's `cap` permits for `ttl_ms`; returns the grant
    /// (possibly 0). Renew by calling again; the new grant replaces the old one. The script
    /// also names the server that ran it, which feeds [`RedisStore::master_generation`].
    pub async fn permits_acquire(
        &self,
        conn: &str,
        node_id: &str,
        want: u32,
        cap: u32,
        ttl_ms: Millis,
    ) -> Result<u32, StoreError> {
        const CMD: &str = "permits_acquire";
        let expiry = self.keys().permit_expiry(conn);
        let grants = self.keys().permit_grants(conn);
        let value: Value = self
            .run(CMD, |mut con| async move {
                ACQUIRE
                    .key(&expiry)
                    .key(&grants)
                    .arg(node_id)
                    .arg(want)
                    .arg(cap)
                    .arg(ttl_ms.max(1))
                    .invoke_async(&mut con)
                    .await
            })
            .await?;
        let parts = reply::array(CMD, &value)?;
        let [granted, run_id] = parts else {
            return Err(reply::protocol(
                CMD,
                "expected the grant and the server's run id",
            ));
        };
        let granted = reply::int(CMD, granted)?;
        let granted = match u32::try_from(granted) {
            Ok(n) if n <= want => n,
            _ => return Err(reply::protocol(CMD, format!("grant {granted} for {want}"))),
        };
        // Before the caller reads the master generation: a new server may lack the last
        // grants (see `master_generation`).
        self.saw_server(&reply::opt_string(CMD, run_id)?.unwrap_or_default());
        Ok(granted)
    }

    /// Returns the node's permits at once (clean shutdown, or the connection left the config).
    pub async fn permits_release(&self, conn: &str, node_id: &str) -> Result<(), StoreError> {
        const CMD: &str = "permits_release";
        let expiry = self.keys().permit_expiry(conn);
        let grants = self.keys().permit_grants(conn);
        let value: Value = self
            .run(CMD, |mut con| async move {
                RELEASE
                    .key(&expiry)
                    .key(&grants)
                    .arg(node_id)
                    .invoke_async(&mut con)
                    .await
            })
            .await?;
        reply::int(CMD, &value).map(|_| ())
    }

    /// The nodes holding live permits of a connection and their grants, sorted by node id.
    /// One atomic round trip (`MULTI` of `TIME`, `ZRANGE … WITHSCORES`, `HGETALL`); expiry is
    /// judged on the Redis clock.
    pub async fn permits_read(&self, conn: &str) -> Result<Vec<(String, u32)>, StoreError> {
        const CMD: &str = "permits_read";
        let expiry = self.keys().permit_expiry(conn);
        let grants = self.keys().permit_grants(conn);
        let value: Value = self
            .run(CMD, |mut con| async move {
                redis::pipe()
                    .atomic()
                    .cmd("TIME")
                    .cmd("ZRANGE")
                    .arg(&expiry)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .cmd("HGETALL")
                    .arg(&grants)
                    .query_async(&mut con)
                    .await
            })
            .await?;
        let parts = reply::array(CMD, &value)?;
        let [time, expiries, grants] = parts else {
            return Err(reply::protocol(CMD, "expected three replies"));
        };
        let now = reply::time_ms(CMD, time.clone())?;
        let mut holders = Vec::new();
        let expiries = pairs(CMD, expiries)?;
        let grants = pairs(CMD, grants)?;
        for (node, granted) in grants {
            let Some((_, until)) = expiries.iter().find(|(n, _)| *n == node) else {
                continue;
            };
            let until: f64 = until
                .parse()
                .map_err(|_| reply::protocol(CMD, "expiry is not a number"))?;
            let granted: u32 = granted
                .parse()
                .map_err(|_| reply::protocol(CMD, "grant is not a number"))?;
            if until > now as f64 && granted > 0 {
                holders.push((node, granted));
            }
        }
        holders.sort();
        Ok(holders)
    }
}

/// A flat `[k1, v1, k2, v2, …]` reply (or a RESP3 map) as string pairs.
fn pairs(command: &'static str, value: &Value) -> Result<Vec<(String, String)>, StoreError> {
    let string = |v: &Value| -> Result<String, StoreError> {
        match v {
            Value::Double(d) => Ok(d.to_string()),
            other => reply::opt_string(command, other)?
                .ok_or_else(|| reply::protocol(command, "nil inside a pair list")),
        }
    };
    if let Value::Map(entries) = value {
        return entries
            .iter()
            .map(|(k, v)| Ok((string(k)?, string(v)?)))
            .collect();
    }
    let items = reply::array(command, value)?;
    if items.len() % 2 != 0 {
        return Err(reply::protocol(command, "odd-length pair list"));
    }
    items
        .chunks_exact(2)
        .map(|kv| Ok((string(&kv[0])?, string(&kv[1])?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_share_rounds_up_and_survives_zero_nodes() {
        assert_eq!(local_share(10, 3), 4);
        assert_eq!(local_share(10, 0), 10);
        assert_eq!(local_share(1, 5), 1);
        assert_eq!(local_share(0, 5), 0);
        assert_eq!(local_share(6, 3), 2);
    }

    #[test]
    fn pair_lists_parse_and_reject_odd_shapes() {
        let flat = Value::Array(vec![
            Value::BulkString(b"a".to_vec()),
            Value::BulkString(b"2".to_vec()),
        ]);
        assert_eq!(pairs("t", &flat), Ok(vec![("a".into(), "2".into())]));
        let odd = Value::Array(vec![Value::BulkString(b"a".to_vec())]);
        assert!(pairs("t", &odd).is_err());
        assert!(reply::time_ms("t", Value::Nil).is_err());
    }
}
