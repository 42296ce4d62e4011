//! Request counters the tests assert on: how many requests reached the upstream per route,
//! key and model, how many were faulted, the peak concurrency per key (to check the gateway's
//! concurrency caps), and recent headers and bodies (to check what the gateway forwards).
//!
//! Every map is capped in size and every history is a ring, so a mock left running under a
//! benchmark does not grow. The header and body histories keep the request's own buffers
//! (reference-counted `HeaderMap` and `Bytes` clones) and turn them into strings only when a
//! snapshot is taken: the mock is also the benchmark's upstream, and copying every header
//! and body into strings was a fifth of its work per request.

use std::collections::{BTreeMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use hyper::HeaderMap;
use serde::{Deserialize, Serialize};

use super::fault::Route;
use super::lock;

/// Stats label for requests without an API key.
pub const NO_KEY: &str = "(none)";
/// Stats label for requests without a `model`.
pub const NO_MODEL: &str = "(none)";
/// Stats label that absorbs keys and models beyond [`MAX_TRACKED_LABELS`].
pub const OTHER: &str = "(other)";
/// Distinct keys (and, separately, models) tracked before new ones are counted as
/// [`OTHER`].
pub const MAX_TRACKED_LABELS: usize = 1024;

/// What became of a request, for the success and fault counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The normal response, no fault applied.
    Normal,
    /// A scripted fault applied.
    Fault,
    /// Refused by the mock itself: bad auth, bad JSON, unknown route, body too large.
    Rejected,
}

/// A request body as recorded (truncated to the configured capture limit).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedBody {
    /// Route label.
    pub route: String,
    /// API key label ([`NO_KEY`] when absent).
    pub api_key: String,
    /// Model label ([`NO_MODEL`] when absent).
    pub model: String,
    /// Size of the whole body in bytes.
    pub len: usize,
    /// The body's first bytes, decoded lossily as UTF-8.
    pub body: String,
    /// Whether `body` was cut at the capture limit.
    pub truncated: bool,
}

/// One request as it reached the mock, for checkers that need to know *when* a connection
/// (API key) was used: the chaos runner compares these with cooldown and breaker intervals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Arrival {
    /// Wall clock at arrival, epoch milliseconds (comparable with Redis `TIME`).
    pub epoch_ms: u64,
    /// Route label.
    pub route: String,
    /// API key label ([`NO_KEY`] when absent).
    pub api_key: String,
    /// Model label ([`NO_MODEL`] when absent).
    pub model: String,
}

/// A point-in-time copy of the counters, as returned by [`super::MockHandle::stats`] and
/// `GET /__mock/stats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatsSnapshot {
    /// Requests to provider routes (control requests under `/__mock/` are not counted).
    pub requests_total: u64,
    /// Requests that got the normal response.
    pub successes: u64,
    /// Requests a scripted fault applied to.
    pub faults: u64,
    /// Requests the mock refused by itself (auth, malformed JSON, unknown path).
    pub rejected: u64,
    /// Requests per route label (`other` for unknown paths).
    pub by_route: BTreeMap<String, u64>,
    /// Requests per API key.
    pub by_key: BTreeMap<String, u64>,
    /// Requests per route, then per API key.
    pub by_route_key: BTreeMap<String, BTreeMap<String, u64>>,
    /// Requests per model.
    pub by_model: BTreeMap<String, u64>,
    /// Requests being served right now.
    pub in_flight: u64,
    /// Most requests ever served at once.
    pub max_in_flight: u64,
    /// Requests being served right now, per key.
    pub in_flight_by_key: BTreeMap<String, u64>,
    /// Most requests ever served at once, per key.
    pub max_in_flight_by_key: BTreeMap<String, u64>,
    /// The last request header sets per key, oldest first; each is a list of
    /// `[name, value]` pairs in arrival order.
    pub recent_headers: BTreeMap<String, Vec<Vec<(String, String)>>>,
    /// The last request bodies, oldest first.
    pub recent_bodies: Vec<RecordedBody>,
    /// Faults still queued.
    pub pending_faults: usize,
}

impl StatsSnapshot {
    /// Requests seen for one key.
    pub fn requests_for_key(&self, api_key: &str) -> u64 {
        self.by_key.get(api_key).copied().unwrap_or(0)
    }

