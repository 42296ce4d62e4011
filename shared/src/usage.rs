//! Token accounting for "who used what": per-minute sums of requests and tokens by client
//! key, model, provider and connection, kept for a day, and the query that sums them.
//!
//! Why here and pure: a node records into a [`UsageLedger`] after each answered request and
//! answers `GET /api/usage` from it; the coordinator asks every live node the same question
//! and adds the answers with [`merge_rows`]. Both sides share the row shape and the query
//! rules, and nothing here reads a clock: every call is given the time in Unix milliseconds.
//!
//! Memory is bounded: at most [`RETAINED_MINUTES`] buckets, and at most
//! [`MAX_GROUPS_PER_MINUTE`] distinct (key, model, provider, connection) tuples per bucket;
//! tuples beyond that are summed under [`OTHER`].
//!
//! A node records from every worker thread, so it uses a [`ShardedLedger`]: one ledger per
//! worker, merged when queried, with the minute and the tuple bound decided node-wide so
//! that its answers are the ones a single ledger would give.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::sse::Usage;

/// How long usage is kept: one day of one-minute buckets.
pub const RETAINED_MINUTES: u64 = 24 * 60;

/// Most distinct tuples one minute keeps before it sums the rest under [`OTHER`].
pub const MAX_GROUPS_PER_MINUTE: usize = 4096;

/// The group name of tuples beyond [`MAX_GROUPS_PER_MINUTE`], and of requests without a key.
pub const OTHER: &str = "(other)";

const MINUTE_MS: u64 = 60_000;

/// What one request used. Absent token counts are zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    pub requests: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_creation_tokens: u64,
}

impl Totals {
    /// One request with this usage (none: a request whose answer reported no usage).
    pub fn of_request(usage: Option<&Usage>) -> Self {
        let u = usage.copied().unwrap_or_default();
        Self {
            requests: 1,
            input_tokens: u.input.unwrap_or(0),
            output_tokens: u.output.unwrap_or(0),
            cache_read_tokens: u.cache_read.unwrap_or(0),
            cache_creation_tokens: u.cache_creation.unwrap_or(0),
        }
    }

    /// Adds `other` (saturating: counters never wrap).
    pub fn add(&mut self, other: &Totals) {
        self.requests = self.requests.saturating_add(other.requests);
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_read_tokens = self
            .cache_read_tokens
            .saturating_add(other.cache_read_tokens);
        self.cache_creation_tokens = self
            .cache_creation_tokens
            .saturating_add(other.cache_creation_tokens);
    }

    fn tokens(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.output_tokens)
            .saturating_add(self.cache_read_tokens)
            .saturating_add(self.cache_creation_tokens)
    }
}

/// Who sent a request and where it went. Shared strings, so recording a request clones the
/// node's own ids instead of allocating copies.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tuple {
    /// The client key's id, or [`OTHER`] when the node requires no key.
    pub key: Arc<str>,
    /// The model the provider served.
    pub model: Arc<str>,
    pub provider: Arc<str>,
    pub connection: Arc<str>,
}

impl Tuple {
    fn other() -> Self {
        Self {
            key: OTHER.into(),
            model: OTHER.into(),
            provider: OTHER.into(),
            connection: OTHER.into(),
        }
    }
}

/// What a usage answer is grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupBy {
    Key,
    Model,
    Provider,
    Connection,
}

impl GroupBy {
    /// `by=` values, for error messages.
    pub const NAMES: &'static str = "key, model, provider or connection";

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "key" => Self::Key,
            "model" => Self::Model,
            "provider" => Self::Provider,
            "connection" => Self::Connection,
            _ => return None,
        })
    }

    fn group<'a>(&self, t: &'a Tuple) -> &'a Arc<str> {
        match self {
            Self::Key => &t.key,
            Self::Model => &t.model,
            Self::Provider => &t.provider,
            Self::Connection => &t.connection,
        }
    }
}

/// One group of a usage answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub group: String,
    #[serde(flatten)]
    pub totals: Totals,
}

