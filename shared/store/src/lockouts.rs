//! Per-model lockouts in Redis.
//!
//! Why: a model-scoped failure (a per-model quota, a 404 for one model) must lock that model on
//! that connection on every node, while the connection keeps serving its other models. Each
//! lockout is its own hash ([`KeySpace::lockout`](super::KeySpace::lockout): `until`, `count`,
//! `reason`) expiring with the lock (`PX`; Redis 7.0 has no per-field expiry), and a set per
//! connection ([`KeySpace::lockout_index`](super::KeySpace::lockout_index), members
//! `provider\u{1f}model`) lets a resync find them without `SCAN`. Extend-only and count = max,
//! as in [`switchyard_shared::lockout`], so replaying writes is safe.

use std::sync::LazyLock;

use redis::{Script, Value};

use super::connections::{RESYNC_CHUNK, conn_script};
use super::error::StoreError;
use super::redis_store::RedisStore;
use super::replies::{
    array_of, int, into_array, opt_enum, opt_string, protocol, u32_or_zero, uint_or_zero,
};
use switchyard_shared::Millis;
use switchyard_shared::outcome::FailureReason;

// Lockout writes bump the connection record's version, so they share its prelude.
static EXTEND: LazyLock<Script> = conn_script!("lua/lockout_extend_v3.lua");
static DECAY: LazyLock<Script> = conn_script!("lua/lockout_decay_v3.lua");
static CLEAR: LazyLock<Script> = conn_script!("lua/lockout_clear_v3.lua");
const READ_SOURCE: &str = include_str!("lua/lockout_read_v1.lua");
static READ: LazyLock<Script> = LazyLock::new(|| Script::new(READ_SOURCE));

/// Separates provider and model in index members (a control character no id contains).
const MEMBER_SEP: char = '\u{1f}';

/// A live lockout, its time relative to the Redis clock at the read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockoutRecord {
    pub provider: String,
    pub conn: String,
    pub model: String,
    pub remaining_ms: Millis,
    pub failure_count: u32,
    pub reason: Option<FailureReason>,
}

/// What a lockout write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockoutApplied {
    /// The stored lockout (the longer one, when it was already longer).
    pub record: LockoutRecord,
    /// Something changed (deadline, count or reason): the caller publishes `LockoutSet`. When
    /// the stored lockout already covered this one, a peer announced it already.
    pub applied: bool,
    /// The connection record's version after the write.
    pub version: u64,
}

fn member(provider: &str, model: &str) -> String {
    format!("{provider}{MEMBER_SEP}{model}")
}

impl RedisStore {
    /// Extend-only lockout write; the stored count is the max of both. Returns the stored
    /// lockout (the longer one, when it was already longer).
    pub async fn lockout_extend(
        &self,
        provider: &str,
        conn: &str,
        model: &str,
        duration_ms: Millis,
        failure_count: u32,
        reason: FailureReason,
    ) -> Result<LockoutRecord, StoreError> {
        Ok(self
            .lockout_extend_applied(provider, conn, model, duration_ms, failure_count, reason)
            .await?
            .record)
    }

    /// [`RedisStore::lockout_extend`], saying whether anything changed and with the connection
    /// record's version.
    pub async fn lockout_extend_applied(
        &self,
        provider: &str,
        conn: &str,
        model: &str,
        duration_ms: Millis,
        failure_count: u32,
        reason: FailureReason,
    ) -> Result<LockoutApplied, StoreError> {
        const CMD: &str = "lockout_extend";
        let key = self.keys().lockout(provider, conn, model);
        let index = self.keys().lockout_index(conn);
        let record_key = self.keys().connection(conn);
        let log = self.keys().changelog();
        let id = conn.to_owned();
        let m = member(provider, model);
        let reply: Value = self
            .run(CMD, |mut con| async move {
                EXTEND
                    .key(key)
                    .key(index)
                    .key(record_key)
                    .key(log)
                    .arg(duration_ms)
                    .arg(failure_count)
                    .arg(reason.as_str())
                    .arg(m)
                    .arg(id)
                    .invoke_async(&mut con)
                    .await
            })
            .await?;
        let v = array_of(CMD, reply, 5)?;
        Ok(LockoutApplied {
            record: LockoutRecord {
                provider: provider.to_owned(),
                conn: conn.to_owned(),
                model: model.to_owned(),
                remaining_ms: uint_or_zero(CMD, &v[0])?,
                failure_count: u32_or_zero(CMD, &v[1])?,
                reason: opt_enum(CMD, &v[2])?,
            },
            applied: int(CMD, &v[3])? == 1,
            version: uint_or_zero(CMD, &v[4])?,
        })
    }