    /// Requests seen for one route.
    pub fn requests_for_route(&self, route: Route) -> u64 {
        self.by_route.get(route.label()).copied().unwrap_or(0)
    }

    /// Peak concurrency seen for one key.
    pub fn max_in_flight_for_key(&self, api_key: &str) -> u64 {
        self.max_in_flight_by_key.get(api_key).copied().unwrap_or(0)
    }

    /// Whether any remembered request carried a header with this name (case-insensitive).
    pub fn any_request_had_header(&self, name: &str) -> bool {
        self.recent_headers
            .values()
            .flatten()
            .flatten()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    }
}

/// FNV-1a: the maps are keyed by a handful of short labels and hashed several times per
/// request; SipHash's flood resistance buys nothing in a test fixture and cost a tenth of the
/// mock's work per request.
#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.0 = h;
    }
}

type HashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<Fnv>>;

/// A remembered body, kept as received until a snapshot decodes it.
struct RawBody {
    route: &'static str,
    api_key: String,
    model: String,
    len: usize,
    body: Bytes,
}

impl RawBody {
    fn record(&self, cap: usize) -> RecordedBody {
        let kept = &self.body[..self.body.len().min(cap)];
        RecordedBody {
            route: self.route.to_owned(),
            api_key: self.api_key.clone(),
            model: self.model.clone(),
            len: self.len,
            body: String::from_utf8_lossy(kept).into_owned(),
            truncated: self.len > cap,
        }
    }
}

/// A header set as `[name, value]` pairs in arrival order.
fn header_pairs(h: &HeaderMap) -> Vec<(String, String)> {
    h.iter()
        .map(|(n, v)| {
            (
                n.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

#[derive(Default)]
struct Inner {
    requests_total: u64,
    successes: u64,
    faults: u64,
    rejected: u64,
    by_route: HashMap<&'static str, u64>,
    by_key: HashMap<String, u64>,
    by_route_key: HashMap<&'static str, HashMap<String, u64>>,
    by_model: HashMap<String, u64>,
    in_flight: u64,
    max_in_flight: u64,
    /// Per key: (current, max).
    in_flight_by_key: HashMap<String, (u64, u64)>,
    headers: HashMap<String, VecDeque<HeaderMap>>,
    bodies: VecDeque<RawBody>,
    arrivals: VecDeque<Arrival>,
}

/// Limits on what is remembered.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) header_history: usize,
    pub(crate) body_history: usize,
    pub(crate) body_capture_limit: usize,
    pub(crate) arrival_log: usize,
}

pub(crate) struct Stats {
    inner: Mutex<Inner>,
    limits: Limits,
}

/// Picks the label to count under: the key itself while the map has room, else [`OTHER`].
fn label<'a, V>(map: &HashMap<String, V>, key: &'a str) -> &'a str {
    if map.len() < MAX_TRACKED_LABELS || map.contains_key(key) {
        key
    } else {
        OTHER
    }
}

fn bump(map: &mut HashMap<String, u64>, key: &str) {
    let key = label(map, key);
    match map.get_mut(key) {
        Some(n) => *n += 1,
        None => {
            map.insert(key.to_owned(), 1);
        }
    }
}

/// Request details handed to [`Stats::begin`].
pub(crate) struct RequestFacts<'a> {
    pub(crate) route: &'static str,
    pub(crate) api_key: Option<&'a str>,
    pub(crate) model: Option<&'a str>,
    pub(crate) headers: &'a HeaderMap,
    pub(crate) body: &'a Bytes,
}

