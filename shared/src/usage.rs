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

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

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

    fn group<'a>(&self, t: &'a Tuple) -> &'a str {
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
        let start = now_ms - now_ms % MINUTE_MS;
        if self.minutes.back().is_none_or(|(s, _)| *s < start) {
            self.minutes.push_back((start, HashMap::new()));
        }
        let horizon = start.saturating_sub((RETAINED_MINUTES - 1) * MINUTE_MS);
        while self.minutes.front().is_some_and(|(s, _)| *s < horizon) {
            self.minutes.pop_front();
        }
        // A clock step back lands in the newest bucket rather than reordering the ring.
        let Some((_, bucket)) = self.minutes.back_mut() else {
            return;
        };
        let tuple = if bucket.len() >= MAX_GROUPS_PER_MINUTE && !bucket.contains_key(&tuple) {
            Tuple::other()
        } else {
            tuple
        };
        bucket.entry(tuple).or_default().add(&totals);
    }

    /// The start of the oldest minute still kept, if any.
    pub fn retained_since(&self) -> Option<u64> {
        self.minutes.front().map(|(s, _)| *s)
    }

    /// The sums of every minute that ends after `since_ms`, grouped by `by`, largest token
    /// count first (then by name). A minute is counted whole: `since_ms` is rounded down to
    /// its minute.
    pub fn query(&self, since_ms: u64, by: GroupBy) -> Vec<Row> {
        let from = since_ms - since_ms % MINUTE_MS;
        let mut groups: HashMap<&str, Totals> = HashMap::new();
        for (_, bucket) in self.minutes.iter().filter(|(s, _)| *s >= from) {
            for (tuple, totals) in bucket {
                groups.entry(by.group(tuple)).or_default().add(totals);
            }
        }
        sorted(
            groups
                .into_iter()
                .map(|(group, totals)| Row {
                    group: group.to_owned(),
                    totals,
                })
                .collect(),
        )
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
