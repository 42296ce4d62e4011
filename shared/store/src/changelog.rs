//! The change log: a bounded Redis Stream of connection record versions, so a node's periodic
//! resync reads only the records that changed.
//!
//! Why: a full resync reads every connection record, so its cost grows with nodes ×
//! connections (at 50 nodes × 10,000 connections every 5 s, about 100,000 commands/s on the
//! one Redis while nothing happens). Every script that bumps a record's version
//! (`conn_common_v3.lua`) also appends `{c = connection id, v = version}` to the stream
//! [`KeySpace::changelog`](super::KeySpace::changelog) with `XADD … MAXLEN ~`
//! [`CHANGELOG_MAXLEN`]. A node remembers the id of the last entry it read (its offset) and
//! reads from there; the stream tells it which records to read again.
//!
//! A node falls back to a full scan when the log cannot say what it missed ([`plan`]): it has no
//! offset yet (first connect, a new runtime), or the stream's first entry is newer than its
//! offset (trimmed past it: it fell too far behind), or the stream is missing or empty (Redis
//! restarted without persistence, or was flushed). Before a full scan it appends a marker entry
//! ([`RedisStore::changelog_mark`]) whose id becomes its offset: every write after the marker
//! has a later entry, and every write before it is seen by the scan. The marker also recreates
//! a missing stream, so a quiet cluster does not fall back to full scans on every tick.
//!
//! The learned records (`store::learned`: usage walls, tool limits) append to the same log,
//! with `w` (a connection's usage wall) or `t` (`provider\x1fmodel`) instead of `c`; a node of
//! an older release reads those entries as markers (no connection) and skips them.

use redis::Value;

use super::error::StoreError;
use super::learned::LearnedKey;
use super::redis_store::RedisStore;
use super::replies::{into_array, opt_string, protocol};
use switchyard_shared::Millis;

/// Approximate bound of the stream (`MAXLEN ~`): at about 100 bytes an entry, some 10 MB. A
/// node whose offset falls out of it (100,000 record changes between two of its reads) scans.
pub const CHANGELOG_MAXLEN: u64 = 100_000;

/// Entries per `XRANGE` page.
pub const CHANGELOG_PAGE: usize = 1_000;

/// How often a node runs a full scan even when the log is intact (before jitter).
///
/// Why a safety net at all: the log is only as good as its writers. A node of an older release
/// during a rolling deploy runs the `_v2` scripts, which bump versions without appending; a
/// script error between the bump and the append, an operator editing keys by hand, or a
/// local change this node dropped while Redis failed would otherwise stay unseen. A rare full
/// scan bounds how long any of those can last, at a small share of the old cost.
pub const SAFETY_SCAN_INTERVAL_MS: Millis = 5 * 60 * 1000;

/// Largest jitter added to [`SAFETY_SCAN_INTERVAL_MS`], so nodes started together do not scan
/// together.
pub const SAFETY_SCAN_JITTER_MS: Millis = 60 * 1000;

/// A stream entry id (`<ms>-<seq>`), ordered as Redis orders them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub fn parse(text: &str) -> Option<Self> {
        let (ms, seq) = text.split_once('-')?;
        Some(Self {
            ms: ms.parse().ok()?,
            seq: seq.parse().ok()?,
        })
    }
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// One record change: connection `conn` reached `version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeEntry {
    pub id: StreamId,
    pub conn: String,
    pub version: u64,
}

/// One page of the log after an offset, with the stream's first entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogPage {
    /// The stream's oldest entry (`None`: the stream is missing or empty).
    pub first: Option<StreamId>,
    /// The id of the last entry of the page (markers included), if the page has any.
    pub last: Option<StreamId>,
    /// The record changes on the page, oldest first (markers left out).
    pub changes: Vec<ChangeEntry>,
    /// The learned records (usage walls, tool limits) the page names, with their versions.
    pub learned: Vec<(LearnedKey, u64)>,
    /// Entries on the page, markers included: a full page means there may be more.
    pub entries: usize,
}

/// Why a resync reads every record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FullReason {
    /// No offset yet: the first resync, or a new runtime whose actors adopt afresh.
    NoOffset,
    /// The stream is missing or empty: Redis lost it (restart, flush) or it was trimmed to 0.
    Missing,
    /// The stream's first entry is newer than the offset: entries this node never read may
    /// have been trimmed.
    Trimmed,
    /// The periodic safety-net scan ([`SAFETY_SCAN_INTERVAL_MS`]).
    SafetyNet,
}

impl FullReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoOffset => "no_offset",
            Self::Missing => "missing",
            Self::Trimmed => "trimmed",
            Self::SafetyNet => "safety_net",
        }
    }
}