impl Stats {
    pub(crate) fn new(limits: Limits) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            limits,
        }
    }

    /// Counts a request and marks it in flight until the returned guard drops.
    pub(crate) fn begin(self: &Arc<Self>, facts: &RequestFacts<'_>) -> InFlightGuard {
        let key = facts.api_key.unwrap_or(NO_KEY);
        let model = facts.model.unwrap_or(NO_MODEL);
        // Take what is remembered before taking the lock: reference-counted clones, decoded
        // only by a snapshot.
        let header_set = (self.limits.header_history > 0).then(|| facts.headers.clone());
        let body = (self.limits.body_history > 0).then(|| RawBody {
            route: facts.route,
            api_key: key.to_owned(),
            model: model.to_owned(),
            len: facts.body.len(),
            // A body over the capture limit is cut now, so the ring never pins a large buffer.
            body: if facts.body.len() > self.limits.body_capture_limit {
                Bytes::copy_from_slice(&facts.body[..self.limits.body_capture_limit])
            } else {
                facts.body.clone()
            },
        });

        let arrival = (self.limits.arrival_log > 0).then(|| Arrival {
            epoch_ms: epoch_ms(),
            route: facts.route.to_owned(),
            api_key: key.to_owned(),
            model: model.to_owned(),
        });

        let mut inner = lock(&self.inner);
        let inner = &mut *inner;
        inner.requests_total += 1;
        if let Some(arrival) = arrival {
            if inner.arrivals.len() >= self.limits.arrival_log {
                inner.arrivals.pop_front();
            }
            inner.arrivals.push_back(arrival);
        }
        *inner.by_route.entry(facts.route).or_insert(0) += 1;
        bump(&mut inner.by_key, key);
        bump(inner.by_route_key.entry(facts.route).or_default(), key);
        bump(&mut inner.by_model, model);

        inner.in_flight += 1;
        inner.max_in_flight = inner.max_in_flight.max(inner.in_flight);
        let key_label = label(&inner.in_flight_by_key, key).to_owned();
        let slot = inner
            .in_flight_by_key
            .entry(key_label.clone())
            .or_insert((0, 0));
        slot.0 += 1;
        slot.1 = slot.1.max(slot.0);

        if let Some(set) = header_set {
            let ring_key = label(&inner.headers, key);
            if !inner.headers.contains_key(ring_key) {
                inner.headers.insert(ring_key.to_owned(), VecDeque::new());
            }
            if let Some(ring) = inner.headers.get_mut(ring_key) {
                if ring.len() >= self.limits.header_history {
                    ring.pop_front();
                }
                ring.push_back(set);
            }
        }
        if let Some(body) = body {
            if inner.bodies.len() >= self.limits.body_history {
                inner.bodies.pop_front();
            }
            inner.bodies.push_back(body);
        }
        InFlightGuard {
            stats: Arc::clone(self),
            key: key_label,
        }
    }

    /// Counts a request that never got as far as [`Stats::begin`] (for example one whose body
    /// could not be read), so it still shows up as rejected.
    pub(crate) fn record(&self, outcome: Outcome) {
        let mut inner = lock(&self.inner);
        match outcome {
            Outcome::Normal => inner.successes += 1,
            Outcome::Fault => inner.faults += 1,
            Outcome::Rejected => inner.rejected += 1,
        }
    }

    fn end(&self, key: &str) {
        let mut inner = lock(&self.inner);
        inner.in_flight = inner.in_flight.saturating_sub(1);
        if let Some(slot) = inner.in_flight_by_key.get_mut(key) {
            slot.0 = slot.0.saturating_sub(1);
        }
    }

    /// Zeroes the counters and histories. Requests still in flight stay counted as in flight
    /// (so the gauge stays right when they finish) and become the new maxima.
    pub(crate) fn reset(&self) {
        let mut inner = lock(&self.inner);
        let in_flight = inner.in_flight;
        let mut by_key = std::mem::take(&mut inner.in_flight_by_key);
        by_key.retain(|_, slot| slot.0 > 0);
        for slot in by_key.values_mut() {
            slot.1 = slot.0;
        }
        *inner = Inner {
            in_flight,
            max_in_flight: in_flight,
            in_flight_by_key: by_key,
            ..Inner::default()
        };
    }

    /// The arrival log, oldest first (empty unless `arrival_log` is set).
    pub(crate) fn arrivals(&self) -> Vec<Arrival> {
        lock(&self.inner).arrivals.iter().cloned().collect()
    }

    pub(crate) fn snapshot(&self, pending_faults: usize) -> StatsSnapshot {
        let inner = lock(&self.inner);
        let owned = |m: &HashMap<String, u64>| -> BTreeMap<String, u64> {
            m.iter().map(|(k, v)| (k.clone(), *v)).collect()
        };
        StatsSnapshot {
            requests_total: inner.requests_total,
            successes: inner.successes,
            faults: inner.faults,
            rejected: inner.rejected,
            by_route: inner
                .by_route
                .iter()
                .map(|(k, v)| ((*k).to_owned(), *v))
                .collect(),
            by_key: owned(&inner.by_key),
            by_route_key: inner
                .by_route_key
                .iter()
                .map(|(k, v)| ((*k).to_owned(), owned(v)))
                .collect(),
            by_model: owned(&inner.by_model),
            in_flight: inner.in_flight,
            max_in_flight: inner.max_in_flight,
            in_flight_by_key: inner
                .in_flight_by_key
                .iter()
                .map(|(k, v)| (k.clone(), v.0))
                .collect(),
            max_in_flight_by_key: inner
                .in_flight_by_key
                .iter()
                .map(|(k, v)| (k.clone(), v.1))
                .collect(),
            recent_headers: inner
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.iter().map(header_pairs).collect()))
                .collect(),
            recent_bodies: inner
                .bodies
                .iter()
                .map(|b| b.record(self.limits.body_capture_limit))
                .collect(),
            pending_faults,
        }
    }
}

fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Marks one request in flight; dropping it (when the response body ends or the client goes
/// away) takes the request out of the gauge.
pub(crate) struct InFlightGuard {
    stats: Arc<Stats>,
    key: String,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.stats.end(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats() -> Arc<Stats> {
        Arc::new(Stats::new(Limits {
            header_history: 2,
            body_history: 2,
            body_capture_limit: 4,
            arrival_log: 2,
        }))
    }

    fn facts<'a>(key: Option<&'a str>, h: &'a HeaderMap, b: &'a Bytes) -> RequestFacts<'a> {
        RequestFacts {
            route: "chat_completions",
            api_key: key,
            model: Some("m"),
            headers: h,
            body: b,
        }
    }

    #[test]
    fn in_flight_peaks_and_rings_are_bounded() {
        let s = stats();
        let h = HeaderMap::new();
        let b = Bytes::from_static(b"0123456789");
        let g1 = s.begin(&facts(Some("k"), &h, &b));
        let g2 = s.begin(&facts(Some("k"), &h, &b));
        let g3 = s.begin(&facts(None, &h, &b));
        drop(g1);
        let snap = s.snapshot(0);
        assert_eq!(snap.in_flight_by_key["k"], 1);
        assert_eq!(snap.max_in_flight_by_key["k"], 2);
        assert_eq!(snap.max_in_flight, 3);
        assert_eq!(snap.by_key[NO_KEY], 1);
        assert_eq!(snap.recent_headers["k"].len(), 2);
        assert_eq!(snap.recent_bodies.len(), 2);
        assert_eq!(snap.recent_bodies[0].body, "0123");
        assert!(snap.recent_bodies[0].truncated);
        let log = s.arrivals();
        assert_eq!(log.len(), 2, "the arrival log is a ring");
        assert_eq!(
            (log[0].api_key.as_str(), log[1].api_key.as_str()),
            ("k", NO_KEY)
        );
        assert!(log[0].epoch_ms > 1_600_000_000_000 && log[0].epoch_ms <= log[1].epoch_ms);
        s.reset();
        let snap = s.snapshot(0);
        assert_eq!(snap.requests_total, 0);
        assert_eq!(snap.in_flight, 2);
        assert_eq!(snap.max_in_flight_by_key["k"], 1);
        drop((g2, g3));
        let snap = s.snapshot(0);
        assert_eq!(snap.in_flight, 0);
        assert_eq!(snap.in_flight_by_key["k"], 0);
    }

    #[test]
    fn labels_are_capped() {
        let s = stats();
        let h = HeaderMap::new();
        let b = Bytes::new();
        for i in 0..(MAX_TRACKED_LABELS + 5) {
            let key = format!("k{i}");
            drop(s.begin(&facts(Some(&key), &h, &b)));
        }
        let snap = s.snapshot(0);
        assert_eq!(snap.by_key.len(), MAX_TRACKED_LABELS + 1);
        assert_eq!(snap.by_key[OTHER], 5);
    }
}
