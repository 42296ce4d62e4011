//! The per-connection request queue (rate-limit protection).
//!
//! Admission order, from the spec: the depth check comes before any other work; then the
//! request waits for a pacing slot (requests per minute, minimum spacing) and an execution
//! permit (`concurrent_requests`) within the **wait budget** (`max_wait_ms`), whose timer stops
//! when execution starts; exceeding it means the request never reaches upstream. Execution is
//! then bounded by the execution budget, enforced by the caller. A request that took its
//! pacing slot but then ran out of budget waiting for the execution permit gives the slot
//! back: it never reached the upstream, so it must not cost the next request a minute.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use switchyard_shared::Millis;
use switchyard_shared::admission::{
    AdmissionError, GateLevel, QueueSettings, RateState, check_queue_depth,
};
use tokio::sync::OwnedSemaphorePermit;

use super::gate::Gate;
use crate::clock::Clock;

/// One connection's queue.
#[derive(Debug)]
pub struct RequestQueue {
    /// Replaced live by `PATCH /api/resilience` ([`RequestQueue::apply`]).
    settings: Mutex<QueueSettings>,
    rate: Mutex<RateState>,
    waiting: AtomicU32,
    executing: Gate,
}

/// A permit to execute; dropping it frees the execution slot.
#[derive(Debug)]
pub struct QueuePermit {
    _permit: Option<OwnedSemaphorePermit>,
    /// How long the request waited in the queue.
    pub waited_ms: Millis,
}

impl RequestQueue {
    pub fn new(settings: QueueSettings) -> Self {
        Self {
            rate: Mutex::new(RateState::new(settings.rate_limit())),
            waiting: AtomicU32::new(0),
            executing: Gate::new(GateLevel::Connection, settings.concurrent_requests),
            settings: Mutex::new(settings),
        }
    }

    /// The current settings.
    pub fn settings(&self) -> QueueSettings {
        match self.settings.lock() {
            Ok(s) => *s,
            Err(poisoned) => *poisoned.into_inner(),
        }
    }

    /// Applies new settings live: pacing from the next admission, and the execution slots
    /// resized (a slot in use is never revoked; a shrink takes effect as slots free up only
    /// up to the free ones now).
    pub fn apply(&self, next: QueueSettings) {
        match self.settings.lock() {
            Ok(mut s) => *s = next,
            Err(poisoned) => *poisoned.into_inner() = next,
        }
        if let Ok(mut rate) = self.rate.lock() {
            rate.set_limit(next.rate_limit());
        }
        let limit = self.executing.limit();
        let cap = next.concurrent_requests.max(1);
        if cap > limit {
            self.executing.grow(cap - limit);
        } else if cap < limit {
            self.executing.shrink(limit - cap);
        }
    }

    /// Pauses admissions until `until` (node time): the upstream stated a short wait in its
    /// 429 body (`RetryInfo`), and queued requests go out when it ends.
    pub fn pause_until(&self, until: Millis) {
        if let Ok(mut rate) = self.rate.lock() {
            rate.pause_until(until);
        }
    }

    /// Adopts a pause a peer announced (`remaining_ms` from `now`, node time) under
    /// [`peer_pause`]; the new end when it extended the pause in force.
    pub fn adopt_peer_pause(&self, remaining_ms: Millis, now: Millis) -> Option<Millis> {
        let max_wait_ms = self.settings().max_wait_ms;
        let mut rate = self.rate.lock().ok()?;
        let until = peer_pause(remaining_ms, max_wait_ms, now, rate.paused_until(now))?;
        rate.pause_until(until);
        Some(until)
    }

    /// The end of the pause in force at `now`, if any.
    pub fn paused_until(&self, now: Millis) -> Option<Millis> {
        self.rate.lock().ok().and_then(|r| r.paused_until(now))
    }

