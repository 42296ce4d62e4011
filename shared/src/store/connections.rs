//! Connection cooldowns, backoff levels and terminal states in Redis.
//!
//! Why: a 429 seen by one node must cool the connection on every node, and the backoff level
//! must rise once per incident, not once per node. The Lua scripts mirror the pure policy in
//! [`crate::cooldown`]: extend-only deadlines, the level raised at most once per cooldown
//! window (the cluster-wide thundering-herd guard) and sticky terminal states. Deadlines are
//! computed on the Redis clock and returned as remaining milliseconds.
//!
//! One hash per connection ([`KeySpace::connection`](super::KeySpace::connection)):
//! `until` (epoch ms, Redis clock), `level`, `reason`, `terminal`, `err`. Scripts never
//! publish; the caller publishes an event when a script reports a change.

use std::sync::LazyLock;

use redis::{Script, Value};

use super::error::StoreError;
use super::redis_store::RedisStore;
use super::replies::{array_of, int, into_array, opt_enum, time_ms, u32_or_zero, uint_or_zero};
use crate::Millis;
use crate::outcome::{FailureReason, TerminalStatus};

/// How long a connection hash outlives its cooldown, so the backoff level survives the window
/// (the level decays on successes, not on time).
pub const LEVEL_RETENTION_MS: Millis = 24 * 60 * 60 * 1000;

/// Longest last-error text stored (characters).
const LAST_ERROR_MAX_CHARS: usize = crate::cooldown::LAST_ERROR_MAX_CHARS;

static EXTEND: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/cooldown_extend_v1.lua")));
static SUCCESS: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/cooldown_success_v1.lua")));
static CLEAR: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/cooldown_clear_v1.lua")));
static TERMINAL_SET: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/terminal_set_v1.lua")));
static TERMINAL_CLEAR: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/terminal_clear_v1.lua")));

/// One failure to write: the cooldown the local policy decided on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CooldownWrite<'a> {
    pub conn: &'a str,
    pub duration_ms: Millis,
    /// The level the local policy proposes; stored only outside an active window.
    pub backoff_level: u32,
    pub reason: FailureReason,
    /// Set when the same failure also made the connection terminal.
    pub terminal: Option<TerminalStatus>,
    pub last_error: &'a str,
}

/// What the extend script did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CooldownApplied {
    /// Something changed (deadline, level or terminal): the caller publishes.
    pub applied: bool,
    /// Remaining cooldown after the write (the stored one, when it was longer).
    pub remaining_ms: Millis,
    /// The stored level after the write.
    pub backoff_level: u32,
    /// The stored terminal status; when it was already set, nothing was written.
    pub terminal: Option<TerminalStatus>,
}

/// A connection's shared state, times relative to the Redis clock at the read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnRecord {
    pub conn: String,
    pub remaining_ms: Millis,
    pub backoff_level: u32,
    pub reason: Option<FailureReason>,
    pub terminal: Option<TerminalStatus>,
}

impl ConnRecord {
    /// The state of a connection Redis knows nothing about.
    pub fn clean(conn: &str) -> Self {
        Self {
            conn: conn.to_owned(),
            remaining_ms: 0,
            backoff_level: 0,
            reason: None,
            terminal: None,
        }
    }
}

impl RedisStore {
    /// Extend-only cooldown write with the herd guard; never touches a terminal connection.
    pub async fn cooldown_extend(
        &self,
        w: &CooldownWrite<'_>,
    ) -> Result<CooldownApplied, StoreError> {
        const CMD: &str = "cooldown_extend";
        let key = self.keys().connection(w.conn);
        let duration = w.duration_ms;
        let level = w.backoff_level;
        let reason = w.reason.as_str();
        let terminal = w.terminal.map_or("", TerminalStatus::as_str);
        let err: String = w.last_error.chars().take(LAST_ERROR_MAX_CHARS).collect();
        let reply: Value = self
            .run(CMD, |mut con| async move {
                EXTEND
                    .key(key)
                    .arg(duration)
                    .arg(level)
                    .arg(reason)
                    .arg(terminal)
                    .arg(err)
                    .arg(LEVEL_RETENTION_MS)
                    .invoke_async(&mut con)
                    .await
            })
            .await?;
        let v = array_of(CMD, reply, 4)?;
        Ok(CooldownApplied {
            applied: int(CMD, &v[0])? == 1,
            remaining_ms: uint_or_zero(CMD, &v[1])?,
            backoff_level: u32_or_zero(CMD, &v[2])?,
            terminal: opt_enum(CMD, &v[3])?,
        })
    }

