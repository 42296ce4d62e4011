//! Reading many breakers in one round trip, for a node's resync and the health view.

use redis::Value;

use super::SharedBreaker;
use crate::Millis;
use crate::store::error::StoreError;
use crate::store::redis_store::RedisStore;
use crate::store::replies::{
    array_of, enum_value, int, into_array, opt_string, protocol, time_ms, u32_or_zero, uint_or_zero,
};
use crate::wire::BreakerPhase;

impl RedisStore {
    /// Reads many breakers in one round trip (pipeline). Unknown providers read as CLOSED.
    pub async fn read_breakers(
        &self,
        providers: &[&str],
    ) -> Result<Vec<SharedBreaker>, StoreError> {
        const CMD: &str = "read_breakers";
        if providers.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        pipe.cmd("TIME");
        for provider in providers {
            let [b, f, pr] = self.breaker_keys(provider);
            pipe.cmd("HMGET")
                .arg(b)
                .arg(&["phase", "gen", "cycles", "open_until", "window"]);
            // Bounded: the window holds fewer than `failure_threshold` entries.
            pipe.cmd("ZRANGE").arg(f).arg(0).arg(-1).arg("WITHSCORES");
            pipe.cmd("PTTL").arg(pr);
        }
        let reply: Vec<Value> = self
            .run(
                CMD,
                |mut con| async move { pipe.query_async(&mut con).await },
            )
            .await?;
        if reply.len() != 1 + 3 * providers.len() {
            return Err(protocol(
                CMD,
                format!("unexpected reply count {}", reply.len()),
            ));
        }
        let mut it = reply.into_iter();
        let now = match it.next() {
            Some(t) => time_ms(CMD, t)?,
            None => return Err(protocol(CMD, "missing TIME reply")),
        };
        let mut out = Vec::with_capacity(providers.len());
        for provider in providers {
            let (Some(h), Some(z), Some(pttl)) = (it.next(), it.next(), it.next()) else {
                return Err(protocol(CMD, "short reply"));
            };
            let h = array_of(CMD, h, 5)?;
            let phase = match opt_string(CMD, &h[0])? {
                Some(s) => enum_value(CMD, &s)?,
                None => BreakerPhase::Closed,
            };
            let open_until = uint_or_zero(CMD, &h[3])?;
            let window = uint_or_zero(CMD, &h[4])?;
            let failure_count = count_in_window(CMD, z, now, window)?;
            let retry_after_ms = match phase {
                BreakerPhase::Open => open_until.saturating_sub(now),
                BreakerPhase::HalfOpen => u64::try_from(int(CMD, &pttl)?).unwrap_or(0),
                BreakerPhase::Closed | BreakerPhase::Degraded => 0,
            };
            out.push(SharedBreaker {
                provider: (*provider).to_owned(),
                phase,
                generation: uint_or_zero(CMD, &h[1])?,
                failure_count,
                retry_after_ms,
                open_cycles: u32_or_zero(CMD, &h[2])?,
            });
        }
        Ok(out)
    }
}

/// Failures newer than `now - window` in a `ZRANGE … WITHSCORES` reply (flat pairs in RESP2,
/// pairs in RESP3).
fn count_in_window(
    command: &'static str,
    reply: Value,
    now: Millis,
    window: Millis,
) -> Result<u32, StoreError> {
    let items = into_array(command, reply)?;
    let mut scores = Vec::new();
    if items.iter().all(|v| matches!(v, Value::Array(_))) {
        for pair in items {
            let pair = array_of(command, pair, 2)?;
            scores.push(score(command, &pair[1])?);
        }
    } else {
        for s in items.iter().skip(1).step_by(2) {
            scores.push(score(command, s)?);
        }
    }
    let cutoff = now.saturating_sub(window) as f64;
    let n = scores
        .iter()
        .filter(|&&s| window == 0 || s > cutoff)
        .count();
    Ok(u32::try_from(n).unwrap_or(u32::MAX))
}

fn score(command: &'static str, v: &Value) -> Result<f64, StoreError> {
    match v {
        Value::Double(d) => Ok(*d),
        other => opt_string(command, other)?
            .and_then(|s| s.parse::<f64>().ok())
            .ok_or_else(|| protocol(command, format!("expected a score, got {other:?}"))),
    }
}