    /// A success on the model: halves the failure count (written only when it is above 0);
    /// at 0 the lockout is removed.
    pub async fn lockout_decay(
        &self,
        provider: &str,
        conn: &str,
        model: &str,
    ) -> Result<(), StoreError> {
        const CMD: &str = "lockout_decay";
        let key = self.keys().lockout(provider, conn, model);
        let index = self.keys().lockout_index(conn);
        let record_key = self.keys().connection(conn);
        let log = self.keys().changelog();
        let id = conn.to_owned();
        let m = member(provider, model);
        let reply: Value = self
            .run(CMD, |mut con| async move {
                DECAY
                    .key(key)
                    .key(index)
                    .key(record_key)
                    .key(log)
                    .arg(m)
                    .arg(id)
                    .invoke_async(&mut con)
                    .await
            })
            .await?;
        array_of(CMD, reply, 2).map(|_| ())
    }

    /// Removes one lockout. `true` when it existed.
    pub async fn lockout_clear(
        &self,
        provider: &str,
        conn: &str,
        model: &str,
    ) -> Result<bool, StoreError> {
        let removed = self
            .clear_members(conn, vec![member(provider, model)])
            .await?;
        Ok(removed > 0)
    }

    /// Removes every lockout of a connection. Returns how many were live.
    pub async fn lockout_clear_connection(&self, conn: &str) -> Result<u32, StoreError> {
        let members = self.lockout_members(conn).await?;
        if members.is_empty() {
            return Ok(0);
        }
        self.clear_members(conn, members).await
    }

    /// The live lockouts of a connection; index members whose lockout expired are pruned.
    pub async fn read_lockouts(&self, conn: &str) -> Result<Vec<LockoutRecord>, StoreError> {
        const CMD: &str = "read_lockouts";
        let members = self.lockout_members(conn).await?;
        if members.is_empty() {
            return Ok(Vec::new());
        }
        let index = self.keys().lockout_index(conn);
        let keys: Vec<String> = members
            .iter()
            .map(|m| self.member_key(conn, m))
            .collect::<Result<_, _>>()?;
        let reply: Value = self
            .run(CMD, |mut con| async move {
                let mut inv = READ.key(index);
                for (key, m) in keys.iter().zip(&members) {
                    inv.key(key).arg(m);
                }
                inv.invoke_async(&mut con).await
            })
            .await?;
        parse_lockouts(CMD, conn, reply)
    }

    /// The live lockouts of many connections (a resync's connections whose version moved), in
    /// two pipelined round trips per [`RESYNC_CHUNK`] connections instead of two sequential
    /// ones per connection: the index sets, then the read script for those that have members.
    /// The order follows `conns`.
    pub async fn read_lockouts_many(
        &self,
        conns: &[&str],
    ) -> Result<Vec<Vec<LockoutRecord>>, StoreError> {
        let mut out = Vec::with_capacity(conns.len());
        for chunk in conns.chunks(RESYNC_CHUNK) {
            out.extend(self.read_lockouts_chunk(chunk).await?);
        }
        Ok(out)
    }