    /// A success: clears the cooldown and lowers the level by one (no-op on terminal). A
    /// success of an attempt dispatched (`started_epoch_ms`, 0 = unknown) before the last
    /// failure any node applied is stale and changes nothing. The flag is `true` when this
    /// success ended a running cooldown: the caller announces that to the other nodes.
    pub async fn cooldown_success(
        &self,
        conn: &str,
        started_epoch_ms: u64,
    ) -> Result<(ConnRecord, bool), StoreError> {
        const CMD: &str = "cooldown_success";
        let key = self.keys().connection(conn);
        let reply: Value = self
            .run(CMD, |mut con| async move {
                SUCCESS
                    .key(key)
                    .arg(started_epoch_ms)
                    .invoke_async(&mut con)
                    .await
            })
            .await?;
        let v = array_of(CMD, reply, 5)?;
        let record = ConnRecord {
            conn: conn.to_owned(),
            remaining_ms: uint_or_zero(CMD, &v[0])?,
            backoff_level: u32_or_zero(CMD, &v[1])?,
            reason: opt_enum(CMD, &v[2])?,
            terminal: opt_enum(CMD, &v[3])?,
        };
        Ok((record, uint_or_zero(CMD, &v[4])? == 1))
    }

    /// Operator clear of cooldown and level. `false` when the connection is terminal (a
    /// terminal status is cleared only by [`RedisStore::terminal_clear`]).
    pub async fn cooldown_clear(&self, conn: &str) -> Result<bool, StoreError> {
        const CMD: &str = "cooldown_clear";
        let key = self.keys().connection(conn);
        let reply: Value = self
            .run(CMD, |mut con| async move {
                CLEAR.key(key).invoke_async(&mut con).await
            })
            .await?;
        Ok(int(CMD, &reply)? == 1)
    }

    /// Marks the connection terminal. `true` when the stored status changed.
    pub async fn terminal_set(
        &self,
        conn: &str,
        status: TerminalStatus,
    ) -> Result<bool, StoreError> {
        const CMD: &str = "terminal_set";
        let key = self.keys().connection(conn);
        let reply: Value = self
            .run(CMD, |mut con| async move {
                TERMINAL_SET
                    .key(key)
                    .arg(status.as_str())
                    .invoke_async(&mut con)
                    .await
            })
            .await?;
        Ok(int(CMD, &reply)? == 1)
    }

    /// Operator reinstate: the connection starts afresh. `true` when it was terminal.
    pub async fn terminal_clear(&self, conn: &str) -> Result<bool, StoreError> {
        const CMD: &str = "terminal_clear";
        let key = self.keys().connection(conn);
        let reply: Value = self
            .run(CMD, |mut con| async move {
                TERMINAL_CLEAR.key(key).invoke_async(&mut con).await
            })
            .await?;
        Ok(int(CMD, &reply)? == 1)
    }

    /// Reads many connections in one round trip (a pipeline: `TIME`, then one `HMGET` per
    /// connection). Absent keys read as clean records; the order follows `conns`.
    pub async fn read_connections(&self, conns: &[&str]) -> Result<Vec<ConnRecord>, StoreError> {
        const CMD: &str = "read_connections";
        if conns.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        pipe.cmd("TIME");
        for conn in conns {
            pipe.cmd("HMGET")
                .arg(self.keys().connection(conn))
                .arg("until")
                .arg("level")
                .arg("reason")
                .arg("terminal");
        }
        let reply: Vec<Value> = self
            .run(
                CMD,
                |mut con| async move { pipe.query_async(&mut con).await },
            )
            .await?;
        if reply.len() != conns.len() + 1 {
            return Err(super::replies::protocol(
                CMD,
                format!("expected {} replies, got {}", conns.len() + 1, reply.len()),
            ));
        }
        let mut replies = reply.into_iter();
        let now = match replies.next() {
            Some(t) => time_ms(CMD, t)?,
            None => return Err(super::replies::protocol(CMD, "missing TIME reply")),
        };
        conns
            .iter()
            .zip(replies)
            .map(|(conn, v)| {
                let f = into_array(CMD, v)?;
                if f.len() != 4 {
                    return Err(super::replies::protocol(CMD, "HMGET arity"));
                }
                let remaining_ms = uint_or_zero(CMD, &f[0])?.saturating_sub(now);
                let terminal = opt_enum(CMD, &f[3])?;
                // The hash outlives its cooldown (for the level); a lapsed cooldown has no reason.
                let reason = if remaining_ms > 0 || terminal.is_some() {
                    opt_enum(CMD, &f[2])?
                } else {
                    None
                };
                Ok(ConnRecord {
                    conn: (*conn).to_owned(),
                    remaining_ms,
                    backoff_level: u32_or_zero(CMD, &f[1])?,
                    reason,
                    terminal,
                })
            })
            .collect()
    }
}
