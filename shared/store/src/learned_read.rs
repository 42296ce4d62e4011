//! Reading the learned records back: what a node's resync needs to make its usage-wall
//! deadlines and tool limits equal to Redis's after it missed an event.
//!
//! Why a read at all: these records are announced by events, and pub/sub loses what is
//! published while a node is disconnected. The writes append to the change log
//! ([`super::changelog`]); a resync reads the records the log names (or, in a full scan, every
//! opted-in connection's usage wall and every tool limit in the index) with these pipelined
//! reads, on the bulk connection. Times come back as time left on the Redis clock.

use redis::Value;

use super::connections::RESYNC_CHUNK;
use super::error::StoreError;
use super::learned::{LaneEnd, LearnedKey, WallDeadlines};
use super::redis_store::RedisStore;
use super::replies::{array_of, opt_string, protocol, time_ms, uint_or_zero};
use switchyard_shared::Millis;

/// A connection's usage-wall record as a resync reads it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WallRecord {
    /// 0 = no record (never written, or expired with its last deadline).
    pub version: u64,
    pub deadlines: WallDeadlines,
    /// The lane's last early end, while no newer lane is stored.
    pub ended: Option<LaneEnd>,
}

/// A provider model's tool limit as a resync reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolLimitState {
    /// Nothing stored (or expired).
    #[default]
    None,
    /// A live limit with its time left.
    Live { limit: u32, remaining_ms: Millis },
    /// Dropped by a success that carried `tools` tools: a limit below that is wrong.
    Dropped { tools: u32 },
}

/// A tool-limit record with its version (0 = none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ToolLimitRecord {
    pub version: u64,
    pub state: ToolLimitState,
}

const WALL_FIELDS: [&str; 9] = [
    "lane",
    "lane_reset",
    "reaccept",
    "budget",
    "reset_hold",
    "reset_backoff",
    "version",
    "ended",
    "ended_reset",
];

impl RedisStore {
    /// The usage-wall records of `conns`, in order (`TIME`, then one `HMGET` each, pipelined
    /// in chunks on the bulk connection).
    pub async fn read_usage_walls(&self, conns: &[&str]) -> Result<Vec<WallRecord>, StoreError> {
        const CMD: &str = "read_usage_walls";
        let mut out = Vec::with_capacity(conns.len());
        for chunk in conns.chunks(RESYNC_CHUNK) {
            let keys: Vec<String> = chunk.iter().map(|c| self.usage_wall_key(c)).collect();
            let (now, rows) = self.read_hashes(CMD, keys, &WALL_FIELDS).await?;
            for row in rows {
                out.push(wall_record(CMD, &row, now)?);
            }
        }
        Ok(out)
    }

    /// The tool-limit records of `(provider, model)` pairs, in order.
    pub async fn read_tool_limits(
        &self,
        targets: &[(&str, &str)],
    ) -> Result<Vec<ToolLimitRecord>, StoreError> {
        const CMD: &str = "read_tool_limits";
        let mut out = Vec::with_capacity(targets.len());
        for chunk in targets.chunks(RESYNC_CHUNK) {
            let keys: Vec<String> = chunk
                .iter()
                .map(|(p, m)| self.tool_limit_key(p, m))
                .collect();
            let fields = ["limit", "until", "version", "dropped"];
            let (now, rows) = self.read_hashes(CMD, keys, &fields).await?;
            for row in rows {
                out.push(tool_limit_record(CMD, &row, now)?);
            }
        }
        Ok(out)
    }

    /// Every tool-limit record the index names (live or recently dropped).
    pub async fn tool_limit_members(&self) -> Result<Vec<LearnedKey>, StoreError> {
        const CMD: &str = "tool_limit_members";
        let index = self.tool_limit_index_key();
        let members: Vec<String> = self
            .run_bulk(CMD, |mut con| async move {
                redis::cmd("ZRANGE")
                    .arg(index)
                    .arg(0)
                    .arg(-1)
                    .query_async(&mut con)
                    .await
            })
            .await?;
        Ok(members
            .iter()
            .filter_map(|m| LearnedKey::tool_limit_member(m))
            .collect())
    }