/// What a resync does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResyncPlan {
    /// Read the log after this offset and only the records it names.
    Incremental { after: StreamId },
    /// Read every record.
    Full(FullReason),
}

/// The decision, pure: `offset` is the last entry this node read (`None` = none), `first` the
/// stream's oldest entry as just read (`None` = missing or empty; ignored without an offset),
/// `safety_due` whether the safety-net scan is due.
pub fn plan(offset: Option<StreamId>, first: Option<StreamId>, safety_due: bool) -> ResyncPlan {
    let Some(after) = offset else {
        return ResyncPlan::Full(FullReason::NoOffset);
    };
    if safety_due {
        return ResyncPlan::Full(FullReason::SafetyNet);
    }
    match first {
        None => ResyncPlan::Full(FullReason::Missing),
        // The entry right after the offset may be gone with the ones trimmed before it. (When
        // the offset's own entry was trimmed and nothing followed it, this scans needlessly;
        // with a bound of 100,000 entries that takes a node far behind anyway.)
        Some(first) if first > after => ResyncPlan::Full(FullReason::Trimmed),
        Some(_) => ResyncPlan::Incremental { after },
    }
}

/// When the next safety-net scan is due after a full scan finished at `now_ms`; `jitter_ms`
/// (below [`SAFETY_SCAN_JITTER_MS`], drawn by the caller) spreads the nodes.
pub fn next_safety_scan(now_ms: Millis, jitter_ms: Millis) -> Millis {
    now_ms
        .saturating_add(SAFETY_SCAN_INTERVAL_MS)
        .saturating_add(jitter_ms.min(SAFETY_SCAN_JITTER_MS))
}

/// The record changes of a log read, one per connection (the newest version), in first-seen
/// order: a connection changed a hundred times is read once.
pub fn changed_connections(changes: &[ChangeEntry]) -> Vec<(&str, u64)> {
    let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut out: Vec<(&str, u64)> = Vec::new();
    for c in changes {
        match seen.get(c.conn.as_str()) {
            Some(&i) => out[i].1 = out[i].1.max(c.version),
            None => {
                seen.insert(&c.conn, out.len());
                out.push((&c.conn, c.version));
            }
        }
    }
    out
}

impl RedisStore {
    /// Appends a marker entry (no connection) and returns its id: the offset a full scan that
    /// starts now leaves its node at. Recreates a missing stream. On the bulk connection.
    pub async fn changelog_mark(&self, origin: &str) -> Result<StreamId, StoreError> {
        const CMD: &str = "changelog_mark";
        let key = self.keys().changelog();
        let origin = origin.to_owned();
        let id: String = self
            .run_bulk(CMD, |mut con| async move {
                redis::cmd("XADD")
                    .arg(key)
                    .arg("MAXLEN")
                    .arg("~")
                    .arg(CHANGELOG_MAXLEN)
                    .arg("*")
                    .arg("mark")
                    .arg(origin)
                    .query_async(&mut con)
                    .await
            })
            .await?;
        StreamId::parse(&id).ok_or_else(|| protocol(CMD, format!("stream id {id:?}")))
    }

    /// One page of at most `count` entries after `after`, and the stream's first entry, in one
    /// pipelined round trip on the bulk connection (`XRANGE key - + COUNT 1`, then
    /// `XRANGE key (after + COUNT count`).
    pub async fn changelog_read(
        &self,
        after: StreamId,
        count: usize,
    ) -> Result<LogPage, StoreError> {
        const CMD: &str = "changelog_read";
        let key = self.keys().changelog();
        let mut pipe = redis::pipe();
        pipe.cmd("XRANGE")
            .arg(&key)
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(1);
        pipe.cmd("XRANGE")
            .arg(&key)
            .arg(format!("({after}"))
            .arg("+")
            .arg("COUNT")
            .arg(count.max(1));
        let reply: Vec<Value> = self
            .run_bulk(
                CMD,
                |mut con| async move { pipe.query_async(&mut con).await },
            )
            .await?;
        let [head, page]: [Value; 2] = reply
            .try_into()
            .map_err(|_| protocol(CMD, "expected 2 replies"))?;
        let first = parse_entries(CMD, head)?.into_iter().next().map(|e| e.0);
        let entries = parse_entries(CMD, page)?;
        let last = entries.last().map(|e| e.0);
        let n = entries.len();
        let mut changes = Vec::new();
        let mut learned = Vec::new();
        for (id, subject, version) in entries {
            match subject {
                Subject::Conn(conn) => changes.push(ChangeEntry { id, conn, version }),
                Subject::Learned(key) => learned.push((key, version)),
                Subject::Marker => {}
            }
        }
        Ok(LogPage {
            first,
            last,
            changes,
            learned,
            entries: n,
        })
    }
}

