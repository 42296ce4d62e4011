//! The time a request spends waiting on its upstream, for the gateway-overhead metric.
//!
//! Why here: the attempt code measures it around each await on the upstream; the metrics
//! only read the sum.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The time one request spent waiting on upstream attempts, summed over its attempts.
#[derive(Debug, Default)]
pub struct UpstreamWait(AtomicU64);

impl UpstreamWait {
    pub fn add(&self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.0.fetch_add(nanos, Ordering::Relaxed);
    }

    pub fn get(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }

    /// Counts the time until the returned guard is dropped.
    pub fn timer(&self) -> WaitTimer<'_> {
        WaitTimer {
            wait: self,
            started: Instant::now(),
        }
    }
}

/// Adds the time from its creation to its drop to a request's upstream wait: around each
/// await on the upstream, so a cancelled attempt (a combo timeout drops the whole dispatch
/// mid-attempt) still counts what it waited.
#[derive(Debug)]
pub struct WaitTimer<'a> {
    wait: &'a UpstreamWait,
    started: Instant,
}

impl Drop for WaitTimer<'_> {
    fn drop(&mut self) {
        self.wait.add(self.started.elapsed());
    }
}