    async fn read_lockouts_chunk(
        &self,
        conns: &[&str],
    ) -> Result<Vec<Vec<LockoutRecord>>, StoreError> {
        const CMD: &str = "read_lockouts";
        if conns.is_empty() {
            return Ok(Vec::new());
        }
        let cmds = conns
            .iter()
            .map(|conn| {
                let mut cmd = redis::cmd("SMEMBERS");
                cmd.arg(self.keys().lockout_index(conn));
                cmd
            })
            .collect();
        let members: Vec<Vec<String>> = self
            .read_pipeline("lockout_index", cmds)
            .await?
            .into_iter()
            .map(redis::from_redis_value)
            .collect::<Result<_, _>>()
            .map_err(|e| protocol(CMD, e.to_string()))?;
        if members.len() != conns.len() {
            return Err(protocol(CMD, "SMEMBERS reply count"));
        }
        let locked: Vec<(usize, Vec<String>)> = members
            .into_iter()
            .enumerate()
            .filter(|(_, m)| !m.is_empty())
            .collect();
        let mut out = vec![Vec::new(); conns.len()];
        if locked.is_empty() {
            return Ok(out);
        }
        // A pipelined EVALSHA is not retried after NOSCRIPT, so the pipeline loads it first.
        let mut pipe = redis::pipe();
        pipe.cmd("SCRIPT").arg("LOAD").arg(READ_SOURCE).ignore();
        for (i, m) in &locked {
            let mut inv = READ.key(self.keys().lockout_index(conns[*i]));
            for member in m {
                inv.key(self.member_key(conns[*i], member)?).arg(member);
            }
            pipe.invoke_script(&inv);
        }
        let replies: Vec<Value> = self
            .run_bulk(
                CMD,
                |mut con| async move { pipe.query_async(&mut con).await },
            )
            .await?;
        if replies.len() != locked.len() {
            return Err(protocol(CMD, "script reply count"));
        }
        for ((i, _), reply) in locked.iter().zip(replies) {
            out[*i] = parse_lockouts(CMD, conns[*i], reply)?;
        }
        Ok(out)
    }

    async fn lockout_members(&self, conn: &str) -> Result<Vec<String>, StoreError> {
        let index = self.keys().lockout_index(conn);
        self.run("lockout_index", |mut con| async move {
            redis::cmd("SMEMBERS")
                .arg(index)
                .query_async(&mut con)
                .await
        })
        .await
    }

    async fn clear_members(&self, conn: &str, members: Vec<String>) -> Result<u32, StoreError> {
        const CMD: &str = "lockout_clear";
        let index = self.keys().lockout_index(conn);
        let record_key = self.keys().connection(conn);
        let log = self.keys().changelog();
        let id = conn.to_owned();
        let keys: Vec<String> = members
            .iter()
            .map(|m| self.member_key(conn, m))
            .collect::<Result<_, _>>()?;
        let reply: Value = self
            .run(CMD, |mut con| async move {
                let mut inv = CLEAR.key(record_key);
                inv.key(index);
                for (key, m) in keys.iter().zip(&members) {
                    inv.key(key).arg(m);
                }
                inv.key(log).arg(id).invoke_async(&mut con).await
            })
            .await?;
        let v = array_of(CMD, reply, 2)?;
        u32_or_zero(CMD, &v[0])
    }

    fn member_key(&self, conn: &str, m: &str) -> Result<String, StoreError> {
        let (provider, model) = split_member("lockout_index", m)?;
        Ok(self.keys().lockout(provider, conn, model))
    }
}

/// The read script's rows as records.
fn parse_lockouts(
    command: &'static str,
    conn: &str,
    reply: Value,
) -> Result<Vec<LockoutRecord>, StoreError> {
    into_array(command, reply)?
        .into_iter()
        .map(|row| {
            let f = array_of(command, row, 4)?;
            let m = opt_string(command, &f[0])?.unwrap_or_default();
            let (provider, model) = split_member(command, &m)?;
            Ok(LockoutRecord {
                provider: provider.to_owned(),
                conn: conn.to_owned(),
                model: model.to_owned(),
                remaining_ms: uint_or_zero(command, &f[1])?,
                failure_count: u32_or_zero(command, &f[2])?,
                reason: opt_enum(command, &f[3])?,
            })
        })
        .collect()
}

fn split_member<'a>(command: &'static str, m: &'a str) -> Result<(&'a str, &'a str), StoreError> {
    m.split_once(MEMBER_SEP)
        .ok_or_else(|| protocol(command, format!("malformed lockout index member {m:?}")))
}