/// What one log entry names.
enum Subject {
    /// A connection record (`c`).
    Conn(String),
    /// A usage-wall (`w`) or tool-limit (`t`) record.
    Learned(LearnedKey),
    /// A full scan's marker, or an entry this release does not know.
    Marker,
}

/// An `XRANGE` reply as `(id, subject, version)`.
fn parse_entries(
    command: &'static str,
    reply: Value,
) -> Result<Vec<(StreamId, Subject, u64)>, StoreError> {
    into_array(command, reply)?
        .into_iter()
        .map(|entry| {
            let mut parts = into_array(command, entry)?.into_iter();
            let (Some(id), Some(fields)) = (parts.next(), parts.next()) else {
                return Err(protocol(command, "stream entry arity"));
            };
            let id = opt_string(command, &id)?
                .and_then(|s| StreamId::parse(&s))
                .ok_or_else(|| protocol(command, "stream entry id"))?;
            let fields = into_array(command, fields)?;
            let (mut subject, mut version) = (Subject::Marker, 0);
            for pair in fields.chunks(2) {
                let [name, value] = pair else { continue };
                match opt_string(command, name)?.as_deref() {
                    Some("c") => {
                        if let Some(conn) = opt_string(command, value)? {
                            subject = Subject::Conn(conn);
                        }
                    }
                    Some("w") => {
                        if let Some(conn) = opt_string(command, value)? {
                            subject = Subject::Learned(LearnedKey::Wall(conn));
                        }
                    }
                    Some("t") => {
                        if let Some(key) = opt_string(command, value)?
                            .and_then(|m| LearnedKey::tool_limit_member(&m))
                        {
                            subject = Subject::Learned(key);
                        }
                    }
                    Some("v") => {
                        version = opt_string(command, value)?
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(0);
                    }
                    _ => {}
                }
            }
            Ok((id, subject, version))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    #[test]
    fn without_an_offset_the_node_scans() {
        assert_eq!(
            plan(None, Some(id(1, 0)), false),
            ResyncPlan::Full(FullReason::NoOffset)
        );
        assert_eq!(
            plan(None, None, true),
            ResyncPlan::Full(FullReason::NoOffset)
        );
    }

    #[test]
    fn an_offset_inside_the_stream_reads_incrementally() {
        let offset = id(100, 3);
        for first in [id(1, 0), id(100, 0), id(100, 3)] {
            assert_eq!(
                plan(Some(offset), Some(first), false),
                ResyncPlan::Incremental { after: offset },
                "first {first}"
            );
        }
    }

    #[test]
    fn a_stream_trimmed_past_the_offset_forces_a_scan() {
        let offset = id(100, 3);
        for first in [id(100, 4), id(101, 0)] {
            assert_eq!(
                plan(Some(offset), Some(first), false),
                ResyncPlan::Full(FullReason::Trimmed)
            );
        }
    }

    #[test]
    fn a_missing_stream_forces_a_scan() {
        assert_eq!(
            plan(Some(id(5, 0)), None, false),
            ResyncPlan::Full(FullReason::Missing)
        );
    }

    #[test]
    fn the_safety_net_scans_even_with_a_valid_offset() {
        assert_eq!(
            plan(Some(id(5, 0)), Some(id(1, 0)), true),
            ResyncPlan::Full(FullReason::SafetyNet)
        );
    }

    #[test]
    fn the_safety_scan_is_jittered_within_bounds() {
        assert_eq!(next_safety_scan(1_000, 0), 1_000 + SAFETY_SCAN_INTERVAL_MS);
        assert_eq!(
            next_safety_scan(1_000, u64::MAX),
            1_000 + SAFETY_SCAN_INTERVAL_MS + SAFETY_SCAN_JITTER_MS
        );
        assert_eq!(next_safety_scan(u64::MAX, 5), u64::MAX);
    }

    #[test]
    fn stream_ids_order_and_round_trip_as_redis_does() {
        assert!(id(1, 9) < id(2, 0));
        assert!(id(2, 0) < id(2, 1));
        assert_eq!(
            StreamId::parse("1700000000000-12"),
            Some(id(1_700_000_000_000, 12))
        );
        assert_eq!(id(7, 1).to_string(), "7-1");
        for bad in ["", "12", "a-1", "1-", "-1", "1-2-3"] {
            assert_eq!(StreamId::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn each_connection_is_read_once_at_its_newest_version() {
        let e = |conn: &str, version| ChangeEntry {
            id: id(1, 0),
            conn: conn.into(),
            version,
        };
        let changes = [e("a", 3), e("b", 1), e("a", 5), e("a", 4)];
        assert_eq!(changed_connections(&changes), vec![("a", 5), ("b", 1)]);
        assert!(changed_connections(&[]).is_empty());
    }
}
