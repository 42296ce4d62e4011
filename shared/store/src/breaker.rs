//! The cluster-wide provider breaker.
//!
//! Why: a provider that fails on one node fails on all of them, so failures are counted in one
//! window per provider, the CLOSED → OPEN transition happens once cluster-wide (one
//! generation), and exactly one node at a time may send the half-open probe. The probe is a
//! fenced lease ([`KeySpace::breaker_probe`](super::KeySpace::breaker_probe) with a generation
//! from [`KeySpace::breaker_probe_fence`](super::KeySpace::breaker_probe_fence), which is never
//! reset), so the late result of an expired probe is ignored.
//!
//! One semantics: the scripts run the same machine as the node's pure breaker
//! ([`switchyard_shared::breaker::Breaker`]) — failures counted since the last close minus one per success,
//! DEGRADED at the band, OPEN at the threshold, an elapsed OPEN read as HALF_OPEN, and the reset
//! escalation `reset · 2^(cycles − backoff_escalation_count)` capped at `reset ·
//! max_backoff_multiplier`. The only difference is the probe budget: one probe cluster-wide.
//! `tests/tests/store_breaker_model.rs` drives both with the same random events.
//!
//! Keys: the breaker hash (`phase`, `gen` = transition counter, `cycles`, `open_until` on the
//! Redis clock, `failures`, `band`) and the probe lease; the v1 failure-window ZSET is only
//! deleted. Scripts never publish; the caller publishes a `BreakerTransition` when
//! [`BreakerChange::changed`] says so.

use std::sync::LazyLock;

use redis::{Script, Value};

use super::error::StoreError;
use super::redis_store::RedisStore;
use super::replies::{
    array_of, enum_value, int, into_array, opt_string, protocol, u32_or_zero, uint_or_zero,
};
use switchyard_shared::Millis;
use switchyard_shared::breaker::BreakerProfile;
use switchyard_shared::wire::BreakerPhase;

macro_rules! breaker_script {
    ($file:literal) => {
        LazyLock::new(|| {
            Script::new(concat!(
                include_str!("lua/breaker_common_v2.lua"),
                include_str!($file)
            ))
        })
    };
}

mod read;

static FAILURE: LazyLock<Script> = breaker_script!("lua/breaker_failure_v2.lua");
static SUCCESS: LazyLock<Script> = breaker_script!("lua/breaker_success_v2.lua");
static PROBE_ACQUIRE: LazyLock<Script> = breaker_script!("lua/breaker_probe_acquire_v2.lua");
static PROBE_RESULT: LazyLock<Script> = breaker_script!("lua/breaker_probe_result_v2.lua");
static RESET: LazyLock<Script> = breaker_script!("lua/breaker_reset_v2.lua");
static PROBE_RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/breaker_probe_release_v1.lua")));

/// The provider's breaker profile, as the scripts need it (see [`BreakerParams::from_profile`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerParams {
    /// Failures (since the last close, minus one per success) that open the breaker.
    pub failure_threshold: u32,
    /// Failures that enter DEGRADED ([`BreakerProfile::degradation_at`]).
    pub degradation_at: u32,
    /// The open period before escalation.
    pub reset_timeout_ms: Millis,
    /// Cap on the escalated open period (`reset · max_backoff_multiplier`).
    pub max_reset_timeout_ms: Millis,
    /// Open cycles tolerated before the open period starts doubling.
    pub backoff_escalation_count: u32,
}

impl BreakerParams {
    /// The parameters of a (normalised) profile, so the shared breaker and the local one agree.
    pub fn from_profile(profile: &BreakerProfile) -> Self {
        let p = profile.normalized().0;
        Self {
            failure_threshold: p.failure_threshold,
            degradation_at: p.degradation_at(),
            reset_timeout_ms: p.reset_timeout_ms,
            max_reset_timeout_ms: p
                .reset_timeout_ms
                .saturating_mul(u64::from(p.max_backoff_multiplier.max(1))),
            backoff_escalation_count: p.backoff_escalation_count,
        }
    }

    fn threshold(&self) -> u32 {
        self.failure_threshold.max(1)
    }

    fn band(&self) -> u32 {
        self.degradation_at
            .clamp(1, self.threshold().saturating_sub(1).max(1))
    }

    fn max_reset(&self) -> Millis {
        self.max_reset_timeout_ms.max(self.reset_timeout_ms)
    }
}