/// The minute buckets of one node.
#[derive(Debug, Default)]
pub struct UsageLedger {
    /// Oldest first; each bucket starts at a whole minute (Unix ms).
    minutes: VecDeque<(u64, HashMap<Tuple, Totals>)>,
}

impl UsageLedger {
    /// Records one answered request at `now_ms`.
    pub fn record(&mut self, now_ms: u64, tuple: Tuple, totals: Totals) {
        let Some(bucket) = self.bucket_at(minute_of(now_ms)) else {
            return;
        };
        let tuple = if bucket.len() >= MAX_GROUPS_PER_MINUTE && !bucket.contains_key(&tuple) {
            Tuple::other()
        } else {
            tuple
        };
        bucket.entry(tuple).or_default().add(&totals);
    }

    /// The bucket a request of minute `start` is summed in: a new newest one, or the newest
    /// one (a clock step back lands there rather than reordering the ring). Drops the
    /// minutes older than a day before `start`.
    fn bucket_at(&mut self, start: u64) -> Option<&mut HashMap<Tuple, Totals>> {
        if self.minutes.back().is_none_or(|(s, _)| *s < start) {
            self.minutes.push_back((start, HashMap::new()));
        }
        let horizon = horizon_of(start);
        while self.minutes.front().is_some_and(|(s, _)| *s < horizon) {
            self.minutes.pop_front();
        }
        self.minutes.back_mut().map(|(_, bucket)| bucket)
    }

    /// Adds the minutes from `from` on (bucket starts) to `groups`.
    fn sum_into(&self, from: u64, by: GroupBy, groups: &mut HashMap<Arc<str>, Totals>) {
        for (_, bucket) in self.minutes.iter().filter(|(s, _)| *s >= from) {
            for (tuple, totals) in bucket {
                match groups.get_mut(by.group(tuple)) {
                    Some(sum) => sum.add(totals),
                    None => {
                        groups.insert(by.group(tuple).clone(), *totals);
                    }
                }
            }
        }
    }

    /// The start of the oldest minute still kept, if any.
    pub fn retained_since(&self) -> Option<u64> {
        self.minutes.front().map(|(s, _)| *s)
    }

    /// The sums of every minute that ends after `since_ms`, grouped by `by`, largest token
    /// count first (then by name). A minute is counted whole: `since_ms` is rounded down to
    /// its minute.
    pub fn query(&self, since_ms: u64, by: GroupBy) -> Vec<Row> {
        let mut groups = HashMap::new();
        self.sum_into(minute_of(since_ms), by, &mut groups);
        rows_of(groups)
    }
}

/// The start of the minute of `ms`.
fn minute_of(ms: u64) -> u64 {
    ms - ms % MINUTE_MS
}

/// The oldest minute kept when `newest` is the newest.
fn horizon_of(newest: u64) -> u64 {
    newest.saturating_sub((RETAINED_MINUTES - 1) * MINUTE_MS)
}

fn rows_of(groups: HashMap<Arc<str>, Totals>) -> Vec<Row> {
    sorted(
        groups
            .into_iter()
            .map(|(group, totals)| Row {
                group: group.to_string(),
                totals,
            })
            .collect(),
    )
}

/// The number of shards of [`ShardedLedger::default`]: more than a node has workers, so
/// each worker thread records into a shard of its own.
pub const DEFAULT_SHARDS: usize = 16;

/// A [`UsageLedger`] that many threads record into without waiting for each other: one
/// ledger per shard (the caller passes a shard hint, a node its worker's index), summed when
/// queried.
///
/// Its answers are a single ledger's: the minute a request is filed under is the node-wide
/// newest one (a clock step back lands there), and whether a tuple new to its shard's minute
/// is kept or summed under [`OTHER`] is decided against the node-wide set of that minute's
/// tuples. Only that decision takes a node-wide lock, once per tuple, shard and minute; a
/// request whose tuple its shard already holds takes only its shard's lock.
///
/// Memory: each shard is bounded like a [`UsageLedger`], plus one minute's admitted tuples.
#[derive(Debug)]
pub struct ShardedLedger {
    shards: Box<[Mutex<UsageLedger>]>,
    /// The newest minute any request was filed under (Unix ms), read without a lock.
    newest: AtomicU64,
    admitted: Mutex<Admitted>,
}