    /// Requests waiting (not executing).
    pub fn waiting(&self) -> u32 {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Requests executing through the queue.
    pub fn executing(&self) -> u32 {
        self.executing.in_use()
    }

    /// Admits a request: depth check, pacing slot, execution permit, all within the wait budget.
    pub async fn admit(&self, clock: &Clock) -> Result<QueuePermit, AdmissionError> {
        // Join the line and check the depth in one atomic step, so simultaneous arrivals cannot
        // both pass a check made before either of them joined.
        let ahead = self.waiting.fetch_add(1, Ordering::AcqRel);
        let _line = Leave(&self.waiting);
        let settings = self.settings();
        check_queue_depth(ahead, settings.max_queue_depth)?;
        let start = clock.now();
        let budget = settings.max_wait_ms;
        // Our own admission and the one before it, to give the slot back exactly.
        let mut previous = None;
        let mut admitted = None;
        loop {
            let now = clock.now();
            let waited = now.saturating_sub(start);
            let slot = match self.rate.lock() {
                Ok(mut rate) => {
                    previous = rate.last_admit();
                    let slot = rate.try_acquire(now);
                    admitted = rate.last_admit().filter(|_| slot.is_ok());
                    slot
                }
                // A poisoned lock means a panic elsewhere; do not throttle on corrupt state.
                Err(_) => Ok(()),
            };
            match slot {
                Ok(()) => break,
                Err(retry_after) => {
                    if waited + retry_after > budget {
                        return Err(AdmissionError::QueueTimeout {
                            waited_ms: waited,
                            max_wait_ms: budget,
                        });
                    }
                    tokio::time::sleep(Duration::from_millis(retry_after.max(1))).await;
                }
            }
        }
        let remaining = budget.saturating_sub(clock.now().saturating_sub(start));
        let permit = self.executing.acquire(u32::MAX, remaining.max(1)).await;
        let permit = match permit {
            Ok(permit) => permit,
            Err(_) => {
                // The request never executes: the pacing slot it took goes back.
                if let Ok(mut rate) = self.rate.lock()
                    && let Some(at) = admitted
                {
                    rate.give_back(at, previous);
                }
                return Err(AdmissionError::QueueTimeout {
                    waited_ms: clock.now().saturating_sub(start),
                    max_wait_ms: budget,
                });
            }
        };
        Ok(QueuePermit {
            _permit: permit,
            waited_ms: clock.now().saturating_sub(start),
        })
    }
}

/// The end (node time) of the pause a peer's `QueuePaused` sets on a queue with wait budget
/// `max_wait_ms`, at `now`, with `current` the pause in force here: `now + remaining_ms`,
/// capped at the budget (the longest pause the local path sets: a longer `RetryInfo` locks a
/// model instead). `None` when it is already over or ends no later than `current`: a peer's
/// pause only ever extends, never shortens a longer local one.
pub fn peer_pause(
    remaining_ms: Millis,
    max_wait_ms: Millis,
    now: Millis,
    current: Option<Millis>,
) -> Option<Millis> {
    let until = now.saturating_add(remaining_ms.min(max_wait_ms));
    (until > now && current.is_none_or(|c| until > c)).then_some(until)
}

struct Leave<'a>(&'a AtomicU32);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_pause_extends_only_is_capped_at_the_wait_budget_and_ignores_one_that_is_over() {
        let now = 10_000;
        // Nothing in force: the announced remainder from now.
        assert_eq!(peer_pause(2_000, 30_000, now, None), Some(12_000));
        // Longer than this queue could sit out: capped at its budget.
        assert_eq!(peer_pause(90_000, 30_000, now, None), Some(40_000));
        assert_eq!(peer_pause(5_000, 0, now, None), None, "no budget, no pause");
        // Already over.
        assert_eq!(peer_pause(0, 30_000, now, None), None);
        // Extend-only: a longer local pause stays, an equal one is not re-set, a longer
        // announcement extends.
        assert_eq!(peer_pause(2_000, 30_000, now, Some(15_000)), None);
        assert_eq!(peer_pause(5_000, 30_000, now, Some(15_000)), None);
        assert_eq!(peer_pause(8_000, 30_000, now, Some(15_000)), Some(18_000));
        assert_eq!(peer_pause(u64::MAX, u64::MAX, now, None), Some(u64::MAX));
    }

    #[test]
    fn an_adopted_peer_pause_holds_the_queue_and_never_shortens_a_local_one() {
        let q = RequestQueue::new(QueueSettings {
            max_wait_ms: 3_000,
            ..QueueSettings::default()
        });
        q.pause_until(5_000);
        assert_eq!(q.adopt_peer_pause(2_000, 1_000), None, "ends before 5 000");
        assert_eq!(q.paused_until(1_000), Some(5_000));
        assert_eq!(q.adopt_peer_pause(60_000, 4_000), Some(7_000), "capped");
        assert_eq!(q.paused_until(4_000), Some(7_000));
        assert_eq!(
            q.adopt_peer_pause(1_000, 8_000),
            Some(9_000),
            "the old one is over"
        );
        assert_eq!(q.paused_until(9_000), None);
    }

    #[tokio::test]
    async fn a_request_that_times_out_on_the_permit_gives_its_pacing_slot_back() {
        let q = RequestQueue::new(QueueSettings {
            requests_per_minute: 2,
            min_time_between_requests_ms: 0,
            concurrent_requests: 1,
            max_wait_ms: 50,
            execution_max_wait_ms: 1000,
            max_queue_depth: 0,
        });
        let clock = Clock::new();
        let running = q.admit(&clock).await.unwrap();
        // Takes the second slot of the minute, then times out waiting for the permit.
        assert!(matches!(
            q.admit(&clock).await,
            Err(AdmissionError::QueueTimeout { .. })
        ));
        drop(running);
        // The slot came back: without it the minute's two slots are spent and this times out.
        assert!(q.admit(&clock).await.is_ok());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn simultaneous_arrivals_never_exceed_the_depth() {
        let q = std::sync::Arc::new(RequestQueue::new(QueueSettings {
            requests_per_minute: 0,
            min_time_between_requests_ms: 0,
            concurrent_requests: 1,
            max_wait_ms: 200,
            execution_max_wait_ms: 1000,
            max_queue_depth: 2,
        }));
        let clock = Clock::new();
        // One executes, holding the only execution slot.
        let running = q.admit(&clock).await.unwrap();
        let mut tasks = Vec::new();
        for _ in 0..10 {
            let q = q.clone();
            tasks.push(tokio::spawn(async move {
                q.admit(&Clock::new()).await.map(|_| ())
            }));
        }
        let mut full = 0;
        let mut timed_out = 0;
        for t in tasks {
            match t.await.unwrap() {
                Err(AdmissionError::QueueFull { .. }) => full += 1,
                Err(AdmissionError::QueueTimeout { .. }) => timed_out += 1,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(timed_out, 2, "only max_queue_depth requests may wait");
        assert_eq!(full, 8);
        assert_eq!(q.waiting(), 0);
        drop(running);
    }
}