/// A provider's shared breaker, times relative to the Redis clock at the read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedBreaker {
    pub provider: String,
    pub phase: BreakerPhase,
    /// Transition counter: bumped on every phase change, never reset.
    pub generation: u64,
    /// Failures since the last close, minus one per success (as the local breaker counts).
    pub failure_count: u32,
    /// OPEN: until the probe may be sent; HALF_OPEN: the probe lease's remaining time.
    pub retry_after_ms: Millis,
    /// Failed probes since the last close (drives the escalation).
    pub open_cycles: u32,
    /// OPEN: the end of the open period on the Redis clock; 0 otherwise.
    pub open_until_ms: Millis,
    /// The Redis clock when this was read (the script's `TIME`).
    pub at_ms: Millis,
}

impl SharedBreaker {
    /// The phase with the lazy step applied, as [`switchyard_shared::breaker::Breaker::view`] reads it: an
    /// OPEN whose period has passed is HALF_OPEN (a read does not write that transition).
    pub fn current_phase(&self) -> BreakerPhase {
        if self.phase == BreakerPhase::Open && self.at_ms >= self.open_until_ms {
            BreakerPhase::HalfOpen
        } else {
            self.phase
        }
    }
}

/// A script's view of the breaker before and after it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BreakerChange {
    pub before: BreakerPhase,
    pub after: SharedBreaker,
}

impl BreakerChange {
    /// The phase changed: the caller publishes a transition.
    pub fn changed(&self) -> bool {
        self.before != self.after.phase
    }
}

/// The answer to a probe request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeGrant {
    /// This caller sends the one probe; report its result with `generation`.
    Granted { generation: u64, ttl_ms: Millis },
    /// Someone else probes, or the open period has not passed. `retry_after_ms` is 0 when the
    /// breaker is closed (no probe is needed).
    Denied { retry_after_ms: Millis },
}

impl RedisStore {
    /// Counts one failure of an attempt admitted while CLOSED/DEGRADED: DEGRADED at the band,
    /// OPEN at the threshold. Counted without effect while OPEN; ignored while HALF_OPEN.
    pub async fn breaker_failure(
        &self,
        provider: &str,
        p: &BreakerParams,
    ) -> Result<BreakerChange, StoreError> {
        const CMD: &str = "breaker_failure";
        let [b, f, pr] = self.breaker_keys(provider);
        let p = *p;
        let reply: Value = self
            .run(CMD, |mut con| async move {
                FAILURE
                    .key(b)
                    .key(f)
                    .key(pr)
                    .arg(p.threshold())
                    .arg(p.band())
                    .arg(p.reset_timeout_ms)
                    .arg(p.max_reset())
                    .arg(p.backoff_escalation_count)
                    .invoke_async(&mut con)
                    .await
            })
            .await?;
        parse_change(CMD, provider, reply)
    }

    /// A success while CLOSED/DEGRADED takes one failure off the count (DEGRADED → CLOSED back
    /// within the band). OPEN/HALF_OPEN are untouched: only a probe result closes them.
    pub async fn breaker_success(&self, provider: &str) -> Result<BreakerChange, StoreError> {
        const CMD: &str = "breaker_success";
        let [b, f, pr] = self.breaker_keys(provider);
        let reply: Value = self
            .run(CMD, |mut con| async move {
                SUCCESS.key(b).key(f).key(pr).invoke_async(&mut con).await
            })
            .await?;
        parse_change(CMD, provider, reply)
    }

    /// Asks for the half-open probe. At most one live grant exists cluster-wide.
    pub async fn breaker_probe_acquire(
        &self,
        provider: &str,
        owner: &str,
        ttl_ms: Millis,
    ) -> Result<ProbeGrant, StoreError> {
        Ok(self
            .breaker_probe_acquire_at(provider, owner, ttl_ms)
            .await?
            .0)
    }

    /// [`RedisStore::breaker_probe_acquire`], with the Redis clock at which it was decided.
    pub async fn breaker_probe_acquire_at(
        &self,
        provider: &str,
        owner: &str,
        ttl_ms: Millis,
    ) -> Result<(ProbeGrant, Millis), StoreError> {
        const CMD: &str = "breaker_probe_acquire";
        let [b, f, pr] = self.breaker_keys(provider);
        let fence = self.keys().breaker_probe_fence(provider);
        let owner = owner.to_owned();
        let ttl_ms = ttl_ms.max(1);
        let reply: Value = self
            .run(CMD, |mut con| async move {
                PROBE_ACQUIRE
                    .key(b)
                    .key(f)
                    .key(pr)
                    .key(fence)
                    .arg(owner)
                    .arg(ttl_ms)
                    .invoke_async(&mut con)
                    .await
            })
            .await?;
        let v = into_array(CMD, reply)?;
        match (v.len(), v.first().map(|x| int(CMD, x)).transpose()?) {
            (4, Some(1)) => Ok((
                ProbeGrant::Granted {
                    generation: uint_or_zero(CMD, &v[1])?,
                    ttl_ms: uint_or_zero(CMD, &v[2])?,
                },
                uint_or_zero(CMD, &v[3])?,
            )),
            (3, Some(0)) => Ok((
                ProbeGrant::Denied {
                    retry_after_ms: uint_or_zero(CMD, &v[1])?,
                },
                uint_or_zero(CMD, &v[2])?,
            )),
            _ => Err(protocol(CMD, format!("unexpected probe reply {v:?}"))),
        }
    }