/// The tuples kept in the newest minute, node-wide.
#[derive(Debug, Default)]
struct Admitted {
    minute: u64,
    tuples: HashSet<Tuple>,
}

impl Default for ShardedLedger {
    fn default() -> Self {
        Self::new(DEFAULT_SHARDS)
    }
}

impl ShardedLedger {
    /// A ledger of `shards` shards (at least one).
    pub fn new(shards: usize) -> Self {
        Self {
            shards: (0..shards.max(1))
                .map(|_| Mutex::new(UsageLedger::default()))
                .collect(),
            newest: AtomicU64::new(0),
            admitted: Mutex::new(Admitted::default()),
        }
    }

    /// Records one answered request at `now_ms` in shard `hint` (modulo the shard count).
    pub fn record(&self, hint: usize, now_ms: u64, tuple: Tuple, totals: Totals) {
        let Some(shard) = self.shards.get(hint % self.shards.len()) else {
            return;
        };
        let Ok(mut ledger) = shard.lock() else {
            return;
        };
        let start = minute_of(now_ms).max(self.newest.load(Ordering::Acquire));
        if let Some(bucket) = ledger.bucket_at(start)
            && let Some(sum) = bucket.get_mut(&tuple)
        {
            sum.add(&totals);
            return;
        }
        // New to this shard's minute: the node-wide set decides (shard, then set: the only
        // order the two locks are taken in).
        let Ok(mut admitted) = self.admitted.lock() else {
            return;
        };
        let start = start.max(admitted.minute);
        if start > admitted.minute {
            admitted.minute = start;
            admitted.tuples.clear();
            self.newest.store(start, Ordering::Release);
        }
        let tuple = if admitted.tuples.contains(&tuple) {
            tuple
        } else if admitted.tuples.len() < MAX_GROUPS_PER_MINUTE {
            admitted.tuples.insert(tuple.clone());
            tuple
        } else {
            Tuple::other()
        };
        drop(admitted);
        if let Some(bucket) = ledger.bucket_at(start) {
            bucket.entry(tuple).or_default().add(&totals);
        }
    }

    /// The sums of every kept minute that ends after `since_ms`, as [`UsageLedger::query`].
    pub fn query(&self, since_ms: u64, by: GroupBy) -> Vec<Row> {
        // A shard that has not recorded lately may still hold minutes older than a day.
        let from = minute_of(since_ms).max(self.horizon());
        let mut groups = HashMap::new();
        for shard in &self.shards {
            if let Ok(ledger) = shard.lock() {
                ledger.sum_into(from, by, &mut groups);
            }
        }
        rows_of(groups)
    }

    /// The start of the oldest minute still kept, if any.
    pub fn retained_since(&self) -> Option<u64> {
        let horizon = self.horizon();
        self.shards
            .iter()
            .filter_map(|shard| {
                let ledger = shard.lock().ok()?;
                ledger
                    .minutes
                    .iter()
                    .map(|(s, _)| *s)
                    .find(|s| *s >= horizon)
            })
            .min()
    }

    fn horizon(&self) -> u64 {
        horizon_of(self.newest.load(Ordering::Acquire))
    }
}

/// Adds the rows of several answers (the nodes of a cluster) group by group.
pub fn merge_rows(answers: impl IntoIterator<Item = Vec<Row>>) -> Vec<Row> {
    let mut groups: HashMap<String, Totals> = HashMap::new();
    for row in answers.into_iter().flatten() {
        groups.entry(row.group).or_default().add(&row.totals);
    }
    sorted(
        groups
            .into_iter()
            .map(|(group, totals)| Row { group, totals })
            .collect(),
    )
}

/// The sum of every row.
pub fn total(rows: &[Row]) -> Totals {
    let mut t = Totals::default();
    for r in rows {
        t.add(&r.totals);
    }
    t
}

