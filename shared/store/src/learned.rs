//! State a node learns from upstream answers about a connection or a target, shared in Redis:
//! the Claude OAuth usage wall's deadlines per connection, and the tool limits learned from
//! "too many tools" answers per provider model.
//!
//! Why: both are facts about the upstream account or model, not about the node that saw them.
//! Kept per node, every node pays its own wall 429 before it takes the low-priority lane, and
//! a node that never saw the lane's budget run out accepts it again. Each record is a small
//! versioned hash; its script only extends (a later deadline, a lower tool limit), takes its
//! time from Redis (`TIME`) and lets the key expire with its last deadline (`PEXPIREAT`), so
//! nothing outlives what it says. The caller publishes what a write changed (a wire event),
//! so peers learn it without a scan.
//!
//! Two writes lower a record, and both leave a tombstone so a node that missed their event
//! can still tell: a lane ended early on one node (`usage_wall_merge_v2` with an end reason:
//! the lane is withdrawn and the end recorded, `ended`, `ended_reset`), and a tool limit a
//! success proved wrong (`tool_limit_v2 drop`: `{version, dropped}` until the dropped limit's
//! own expiry). Every change bumps the record's version (at least the Redis clock in µs, so it
//! stays monotonic across expiry) and is appended to the change log (`w` = connection, `t` =
//! provider and model), so a node's resync reads the records that changed
//! ([`super::learned_read`]).

use std::sync::LazyLock;

use redis::{Script, Value};

use super::error::StoreError;
use super::redis_store::RedisStore;
use super::replies::{array_of, int, non_negative, opt_string};
use switchyard_shared::Millis;

const WALL_SOURCE: &str = include_str!("lua/usage_wall_merge_v2.lua");
static WALL_MERGE: LazyLock<Script> = LazyLock::new(|| Script::new(WALL_SOURCE));
const TOOL_SOURCE: &str = include_str!("lua/tool_limit_v2.lua");
static TOOL_LIMIT: LazyLock<Script> = LazyLock::new(|| Script::new(TOOL_SOURCE));

/// Separates provider and model in a tool-limit index member and change-log entry.
pub const MEMBER_SEPARATOR: char = '\u{1f}';

/// A connection's usage-wall deadlines as time left (ms, 0 = none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WallDeadlines {
    pub lane_ms: Millis,
    pub lane_reset_ms: Millis,
    pub reaccept_blocked_ms: Millis,
    pub budget_exhausted_ms: Millis,
    pub reset_hold_ms: Millis,
    pub reset_backoff: bool,
}

/// What a usage-wall merge left in Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WallMerged {
    /// Something was extended (or a lane ended): the caller publishes what changed.
    pub changed: bool,
    pub version: u64,
    /// The stored deadlines after the merge (may be longer than the ones written).
    pub deadlines: WallDeadlines,
    /// The last early end of a lane the record remembers, `None` while a lane is stored or
    /// none ended.
    pub ended: Option<LaneEnd>,
}

/// A lane ended early, as a record remembers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneEnd {
    /// Why (the node's end reason label: `weekly_limit`, `budget_exhausted`, `off`, …).
    pub reason: String,
    /// Time left to the ended lane's reset (0 = passed): a node ends its own copy of the lane
    /// when that copy's reset is not later than this (it is the same lane).
    pub reset_ms: Millis,
}

/// A shared record this node may have to read again: what a change-log entry names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LearnedKey {
    /// A connection's usage-wall record.
    Wall(String),
    /// A provider model's tool-limit record.
    ToolLimit { provider: String, model: String },
}

impl LearnedKey {
    /// A tool-limit key from its index member (`provider\x1fmodel`).
    pub fn tool_limit_member(member: &str) -> Option<Self> {
        let (provider, model) = member.split_once(MEMBER_SEPARATOR)?;
        Some(Self::ToolLimit {
            provider: provider.to_owned(),
            model: model.to_owned(),
        })
    }
}

/// What a tool-limit write left in Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolLimitStored {
    pub changed: bool,
    /// The live limit, `None` when there is none (dropped, or never learned).
    pub limit: Option<u32>,
    pub remaining_ms: Millis,
    pub version: u64,
}

impl RedisStore {
    /// The usage-wall hash of connection `conn`.
    pub fn usage_wall_key(&self, conn: &str) -> String {
        format!("{}usage_wall:{{{conn}}}", self.keys().prefix())
    }

    /// The tool-limit hash of `provider`'s `model`.
    pub fn tool_limit_key(&self, provider: &str, model: &str) -> String {
        format!("{}tool_limit:{{{provider}}}:{model}", self.keys().prefix())
    }

