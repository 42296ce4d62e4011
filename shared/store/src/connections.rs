//! Connection cooldowns, backoff levels and terminal states in Redis.
//!
//! Why: a 429 seen by one node must cool the connection on every node, and the backoff level
//! must rise once per incident, not once per node. The Lua scripts mirror the pure policy in
//! [`switchyard_shared::cooldown`]: extend-only deadlines, the level raised at most once per cooldown
//! window (the cluster-wide thundering-herd guard) and sticky terminal states. Deadlines are
//! computed on the Redis clock and returned as remaining milliseconds.
//!
//! One hash per connection ([`KeySpace::connection`](super::KeySpace::connection)):
//! `until` (epoch ms, Redis clock), `level`, `reason`, `terminal`, `err`, `at`, `ver`, the
//! record's version, and `reinstated`, the version of its last reinstatement. Every write that changes the record — cooldown extend, success, clear,
//! terminal set and clear, and the connection's lockout extend, decay and clear — bumps `ver`,
//! and a clear keeps the hash as a tombstone carrying it. So a node's resync
//! ([`RedisStore::read_connection_states`]) can make its state equal to Redis's whenever
//! Redis's version is newer, lowering as well as raising (docs/cluster-state.md, "Versions").
//! Scripts never publish; the caller publishes an event when a script reports a change.

use std::sync::LazyLock;

use redis::{Script, Value};

use super::error::StoreError;
use super::redis_store::RedisStore;
use super::replies::{array_of, int, into_array, opt_enum, time_ms, u32_or_zero, uint_or_zero};
use switchyard_shared::Millis;
use switchyard_shared::outcome::{FailureReason, TerminalStatus};

/// How long a connection hash outlives its cooldown, so the backoff level survives the window
/// (the level decays on successes, not on time).
pub const LEVEL_RETENTION_MS: Millis = 24 * 60 * 60 * 1000;

/// Connections per pipeline in the resync reads: small enough that one chunk takes a
/// fraction of a command timeout, large enough that ten thousand connections take 20 round
/// trips.
pub const RESYNC_CHUNK: usize = 500;

/// Longest last-error text stored (characters).
const LAST_ERROR_MAX_CHARS: usize = switchyard_shared::cooldown::LAST_ERROR_MAX_CHARS;

/// A connection-record script: the shared prelude (clock, version bump, retention) first.
macro_rules! conn_script {
    ($file:literal) => {
        LazyLock::new(|| {
            Script::new(concat!(
                include_str!("lua/conn_common_v3.lua"),
                include_str!($file)
            ))
        })
    };
}
pub(crate) use conn_script;

static EXTEND: LazyLock<Script> = conn_script!("lua/cooldown_extend_v3.lua");
static SUCCESS: LazyLock<Script> = conn_script!("lua/cooldown_success_v3.lua");
static CLEAR: LazyLock<Script> = conn_script!("lua/cooldown_clear_v3.lua");
static TERMINAL_SET: LazyLock<Script> = conn_script!("lua/terminal_set_v3.lua");
static TERMINAL_CLEAR: LazyLock<Script> = conn_script!("lua/terminal_clear_v3.lua");

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
    /// The record's version after the call (bumped only when something changed).
    pub version: u64,
}

/// What a write to a connection record did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnWrite {
    /// Something changed (and the version was bumped).
    pub changed: bool,
    /// The record's version after the call.
    pub version: u64,
}

/// What a success did to a connection record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuccessApplied {
    pub record: ConnRecord,
    /// This success ended a running cooldown: the caller announces it to the other nodes.
    pub eased: bool,
    pub version: u64,
}