fn sorted(mut rows: Vec<Row>) -> Vec<Row> {
    rows.sort_by(|a, b| {
        b.totals
            .tokens()
            .cmp(&a.totals.tokens())
            .then(b.totals.requests.cmp(&a.totals.requests))
            .then(a.group.cmp(&b.group))
    });
    rows
}

/// `since=`: Unix milliseconds, or a duration before `now_ms` (`90s`, `15m`, `6h`, `1d`).
/// Absent: the whole retained day. A time in the future or a duration over a day is refused
/// (the message says why).
pub fn parse_since(raw: Option<&str>, now_ms: u64) -> Result<u64, String> {
    let day = RETAINED_MINUTES * MINUTE_MS;
    let Some(raw) = raw.map(str::trim) else {
        return Ok(now_ms.saturating_sub(day));
    };
    if let Ok(ms) = raw.parse::<u64>() {
        return if ms > now_ms {
            Err("`since` is in the future".to_owned())
        } else {
            Ok(ms)
        };
    }
    let Some(unit) = raw.chars().last() else {
        return Err(since_help());
    };
    let digits = &raw[..raw.len() - unit.len_utf8()];
    let unit_ms = match unit {
        's' => 1_000,
        'm' => MINUTE_MS,
        'h' => 60 * MINUTE_MS,
        'd' => day,
        _ => return Err(since_help()),
    };
    let n: u64 = digits.parse().map_err(|_| since_help())?;
    let back = n
        .checked_mul(unit_ms)
        .filter(|b| *b <= day)
        .ok_or_else(|| {
            "`since` reaches back at most one day (usage is kept for 24 h)".to_owned()
        })?;
    Ok(now_ms.saturating_sub(back))
}

/// `since` and `by` of a usage query (default: the retained day, by model), checked the same
/// way on a node and the coordinator: 400 `invalid_query` naming the parameter.
pub fn parse_query(
    since: Option<&str>,
    by: Option<&str>,
    now_ms: u64,
) -> Result<(u64, GroupBy), crate::admin_kit::AdminError> {
    let invalid = |field: &str, message: String| {
        crate::admin_kit::AdminError::bad_request("invalid_query", message.clone())
            .with_details([(field, message)])
    };
    let since = parse_since(since, now_ms).map_err(|m| invalid("since", m))?;
    let by = match by {
        None => GroupBy::Model,
        Some(raw) => GroupBy::parse(raw)
            .ok_or_else(|| invalid("by", format!("`by` must be {}", GroupBy::NAMES)))?,
    };
    Ok((since, by))
}