    /// `TIME` and one `HMGET` of `fields` per key, pipelined on the bulk connection.
    async fn read_hashes(
        &self,
        command: &'static str,
        keys: Vec<String>,
        fields: &[&str],
    ) -> Result<(Millis, Vec<Vec<Value>>), StoreError> {
        let n = keys.len();
        let mut cmds = vec![redis::cmd("TIME")];
        for key in keys {
            let mut cmd = redis::cmd("HMGET");
            cmd.arg(key).arg(fields);
            cmds.push(cmd);
        }
        let reply = self.read_pipeline(command, cmds).await?;
        if reply.len() != n + 1 {
            return Err(protocol(command, "reply count differs from the key count"));
        }
        let mut it = reply.into_iter();
        let now = time_ms(command, it.next().unwrap_or(Value::Nil))?;
        let rows = it
            .map(|row| array_of(command, row, fields.len()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((now, rows))
    }
}

/// Time left from `now` to a stored deadline (0 when absent or past).
fn left(command: &'static str, v: &Value, now: Millis) -> Result<Millis, StoreError> {
    Ok(uint_or_zero(command, v)?.saturating_sub(now))
}

fn wall_record(
    command: &'static str,
    row: &[Value],
    now: Millis,
) -> Result<WallRecord, StoreError> {
    let [
        lane,
        reset,
        reaccept,
        budget,
        hold,
        backoff,
        version,
        ended,
        ended_reset,
    ] = row
    else {
        return Err(protocol(command, "usage-wall field count"));
    };
    let deadlines = WallDeadlines {
        lane_ms: left(command, lane, now)?,
        lane_reset_ms: left(command, reset, now)?,
        reaccept_blocked_ms: left(command, reaccept, now)?,
        budget_exhausted_ms: left(command, budget, now)?,
        reset_hold_ms: left(command, hold, now)?,
        reset_backoff: uint_or_zero(command, backoff)? == 1,
    };
    let ended = match opt_string(command, ended)? {
        Some(reason) if deadlines.lane_ms == 0 => Some(LaneEnd {
            reason,
            reset_ms: left(command, ended_reset, now)?,
        }),
        _ => None,
    };
    Ok(WallRecord {
        version: uint_or_zero(command, version)?,
        deadlines,
        ended,
    })
}

fn tool_limit_record(
    command: &'static str,
    row: &[Value],
    now: Millis,
) -> Result<ToolLimitRecord, StoreError> {
    let [limit, until, version, dropped] = row else {
        return Err(protocol(command, "tool-limit field count"));
    };
    let remaining_ms = left(command, until, now)?;
    let state = match (opt_string(command, limit)?, opt_string(command, dropped)?) {
        (Some(limit), _) if remaining_ms > 0 => ToolLimitState::Live {
            limit: limit
                .parse()
                .map_err(|_| protocol(command, format!("tool limit {limit:?}")))?,
            remaining_ms,
        },
        (None, Some(tools)) => ToolLimitState::Dropped {
            tools: tools
                .parse()
                .map_err(|_| protocol(command, format!("dropped at {tools:?} tools")))?,
        },
        _ => ToolLimitState::None,
    };
    Ok(ToolLimitRecord {
        version: uint_or_zero(command, version)?,
        state,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    const NOW: Millis = 1_800_000_000_000;

    #[test]
    fn a_wall_record_reads_as_time_left_and_an_end_only_without_a_lane() {
        let at = |ms: Millis| bulk(&(NOW + ms).to_string());
        let row = [
            at(60_000),
            at(0),
            Value::Nil,
            at(5_000),
            bulk("0"),
            bulk("1"),
            bulk("1800000000000123"),
            bulk("off"),
            at(30_000),
        ];
        let r = wall_record("t", &row, NOW).unwrap();
        assert_eq!(r.version, 1_800_000_000_000_123);
        assert_eq!(r.deadlines.lane_ms, 60_000);
        assert_eq!(r.deadlines.lane_reset_ms, 0);
        assert_eq!(r.deadlines.budget_exhausted_ms, 5_000);
        assert!(r.deadlines.reset_backoff);
        assert_eq!(r.ended, None, "a stored lane hides an older end");

        let mut ended = row.clone();
        ended[0] = bulk("0");
        let r = wall_record("t", &ended, NOW).unwrap();
        assert_eq!(
            r.ended,
            Some(LaneEnd {
                reason: "off".into(),
                reset_ms: 30_000
            })
        );
        // No record at all: version 0, nothing.
        let none = vec![Value::Nil; 9];
        assert_eq!(wall_record("t", &none, NOW).unwrap(), WallRecord::default());
        assert!(wall_record("t", &none[..8], NOW).is_err());
    }

    #[test]
    fn a_tool_limit_record_is_live_dropped_or_none() {
        let until = bulk(&(NOW + 9_000).to_string());
        let live = [bulk("2"), until.clone(), bulk("7"), Value::Nil];
        assert_eq!(
            tool_limit_record("t", &live, NOW).unwrap(),
            ToolLimitRecord {
                version: 7,
                state: ToolLimitState::Live {
                    limit: 2,
                    remaining_ms: 9_000
                }
            }
        );
        let dropped = [Value::Nil, until.clone(), bulk("8"), bulk("3")];
        assert_eq!(
            tool_limit_record("t", &dropped, NOW).unwrap().state,
            ToolLimitState::Dropped { tools: 3 }
        );
        // Expired: nothing, whatever the hash still says.
        assert_eq!(
            tool_limit_record("t", &live, NOW + 9_000).unwrap().state,
            ToolLimitState::None
        );
        // A value in an unexpected shape is an error, never a default.
        let bad = [Value::Nil, until, bulk("8"), bulk("many")];
        assert!(tool_limit_record("t", &bad, NOW).is_err());
    }
}