/// A connection record with its version, as a resync reads it. A connection Redis knows
/// nothing about, or whose last write was a clear, reads as a clean record; a clear keeps its
/// version (a tombstone), an unknown connection has version 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnState {
    pub record: ConnRecord,
    pub version: u64,
    /// The version of the record's last reinstatement (0 = none the record remembers). A node
    /// lowers a terminal status only for a reinstatement newer than what it adopted.
    pub reinstated: u64,
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
        let log = self.keys().changelog();
        let conn = w.conn.to_owned();
        let reply: Value = self
            .run_replicated(CMD, |mut con| async move {
                EXTEND
                    .key(key)
                    .key(log)
                    .arg(duration)
                    .arg(level)
                    .arg(reason)
                    .arg(terminal)
                    .arg(err)
                    .arg(conn)
                    .invoke_async(&mut con)
                    .await
            })
            .await?;
        let v = array_of(CMD, reply, 5)?;
        if int(CMD, &v[0])? == 1 {
            self.replicate().await;
        }
        Ok(CooldownApplied {
            applied: int(CMD, &v[0])? == 1,
            remaining_ms: uint_or_zero(CMD, &v[1])?,
            backoff_level: u32_or_zero(CMD, &v[2])?,
            terminal: opt_enum(CMD, &v[3])?,
            version: uint_or_zero(CMD, &v[4])?,
        })
    }

    /// A success: clears the cooldown and lowers the level by one (no-op on terminal). The
    /// flag is `true` when this success ended a running cooldown: the caller announces that to
    /// the other nodes. See [`RedisStore::cooldown_success_versioned`] for `age_ms`.
    pub async fn cooldown_success(
        &self,
        conn: &str,
        age_ms: Option<Millis>,
    ) -> Result<(ConnRecord, bool), StoreError> {
        let s = self.cooldown_success_versioned(conn, age_ms).await?;
        Ok((s.record, s.eased))
    }

    /// A success, with the record's version. `age_ms` is how long ago the successful attempt
    /// was dispatched, measured on the caller's own (monotonic) clock just before this call;
    /// `None` when unknown. The script places the dispatch on the Redis clock (`now − age`), so
    /// no node's wall clock enters the decision: a success of an attempt dispatched before the
    /// last failure any node applied is stale and changes nothing, however far the caller's
    /// clock runs ahead. (The estimate errs late by the call's latency only.)
    pub async fn cooldown_success_versioned(
        &self,
        conn: &str,
        age_ms: Option<Millis>,
    ) -> Result<SuccessApplied, StoreError> {
        const CMD: &str = "cooldown_success";
        let key = self.keys().connection(conn);
        let age = age_ms.map_or_else(String::new, |a| a.to_string());
        let log = self.keys().changelog();
        let id = conn.to_owned();
        let reply: Value = self
            .run(CMD, |mut con| async move {
                SUCCESS
                    .key(key)
                    .key(log)
                    .arg(age)
                    .arg(id)
                    .invoke_async(&mut con)
                    .await
            })
            .await?;
        let v = array_of(CMD, reply, 6)?;
        let record = ConnRecord {
            conn: conn.to_owned(),
            remaining_ms: uint_or_zero(CMD, &v[0])?,
            backoff_level: u32_or_zero(CMD, &v[1])?,
            reason: opt_enum(CMD, &v[2])?,
            terminal: opt_enum(CMD, &v[3])?,
        };
        Ok(SuccessApplied {
            record,
            eased: uint_or_zero(CMD, &v[4])? == 1,
            version: uint_or_zero(CMD, &v[5])?,
        })
    }

    /// Operator clear of cooldown and level. `false` when the connection is terminal (a
    /// terminal status is cleared only by [`RedisStore::terminal_clear`]).
    pub async fn cooldown_clear(&self, conn: &str) -> Result<bool, StoreError> {
        Ok(self.cooldown_clear_versioned(conn).await?.changed)
    }

    /// [`RedisStore::cooldown_clear`] with the record's version; `changed` is `false` only
    /// when the connection is terminal.
    pub async fn cooldown_clear_versioned(&self, conn: &str) -> Result<ConnWrite, StoreError> {
        self.conn_write("cooldown_clear", &CLEAR, conn, None).await
    }

    /// Marks the connection terminal. `true` when the stored status changed.
    pub async fn terminal_set(
        &self,
        conn: &str,
        status: TerminalStatus,
    ) -> Result<bool, StoreError> {
        Ok(self.terminal_set_versioned(conn, status).await?.changed)
    }

    /// [`RedisStore::terminal_set`] with the record's version.
    pub async fn terminal_set_versioned(
        &self,
        conn: &str,
        status: TerminalStatus,
    ) -> Result<ConnWrite, StoreError> {
        self.conn_write("terminal_set", &TERMINAL_SET, conn, Some(status.as_str()))
            .await
    }

    /// Operator reinstate: the connection starts afresh. `true` when it was terminal.
    pub async fn terminal_clear(&self, conn: &str) -> Result<bool, StoreError> {
        Ok(self.terminal_clear_versioned(conn).await?.changed)
    }

    /// [`RedisStore::terminal_clear`] with the record's version.
    pub async fn terminal_clear_versioned(&self, conn: &str) -> Result<ConnWrite, StoreError> {
        self.conn_write("terminal_clear", &TERMINAL_CLEAR, conn, None)
            .await
    }

    /// Runs a script replying `{changed 0|1, version}` on one connection hash.
    async fn conn_write(
        &self,
        command: &'static str,
        script: &'static Script,
        conn: &str,
        arg: Option<&str>,
    ) -> Result<ConnWrite, StoreError> {
        let key = self.keys().connection(conn);
        let log = self.keys().changelog();
        let arg = arg.map(str::to_owned);
        let id = conn.to_owned();
        let reply: Value = self
            .run_replicated(command, |mut con| async move {
                let mut inv = script.key(key);
                inv.key(log);
                if let Some(arg) = arg {
                    inv.arg(arg);
                }
                inv.arg(id).invoke_async(&mut con).await
            })
            .await?;
        let v = array_of(command, reply, 2)?;
        if int(command, &v[0])? == 1 {
            self.replicate().await;
        }
        Ok(ConnWrite {
            changed: int(command, &v[0])? == 1,
            version: uint_or_zero(command, &v[1])?,
        })
    }

    /// Reads many connections in one round trip (a pipeline: `TIME`, then one `HMGET` per
    /// connection). Absent keys read as clean records; the order follows `conns`.
    pub async fn read_connections(&self, conns: &[&str]) -> Result<Vec<ConnRecord>, StoreError> {
        Ok(self
            .read_connection_states(conns)
            .await?
            .into_iter()
            .map(|s| s.record)
            .collect())
    }

    /// The resync read: every connection's record with its version, including records whose
    /// last write was a clear (clean, with the clear's version). A node adopts a record whose
    /// version is newer than the one it holds, lowering as well as raising; the connection's
    /// lockouts ([`RedisStore::read_lockouts_many`]) share that version.
    ///
    /// Pipelined in chunks of [`RESYNC_CHUNK`] connections (`TIME`, then one `HMGET` each),
    /// each chunk its own bounded command (at ten thousand connections one pipeline takes
    /// longer than a command may), on the store's bulk connection, so the request path's
    /// fences and buckets never wait behind it.
    pub async fn read_connection_states(
        &self,
        conns: &[&str],
    ) -> Result<Vec<ConnState>, StoreError> {
        let mut states = Vec::with_capacity(conns.len());
        for chunk in conns.chunks(RESYNC_CHUNK) {
            states.extend(self.read_state_chunk(chunk).await?);
        }
        Ok(states)
    }

    /// `HMGET` of the fields a connection's state is read from.
    fn state_fields(&self, conn: &str) -> redis::Cmd {
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(self.keys().connection(conn))
            .arg("until")
            .arg("level")
            .arg("reason")
            .arg("terminal")
            .arg("ver")
            .arg("reinstated");
        cmd
    }

    async fn read_state_chunk(&self, conns: &[&str]) -> Result<Vec<ConnState>, StoreError> {
        const CMD: &str = "read_connections";
        if conns.is_empty() {
            return Ok(Vec::new());
        }
        let mut cmds = vec![redis::cmd("TIME")];
        cmds.extend(conns.iter().map(|conn| self.state_fields(conn)));
        let reply = self.read_pipeline(CMD, cmds).await?;
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
                if f.len() != 6 {
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
                Ok(ConnState {
                    record: ConnRecord {
                        conn: (*conn).to_owned(),
                        remaining_ms,
                        backoff_level: u32_or_zero(CMD, &f[1])?,
                        reason,
                        terminal,
                    },
                    version: uint_or_zero(CMD, &f[4])?,
                    reinstated: uint_or_zero(CMD, &f[5])?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::LEVEL_RETENTION_MS;

    #[test]
    fn the_scripts_retention_is_the_documented_one() {
        let prelude = include_str!("lua/conn_common_v3.lua");
        assert!(prelude.contains(&format!("local RETENTION_MS = {LEVEL_RETENTION_MS}\n")));
        let bound = super::super::changelog::CHANGELOG_MAXLEN;
        assert!(prelude.contains(&format!("local CHANGELOG_MAXLEN = {bound}\n")));
    }
}