    /// The index of tool-limit records (sorted set, member `provider\x1fmodel`, score the
    /// record's expiry on the Redis clock).
    pub fn tool_limit_index_key(&self) -> String {
        format!("{}tool_limits", self.keys().prefix())
    }

    /// Merges connection `conn`'s usage-wall deadlines, extend-only.
    pub async fn usage_wall_merge(
        &self,
        conn: &str,
        d: WallDeadlines,
    ) -> Result<WallMerged, StoreError> {
        self.usage_wall_call(conn, d, "").await
    }

    /// Ends connection `conn`'s shared lane early for `reason` (an end reason label), when the
    /// stored lane is the one that ended: its reset not later than `d.lane_reset_ms` from now
    /// (`d.lane_ms` is ignored). The other deadlines of `d` merge as usual.
    pub async fn usage_wall_end(
        &self,
        conn: &str,
        reason: &str,
        d: WallDeadlines,
    ) -> Result<WallMerged, StoreError> {
        let reason = if reason.is_empty() { "ended" } else { reason };
        self.usage_wall_call(conn, d, reason).await
    }

    async fn usage_wall_call(
        &self,
        conn: &str,
        d: WallDeadlines,
        end: &str,
    ) -> Result<WallMerged, StoreError> {
        const CMD: &str = "usage_wall_merge";
        let key = self.usage_wall_key(conn);
        let log = self.keys().changelog();
        let (conn, end) = (conn.to_owned(), end.to_owned());
        let reply: Value = self
            .run(CMD, |mut con| async move {
                WALL_MERGE
                    .key(key)
                    .key(log)
                    .arg(d.lane_ms)
                    .arg(d.lane_reset_ms)
                    .arg(d.reaccept_blocked_ms)
                    .arg(d.budget_exhausted_ms)
                    .arg(d.reset_hold_ms)
                    .arg(u8::from(d.reset_backoff))
                    .arg(end)
                    .arg(conn)
                    .invoke_async(&mut con)
                    .await
            })
            .await?;
        let v = array_of(CMD, reply, 10)?;
        let n = |i: usize| -> Result<u64, StoreError> { non_negative(CMD, int(CMD, &v[i])?) };
        let deadlines = WallDeadlines {
            lane_ms: n(2)?,
            lane_reset_ms: n(3)?,
            reaccept_blocked_ms: n(4)?,
            budget_exhausted_ms: n(5)?,
            reset_hold_ms: n(6)?,
            reset_backoff: n(7)? == 1,
        };
        let ended = opt_string(CMD, &v[8])?.map(|reason| LaneEnd {
            reason,
            reset_ms: n(9).unwrap_or(0),
        });
        Ok(WallMerged {
            changed: n(0)? == 1,
            version: n(1)?,
            ended: ended.filter(|_| deadlines.lane_ms == 0),
            deadlines,
        })
    }

    /// Learns `limit` for `provider`'s `model` for `ttl_ms` (a lower limit wins with a fresh
    /// TTL, the same one extends).
    pub async fn tool_limit_learn(
        &self,
        provider: &str,
        model: &str,
        limit: u32,
        ttl_ms: Millis,
    ) -> Result<ToolLimitStored, StoreError> {
        self.tool_limit_call(provider, model, "learn", limit, ttl_ms)
            .await
    }

    /// A success with `tools` tools on `provider`'s `model`: a stored limit below it is
    /// dropped.
    pub async fn tool_limit_drop(
        &self,
        provider: &str,
        model: &str,
        tools: u32,
    ) -> Result<ToolLimitStored, StoreError> {
        self.tool_limit_call(provider, model, "drop", tools, 0)
            .await
    }

    async fn tool_limit_call(
        &self,
        provider: &str,
        model: &str,
        op: &'static str,
        n: u32,
        ttl_ms: Millis,
    ) -> Result<ToolLimitStored, StoreError> {
        const CMD: &str = "tool_limit";
        let key = self.tool_limit_key(provider, model);
        let index = self.tool_limit_index_key();
        let log = self.keys().changelog();
        let member = format!("{provider}{MEMBER_SEPARATOR}{model}");
        let reply: Value = self
            .run(CMD, |mut con| async move {
                TOOL_LIMIT
                    .key(key)
                    .key(index)
                    .key(log)
                    .arg(op)
                    .arg(n)
                    .arg(ttl_ms)
                    .arg(member)
                    .invoke_async(&mut con)
                    .await
            })
            .await?;
        let v = array_of(CMD, reply, 4)?;
        let limit = int(CMD, &v[1])?;
        Ok(ToolLimitStored {
            changed: int(CMD, &v[0])? == 1,
            limit: u32::try_from(limit).ok(),
            remaining_ms: non_negative(CMD, int(CMD, &v[2])?)?,
            version: non_negative(CMD, int(CMD, &v[3])?)?,
        })
    }
}
