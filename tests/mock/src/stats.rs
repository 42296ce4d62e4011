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
use std::sync::atomic::{AtomicU64, Ordering};
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

/// FNV-1a: the maps are keyed by short labels; SipHash's flood resistance buys nothing in a
/// test fixture and cost a tenth of the mock's work per request.
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

/// Route labels counted, in the order of their counters.
const ROUTE_LABELS: [&str; 5] = [
    "chat_completions",
    "messages",
    "responses",
    "models",
    "other",
];

fn route_index(label: &str) -> usize {
    ROUTE_LABELS
        .iter()
        .position(|l| *l == label)
        .unwrap_or(ROUTE_LABELS.len() - 1)
}

/// A remembered body, kept as received until a snapshot decodes it.
struct RawBody {
    route: &'static str,
    api_key: Arc<str>,
    model: Arc<str>,
    len: usize,
    body: Bytes,
}

impl RawBody {
    fn record(&self, cap: usize) -> RecordedBody {
        let kept = &self.body[..self.body.len().min(cap)];
        RecordedBody {
            route: self.route.to_owned(),
            api_key: self.api_key.as_ref().to_owned(),
            model: self.model.as_ref().to_owned(),
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

/// What one key label's in-flight requests share without the stats lock: the guard of a
/// request ends it with two atomic operations, and its header set goes into the key's ring
/// without a second lookup.
#[derive(Default)]
struct KeyLive {
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
    /// The key's last request header sets, oldest first.
    headers: Mutex<VecDeque<HeaderMap>>,
}

/// Counters of one API key label.
struct KeySlot {
    /// Requests since the last reset (`by_key`).
    requests: u64,
    /// Requests since the last reset per route label (`by_route_key`).
    by_route: [u64; ROUTE_LABELS.len()],
    live: Arc<KeyLive>,
}

impl Default for KeySlot {
    fn default() -> Self {
        Self {
            requests: 0,
            by_route: [0; ROUTE_LABELS.len()],
            live: Arc::new(KeyLive::default()),
        }
    }
}

/// Labels (API keys or models) with their values, capped at [`MAX_TRACKED_LABELS`]
/// distinct ones, beyond which new labels are counted as [`OTHER`]. The last label used is
/// checked first: a benchmark, and most tests, send one key and one model, and comparing
/// with it costs less than hashing.
struct Labels<T> {
    index: HashMap<Arc<str>, usize>,
    slots: Vec<(Arc<str>, T)>,
    last: usize,
}

impl<T> Default for Labels<T> {
    fn default() -> Self {
        Self {
            index: HashMap::default(),
            slots: Vec::new(),
            last: usize::MAX,
        }
    }
}

impl<T: Default> Labels<T> {
    /// The slot counting `name` (or [`OTHER`] once the cap is reached), created if new.
    fn slot(&mut self, name: &str) -> &mut (Arc<str>, T) {
        let hit = matches!(self.slots.get(self.last), Some((n, _)) if **n == *name);
        if !hit {
            self.last = self.find_or_insert(name);
        }
        // `last` indexes a slot: the one just compared, found or pushed.
        &mut self.slots[self.last]
    }

    fn find_or_insert(&mut self, name: &str) -> usize {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let name = if self.slots.len() < MAX_TRACKED_LABELS {
            name
        } else {
            OTHER
        };
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let label: Arc<str> = Arc::from(name);
        self.index.insert(Arc::clone(&label), self.slots.len());
        self.slots.push((label, T::default()));
        self.slots.len() - 1
    }

    /// Keeps the slots `keep` accepts, in order.
    fn retain(&mut self, mut keep: impl FnMut(&mut T) -> bool) {
        self.slots.retain_mut(|(_, v)| keep(v));
        self.index = self
            .slots
            .iter()
            .enumerate()
            .map(|(i, (n, _))| (Arc::clone(n), i))
            .collect();
        self.last = usize::MAX;
    }

    fn iter(&self) -> impl Iterator<Item = (&str, &T)> {
        self.slots.iter().map(|(n, v)| (n.as_ref(), v))
    }
}

#[derive(Default)]
struct Inner {
    requests_total: u64,
    by_route: [u64; ROUTE_LABELS.len()],
    keys: Labels<KeySlot>,
    models: Labels<u64>,
    max_in_flight: u64,
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

/// The counters behind [`StatsSnapshot`]. Counting a request takes one uncontended lock;
/// outcomes, the in-flight gauge and the header rings are kept beside it so that the rest of
/// a request's life takes no lock and no lookup.
pub(crate) struct Stats {
    inner: Mutex<Inner>,
    successes: AtomicU64,
    faults: AtomicU64,
    rejected: AtomicU64,
    in_flight: AtomicU64,
    limits: Limits,
}

/// Request details handed to [`Stats::begin`].
pub(crate) struct RequestFacts<'a> {
    pub(crate) route: &'static str,
    pub(crate) api_key: Option<&'a str>,
    pub(crate) model: Option<&'a str>,
    pub(crate) body: &'a Bytes,
}

impl Stats {
    pub(crate) fn new(limits: Limits) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            successes: AtomicU64::new(0),
            faults: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            limits,
        }
    }

    /// Counts a request and marks it in flight until the returned guard drops. Its header
    /// set is handed over afterwards with [`InFlightGuard::keep_headers`], once nothing
    /// borrows from it any more.
    pub(crate) fn begin(self: &Arc<Self>, facts: &RequestFacts<'_>) -> InFlightGuard {
        let key = facts.api_key.unwrap_or(NO_KEY);
        let model = facts.model.unwrap_or(NO_MODEL);
        let route = route_index(facts.route);
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
        if let Some(n) = inner.by_route.get_mut(route) {
            *n += 1;
        }
        let (key_label, slot) = inner.keys.slot(key);
        slot.requests += 1;
        if let Some(n) = slot.by_route.get_mut(route) {
            *n += 1;
        }
        let live = Arc::clone(&slot.live);
        let key_label = Arc::clone(key_label);
        let (model_label, count) = inner.models.slot(model);
        *count += 1;
        let model_label = Arc::clone(model_label);

        let in_flight = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        inner.max_in_flight = inner.max_in_flight.max(in_flight);
        let key_in_flight = live.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        live.max_in_flight
            .fetch_max(key_in_flight, Ordering::Relaxed);

        if self.limits.body_history > 0 {
            // The labels are the key and model themselves unless the caps folded them into
            // `(other)`; the body records the real ones.
            let label_or = |label: Arc<str>, real: &str| {
                if *label == *real {
                    label
                } else {
                    Arc::from(real)
                }
            };
            let body = RawBody {
                route: facts.route,
                api_key: label_or(key_label, key),
                model: label_or(model_label, model),
                len: facts.body.len(),
                // A body over the capture limit is cut now, so the ring never pins a large
                // buffer.
                body: if facts.body.len() > self.limits.body_capture_limit {
                    Bytes::copy_from_slice(&facts.body[..self.limits.body_capture_limit])
                } else {
                    facts.body.clone()
                },
            };
            if inner.bodies.len() >= self.limits.body_history {
                inner.bodies.pop_front();
            }
            inner.bodies.push_back(body);
        }
        InFlightGuard {
            stats: Arc::clone(self),
            live,
        }
    }

    /// Counts what became of a request (also one that never got as far as
    /// [`Stats::begin`], for example one whose body could not be read).
    pub(crate) fn record(&self, outcome: Outcome) {
        let counter = match outcome {
            Outcome::Normal => &self.successes,
            Outcome::Fault => &self.faults,
            Outcome::Rejected => &self.rejected,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Zeroes the counters and histories. Requests still in flight stay counted as in flight
    /// (so the gauge stays right when they finish) and become the new maxima.
    pub(crate) fn reset(&self) {
        let mut inner = lock(&self.inner);
        let in_flight = self.in_flight.load(Ordering::Relaxed);
        let mut keys = std::mem::take(&mut inner.keys);
        keys.retain(|slot| {
            let now = slot.live.in_flight.load(Ordering::Relaxed);
            slot.requests = 0;
            slot.by_route = [0; ROUTE_LABELS.len()];
            slot.live.max_in_flight.store(now, Ordering::Relaxed);
            lock(&slot.live.headers).clear();
            now > 0
        });
        *inner = Inner {
            max_in_flight: in_flight,
            keys,
            ..Inner::default()
        };
        for counter in [&self.successes, &self.faults, &self.rejected] {
            counter.store(0, Ordering::Relaxed);
        }
    }

    /// The arrival log, oldest first (empty unless `arrival_log` is set).
    pub(crate) fn arrivals(&self) -> Vec<Arrival> {
        lock(&self.inner).arrivals.iter().cloned().collect()
    }

    pub(crate) fn snapshot(&self, pending_faults: usize) -> StatsSnapshot {
        let inner = lock(&self.inner);
        let keys = || inner.keys.iter();
        let per_key = |value: &dyn Fn(&KeySlot) -> u64, only_counted: bool| {
            keys()
                .map(|(k, slot)| (k.to_owned(), value(slot)))
                .filter(|(_, n)| !only_counted || *n > 0)
                .collect::<BTreeMap<String, u64>>()
        };
        let mut by_route = BTreeMap::new();
        let mut by_route_key = BTreeMap::new();
        for (i, label) in ROUTE_LABELS.iter().enumerate() {
            let n = inner.by_route.get(i).copied().unwrap_or(0);
            if n > 0 {
                by_route.insert((*label).to_owned(), n);
                let counts = per_key(&|s| s.by_route.get(i).copied().unwrap_or(0), true);
                by_route_key.insert((*label).to_owned(), counts);
            }
        }
        let mut recent_headers = BTreeMap::new();
        for (k, slot) in keys() {
            let ring = lock(&slot.live.headers);
            if !ring.is_empty() {
                recent_headers.insert(k.to_owned(), ring.iter().map(header_pairs).collect());
            }
        }
        StatsSnapshot {
            requests_total: inner.requests_total,
            successes: self.successes.load(Ordering::Relaxed),
            faults: self.faults.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            by_route,
            by_key: per_key(&|s| s.requests, true),
            by_route_key,
            by_model: inner
                .models
                .iter()
                .map(|(k, n)| (k.to_owned(), *n))
                .collect(),
            in_flight: self.in_flight.load(Ordering::Relaxed),
            max_in_flight: inner.max_in_flight,
            in_flight_by_key: per_key(&|s| s.live.in_flight.load(Ordering::Relaxed), false),
            max_in_flight_by_key: per_key(&|s| s.live.max_in_flight.load(Ordering::Relaxed), false),
            recent_headers,
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
    live: Arc<KeyLive>,
}

impl InFlightGuard {
    /// Remembers the request's header set in its key's ring. The map is moved, not copied:
    /// hyper builds one per request, and the ring is its last owner.
    pub(crate) fn keep_headers(&self, headers: HeaderMap) {
        let cap = self.stats.limits.header_history;
        if cap == 0 {
            return;
        }
        let mut ring = lock(&self.live.headers);
        if ring.len() >= cap {
            ring.pop_front();
        }
        ring.push_back(headers);
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.stats.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.live.in_flight.fetch_sub(1, Ordering::Relaxed);
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

    fn facts<'a>(key: Option<&'a str>, b: &'a Bytes) -> RequestFacts<'a> {
        RequestFacts {
            route: "chat_completions",
            api_key: key,
            model: Some("m"),
            body: b,
        }
    }

    fn begin(s: &Arc<Stats>, key: Option<&str>, h: &HeaderMap, b: &Bytes) -> InFlightGuard {
        let g = s.begin(&facts(key, b));
        g.keep_headers(h.clone());
        g
    }

    #[test]
    fn in_flight_peaks_and_rings_are_bounded() {
        let s = stats();
        let h = HeaderMap::new();
        let b = Bytes::from_static(b"0123456789");
        let g1 = begin(&s, Some("k"), &h, &b);
        let g2 = begin(&s, Some("k"), &h, &b);
        let g3 = begin(&s, None, &h, &b);
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
        assert!(snap.by_key.is_empty() && snap.by_route.is_empty());
        assert!(snap.recent_headers.is_empty() && snap.recent_bodies.is_empty());
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
            drop(begin(&s, Some(&key), &h, &b));
        }
        let snap = s.snapshot(0);
        assert_eq!(snap.by_key.len(), MAX_TRACKED_LABELS + 1);
        assert_eq!(snap.by_key[OTHER], 5);
        assert_eq!(
            snap.by_route_key["chat_completions"].len(),
            MAX_TRACKED_LABELS + 1
        );
        assert_eq!(snap.in_flight_by_key.len(), MAX_TRACKED_LABELS + 1);
        assert_eq!(snap.recent_headers[OTHER].len(), 2);
        // The body history keeps the real key, not the label it was counted under.
        let last = format!("k{}", MAX_TRACKED_LABELS + 4);
        assert_eq!(
            snap.recent_bodies.last().map(|b| b.api_key.as_str()),
            Some(last.as_str())
        );
    }

    #[test]
    fn interleaved_keys_and_models_count_apart() {
        let s = stats();
        let h = HeaderMap::new();
        let b = Bytes::new();
        let mut guards = Vec::new();
        for (key, model, route) in [
            ("a", "m1", "chat_completions"),
            ("b", "m2", "messages"),
            ("a", "m2", "messages"),
            ("a", "m1", "other"),
        ] {
            let g = s.begin(&RequestFacts {
                route,
                api_key: Some(key),
                model: Some(model),
                body: &b,
            });
            g.keep_headers(h.clone());
            guards.push(g);
        }
        s.record(Outcome::Normal);
        s.record(Outcome::Rejected);
        let snap = s.snapshot(3);
        assert_eq!((snap.by_key["a"], snap.by_key["b"]), (3, 1));
        assert_eq!((snap.by_model["m1"], snap.by_model["m2"]), (2, 2));
        assert_eq!(snap.by_route["messages"], 2);
        assert_eq!(snap.by_route["other"], 1);
        assert!(!snap.by_route.contains_key("responses"));
        assert_eq!(snap.by_route_key["messages"]["a"], 1);
        assert_eq!(snap.by_route_key["messages"]["b"], 1);
        assert!(!snap.by_route_key["chat_completions"].contains_key("b"));
        assert_eq!((snap.in_flight, snap.max_in_flight), (4, 4));
        assert_eq!(snap.max_in_flight_by_key["a"], 3);
        drop(guards);
        let snap = s.snapshot(3);
        assert_eq!((snap.in_flight, snap.max_in_flight), (0, 4));
        assert_eq!(snap.in_flight_by_key["a"], 0);
        assert_eq!((snap.successes, snap.rejected, snap.faults), (1, 1, 0));
        assert_eq!(snap.recent_headers["a"].len(), 2);
        assert_eq!(snap.pending_faults, 3);
    }
}
