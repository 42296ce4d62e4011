//! The bounded per-provider history: one point per sampling round, at most one window long.

use std::collections::{BTreeMap, VecDeque};

use serde_json::{Value, json};

use super::WINDOW_MS;
use super::exposition::{Counters, NodeCounters, add, increase, quantile};

/// Most points a provider keeps, whatever the interval (memory stays bounded).
pub const MAX_POINTS: usize = 900;

/// One sampling round of one provider, summed over the nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Epoch ms of the round.
    pub at: u64,
    pub requests_per_sec: f64,
    pub errors_per_sec: f64,
    /// p95 upstream attempt duration in the round; `None` without attempts.
    pub p95_ms: Option<f64>,
}

/// The rings, and each node's previous counters to take increases from.
#[derive(Debug)]
pub struct History {
    interval_ms: u64,
    capacity: usize,
    last: BTreeMap<String, (u64, NodeCounters)>,
    series: BTreeMap<String, VecDeque<Point>>,
}

impl History {
    /// A history sampled every `interval_ms` (15 min at 10 s: 90 points per provider).
    pub fn new(interval_ms: u64) -> Self {
        let interval_ms = interval_ms.max(1);
        let capacity = usize::try_from(WINDOW_MS.div_ceil(interval_ms))
            .unwrap_or(MAX_POINTS)
            .clamp(1, MAX_POINTS);
        Self {
            interval_ms,
            capacity,
            last: BTreeMap::new(),
            series: BTreeMap::new(),
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Records a round taken at `at` (epoch ms): `samples` are the nodes that answered, by
    /// node id. A node contributes from its second answer on (a rate needs two readings); a
    /// node that did not answer loses its baseline. Every provider in `providers` gets a
    /// point once any node has a baseline, zero when nothing happened.
    pub fn record(&mut self, at: u64, samples: Vec<(String, NodeCounters)>, providers: &[String]) {
        let mut sums: BTreeMap<&str, (f64, f64, Counters)> = BTreeMap::new();
        let mut rated = false;
        let mut next = BTreeMap::new();
        for (node, counters) in samples {
            if let Some((prev_at, prev)) = self.last.get(&node)
                && at > *prev_at
            {
                rated = true;
                let secs = (at - prev_at) as f64 / 1000.0;
                for provider in providers {
                    let Some(cur) = counters.get(provider) else {
                        continue;
                    };
                    let inc = increase(prev.get(provider).unwrap_or(&Counters::default()), cur);
                    let sum = sums.entry(provider.as_str()).or_default();
                    sum.0 += inc.requests / secs;
                    sum.1 += inc.errors / secs;
                    add(&mut sum.2, &inc);
                }
            }
            next.insert(node, (at, counters));
        }
        self.last = next;
        if !rated {
            return;
        }
        for provider in providers {
            let (requests, errors, hist) = sums.remove(provider.as_str()).unwrap_or_default();
            let point = Point {
                at,
                requests_per_sec: requests,
                errors_per_sec: errors,
                p95_ms: quantile(0.95, &hist.buckets).map(|s| s * 1000.0),
            };
            let ring = self.series.entry(provider.clone()).or_default();
            ring.push_back(point);
            while ring.len() > self.capacity
                || ring
                    .front()
                    .is_some_and(|p| p.at.saturating_add(WINDOW_MS) < at)
            {
                ring.pop_front();
            }
        }
        self.series.retain(|id, _| providers.contains(id));
    }

    /// The points of one provider, oldest first.
    pub fn points(&self, provider: &str) -> Vec<Point> {
        self.series
            .get(provider)
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// `GET /api/cluster/history`.
    pub fn to_json(&self, providers: &[String], now: u64) -> Value {
        let rows: Vec<Value> = providers
            .iter()
            .map(|id| {
                let points: Vec<Value> = self
                    .points(id)
                    .iter()
                    .map(|p| {
                        json!({
                            "at": p.at,
                            "requestsPerSec": round(p.requests_per_sec),
                            "errorsPerSec": round(p.errors_per_sec),
                            "p95Ms": p.p95_ms.map(round),
                        })
                    })
                    .collect();
                json!({"id": id, "points": points})
            })
            .collect();
        json!({
            "windowMs": WINDOW_MS,
            "stepMs": self.interval_ms,
            "generatedAt": now,
            "providers": rows,
        })
    }
}

/// Three decimals are plenty for a chart and keep the document small.
fn round(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(requests: f64, errors: f64, fast: f64) -> NodeCounters {
        let mut m = NodeCounters::new();
        m.insert(
            "p".into(),
            Counters {
                requests,
                errors,
                buckets: vec![(0.1, fast), (1.0, requests), (f64::INFINITY, requests)],
            },
        );
        m
    }

    fn providers() -> Vec<String> {
        vec!["p".into(), "q".into()]
    }

    #[test]
    fn fifteen_minutes_at_ten_seconds_is_ninety_points() {
        assert_eq!(History::new(10_000).capacity(), 90);
        assert_eq!(History::new(1).capacity(), MAX_POINTS);
        assert_eq!(History::new(3_600_000).capacity(), 1);
    }

    #[test]
    fn rates_are_summed_over_nodes_from_the_second_reading() {
        let mut h = History::new(10_000);
        h.record(
            0,
            vec![
                ("a".into(), counters(0.0, 0.0, 0.0)),
                ("b".into(), counters(5.0, 0.0, 5.0)),
            ],
            &providers(),
        );
        assert!(h.points("p").is_empty(), "one reading is no rate");
        h.record(
            10_000,
            vec![
                ("a".into(), counters(100.0, 10.0, 100.0)),
                ("b".into(), counters(105.0, 0.0, 5.0)),
            ],
            &providers(),
        );
        let p = h.points("p");
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].at, 10_000);
        assert_eq!(p[0].requests_per_sec, 20.0);
        assert_eq!(p[0].errors_per_sec, 1.0);
        // 100 fast (≤ 0.1 s) and 100 slow (0.1–1 s) attempts: p95 at 90 % of the slow bucket.
        let p95 = p[0].p95_ms.unwrap();
        assert!((p95 - 910.0).abs() < 1e-6, "{p95}");
        // A provider nobody reported gets an empty point, not a gap.
        let q = h.points("q");
        assert_eq!(q.len(), 1);
        assert_eq!((q[0].requests_per_sec, q[0].p95_ms), (0.0, None));
    }

    #[test]
    fn a_node_that_missed_a_round_starts_over() {
        let mut h = History::new(10_000);
        h.record(0, vec![("a".into(), counters(0.0, 0.0, 0.0))], &providers());
        h.record(10_000, vec![], &providers());
        h.record(
            20_000,
            vec![("a".into(), counters(500.0, 0.0, 500.0))],
            &providers(),
        );
        assert!(h.points("p").is_empty(), "no baseline after the gap");
        h.record(
            30_000,
            vec![("a".into(), counters(510.0, 0.0, 510.0))],
            &providers(),
        );
        assert_eq!(h.points("p")[0].requests_per_sec, 1.0);
    }

    #[test]
    fn the_ring_is_bounded_by_count_and_window() {
        let mut h = History::new(10_000);
        let mut total = 0.0;
        for i in 0..200u64 {
            total += 10.0;
            h.record(
                i * 10_000,
                vec![("a".into(), counters(total, 0.0, total))],
                &providers(),
            );
        }
        let p = h.points("p");
        assert_eq!(p.len(), 90);
        assert_eq!(p.last().map(|x| x.at), Some(1_990_000));
        assert!(p.iter().all(|x| x.at + WINDOW_MS >= 1_990_000));
        let doc = h.to_json(&providers(), 2_000_000);
        assert_eq!(
            doc["providers"][0]["points"].as_array().map(Vec::len),
            Some(90)
        );
        assert_eq!(doc["providers"][0]["points"][0]["requestsPerSec"], 1.0);
        assert_eq!(doc["stepMs"], 10_000);
    }
}
