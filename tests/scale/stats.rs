//! Latency samples and their percentiles.

use std::sync::Mutex;
use std::time::Duration;

/// Most samples one recorder keeps; later ones are dropped (the run stays bounded in memory).
const MAX_SAMPLES: usize = 2_000_000;

/// A bounded list of durations in microseconds.
#[derive(Debug, Default)]
pub struct Recorder {
    samples: Mutex<Vec<u64>>,
}

impl Recorder {
    pub fn record(&self, d: Duration) {
        if let Ok(mut s) = self.samples.lock()
            && s.len() < MAX_SAMPLES
        {
            s.push(u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        }
    }

    pub fn summary(&self) -> Summary {
        let mut s = self.samples.lock().map(|s| s.clone()).unwrap_or_default();
        s.sort_unstable();
        Summary::of_sorted(&s)
    }
}

/// Percentiles in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Summary {
    pub count: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Summary {
    fn of_sorted(sorted_us: &[u64]) -> Self {
        let at = |q: f64| -> f64 {
            if sorted_us.is_empty() {
                return 0.0;
            }
            // Nearest rank.
            let rank = (q * sorted_us.len() as f64).ceil() as usize;
            sorted_us[rank.clamp(1, sorted_us.len()) - 1] as f64 / 1000.0
        };
        Self {
            count: sorted_us.len(),
            p50_ms: at(0.50),
            p99_ms: at(0.99),
            max_ms: at(1.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        let s = Summary::of_sorted(&v);
        assert_eq!(s.count, 100);
        assert!((s.p50_ms - 50.0).abs() < 1e-9);
        assert!((s.p99_ms - 99.0).abs() < 1e-9);
        assert!((s.max_ms - 100.0).abs() < 1e-9);
        assert_eq!(Summary::of_sorted(&[]).count, 0);
    }
}