    /// Reports the probe's outcome. `None` when `generation` is stale (the probe expired or was
    /// replaced): nothing changed.
    pub async fn breaker_probe_result(
        &self,
        provider: &str,
        generation: u64,
        success: bool,
        p: &BreakerParams,
    ) -> Result<Option<BreakerChange>, StoreError> {
        const CMD: &str = "breaker_probe_result";
        let [b, f, pr] = self.breaker_keys(provider);
        let p = *p;
        let reply: Value = self
            .run(CMD, |mut con| async move {
                PROBE_RESULT
                    .key(b)
                    .key(f)
                    .key(pr)
                    .arg(generation)
                    .arg(if success { "1" } else { "0" })
                    .arg(p.reset_timeout_ms)
                    .arg(p.max_reset())
                    .arg(p.backoff_escalation_count)
                    .invoke_async(&mut con)
                    .await
            })
            .await?;
        if matches!(&reply, Value::Array(v) if v.is_empty()) || matches!(reply, Value::Nil) {
            return Ok(None);
        }
        parse_change(CMD, provider, reply).map(Some)
    }

    /// Hands back the probe lease `generation` held by `owner` when its probe never reached
    /// upstream (no outcome will be reported). `true` when it was still held and is now free.
    pub async fn breaker_probe_release(
        &self,
        provider: &str,
        generation: u64,
        owner: &str,
    ) -> Result<bool, StoreError> {
        const CMD: &str = "breaker_probe_release";
        let key = self.keys().breaker_probe(provider);
        let owner = owner.to_owned();
        let reply: Value = self
            .run(CMD, |mut con| async move {
                PROBE_RELEASE
                    .key(key)
                    .arg(generation)
                    .arg(owner)
                    .invoke_async(&mut con)
                    .await
            })
            .await?;
        Ok(int(CMD, &reply)? == 1)
    }

    /// The fence at dispatch: whether probe lease `generation` is still the live one (it did
    /// not expire, and no other node took the next one).
    pub async fn breaker_probe_holds(
        &self,
        provider: &str,
        generation: u64,
    ) -> Result<bool, StoreError> {
        const CMD: &str = "breaker_probe_holds";
        let key = self.keys().breaker_probe(provider);
        let reply: Option<String> = self
            .run(CMD, |mut con| async move {
                redis::cmd("HGET")
                    .arg(key)
                    .arg("gen")
                    .query_async(&mut con)
                    .await
            })
            .await?;
        Ok(reply.is_some_and(|g| g == generation.to_string()))
    }

    /// Operator reset to CLOSED (failures and any probe lease dropped).
    pub async fn breaker_reset(&self, provider: &str) -> Result<BreakerChange, StoreError> {
        const CMD: &str = "breaker_reset";
        let [b, f, pr] = self.breaker_keys(provider);
        let reply: Value = self
            .run(CMD, |mut con| async move {
                RESET.key(b).key(f).key(pr).invoke_async(&mut con).await
            })
            .await?;
        parse_change(CMD, provider, reply)
    }

    fn breaker_keys(&self, provider: &str) -> [String; 3] {
        let k = self.keys();
        [
            k.breaker(provider),
            k.breaker_failures(provider),
            k.breaker_probe(provider),
        ]
    }
}

fn parse_change(
    command: &'static str,
    provider: &str,
    reply: Value,
) -> Result<BreakerChange, StoreError> {
    let v = array_of(command, reply, 8)?;
    let before = phase(command, &v[0])?;
    Ok(BreakerChange {
        before,
        after: SharedBreaker {
            provider: provider.to_owned(),
            phase: phase(command, &v[1])?,
            generation: uint_or_zero(command, &v[2])?,
            failure_count: u32_or_zero(command, &v[3])?,
            retry_after_ms: uint_or_zero(command, &v[4])?,
            open_cycles: u32_or_zero(command, &v[5])?,
            open_until_ms: uint_or_zero(command, &v[6])?,
            at_ms: uint_or_zero(command, &v[7])?,
        },
    })
}

fn phase(command: &'static str, v: &Value) -> Result<BreakerPhase, StoreError> {
    match opt_string(command, v)? {
        Some(s) => enum_value(command, &s),
        None => Err(protocol(command, "missing breaker phase")),
    }
}
