//! Reading many breakers in one round trip, for a node's resync and the health view.

use redis::Value;

use super::SharedBreaker;
use crate::error::StoreError;
use crate::redis_store::RedisStore;
use crate::replies::{
    array_of, enum_value, int, opt_string, protocol, time_ms, u32_or_zero, uint_or_zero,
};
use switchyard_shared::wire::BreakerPhase;

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
        let mut cmds = vec![redis::cmd("TIME")];
        for provider in providers {
            let [b, _, pr] = self.breaker_keys(provider);
            let mut fields = redis::cmd("HMGET");
            fields.arg(b).arg(&[
                "phase",
                "gen",
                "cycles",
                "open_until",
                "failures",
                "last_failure",
                "quiet",
            ]);
            let mut ttl = redis::cmd("PTTL");
            ttl.arg(pr);
            cmds.extend([fields, ttl]);
        }
        let reply: Vec<Value> = self.read_pipeline_now(CMD, cmds).await?;
        if reply.len() != 1 + 2 * providers.len() {
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
            let (Some(h), Some(pttl)) = (it.next(), it.next()) else {
                return Err(protocol(CMD, "short reply"));
            };
            let h = array_of(CMD, h, 7)?;
            let mut phase = match opt_string(CMD, &h[0])? {
                Some(s) => enum_value(CMD, &s)?,
                None => BreakerPhase::Closed,
            };
            let failure_count = u32_or_zero(CMD, &h[4])?;
            // The scripts' quiet decay, as a read sees it (a read writes nothing): a DEGRADED
            // breaker without a failure for its quiet window is CLOSED (its count is cleared by
            // the next script that runs, as the pure breaker's view and refresh).
            let (last_failure, quiet) = (uint_or_zero(CMD, &h[5])?, uint_or_zero(CMD, &h[6])?);
            if phase == BreakerPhase::Degraded
                && last_failure > 0
                && quiet > 0
                && now.saturating_sub(last_failure) >= quiet
            {
                phase = BreakerPhase::Closed;
            }
            let open_until = uint_or_zero(CMD, &h[3])?;
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
                open_until_ms: if phase == BreakerPhase::Open {
                    open_until
                } else {
                    0
                },
                at_ms: now,
            });
        }
        Ok(out)
    }
}