fn since_help() -> String {
    "`since` is Unix milliseconds or a duration such as 90s, 15m, 6h or 1d".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuple(key: &str, model: &str, conn: &str) -> Tuple {
        Tuple {
            key: key.into(),
            model: model.into(),
            provider: "p".into(),
            connection: conn.into(),
        }
    }

    fn used(input: u64, output: u64) -> Totals {
        Totals::of_request(Some(&Usage {
            input: Some(input),
            output: Some(output),
            cache_read: None,
            cache_creation: None,
        }))
    }

    const T0: u64 = 1_700_000_000_000;

    #[test]
    fn sums_group_by_each_dimension() {
        let mut l = UsageLedger::default();
        l.record(T0, tuple("alice", "m1", "c1"), used(10, 5));
        l.record(T0 + 1, tuple("bob", "m1", "c2"), used(1, 1));
        l.record(T0 + 2, tuple("alice", "m2", "c2"), used(100, 0));
        l.record(T0 + 3, tuple("alice", "m2", "c2"), Totals::of_request(None));
        let by_key = l.query(T0, GroupBy::Key);
        assert_eq!(by_key[0].group, "alice");
        assert_eq!(by_key[0].totals.requests, 3);
        assert_eq!(by_key[0].totals.input_tokens, 110);
        assert_eq!(by_key[1].group, "bob");
        let by_model = l.query(T0, GroupBy::Model);
        assert_eq!(by_model[0].group, "m2");
        assert_eq!(by_model[0].totals.requests, 2);
        let by_conn = l.query(T0, GroupBy::Connection);
        assert_eq!(total(&by_conn), total(&by_key));
        assert_eq!(total(&by_key).requests, 4);
    }

    #[test]
    fn since_counts_whole_minutes_and_old_minutes_expire() {
        let mut l = UsageLedger::default();
        l.record(T0, tuple("a", "m", "c"), used(1, 0));
        l.record(T0 + 10 * MINUTE_MS, tuple("a", "m", "c"), used(2, 0));
        assert_eq!(
            total(&l.query(T0 + 5 * MINUTE_MS, GroupBy::Key)).input_tokens,
            2
        );
        assert_eq!(total(&l.query(T0, GroupBy::Key)).input_tokens, 3);
        // A day and a minute later only the newest minute is left.
        let later = T0 + 10 * MINUTE_MS + RETAINED_MINUTES * MINUTE_MS;
        l.record(later, tuple("a", "m", "c"), used(4, 0));
        assert_eq!(total(&l.query(0, GroupBy::Key)).input_tokens, 4);
        assert!(l.minutes.len() <= RETAINED_MINUTES as usize);
        assert_eq!(l.retained_since(), Some(later - later % MINUTE_MS));
    }

    #[test]
    fn a_clock_step_back_lands_in_the_newest_minute() {
        let mut l = UsageLedger::default();
        l.record(T0 + 5 * MINUTE_MS, tuple("a", "m", "c"), used(1, 0));
        l.record(T0, tuple("a", "m", "c"), used(1, 0));
        assert_eq!(l.minutes.len(), 1);
        assert_eq!(total(&l.query(0, GroupBy::Key)).requests, 2);
    }

    #[test]
    fn tuples_beyond_the_bound_are_summed_as_other() {
        let mut l = UsageLedger::default();
        for i in 0..MAX_GROUPS_PER_MINUTE + 10 {
            l.record(T0, tuple(&format!("k{i}"), "m", "c"), used(1, 0));
        }
        let rows = l.query(T0, GroupBy::Key);
        assert_eq!(rows.len(), MAX_GROUPS_PER_MINUTE + 1);
        let other = rows.iter().find(|r| r.group == OTHER).unwrap();
        assert_eq!(other.totals.requests, 10);
        assert_eq!(total(&rows).requests, (MAX_GROUPS_PER_MINUTE + 10) as u64);
    }

    /// The same requests recorded into one ledger and into shards (hints spread as workers
    /// would) give the same answers: every grouping, every `since`, the bound included.
    #[test]
    fn shards_answer_as_one_ledger_would() {
        let mut single = UsageLedger::default();
        let sharded = ShardedLedger::new(4);
        // A small linear congruential generator: a fixed, varied sequence.
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n
        };
        let mut now = T0;
        for i in 0..30_000u64 {
            // Mostly the same minute; now and then the next few; once a burst past the bound.
            if i % 5_000 == 4_999 {
                now += next(3) * MINUTE_MS + 1;
            }
            let spread = if (10_000..16_000).contains(&i) {
                6_000
            } else {
                50
            };
            let t = tuple(
                &format!("k{}", next(spread)),
                &format!("m{}", next(3)),
                &format!("c{}", next(2)),
            );
            let totals = used(next(100), next(10));
            single.record(now, t.clone(), totals);
            sharded.record(next(8) as usize, now, t, totals);
        }
        for by in [
            GroupBy::Key,
            GroupBy::Model,
            GroupBy::Provider,
            GroupBy::Connection,
        ] {
            for since in [0, T0, now - 2 * MINUTE_MS, now] {
                assert_eq!(sharded.query(since, by), single.query(since, by), "{by:?}");
            }
        }
        let by_key = sharded.query(0, GroupBy::Key);
        assert!(
            by_key.iter().any(|r| r.group == OTHER),
            "the bound was reached"
        );
        assert_eq!(sharded.retained_since(), single.retained_since());
    }

    #[test]
    fn shards_keep_the_bound_the_clock_step_back_and_the_day() {
        let l = ShardedLedger::new(3);
        for i in 0..MAX_GROUPS_PER_MINUTE + 10 {
            l.record(i, T0, tuple(&format!("k{i}"), "m", "c"), used(1, 0));
        }
        let rows = l.query(T0, GroupBy::Key);
        assert_eq!(rows.len(), MAX_GROUPS_PER_MINUTE + 1);
        let other = rows.iter().find(|r| r.group == OTHER).unwrap();
        assert_eq!(other.totals.requests, 10);
        // A step back lands in the newest minute, whatever the shard.
        l.record(7, T0 - 3 * MINUTE_MS, tuple("k1", "m", "c"), used(1, 0));
        assert_eq!(l.retained_since(), Some(T0 - T0 % MINUTE_MS));
        // A day later, a shard that never recorded again no longer answers for old minutes.
        let later = T0 + RETAINED_MINUTES * MINUTE_MS;
        l.record(1, later, tuple("late", "m", "c"), used(4, 0));
        let rows = l.query(0, GroupBy::Key);
        assert_eq!(rows.len(), 1);
        assert_eq!(total(&rows).input_tokens, 4);
        assert_eq!(l.retained_since(), Some(later - later % MINUTE_MS));
    }

    #[test]
    fn threads_recording_at_once_lose_nothing() {
        let l = Arc::new(ShardedLedger::default());
        let threads: Vec<_> = (0..4)
            .map(|worker| {
                let l = Arc::clone(&l);
                std::thread::spawn(move || {
                    for i in 0..2_000u64 {
                        let t = tuple(&format!("k{}", i % 7), "m", "c");
                        l.record(worker, T0 + i, t, used(1, 2));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let rows = l.query(0, GroupBy::Key);
        assert_eq!(rows.len(), 7);
        assert_eq!(total(&rows).requests, 8_000);
        assert_eq!(total(&rows).output_tokens, 16_000);
    }

    #[test]
    fn nodes_answers_merge_by_group() {
        let a = vec![Row {
            group: "m".into(),
            totals: used(1, 2),
        }];
        let b = vec![
            Row {
                group: "m".into(),
                totals: used(3, 4),
            },
            Row {
                group: "n".into(),
                totals: used(0, 1),
            },
        ];
        let merged = merge_rows([a, b]);
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0].group, "m");
        assert_eq!(merged[0].totals.requests, 2);
        assert_eq!(merged[0].totals.output_tokens, 6);
    }

    #[test]
    fn a_bad_query_names_its_parameter() {
        let now = T0;
        assert_eq!(parse_query(None, None, now).unwrap().1, GroupBy::Model);
        assert_eq!(
            parse_query(Some("1h"), Some("key"), now).unwrap(),
            (now - 60 * MINUTE_MS, GroupBy::Key)
        );
        let e = parse_query(None, Some("team"), now).unwrap_err();
        assert_eq!((e.status, e.code.as_str()), (400, "invalid_query"));
        assert_eq!(e.details[0].field, "by");
        let e = parse_query(Some("3d"), None, now).unwrap_err();
        assert_eq!(e.details[0].field, "since");
    }

    #[test]
    fn since_takes_epoch_ms_or_a_duration() {
        let now = T0;
        assert_eq!(parse_since(None, now), Ok(now - 24 * 60 * MINUTE_MS));
        assert_eq!(parse_since(Some("1000"), now), Ok(1000));
        assert_eq!(parse_since(Some("15m"), now), Ok(now - 15 * MINUTE_MS));
        assert_eq!(parse_since(Some("90s"), now), Ok(now - 90_000));
        assert_eq!(parse_since(Some("1d"), now), Ok(now - 24 * 60 * MINUTE_MS));
        assert!(parse_since(Some("2d"), now).is_err());
        assert!(parse_since(Some("99999999999999999999h"), now).is_err());
        assert!(parse_since(Some(&(now + 1).to_string()), now).is_err());
        for bad in ["", "h", "5x", "-5m", "1.5h", "é"] {
            assert!(parse_since(Some(bad), now).is_err(), "{bad}");
        }
    }
}
